//! What exporters take: the [`Export`] trait every exporter is driven through, the data a chunk
//! exporter takes ([`ExportChunk`]), and why an export fails ([`ExportError`]).
//!
//! The data type is part of the trait, so a pipeline can only hand an exporter what it takes:
//! chunk exporters (`sentry`, `file`) take `Vec<ExportChunk>`, OTLP profiles exporters
//! `ExportProfilesServiceRequest`, traces exporters `ExportTraceServiceRequest`.

use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// A boxed, sendable future (what [`Export`]'s methods return, so exporters can be trait
/// objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An exporter of `T`: takes data, says when it pushes back, and stops.
pub trait Export<T>: Send + Sync {
    /// Hands `data` over; `Ok` once it is durable (or queued, for in-memory queues).
    /// [`ExportError::Full`] when the queue is full.
    fn export(&self, data: T) -> BoxFuture<'_, Result<(), ExportError>>;

    /// True while the exporter's queue is (nearly) full and it wants new requests refused
    /// before they are read. Each exporter knows its own rule; the default: never.
    fn is_full(&self) -> bool {
        false
    }

    /// Flushes what it holds and stops within `deadline` (what is left stays in a durable
    /// queue for the next start).
    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()>;
}

/// A chunk to export, with the resource attributes of its origin (used for routing).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExportChunk {
    /// The chunk.
    pub chunk: ProfileChunk,
    /// Resource attributes of the producer (`service.name`, `process.pid`, …).
    pub resource: BTreeMap<String, String>,
    /// Thread ids of the chunk that spans may reference (a sample of theirs carries a trace
    /// link, or the chunk came from an SDK): the exporter never groups them when it merges
    /// chunks (see the exporter's `SparseThreads`). Kept in the durable queue with the chunk, so a replay
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

/// Why `export` failed. Clone (sources are shared), so one failure can answer several waiting
/// callers. (Why an exporter could not start is not part of this contract: each exporter
/// crate has its own start-up error, profilink-exporter's `StartError`.)
#[derive(Debug, Error, Clone)]
pub enum ExportError {
    /// The queue is full (`overflow: backpressure`): receivers should answer UNAVAILABLE / 429
    /// and let the producer retry after `retry_after`.
    #[error("exporter queue is full; retry after {retry_after:?}")]
    Full {
        /// Suggested wait.
        retry_after: Duration,
    },
    /// The data is larger than the whole queue: it can never fit, so receivers should refuse
    /// it for good (gRPC `INVALID_ARGUMENT`, HTTP 400) rather than ask for a retry.
    #[error(
        "the batch needs {needed} bytes of queue space, more than the queue's capacity of {capacity}"
    )]
    TooLarge {
        /// Bytes the batch needs.
        needed: u64,
        /// The queue's capacity.
        capacity: u64,
    },
    /// The exporter was shut down.
    #[error("exporter is shut down")]
    Closed,
    /// The queue could not be opened or written.
    #[error("exporter queue I/O error: {0}")]
    Io(#[source] Arc<std::io::Error>),
}

impl From<std::io::Error> for ExportError {
    fn from(e: std::io::Error) -> Self {
        ExportError::Io(Arc::new(e))
    }
}

impl From<tokio::task::JoinError> for ExportError {
    /// A blocking queue task that panicked or was cancelled, as an I/O failure of the queue.
    fn from(e: tokio::task::JoinError) -> Self {
        ExportError::Io(Arc::new(std::io::Error::other(e)))
    }
}
