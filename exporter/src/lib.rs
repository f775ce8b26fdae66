//! profilink exporters: deliver profile chunks to Sentry (or envelope files) and OTLP profiles
//! to an OTLP endpoint, without losing data.
//!
//! * [`sentry::SentryExporter`]: accumulates short chunks of one profiler session into chunks
//!   of up to a minute ([`accumulate`], [`merge`]), persists everything in a durable queue
//!   ([`queue`]) before acknowledging it, and sends one `profile_chunk` envelope per chunk with
//!   Sentry's auth, compression, rate limits (`X-Sentry-Rate-Limits`, `Retry-After`), retries
//!   with backoff, dead letters, client reports and per-attribute DSN routing.
//! * [`file::FileExporter`]: the same accumulation and queue, writing `<chunk_id>.envelope`
//!   files atomically.
//! * [`otlp::OtlpExporter`]: OTLP gRPC or HTTP with the OTLP retry rules and partial-success
//!   accounting.
//! * [`forward::Forwarder`]: the Sentry receiver's `upstream`: what SDKs send, passed on as
//!   received to their Sentry or Relay through a durable queue, in order per project, with
//!   retries and upstream rate limits handed back to the SDKs.
//! * [`traces::TracesExporter`]: OTLP traces to an OTLP endpoint (gRPC / HTTP) or to Sentry's
//!   OTLP traces endpoint (DSN key auth, rate limits, request splitting).
//!
//! Every transport is built by [`http`]: TLS from the exporter's `tls:` settings
//! ([`ClientTlsConfig`], the Collector's `configtls`), proxies from the environment, request
//! compression, and Sentry's rate-limit headers.
//!
//! Life cycle of every exporter: `start(config)` → `export(...)` any number of times (from any
//! task) → `shutdown(deadline)`. Dropping an exporter without `shutdown` stops it like a crash:
//! accepted data stays in the queue and is delivered on the next start.
#![warn(missing_docs)]

pub mod accumulate;
pub mod clock;
pub mod config;
pub mod file;
pub mod forward;
pub mod http;
pub mod merge;
pub mod metrics;
pub mod observer;
pub mod otlp;
pub mod otlp_client;
pub mod otlp_retry;
pub mod pipeline;
pub mod queue;
pub mod retry;
pub mod sentry;
pub mod traces;

use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

pub use accumulate::ChunkAccumulator;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use config::{
    ClientTlsConfig, Compression, FileExporterConfig, OtlpExporterConfig, OtlpProtocol, Overflow,
    QueueConfig, RetryConfig, RoutingConfig, SentryExporterConfig, SparseThreads,
};
pub use file::FileExporter;
pub use forward::{ForwardConfig, ForwardMetrics, Forwarder};
pub use metrics::{DiscardReason, ExporterMetrics, MetricsSnapshot};
pub use observer::{ChunkObserver, ObserverSlot, SharedObserver};
pub use otlp::OtlpExporter;
pub use sentry::SentryExporter;
pub use traces::{
    OtlpTracesConfig, SentryTracesConfig, TracesExporter, TracesExporterConfig, TracesMetrics,
    TracesMetricsSnapshot, TracesQueueConfig,
};

/// The SDK name profilink reports (`sdk.name`, `sentry_client`).
pub const SDK_NAME: &str = "profilink";
/// This crate's version (`sdk.version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A chunk to export, with the resource attributes of its origin (used for routing).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExportChunk {
    /// The chunk.
    pub chunk: ProfileChunk,
    /// Resource attributes of the producer (`service.name`, `process.pid`, …).
    pub resource: BTreeMap<String, String>,
    /// Thread ids of the chunk that spans may reference (a sample of theirs carries a trace
    /// link, or the chunk came from an SDK): the exporter never groups them when it merges
    /// chunks (see [`SparseThreads`]). Kept in the durable queue with the chunk, so a replay
    /// after a crash groups exactly as the first run did.
    pub linked_threads: Vec<CompactString>,
}

impl ExportChunk {
    /// A chunk without resource attributes or linked threads.
    pub fn new(chunk: ProfileChunk) -> Self {
        ExportChunk {
            chunk,
            resource: BTreeMap::new(),
            linked_threads: Vec::new(),
        }
    }
}

/// Why `export` (or `start`) failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// The queue is full (`overflow: backpressure`): receivers should answer UNAVAILABLE / 429
    /// and let the producer retry after `retry_after`.
    #[error("exporter queue is full; retry after {retry_after:?}")]
    Full {
        /// Suggested wait.
        retry_after: Duration,
    },
    /// The exporter was shut down.
    #[error("exporter is shut down")]
    Closed,
    /// The queue could not be written.
    #[error("exporter queue I/O error: {0}")]
    Io(String),
    /// Invalid configuration (bad DSN, …).
    #[error("invalid exporter configuration: {0}")]
    Config(String),
}
