//! Exporter counters: plain atomics, read by the service's `/metrics` endpoint via
//! [`ExporterMetrics::snapshot`].

use crate::durations::AttemptDurations;
use crate::emit_reason::EmitReason;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a chunk was given up (Sentry client-report `reason` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscardReason {
    /// Dropped because of a rate limit.
    RatelimitBackoff,
    /// Dropped because the queue was full (`overflow: drop_oldest`).
    QueueOverflow,
    /// Retries of timeouts / connection errors ran out.
    NetworkError,
    /// The server refused it (4xx other than 429), or retries of 5xx ran out.
    SendError,
}

impl DiscardReason {
    /// All reasons, in counter order.
    pub const ALL: [DiscardReason; 4] = [
        DiscardReason::RatelimitBackoff,
        DiscardReason::QueueOverflow,
        DiscardReason::NetworkError,
        DiscardReason::SendError,
    ];

    /// The client-report `reason` string.
    pub fn as_str(self) -> &'static str {
        match self {
            DiscardReason::RatelimitBackoff => "ratelimit_backoff",
            DiscardReason::QueueOverflow => "queue_overflow",
            DiscardReason::NetworkError => "network_error",
            DiscardReason::SendError => "send_error",
        }
    }

    fn index(self) -> usize {
        match self {
            DiscardReason::RatelimitBackoff => 0,
            DiscardReason::QueueOverflow => 1,
            DiscardReason::NetworkError => 2,
            DiscardReason::SendError => 3,
        }
    }
}

/// One counter per [`DiscardReason`] (chunks, samples or spans given up), as every exporter
/// keeps them.
#[derive(Debug, Default)]
pub struct ReasonCounters([AtomicU64; 4]);

impl ReasonCounters {
    /// Adds `n` under `reason`.
    pub fn add(&self, reason: DiscardReason, n: u64) {
        self.0[reason.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// The count under `reason`.
    pub fn get(&self, reason: DiscardReason) -> u64 {
        get(&self.0[reason.index()])
    }

    /// `(reason, count)` for every reason, in [`DiscardReason::ALL`] order.
    pub fn snapshot(&self) -> Vec<(DiscardReason, u64)> {
        DiscardReason::ALL
            .iter()
            .map(|r| (*r, self.get(*r)))
            .collect()
    }
}

/// The count under `reason` in a [`ReasonCounters::snapshot`].
pub fn count_for(counts: &[(DiscardReason, u64)], reason: DiscardReason) -> u64 {
    counts
        .iter()
        .find(|(r, _)| *r == reason)
        .map_or(0, |(_, n)| *n)
}

/// Adds `n` to a counter.
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Subtracts `n` from a gauge (saturating at 0).
pub fn sub(gauge: &AtomicU64, n: u64) {
    let _ = gauge.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(n))
    });
}

