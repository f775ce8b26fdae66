//! The rule by which exporters refuse requests before they are read ([`Export::is_full`] of
//! the pipeline's contract, `profilink-consumer`). Each exporter implements [`Export`] in its
//! own `export.rs`.
//!
//! * [`SentryExporter`](crate::SentryExporter), [`FileExporter`](crate::FileExporter): chunks.
//!   With `sending_queue.overflow: backpressure` (the default), full once less than
//!   [`QUEUE_HEADROOM`] (or a tenth of the capacity, whichever is smaller) of the durable queue
//!   is left ([`within_headroom`]), so requests are refused before they are read rather than
//!   after they were decoded and translated.
//! * [`OtlpExporter`](crate::OtlpExporter): OTLP profiles requests (its sending queue answers `Full` itself).
//! * [`TracesExporter`]: OTLP traces requests; full within a tenth of its in-memory queue.

use crate::TracesExporter;
use crate::metrics::ExporterMetrics;
use profilink_consumer::{BoxFuture, Export, ExportError};
use profilink_proto::otlp::ExportTraceServiceRequest;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Room kept free in a durable chunk queue: requests are refused up front once less than this
/// (or a tenth of the capacity, whichever is smaller) is left.
pub(crate) const QUEUE_HEADROOM: u64 = 16 << 20;

/// Whether a queue holding `size` of `capacity` bytes has less than `headroom` left: the one
/// rule by which exporters refuse up front. A queue of unknown capacity (0) is never full.
pub fn nearly_full(size: u64, capacity: u64, headroom: u64) -> bool {
    capacity > 0 && size + headroom >= capacity
}

/// Whether a durable chunk queue whose gauges are `metrics` is within its headroom of full
/// (see [`QUEUE_HEADROOM`]).
pub(crate) fn within_headroom(metrics: &ExporterMetrics) -> bool {
    let cap = metrics.queue_capacity_bytes.load(Ordering::Relaxed);
    let size = metrics.queue_size_bytes.load(Ordering::Relaxed);
    nearly_full(size, cap, (cap / 10).min(QUEUE_HEADROOM))
}

impl Export<ExportTraceServiceRequest> for TracesExporter {
    fn export(&self, data: ExportTraceServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(TracesExporter::export(self, data))
    }

    fn is_full(&self) -> bool {
        let m = self.metrics();
        let cap = m.queue_capacity_bytes.load(Ordering::Relaxed);
        nearly_full(m.queue_bytes.load(Ordering::Relaxed), cap, cap / 10)
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(TracesExporter::shutdown(*self, deadline))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_within_the_headroom() {
        let m = ExporterMetrics::default();
        let cap = 1000u64 << 20;
        m.queue_capacity_bytes.store(cap, Ordering::Relaxed);
        // The headroom is the smaller of a tenth of the capacity and QUEUE_HEADROOM.
        m.queue_size_bytes
            .store(cap - QUEUE_HEADROOM - 1, Ordering::Relaxed);
        assert!(!within_headroom(&m));
        m.queue_size_bytes
            .store(cap - QUEUE_HEADROOM, Ordering::Relaxed);
        assert!(within_headroom(&m));
        let small = 100u64 << 20;
        m.queue_capacity_bytes.store(small, Ordering::Relaxed);
        m.queue_size_bytes
            .store(small - small / 10 - 1, Ordering::Relaxed);
        assert!(!within_headroom(&m), "a tenth of a small queue");
        m.queue_size_bytes
            .store(small - small / 10, Ordering::Relaxed);
        assert!(within_headroom(&m));
        m.queue_capacity_bytes.store(0, Ordering::Relaxed);
        assert!(!within_headroom(&m), "no capacity known: not full");
    }
}
