//! Counters of what the receivers accept and refuse, per receiver and transport, for the
//! service's `/metrics` (named like the Collector's `otelcol_receiver_accepted_*`).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one receiver on one transport. All counters only grow.
#[derive(Debug, Default)]
pub struct Counters {
    /// Observations handed to the consumer (and accepted by it).
    pub accepted_samples: AtomicU64,
    /// Observations refused: invalid profiles, or a whole request the consumer refused.
    pub refused_samples: AtomicU64,
    /// Profiles handed to the consumer (and accepted by it).
    pub accepted_profiles: AtomicU64,
    /// Profiles refused (invalid, or refused by the consumer).
    pub refused_profiles: AtomicU64,
    /// Spans handed to the consumer (and accepted by it): OTLP trace spans, or the spans of
    /// Sentry `span` items.
    pub accepted_spans: AtomicU64,
    /// Spans refused: invalid spans (OTLP `rejected_spans`, unreadable Sentry span items), or
    /// all spans of a request the consumer refused. Requests refused before decoding (auth,
    /// size, full pipeline, traces not accepted) count no spans.
    pub refused_spans: AtomicU64,
    /// Requests answered with success (including partial success), profiles and traces alike.
    pub accepted_requests: AtomicU64,
    /// Requests answered with an error (bad input, auth, size, full pipeline…).
    pub refused_requests: AtomicU64,
}

impl Counters {
    /// Counts an accepted batch of `profiles` and `samples`.
    pub fn accept(&self, profiles: u64, samples: u64) {
        self.accepted_profiles
            .fetch_add(profiles, Ordering::Relaxed);
        self.accepted_samples.fetch_add(samples, Ordering::Relaxed);
    }

    /// Counts refused `profiles` and `samples` (not the request itself).
    pub fn refuse(&self, profiles: u64, samples: u64) {
        self.refused_profiles.fetch_add(profiles, Ordering::Relaxed);
        self.refused_samples.fetch_add(samples, Ordering::Relaxed);
    }

    /// Counts accepted spans.
    pub fn accept_spans(&self, spans: u64) {
        self.accepted_spans.fetch_add(spans, Ordering::Relaxed);
    }

    /// Counts refused spans (not the request itself).
    pub fn refuse_spans(&self, spans: u64) {
        self.refused_spans.fetch_add(spans, Ordering::Relaxed);
    }

    /// Counts a request answered with success.
    pub fn request_accepted(&self) {
        self.accepted_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a request answered with an error.
    pub fn request_refused(&self) {
        self.refused_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            accepted_samples: self.accepted_samples.load(Ordering::Relaxed),
            refused_samples: self.refused_samples.load(Ordering::Relaxed),
            accepted_profiles: self.accepted_profiles.load(Ordering::Relaxed),
            refused_profiles: self.refused_profiles.load(Ordering::Relaxed),
            accepted_spans: self.accepted_spans.load(Ordering::Relaxed),
            refused_spans: self.refused_spans.load(Ordering::Relaxed),
            accepted_requests: self.accepted_requests.load(Ordering::Relaxed),
            refused_requests: self.refused_requests.load(Ordering::Relaxed),
        }
    }
}

/// A copy of [`Counters`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// See [`Counters::accepted_samples`].
    pub accepted_samples: u64,
    /// See [`Counters::refused_samples`].
    pub refused_samples: u64,
    /// See [`Counters::accepted_profiles`].
    pub accepted_profiles: u64,
    /// See [`Counters::refused_profiles`].
    pub refused_profiles: u64,
    /// See [`Counters::accepted_spans`].
    pub accepted_spans: u64,
    /// See [`Counters::refused_spans`].
    pub refused_spans: u64,
    /// See [`Counters::accepted_requests`].
    pub accepted_requests: u64,
    /// See [`Counters::refused_requests`].
    pub refused_requests: u64,
}

/// The counters of every receiver; share one `Arc<Stats>` between the servers and `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    /// OTLP over gRPC.
    pub otlp_grpc: Counters,
    /// OTLP over HTTP.
    pub otlp_http: Counters,
    /// Sentry envelopes over HTTP.
    pub sentry_http: Counters,
    /// The Sentry receiver's items dropped (no pipeline, no upstream) or refused with a reason.
    pub sentry_items: crate::item_stats::ItemCounters,
}

impl Stats {
    /// `(receiver, transport, counters)` for every receiver, e.g. `("otlp", "grpc", …)`, in a
    /// fixed order: ready for labelled metrics.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, CountersSnapshot)> {
        vec![
            ("otlp", "grpc", self.otlp_grpc.snapshot()),
            ("otlp", "http", self.otlp_http.snapshot()),
            ("sentry", "http", self.sentry_http.snapshot()),
        ]
    }
}
