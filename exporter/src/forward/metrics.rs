//! Counters of an upstream forwarder, read by the service's `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a forwarded request was given up.
pub const DROP_REASONS: [&str; 4] = [
    // Upstream answered 429: its quota is spent, Relay drops such an envelope too.
    "rate_limited",
    // Upstream answered another 4xx (bad request, auth, too large): resending cannot help.
    "rejected",
    // 5xx / network errors outlasted `retry_on_failure.max_elapsed_time`.
    "retries_exhausted",
    // The queue record could not be read back.
    "corrupt",
];

/// The forwarder's counters; all grow except the gauges.
#[derive(Debug, Default)]
pub struct ForwardMetrics {
    /// Requests taken into the queue.
    pub queued: AtomicU64,
    /// Requests refused because the queue was full (answered 503).
    pub refused_full: AtomicU64,
    /// Requests delivered (2xx).
    pub sent: AtomicU64,
    /// Failed attempts (network errors, 5xx).
    pub send_failed: AtomicU64,
    /// Retries scheduled.
    pub retries: AtomicU64,
    /// Responses that carried rate limits.
    pub rate_limited: AtomicU64,
    /// Requests given up, by `DROP_REASONS`.
    pub dropped: [AtomicU64; DROP_REASONS.len()],
    /// Gauge: bytes queued.
    pub queue_bytes: AtomicU64,
    /// Gauge: the queue's bound.
    pub queue_capacity: AtomicU64,
    /// Requests found in the queue at start (left by an earlier run).
    pub replayed: AtomicU64,
}

impl ForwardMetrics {
    /// Adds one to `c`.
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request given up for `reason` (one of `DROP_REASONS`).
    pub fn drop_request(&self, reason: &str) {
        if let Some(i) = DROP_REASONS.iter().position(|r| *r == reason) {
            Self::inc(&self.dropped[i]);
        }
    }

    /// `(reason, count)` of requests given up.
    pub fn dropped(&self) -> Vec<(&'static str, u64)> {
        DROP_REASONS
            .iter()
            .zip(&self.dropped)
            .map(|(r, c)| (*r, c.load(Ordering::Relaxed)))
            .collect()
    }
}
