//! Counters of what the receivers accept and refuse, per receiver and transport, for the
//! service's `/metrics` (named like the Collector's `otelcol_receiver_accepted_*`).
//!
//! Three units are counted: profiles (and spans), **observations** (profilink's sample: one
//! timestamp or one value of an OTLP `Sample`, one entry of a Sentry chunk's `samples`), and
//! **sample records** by `sample_type` ([`crate::sample_records`], the Collector's unit).
//! Requests refused before their body was decoded (authentication, version, size, a full
//! pipeline at [`Consumer::check_ready`](profilink_consumer::Consumer::check_ready)) count as refused
//! requests, with a [`RefusalReason`], and no samples: none were read.

pub(crate) mod items;
pub(crate) mod scrape;

use crate::sample_records::{SampleRecordCounters, SampleRecords};
use scrape::ScrapeCounters;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a request was answered with an error: the `reason` label of
/// `profilink_receiver_refusals_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefusalReason {
    /// The OTLP profiles development version is repeated, malformed or not supported
    /// ([`crate::profiles_version`]).
    UnsupportedVersion,
    /// Missing or wrong credentials (`auth`, `bearer_token`, Sentry keys).
    Unauthenticated,
    /// `Content-Type` not taken (HTTP 415).
    UnsupportedMediaType,
    /// `Content-Encoding` not taken.
    UnsupportedEncoding,
    /// The body is over the size limit.
    TooLarge,
    /// A pipeline (or the Sentry receiver's forward queue) is full: retry later.
    Full,
    /// The body cannot be read or decoded, or is unusable (broken dictionary, bad envelope).
    Invalid,
    /// The pipeline rejected the data for good.
    Rejected,
    /// The pipeline failed (any [`ConsumeError`](profilink_consumer::ConsumeError) but `Full`
    /// and `Rejected`).
    Unavailable,
    /// Upstream rate limits cover the request (Sentry receiver, 429).
    RateLimited,
    /// The call did not finish in time (gRPC `request_timeout`, a client's deadline).
    Timeout,
    /// A profile format profilink does not read (the Pyroscope receiver's `format=jfr`).
    UnsupportedFormat,
    /// Anything else.
    Other,
}