/// Live counters of one exporter.
#[derive(Debug, Default)]
pub struct ExporterMetrics {
    /// Chunks (or OTLP requests) delivered.
    pub sent_chunks: AtomicU64,
    /// Delivery attempts that failed (any reason, retried or not): one per failed attempt,
    /// so a chunk delivered on its third attempt adds 2. Served as
    /// `profilink_exporter_failed_attempts_total`; what was given up is in the drop counters
    /// ([`ExporterMetrics::add_dropped`], [`MetricsSnapshot::send_failed_samples`]).
    pub send_failed_chunks: AtomicU64,
    /// Retries scheduled.
    pub retries: AtomicU64,
    /// Responses that imposed a rate limit (429, or `X-Sentry-Rate-Limits` on a 2xx).
    pub rate_limited: AtomicU64,
    dropped: ReasonCounters,
    /// Bytes of unacknowledged records in the queue.
    pub queue_size_bytes: AtomicU64,
    /// Queue capacity in bytes.
    pub queue_capacity_bytes: AtomicU64,
    /// Chunks accepted by `export`.
    pub accepted_chunks: AtomicU64,
    /// Merged chunks emitted by the accumulator.
    pub merged_chunks: AtomicU64,
    /// Corrupt queue records skipped on replay.
    pub corrupt_records: AtomicU64,
    /// `export` calls refused because the queue was full.
    pub refused_full: AtomicU64,
    /// Samples in `export` calls refused because the queue was full.
    pub refused_full_samples: AtomicU64,
    /// Envelopes written to the dead-letter directory.
    pub dead_lettered: AtomicU64,
    /// Client reports sent.
    pub client_reports_sent: AtomicU64,
    /// OTLP partial successes received.
    pub partial_successes: AtomicU64,
    /// Profiles the OTLP server reported as rejected in partial successes.
    pub rejected_profiles: AtomicU64,
    /// Samples not sent because their thread had fewer than 2 samples in its merged chunk
    /// (Relay would drop them).
    pub sparse_samples_dropped: AtomicU64,
    /// Merged chunks that failed the chunk validator's error rules on their way out, and were
    /// dropped instead of queued for delivery (each logged with its rule).
    pub invalid_chunks: AtomicU64,
    /// Samples of those chunks.
    pub invalid_samples: AtomicU64,
    /// Samples accepted by `export`.
    pub accepted_samples: AtomicU64,
    /// Samples replayed from the queue at start (unacknowledged inputs and merged chunks).
    pub replayed_samples: AtomicU64,
    /// Samples of replayed inputs left out because a persisted chunk already holds them.
    pub replay_skipped_samples: AtomicU64,
    /// Samples in delivered chunks.
    pub sent_samples: AtomicU64,
    dropped_samples: ReasonCounters,
    /// Samples of such threads moved into group threads instead (`sparse_threads: group`).
    pub sparse_samples_grouped: AtomicU64,
    /// Threads whose samples were moved into group threads.
    pub sparse_threads_grouped: AtomicU64,
    /// Chunks the accumulator emitted, by why (indexed by [`EmitReason::index`]); `memory`
    /// and `size` are the ones cut before their window closed.
    chunks_closed: [AtomicU64; EmitReason::ALL.len()],
    /// How long each delivery attempt took, by outcome.
    pub attempt_durations: AttemptDurations,
}

/// A copy of the counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetricsSnapshot {
    /// See [`ExporterMetrics::sent_chunks`].
    pub sent_chunks: u64,
    /// See [`ExporterMetrics::send_failed_chunks`].
    pub send_failed_chunks: u64,
    /// See [`ExporterMetrics::retries`].
    pub retries: u64,
    /// See [`ExporterMetrics::rate_limited`].
    pub rate_limited: u64,
    /// Dropped chunks by reason.
    pub dropped: Vec<(DiscardReason, u64)>,
    /// See [`ExporterMetrics::queue_size_bytes`].
    pub queue_size_bytes: u64,
    /// See [`ExporterMetrics::queue_capacity_bytes`].
    pub queue_capacity_bytes: u64,
    /// See [`ExporterMetrics::accepted_chunks`].
    pub accepted_chunks: u64,
    /// See [`ExporterMetrics::merged_chunks`].
    pub merged_chunks: u64,
    /// See [`ExporterMetrics::corrupt_records`].
    pub corrupt_records: u64,
    /// See [`ExporterMetrics::refused_full`].
    pub refused_full: u64,
    /// See [`ExporterMetrics::refused_full_samples`].
    pub refused_full_samples: u64,
    /// See [`ExporterMetrics::dead_lettered`].
    pub dead_lettered: u64,
    /// See [`ExporterMetrics::client_reports_sent`].
    pub client_reports_sent: u64,
    /// See [`ExporterMetrics::partial_successes`].
    pub partial_successes: u64,
    /// See [`ExporterMetrics::rejected_profiles`].
    pub rejected_profiles: u64,
    /// See [`ExporterMetrics::sparse_samples_dropped`].
    pub sparse_samples_dropped: u64,
    /// See [`ExporterMetrics::invalid_chunks`].
    pub invalid_chunks: u64,
    /// See [`ExporterMetrics::invalid_samples`].
    pub invalid_samples: u64,
    /// See [`ExporterMetrics::accepted_samples`].
    pub accepted_samples: u64,
    /// See [`ExporterMetrics::replayed_samples`].
    pub replayed_samples: u64,
    /// See [`ExporterMetrics::replay_skipped_samples`].
    pub replay_skipped_samples: u64,
    /// See [`ExporterMetrics::sent_samples`].
    pub sent_samples: u64,
    /// Samples of dropped chunks, by reason.
    pub dropped_samples: Vec<(DiscardReason, u64)>,
    /// See [`ExporterMetrics::sparse_samples_grouped`].
    pub sparse_samples_grouped: u64,
    /// See [`ExporterMetrics::sparse_threads_grouped`].
    pub sparse_threads_grouped: u64,
    /// Chunks the accumulator emitted, by why (see [`ExporterMetrics::add_closed`]).
    pub chunks_closed: [u64; EmitReason::ALL.len()],
}

