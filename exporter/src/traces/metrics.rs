//! Counters of one traces exporter, in spans (and requests where it says so). Same shape as
//! [`crate::ExporterMetrics`]: plain atomics, copied by [`TracesMetrics::snapshot`]; drop
//! reasons are the client-report names of [`DiscardReason`].

use crate::durations::AttemptDurations;
use crate::metrics::{self, DiscardReason, ReasonCounters, count_for, get};
use crate::queue_config::QueueLimits;
use crate::request::{QueueLevels, RequestMetrics};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one traces exporter.
#[derive(Debug, Default)]
pub struct TracesMetrics {
    /// `export` calls accepted.
    pub accepted_requests: AtomicU64,
    /// Spans accepted by `export`.
    pub accepted_spans: AtomicU64,
    /// `export` calls refused because the queue was full.
    pub refused_full: AtomicU64,
    /// Spans in `export` calls refused because the queue was full.
    pub refused_full_spans: AtomicU64,
    /// Extra requests made by splitting requests above `max_request_bytes`.
    pub split_requests: AtomicU64,
    /// Requests delivered (2xx / gRPC OK).
    pub sent_requests: AtomicU64,
    /// Spans in delivered requests (including spans the server reported as rejected in a
    /// partial success, see `rejected_spans`).
    pub sent_spans: AtomicU64,
    /// Spans given up for good (refused, retries exhausted, or unsent at shutdown); the sum
    /// of the per-reason drop counters.
    pub send_failed_spans: AtomicU64,
    /// Delivery attempts that failed (any reason, retried or not).
    pub failed_attempts: AtomicU64,
    /// Retries scheduled.
    pub retries: AtomicU64,
    /// Responses that imposed a rate limit (429, or `X-Sentry-Rate-Limits` on any response).
    pub rate_limited: AtomicU64,
    /// Senders currently holding a request back because of an active rate limit (gauge).
    pub rate_limit_waiting: AtomicU64,
    /// Partial successes received.
    pub partial_successes: AtomicU64,
    /// Spans the server reported as rejected in partial successes.
    pub rejected_spans: AtomicU64,
    /// Requests waiting in the queue (gauge).
    pub queue_requests: AtomicU64,
    /// Uncompressed bytes of the requests waiting in the queue (gauge).
    pub queue_bytes: AtomicU64,
    /// Queue capacity in bytes.
    pub queue_capacity_bytes: AtomicU64,
    /// Queue capacity in requests.
    pub queue_capacity_requests: AtomicU64,
    dropped: ReasonCounters,
    /// How long each delivery attempt took, by outcome.
    pub attempt_durations: AttemptDurations,
}

/// A copy of the counters at one instant. See [`TracesMetrics`] for the meaning of each field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TracesMetricsSnapshot {
    /// See [`TracesMetrics::accepted_requests`].
    pub accepted_requests: u64,
    /// See [`TracesMetrics::accepted_spans`].
    pub accepted_spans: u64,
    /// See [`TracesMetrics::refused_full`].
    pub refused_full: u64,
    /// See [`TracesMetrics::refused_full_spans`].
    pub refused_full_spans: u64,
    /// See [`TracesMetrics::split_requests`].
    pub split_requests: u64,
    /// See [`TracesMetrics::sent_requests`].
    pub sent_requests: u64,
    /// See [`TracesMetrics::sent_spans`].
    pub sent_spans: u64,
    /// See [`TracesMetrics::send_failed_spans`].
    pub send_failed_spans: u64,
    /// See [`TracesMetrics::failed_attempts`].
    pub failed_attempts: u64,
    /// See [`TracesMetrics::retries`].
    pub retries: u64,
    /// See [`TracesMetrics::rate_limited`].
    pub rate_limited: u64,
    /// See [`TracesMetrics::rate_limit_waiting`].
    pub rate_limit_waiting: u64,
    /// See [`TracesMetrics::partial_successes`].
    pub partial_successes: u64,
    /// See [`TracesMetrics::rejected_spans`].
    pub rejected_spans: u64,
    /// See [`TracesMetrics::queue_requests`].
    pub queue_requests: u64,
    /// See [`TracesMetrics::queue_bytes`].
    pub queue_bytes: u64,
    /// See [`TracesMetrics::queue_capacity_bytes`].
    pub queue_capacity_bytes: u64,
    /// See [`TracesMetrics::queue_capacity_requests`].
    pub queue_capacity_requests: u64,
    /// Dropped spans by reason.
    pub dropped: Vec<(DiscardReason, u64)>,
}

impl TracesMetricsSnapshot {
    /// Dropped spans for one reason.
    pub fn dropped(&self, reason: DiscardReason) -> u64 {
        count_for(&self.dropped, reason)
    }
}

impl TracesMetrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        metrics::add(counter, n);
    }

    /// Subtracts `n` from a gauge (saturating at 0).
    pub fn sub(gauge: &AtomicU64, n: u64) {
        metrics::sub(gauge, n);
    }

    /// Counts `n` spans dropped for `reason` (also added to `send_failed_spans`).
    pub fn add_dropped(&self, reason: DiscardReason, n: u64) {
        self.dropped.add(reason, n);
        metrics::add(&self.send_failed_spans, n);
    }

    /// Dropped spans for `reason`.
    pub fn dropped(&self, reason: DiscardReason) -> u64 {
        self.dropped.get(reason)
    }

    /// Copies all counters.
    pub fn snapshot(&self) -> TracesMetricsSnapshot {
        TracesMetricsSnapshot {
            accepted_requests: get(&self.accepted_requests),
            accepted_spans: get(&self.accepted_spans),
            refused_full: get(&self.refused_full),
            refused_full_spans: get(&self.refused_full_spans),
            split_requests: get(&self.split_requests),
            sent_requests: get(&self.sent_requests),
            sent_spans: get(&self.sent_spans),
            send_failed_spans: get(&self.send_failed_spans),
            failed_attempts: get(&self.failed_attempts),
            retries: get(&self.retries),
            rate_limited: get(&self.rate_limited),
            rate_limit_waiting: get(&self.rate_limit_waiting),
            partial_successes: get(&self.partial_successes),
            rejected_spans: get(&self.rejected_spans),
            queue_requests: get(&self.queue_requests),
            queue_bytes: get(&self.queue_bytes),
            queue_capacity_bytes: get(&self.queue_capacity_bytes),
            queue_capacity_requests: get(&self.queue_capacity_requests),
            dropped: self.dropped.snapshot(),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_adds_to_send_failed_and_gauges_saturate() {
        let m = TracesMetrics::default();
        m.add_dropped(DiscardReason::SendError, 3);
        m.add_dropped(DiscardReason::RatelimitBackoff, 2);
        TracesMetrics::add(&m.queue_bytes, 5);
        TracesMetrics::sub(&m.queue_bytes, 9);
        let s = m.snapshot();
        assert_eq!(s.send_failed_spans, 5);
        assert_eq!(s.dropped(DiscardReason::SendError), 3);
        assert_eq!(s.dropped(DiscardReason::RatelimitBackoff), 2);
        assert_eq!(s.dropped(DiscardReason::NetworkError), 0);
        assert_eq!(s.queue_bytes, 0);
    }
}
