//! What every queue-backed exporter's `export` does with its sending queue: push, count the
//! outcome in the exporter's metrics, and map a refusal to [`ExportError`].

use super::record::Queued;
use super::{PushError, SendQueue};
use crate::ExportError;
use crate::metrics::ExporterMetrics;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl<T: Queued> SendQueue<T> {
    /// Pushes `values` (each with its sample count) for an exporter's `export`, counting
    /// them in `metrics`: accepted (one `accepted_chunks` per value, their samples) or
    /// refused by a full queue. [`ExportError::Full`] when full; `what` names the queue in the
    /// log line of a value that could not be stored.
    pub async fn export_counted(
        self: &Arc<Self>,
        values: Vec<(T, u64)>,
        metrics: &ExporterMetrics,
        what: &str,
    ) -> Result<(), ExportError> {
        let n = values.len() as u64;
        let samples: u64 = values.iter().map(|(_, s)| s).sum();
        match self.push_all(values).await {
            Ok(()) => {
                ExporterMetrics::add(&metrics.accepted_chunks, n);
                ExporterMetrics::add(&metrics.accepted_samples, samples);
                metrics
                    .queue_size_bytes
                    .store(self.bytes(), Ordering::Relaxed);
                Ok(())
            }
            Err(PushError::Full { .. }) => {
                ExporterMetrics::add(&metrics.refused_full, 1);
                ExporterMetrics::add(&metrics.refused_full_samples, samples);
                Err(ExportError::Full {
                    retry_after: Duration::from_secs(1),
                })
            }
            Err(PushError::Closed) => Err(ExportError::Closed),
            Err(PushError::Io(e)) => {
                tracing::error!(error = %e, "{what}: data could not be stored; refused");
                Err(e.into())
            }
        }
    }
}
