//! A hook that sees every merged chunk an exporter queues for delivery (the service's
//! `profile_store` keeps them for the flamegraph API).

use profilink_proto::sentry::ProfileChunk;
use std::sync::Arc;

/// Sees each merged chunk once it is durably queued for delivery, with the Sentry project it
/// goes to (`None` for exporters without a DSN, such as the file exporter).
///
/// Called on the exporter's engine task: implementations must not block (hand the chunk to a
/// queue of their own and return). After a crash, chunks recovered from the queue are not
/// seen again (they were seen when first queued).
pub trait ChunkObserver: Send + Sync + 'static {
    /// A merged chunk was queued.
    fn queued(&self, project_id: Option<u64>, chunk: &ProfileChunk);
}

/// An optional shared observer.
pub type SharedObserver = Option<Arc<dyn ChunkObserver>>;
