//! What a [`RequestExporter`](super::RequestExporter) counts ([`RequestMetrics`]), and where
//! each count lands in [`ExporterMetrics`] (OTLP profiles, Kafka: requests counted as
//! `chunks`, items as `samples`). The traces exporter's counters (requests and spans) implement
//! the trait beside their type (`traces/metrics.rs`).

use crate::durations::AttemptDurations;
use crate::metrics::{self, DiscardReason, ExporterMetrics};
use crate::queue_config::QueueLimits;
use std::sync::atomic::Ordering;

/// How full the sending queue is at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLevels {
    /// Requests waiting (not claimed by a consumer).
    pub waiting: u64,
    /// Bytes of the waiting requests.
    pub waiting_bytes: u64,
    /// Bytes counted against the queue's bound (a durable queue counts claimed requests too).
    pub bytes: u64,
}

/// The counters a [`RequestExporter`](super::RequestExporter) updates. Requests are what the
/// queue holds; items are what they carry (samples, spans, messages' observations).
pub trait RequestMetrics: Send + Sync + 'static {
    /// How long each attempt took, by outcome.
    fn attempt_durations(&self) -> &AttemptDurations;
    /// The queue opened with `limits`, refusing `corrupt` unreadable records left by an
    /// earlier run.
    fn queue_opened(&self, limits: &QueueLimits, corrupt: u64);
    /// The queue's gauges.
    fn queue_levels(&self, levels: QueueLevels);
    /// One `export` call queued `requests` requests of `items` items.
    fn accepted(&self, requests: u64, items: u64);
    /// One `export` call of `items` items was refused because the queue was full.
    fn refused_full(&self, items: u64);
    /// A request of `items` items was delivered.
    fn sent(&self, items: u64);
    /// A delivered request's partial success rejected `rejected` items.
    fn partial_success(&self, rejected: u64);
    /// An attempt failed (rate limited, retryable or for good).
    fn failed_attempt(&self);
    /// A retry was scheduled.
    fn retry(&self);
    /// `requests` requests of `items` items were given up for `reason`.
    fn dropped(&self, reason: DiscardReason, requests: u64, items: u64);
    /// A claimed record of `items` items (0 when its header does not read) did not read back
    /// and was removed.
    fn corrupt(&self, items: u64);
}

impl RequestMetrics for ExporterMetrics {
    fn attempt_durations(&self) -> &AttemptDurations {
        &self.attempt_durations
    }

    fn queue_opened(&self, limits: &QueueLimits, corrupt: u64) {
        self.queue_capacity_bytes
            .store(limits.max_bytes, Ordering::Relaxed);
        metrics::add(&self.corrupt_records, corrupt);
    }

    fn queue_levels(&self, levels: QueueLevels) {
        self.queue_size_bytes.store(levels.bytes, Ordering::Relaxed);
    }

    fn accepted(&self, requests: u64, items: u64) {
        metrics::add(&self.accepted_chunks, requests);
        metrics::add(&self.accepted_samples, items);
    }

    fn refused_full(&self, items: u64) {
        metrics::add(&self.refused_full, 1);
        metrics::add(&self.refused_full_samples, items);
    }

    fn sent(&self, items: u64) {
        metrics::add(&self.sent_chunks, 1);
        metrics::add(&self.sent_samples, items);
    }

    fn partial_success(&self, rejected: u64) {
        metrics::add(&self.partial_successes, 1);
        metrics::add(&self.rejected_profiles, rejected);
    }

    fn failed_attempt(&self) {
        metrics::add(&self.send_failed_chunks, 1);
    }

    fn retry(&self) {
        metrics::add(&self.retries, 1);
    }

    fn dropped(&self, reason: DiscardReason, requests: u64, items: u64) {
        self.add_dropped(reason, requests);
        self.add_dropped_samples(reason, items);
    }

    fn corrupt(&self, _items: u64) {
        metrics::add(&self.corrupt_records, 1);
    }
}