impl RefusalReason {
    /// Every reason, in label order.
    pub const ALL: [RefusalReason; 13] = [
        RefusalReason::UnsupportedVersion,
        RefusalReason::Unauthenticated,
        RefusalReason::UnsupportedMediaType,
        RefusalReason::UnsupportedEncoding,
        RefusalReason::TooLarge,
        RefusalReason::Full,
        RefusalReason::Invalid,
        RefusalReason::Rejected,
        RefusalReason::Unavailable,
        RefusalReason::RateLimited,
        RefusalReason::Timeout,
        RefusalReason::UnsupportedFormat,
        RefusalReason::Other,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::UnsupportedVersion => "unsupported_version",
            RefusalReason::Unauthenticated => "unauthenticated",
            RefusalReason::UnsupportedMediaType => "unsupported_media_type",
            RefusalReason::UnsupportedEncoding => "unsupported_encoding",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::Full => "full",
            RefusalReason::Invalid => "invalid",
            RefusalReason::Rejected => "rejected",
            RefusalReason::Unavailable => "unavailable",
            RefusalReason::RateLimited => "rate_limited",
            RefusalReason::Timeout => "timeout",
            RefusalReason::UnsupportedFormat => "unsupported_format",
            RefusalReason::Other => "other",
        }
    }

    /// The reason an HTTP error answer stands for, when nothing more precise is known
    /// (`full`: a 503 with `Retry-After`).
    pub fn of_http_status(status: u16, retry_after: bool) -> RefusalReason {
        match status {
            400 | 404 | 422 => RefusalReason::Invalid,
            401 | 403 => RefusalReason::Unauthenticated,
            408 => RefusalReason::Timeout,
            413 => RefusalReason::TooLarge,
            415 => RefusalReason::UnsupportedEncoding,
            429 => RefusalReason::RateLimited,
            503 if retry_after => RefusalReason::Full,
            502..=504 => RefusalReason::Unavailable,
            _ => RefusalReason::Other,
        }
    }

    /// The reason a gRPC status code stands for, when nothing more precise is known.
    pub fn of_grpc_code(code: tonic::Code) -> RefusalReason {
        use tonic::Code;
        match code {
            Code::InvalidArgument | Code::Internal | Code::DataLoss => RefusalReason::Invalid,
            Code::Unauthenticated | Code::PermissionDenied => RefusalReason::Unauthenticated,
            Code::ResourceExhausted => RefusalReason::TooLarge,
            Code::Unimplemented => RefusalReason::UnsupportedEncoding,
            Code::Unavailable => RefusalReason::Unavailable,
            Code::Cancelled | Code::DeadlineExceeded => RefusalReason::Timeout,
            _ => RefusalReason::Other,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

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
    /// [`Counters::refused_requests`] by [`RefusalReason`] (indexed by its discriminant).
    refusals: [AtomicU64; RefusalReason::ALL.len()],
    /// Sample records by `sample_type`, accepted and refused (the Collector's unit).
    pub sample_records: SampleRecordCounters,
    /// Pulls (the pprof receiver's `remote` scrapes and `file` reads; 0 on other listeners).
    pub scrapes: ScrapeCounters,
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

    /// Counts accepted sample records (see [`crate::sample_records`]).
    pub fn accept_records(&self, records: &SampleRecords) {
        self.sample_records.accept(records);
    }

    /// Counts refused sample records.
    pub fn refuse_records(&self, records: &SampleRecords) {
        self.sample_records.refuse(records);
    }

    /// Counts a request answered with an error, for [`RefusalReason::Other`].
    pub fn request_refused(&self) {
        self.request_refused_for(RefusalReason::Other);
    }

    /// Counts a request answered with an error, for `reason`.
    pub fn request_refused_for(&self, reason: RefusalReason) {
        self.refused_requests.fetch_add(1, Ordering::Relaxed);
        self.refusals[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// `(reason, requests)` of every reason that refused a request so far.
    pub fn refusals(&self) -> Vec<(RefusalReason, u64)> {
        RefusalReason::ALL
            .iter()
            .map(|r| (*r, self.refusals[r.index()].load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
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
    /// OTLP messages of Kafka topics (profilink-kafka's receiver).
    pub kafka: Counters,
    /// The pprof receiver's `server` mode (`POST /v1/pprof`).
    pub pprof_http: Counters,
    /// The pprof receiver's `remote` mode (scrapes of `/debug/pprof/...`).
    pub pprof_scrape: Counters,
    /// The pprof receiver's `file` mode.
    pub pprof_file: Counters,
    /// The Pyroscope receiver (`/ingest`, `/push.v1.PusherService/Push`).
    pub pyroscope_http: Counters,
    /// The Sentry receiver's items dropped (no pipeline, no upstream) or refused with a reason.
    pub sentry_items: items::ItemCounters,
}

impl Stats {
    /// `(receiver, transport, counters)` for every receiver, e.g. `("otlp", "grpc", …)`, in a
    /// fixed order: ready for labelled metrics.
    pub fn snapshot(&self) -> Vec<(&'static str, &'static str, CountersSnapshot)> {
        vec![
            ("otlp", "grpc", self.otlp_grpc.snapshot()),
            ("otlp", "http", self.otlp_http.snapshot()),
            ("sentry", "http", self.sentry_http.snapshot()),
            ("kafka", "kafka", self.kafka.snapshot()),
            ("pprof", "http", self.pprof_http.snapshot()),
            ("pprof", "scrape", self.pprof_scrape.snapshot()),
            ("pprof", "file", self.pprof_file.snapshot()),
            ("pyroscope", "http", self.pyroscope_http.snapshot()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_reason_and_in_total() {
        for (i, r) in RefusalReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i, "{r:?}");
        }
        let c = Counters::default();
        c.request_refused_for(RefusalReason::UnsupportedVersion);
        c.request_refused_for(RefusalReason::UnsupportedVersion);
        c.request_refused();
        assert_eq!(c.snapshot().refused_requests, 3);
        assert_eq!(
            c.refusals(),
            [
                (RefusalReason::UnsupportedVersion, 2),
                (RefusalReason::Other, 1)
            ]
        );
        assert_eq!(
            RefusalReason::of_http_status(503, true),
            RefusalReason::Full
        );
        assert_eq!(
            RefusalReason::of_http_status(503, false),
            RefusalReason::Unavailable
        );
        assert_eq!(
            RefusalReason::of_grpc_code(tonic::Code::ResourceExhausted),
            RefusalReason::TooLarge
        );
    }
}
