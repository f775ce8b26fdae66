//! The file exporter itself: [`FileExporter::start`] (the durable queue and its chunk engine),
//! `export`, `is_full` and `shutdown`, the engine's `FileSink` that writes one envelope file per
//! merged chunk, and how the exporter meets the pipeline's [`Export`] contract.

use super::config::FileExporterConfig;
use super::write::{envelope_file_name, write_atomic};
use crate::chunk_engine::start_engine;
use crate::clock::{SharedClock, system_clock};
use crate::engine::{Delivery, Engine, Sink};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::ReadyMeta;
use crate::start_error::StartError;
use crate::{SDK_NAME, VERSION};
use profilink_consumer::{BoxFuture, Export, ExportChunk, ExportError};
use profilink_proto::sentry::Envelope;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct FileSink {
    dir: PathBuf,
}

impl Sink for FileSink {
    fn blocked_until(&self, _route: &str, _category: &str, _now: Instant) -> Option<Instant> {
        None
    }

    async fn deliver(&self, meta: ReadyMeta, json: Vec<u8>) -> Delivery {
        let dir = self.dir.clone();
        let name = envelope_file_name(&meta.chunk_id);
        let res = tokio::task::spawn_blocking(move || {
            let bytes =
                Envelope::for_chunk_json(json, &meta.platform, SDK_NAME, VERSION).to_bytes();
            write_atomic(&dir, &name, &bytes)
        })
        .await;
        match res {
            Ok(Ok(_)) => Delivery::Delivered,
            Ok(Err(e)) => Delivery::Retry {
                after: None,
                reason: DiscardReason::SendError,
                message: format!("writing envelope file: {e}"),
            },
            Err(e) => Delivery::Retry {
                after: None,
                reason: DiscardReason::SendError,
                message: format!("writing envelope file: {e}"),
            },
        }
    }

    fn discarded(&self, _meta: &ReadyMeta, _reason: DiscardReason, _n: u64) {}
}

/// Writes merged chunks as envelope files.
pub struct FileExporter {
    engine: Engine<FileSink>,
    metrics: Arc<ExporterMetrics>,
    /// `sending_queue.overflow: backpressure`: refuse requests up front near full.
    backpressure: bool,
}

impl FileExporter {
    /// Opens the queue (replaying what a previous run left) and starts writing.
    pub async fn start(cfg: FileExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`FileExporter::start`] with an injected clock.
    pub async fn start_with_clock(
        cfg: FileExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        cfg.check().map_err(|e| e.under("exporters.file"))?;
        let metrics = Arc::new(ExporterMetrics::default());
        let backpressure = cfg.sending_queue.overflow() == crate::Overflow::Backpressure;
        let sink = Arc::new(FileSink {
            dir: cfg.path.clone(),
        });
        let engine = start_engine(&cfg, sink, Default::default(), clock, metrics.clone()).await?;
        Ok(FileExporter {
            engine,
            metrics,
            backpressure,
        })
    }

    /// Durably queues chunks; `Ok` once they are on disk.
    pub async fn export(&self, chunks: Vec<ExportChunk>) -> Result<(), ExportError> {
        self.engine.export_chunks(chunks, |_| String::new()).await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// True while requests should be refused before they are read: with
    /// `sending_queue.overflow: backpressure`, once the durable queue is within its headroom of
    /// full (16 MiB, or a tenth of the capacity when that is less).
    pub fn is_full(&self) -> bool {
        self.backpressure && crate::contract::within_headroom(&self.metrics)
    }

    /// Flushes open sessions and writes what it can before `deadline`.
    pub async fn shutdown(self, deadline: Duration) {
        self.engine.shutdown(deadline).await;
    }
}

impl Export<Vec<ExportChunk>> for FileExporter {
    fn export(&self, data: Vec<ExportChunk>) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(FileExporter::export(self, data))
    }

    fn is_full(&self) -> bool {
        FileExporter::is_full(self)
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(FileExporter::shutdown(*self, deadline))
    }
}

crate::chunk_engine::chunk_exporter_config!(FileExporterConfig);
