//! The rule by which exporters refuse requests before they are read
//! ([`Export::is_full`](profilink_consumer::Export::is_full) of the pipeline's contract,
//! `profilink-consumer`). Each exporter implements [`Export`](profilink_consumer::Export) in
//! its own `export.rs`.
//!
//! * [`SentryExporter`](crate::SentryExporter), [`FileExporter`](crate::FileExporter): chunks.
//!   With `sending_queue.overflow: backpressure` (the default), full once less than
//!   [`QUEUE_HEADROOM`] (or a tenth of the capacity, whichever is smaller) of the durable queue
//!   is left ([`within_headroom`]), so requests are refused before they are read rather than
//!   after they were decoded and translated.
//! * [`OtlpExporter`](crate::OtlpExporter): OTLP profiles requests (its sending queue answers
//!   `Full` itself).
//! * [`TracesExporter`](crate::TracesExporter): OTLP traces requests; full within a tenth of
//!   its queue ([`nearly_full`]).

use crate::metrics::ExporterMetrics;
use std::sync::atomic::Ordering;

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
