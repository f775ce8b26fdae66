//! [`ServiceError`]: why the service could not start.

use crate::service::components::NotForTraces;
use crate::telemetry::http::BindError;
use profilink_consumer::ExportError;
use profilink_flamegraph::StoreError;
use profilink_receiver::ReceiverError;
use profilink_receiver::auth::TokenFileError;
use std::path::PathBuf;

/// Why the service could not start. Its message is one line naming the configuration key of
/// the component that failed; the cause is its [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The `profile_store` could not be opened.
    #[error("extensions.{id}: cannot open {}: {source}", path.display())]
    OpenStore {
        /// The extension id.
        id: String,
        /// The store's file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// A `file_storage` extension's directory could not be created.
    #[error("extensions.{id}: cannot create {}: {source}", path.display())]
    FileStorage {
        /// The extension id.
        id: String,
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The task opening the `profile_store` failed.
    #[error("extensions.{id}: {source}")]
    StoreTask {
        /// The extension id.
        id: String,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
    /// The `profile_store`'s writer thread could not start.
    #[error("extensions.{id}: cannot start its writer: {source}")]
    StoreWriter {
        /// The extension id.
        id: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An extension's HTTP endpoint (`health_check`, `flamegraph_api`) could not be bound.
    #[error("extensions.{id}: {source}")]
    ExtensionEndpoint {
        /// The extension id.
        id: String,
        /// Why.
        #[source]
        source: BindError,
    },
    /// A `bearertokenauth` extension could not read its token file.
    #[error("extensions.{id}.filename: {source}")]
    Authenticator {
        /// The extension id.
        id: String,
        /// Why.
        #[source]
        source: TokenFileError,
    },
    /// An `auth` setting could not be served (the message names the key).
    #[error("{0}")]
    Auth(String),
    /// An exporter could not start (e.g. its queue directory cannot be written).
    #[error("exporters.{id}: cannot start: {source}")]
    Exporter {
        /// The exporter id.
        id: String,
        /// Why.
        #[source]
        source: ExportError,
    },
    /// The traces instance of an exporter could not start.
    #[error("exporters.{id}: cannot start for traces: {source}")]
    TracesExporter {
        /// The exporter id.
        id: String,
        /// Why.
        #[source]
        source: ExportError,
    },
    /// An exporter listed in a traces pipeline cannot export traces.
    #[error("exporters.{id}: cannot start for traces: {source}")]
    NotForTraces {
        /// The exporter id.
        id: String,
        /// Why.
        #[source]
        source: NotForTraces,
    },
    /// The `/metrics` endpoint could not be bound.
    #[error("service.telemetry.metrics.address: {source}")]
    Metrics {
        /// Why.
        #[source]
        source: BindError,
    },
    /// A Sentry receiver's `upstream` is invalid (the message names the key).
    #[error(transparent)]
    Upstream(crate::config::ConfigError),
    /// A Sentry receiver's upstream forwarder could not start.
    #[error("{at}.upstream: cannot start: {source}")]
    Forwarder {
        /// The receiver's configuration key.
        at: String,
        /// Why.
        #[source]
        source: ExportError,
    },
    /// A pipeline's join log could not be opened (its directory cannot be written, or another
    /// pipeline or process holds it).
    #[error("service.pipelines.{pipeline}: cannot open the join log in {}: {source}", path.display())]
    JoinLog {
        /// The pipeline.
        pipeline: String,
        /// The join log's directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A receiver could not start; `at` is its key (`receivers.otlp.protocols.grpc`).
    #[error("{at}: {source}")]
    Receiver {
        /// The receiver's configuration key.
        at: String,
        /// Why.
        #[source]
        source: ReceiverError,
    },
}