impl MetricsSnapshot {
    /// Dropped count for one reason.
    pub fn dropped(&self, reason: DiscardReason) -> u64 {
        count_for(&self.dropped, reason)
    }

    /// Samples given up after delivery failed: refused for good, retries exhausted, or rate
    /// limited for too long; each chunk's samples once, however many attempts it took. What
    /// the Collector counts as `otelcol_exporter_send_failed_*` (its retry sender gives up
    /// before its obsreport sender counts). Samples dropped from a full queue
    /// (`queue_overflow`) never failed a send and are not included.
    pub fn send_failed_samples(&self) -> u64 {
        self.dropped_samples
            .iter()
            .filter(|(r, _)| *r != DiscardReason::QueueOverflow)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A counter's value.
pub(crate) fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl ExporterMetrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        add(counter, n);
    }

    /// Counts a chunk the accumulator emitted for `reason`.
    pub fn add_closed(&self, reason: EmitReason) {
        self.chunks_closed[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts `n` chunks dropped for `reason`.
    pub fn add_dropped(&self, reason: DiscardReason, n: u64) {
        self.dropped.add(reason, n);
    }

    /// Dropped count for `reason`.
    pub fn dropped(&self, reason: DiscardReason) -> u64 {
        self.dropped.get(reason)
    }

    /// Counts `n` samples of dropped chunks for `reason`.
    pub fn add_dropped_samples(&self, reason: DiscardReason, n: u64) {
        self.dropped_samples.add(reason, n);
    }

    /// Copies all counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            sent_chunks: get(&self.sent_chunks),
            send_failed_chunks: get(&self.send_failed_chunks),
            retries: get(&self.retries),
            rate_limited: get(&self.rate_limited),
            dropped: self.dropped.snapshot(),
            queue_size_bytes: get(&self.queue_size_bytes),
            queue_capacity_bytes: get(&self.queue_capacity_bytes),
            accepted_chunks: get(&self.accepted_chunks),
            merged_chunks: get(&self.merged_chunks),
            corrupt_records: get(&self.corrupt_records),
            refused_full: get(&self.refused_full),
            refused_full_samples: get(&self.refused_full_samples),
            dead_lettered: get(&self.dead_lettered),
            client_reports_sent: get(&self.client_reports_sent),
            partial_successes: get(&self.partial_successes),
            rejected_profiles: get(&self.rejected_profiles),
            sparse_samples_dropped: get(&self.sparse_samples_dropped),
            invalid_chunks: get(&self.invalid_chunks),
            invalid_samples: get(&self.invalid_samples),
            accepted_samples: get(&self.accepted_samples),
            replayed_samples: get(&self.replayed_samples),
            replay_skipped_samples: get(&self.replay_skipped_samples),
            sent_samples: get(&self.sent_samples),
            dropped_samples: self.dropped_samples.snapshot(),
            sparse_samples_grouped: get(&self.sparse_samples_grouped),
            sparse_threads_grouped: get(&self.sparse_threads_grouped),
            chunks_closed: std::array::from_fn(|i| get(&self.chunks_closed[i])),
        }
    }
}
