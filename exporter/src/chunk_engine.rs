//! Starting the delivery engine of a chunk exporter (`sentry`, `file`) from its config: what a
//! config must give ([`ChunkExporterConfig`]: the engine settings, [`EngineConfig`], the
//! queue settings and directory), and the durable queue opened there.
//!
//! This sits above `config` and `engine` and below the chunk exporters, which implement
//! [`ChunkExporterConfig`] for their configs in their `export.rs` (with
//! `chunk_exporter_config!`: both configs have the same engine fields), so the configs stay
//! plain settings that know nothing of the engine that runs them.

use crate::clock::SharedClock;
use crate::config::RetryConfig;
use crate::engine::{Engine, EngineConfig, Sink};
use crate::metrics::ExporterMetrics;
use crate::queue_config::QueueConfig;
use crate::start_error::StartError;
use profilink_consumer::ExportError;
use std::path::PathBuf;
use std::sync::Arc;

/// What a chunk exporter's config gives its engine.
pub(crate) trait ChunkExporterConfig {
    /// The engine's settings, retrying with `retry`.
    fn engine_config(&self, retry: RetryConfig) -> EngineConfig;
    /// The `sending_queue` settings.
    fn sending_queue(&self) -> &QueueConfig;
    /// The queue directory.
    fn queue_dir(&self) -> PathBuf;
}

/// Implements [`ChunkExporterConfig`] for a chunk exporter's config from its fields (`tick`,
/// `observer`, `flush_on_shutdown`, `sending_queue`) and its `accumulate`, `consumers` and
/// `queue_dir` methods.
macro_rules! chunk_exporter_config {
    ($config:ty) => {
        impl $crate::chunk_engine::ChunkExporterConfig for $config {
            fn engine_config(
                &self,
                retry: $crate::config::RetryConfig,
            ) -> $crate::engine::EngineConfig {
                $crate::engine::EngineConfig {
                    accumulate: self.accumulate(),
                    retry,
                    num_consumers: self.consumers(),
                    tick: self.tick,
                    observer: self.observer.clone(),
                    flush_on_shutdown: self.flush_on_shutdown,
                }
            }

            fn sending_queue(&self) -> &$crate::queue_config::QueueConfig {
                &self.sending_queue
            }

            fn queue_dir(&self) -> std::path::PathBuf {
                <$config>::queue_dir(self)
            }
        }
    };
}
pub(crate) use chunk_exporter_config;

/// Opens the exporter's durable queue (replaying what an earlier run left) and starts the
/// delivery engine on it, delivering to `sink` and retrying with `retry`.
pub(crate) async fn start_engine<S: Sink>(
    config: &impl ChunkExporterConfig,
    sink: Arc<S>,
    retry: RetryConfig,
    clock: SharedClock,
    metrics: Arc<ExporterMetrics>,
) -> Result<Engine<S>, StartError> {
    Engine::open(
        config.sending_queue(),
        config.queue_dir(),
        sink,
        config.engine_config(retry),
        clock,
        metrics,
    )
    .await
    // Opening fails only on the queue's I/O (a full queue is an `export` answer).
    .map_err(|e| match e {
        ExportError::Io(e) => StartError::Queue(e),
        other => StartError::Queue(Arc::new(std::io::Error::other(other))),
    })
}
