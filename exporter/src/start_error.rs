//! [`StartError`]: why an exporter could not start. Start-up is not part of the export
//! contract (`profilink_consumer::ExportError` is why a running exporter refused data), so its
//! failures are their own type, returned by every exporter's `start` and by the constructors
//! it calls (routes, transports, clients, the forwarder); each keeps its cause as its
//! [`source`](std::error::Error::source) where there is one.
//!
//! Every message starts as the export contract's did (`invalid exporter configuration: …`,
//! `exporter queue I/O error: …`), so what the service prints has not changed.

use crate::queue_config::SettingError;
use std::error::Error as StdError;
use std::sync::Arc;
use thiserror::Error;

/// Why an exporter could not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// A setting is refused or contradicts another: its key and why.
    #[error("invalid exporter configuration: {0}")]
    Setting(#[from] SettingError),
    /// A required setting is missing (`exporters.sentry.dsn`).
    #[error("invalid exporter configuration: {0} is required")]
    Missing(&'static str),
    /// A configured value does not parse (a DSN, an endpoint, a header): which one, and why.
    #[error("invalid exporter configuration: invalid {what}: {source}")]
    Invalid {
        /// The value that does not parse (e.g. `DSN "…"`).
        what: String,
        /// The parser's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The `tls` settings cannot be used (a file that does not read, a bad certificate).
    #[error("invalid exporter configuration: {context}{source}")]
    Tls {
        /// What the settings were for, when not the exporter itself (`tls: `).
        context: &'static str,
        /// Why (its text starts with the key, `tls.ca_file: …`).
        #[source]
        source: profilink_tls::TlsError,
    },
    /// The HTTP or gRPC client could not be built.
    #[error("invalid exporter configuration: {context}{source}")]
    Client {
        /// Which client (`HTTP client: `), when the source does not say.
        context: &'static str,
        /// Why.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The queue could not be opened (its directory cannot be written, another process holds
    /// it, …).
    #[error("exporter queue I/O error: {0}")]
    Queue(#[source] Arc<std::io::Error>),
}

impl StartError {
    /// [`StartError::Invalid`] for `what`, caused by `source`.
    pub fn invalid(what: impl Into<String>, source: impl StdError + Send + Sync + 'static) -> Self {
        StartError::Invalid {
            what: what.into(),
            source: Box::new(source),
        }
    }

    /// [`StartError::Client`] for the client `context` names, caused by `source`.
    pub(crate) fn client(
        context: &'static str,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        StartError::Client {
            context,
            source: Box::new(source),
        }
    }
}

impl From<std::io::Error> for StartError {
    fn from(e: std::io::Error) -> Self {
        StartError::Queue(Arc::new(e))
    }
}

impl From<tokio::task::JoinError> for StartError {
    /// The blocking task opening a queue panicked or was cancelled: an I/O failure of the
    /// queue.
    fn from(e: tokio::task::JoinError) -> Self {
        StartError::Queue(Arc::new(std::io::Error::other(e)))
    }
}
