//! What a [`RequestExporter`](super::RequestExporter) counts, and where each count lands in
//! the two counter sets of the request exporters: [`ExporterMetrics`] (OTLP profiles, Kafka:
//! requests counted as `chunks`, items as `samples`) and [`TracesMetrics`] (requests and
//! spans).

use crate::durations::AttemptDurations;
use crate::metrics::{self, DiscardReason, ExporterMetrics};
use crate::send_queue::QueueLimits;
use crate::traces::TracesMetrics;
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

impl RequestMetrics for TracesMetrics {
    fn attempt_durations(&self) -> &AttemptDurations {
        &self.attempt_durations
    }

    /// Unreadable records found at start are logged, not counted: their spans are unknown.
    fn queue_opened(&self, limits: &QueueLimits, _corrupt: u64) {
        self.queue_capacity_bytes
            .store(limits.max_bytes, Ordering::Relaxed);
        self.queue_capacity_requests
            .store(limits.max_requests.unwrap_or(0), Ordering::Relaxed);
    }

    fn queue_levels(&self, levels: QueueLevels) {
        self.queue_requests.store(levels.waiting, Ordering::Relaxed);
        self.queue_bytes
            .store(levels.waiting_bytes, Ordering::Relaxed);
    }

    /// One accepted `export` call; the requests beyond the first are the splits of
    /// `max_request_bytes`.
    fn accepted(&self, requests: u64, items: u64) {
        metrics::add(&self.accepted_requests, 1);
        metrics::add(&self.accepted_spans, items);
        metrics::add(&self.split_requests, requests.saturating_sub(1));
    }

    fn refused_full(&self, items: u64) {
        metrics::add(&self.refused_full, 1);
        metrics::add(&self.refused_full_spans, items);
    }

    fn sent(&self, items: u64) {
        metrics::add(&self.sent_requests, 1);
        metrics::add(&self.sent_spans, items);
    }

    fn partial_success(&self, rejected: u64) {
        metrics::add(&self.partial_successes, 1);
        metrics::add(&self.rejected_spans, rejected);
    }

    fn failed_attempt(&self) {
        metrics::add(&self.failed_attempts, 1);
    }

    fn retry(&self) {
        metrics::add(&self.retries, 1);
    }

    /// Spans only: the traces counters have no per-reason request counts.
    fn dropped(&self, reason: DiscardReason, _requests: u64, items: u64) {
        self.add_dropped(reason, items);
    }

    /// An unreadable record's spans are dropped as `send_error`.
    fn corrupt(&self, items: u64) {
        self.add_dropped(DiscardReason::SendError, items);
    }
}
