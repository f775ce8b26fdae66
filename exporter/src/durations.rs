//! How long export attempts take: one fixed-bucket histogram per attempt outcome, in plain
//! atomics like the other counters, read by the service's `/metrics` endpoint as
//! `otel_sdk_exporter_operation_duration_seconds` (the OpenTelemetry semantic conventions'
//! `otel.sdk.exporter.operation.duration`; the Collector has no exporter duration histogram).
//!
//! Every attempt is recorded once, when its answer (or its failure) is known, whether it is
//! then retried or not; an item delivered on its third attempt adds three observations.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The bucket upper bounds in seconds: the semantic conventions' advice for request durations
/// (`http.client.request.duration`), which `otel.sdk.exporter.operation.duration` follows.
pub(crate) const DURATION_BOUNDS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// How an attempt ended: success, or the semantic conventions' `error.type` of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// The destination accepted the request (a partial success included).
    Success,
    /// Refused because of a rate limit (429, or a limit the response imposed).
    RateLimited,
    /// No answer: connection error or timeout.
    NetworkError,
    /// An error answer (4xx, 5xx, a gRPC error status) or a request that could not be sent.
    SendError,
}

impl AttemptOutcome {
    /// Every outcome, in histogram order.
    pub const ALL: [AttemptOutcome; 4] = [
        AttemptOutcome::Success,
        AttemptOutcome::RateLimited,
        AttemptOutcome::NetworkError,
        AttemptOutcome::SendError,
    ];

    /// The `error.type` value of a failure; `None` for a success (the conventions leave
    /// `error.type` unset on successful operations).
    pub fn error_type(self) -> Option<&'static str> {
        match self {
            AttemptOutcome::Success => None,
            AttemptOutcome::RateLimited => Some("rate_limited"),
            AttemptOutcome::NetworkError => Some("network_error"),
            AttemptOutcome::SendError => Some("send_error"),
        }
    }

    fn index(self) -> usize {
        match self {
            AttemptOutcome::Success => 0,
            AttemptOutcome::RateLimited => 1,
            AttemptOutcome::NetworkError => 2,
            AttemptOutcome::SendError => 3,
        }
    }
}

/// One histogram of durations over [`DURATION_BOUNDS`].
#[derive(Debug, Default)]
pub(crate) struct DurationHistogram {
    /// Observations per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; DURATION_BOUNDS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

/// A copy of one histogram of [`AttemptDurations`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations in this bucket)`, not cumulative; the last
    /// bound is `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
    /// Observations.
    pub count: u64,
    /// Sum of the observations in seconds.
    pub sum_seconds: f64,
}

impl DurationHistogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = DURATION_BOUNDS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(DURATION_BOUNDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Copies the histogram.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let bounds = DURATION_BOUNDS.iter().copied().chain([f64::INFINITY]);
        HistogramSnapshot {
            buckets: bounds
                .zip(&self.buckets)
                .map(|(b, n)| (b, n.load(Ordering::Relaxed)))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// The attempt durations of one exporter, one histogram per [`AttemptOutcome`].
#[derive(Debug, Default)]
pub struct AttemptDurations([DurationHistogram; 4]);

impl AttemptDurations {
    /// Records one attempt that took `d` and ended with `outcome`.
    pub fn record(&self, outcome: AttemptOutcome, d: Duration) {
        self.0[outcome.index()].observe(d);
    }

    /// `(outcome, histogram)` for every outcome, in [`AttemptOutcome::ALL`] order.
    pub fn snapshot(&self) -> Vec<(AttemptOutcome, HistogramSnapshot)> {
        AttemptOutcome::ALL
            .iter()
            .map(|o| (*o, self.0[o.index()].snapshot()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive_and_sum_in_seconds() {
        let h = DurationHistogram::default();
        h.observe(Duration::from_millis(5));
        h.observe(Duration::from_millis(6));
        h.observe(Duration::from_secs(11));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets.len(), DURATION_BOUNDS.len() + 1);
        assert_eq!(s.buckets[0], (0.005, 1));
        assert_eq!(s.buckets[1], (0.01, 1));
        assert_eq!(s.buckets[DURATION_BOUNDS.len()], (f64::INFINITY, 1));
        assert!((s.sum_seconds - 11.011).abs() < 1e-9);
    }

    #[test]
    fn outcomes_have_their_own_histograms() {
        let d = AttemptDurations::default();
        d.record(AttemptOutcome::Success, Duration::from_millis(1));
        d.record(AttemptOutcome::SendError, Duration::from_millis(1));
        d.record(AttemptOutcome::SendError, Duration::from_millis(1));
        let counts: Vec<u64> = d.snapshot().iter().map(|(_, h)| h.count).collect();
        assert_eq!(counts, vec![1, 0, 0, 2]);
        assert_eq!(AttemptOutcome::Success.error_type(), None);
    }
}
