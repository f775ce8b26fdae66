//! The receivers' metric families, read from each listener's [`Counters`] and the Sentry
//! receivers' [`ItemCounters`](crate::ItemCounters): the OpenTelemetry Collector's own names
//! (`otelcol_receiver_*`, from its `receiverhelper`) for what profilink shares with it, and
//! profilink's `profilink_receiver_*`. The service's registry serves them at `/metrics`. The
//! pprof receiver's pulls have families of their own ([`Scrapes`]).
//!
//! The profile samples of the Collector's names are sample records labelled
//! `sample_type="<type>:<unit>"`, as the Collector counts them since v0.165 (profilink's
//! observations are `profilink_receiver_*_samples_total`). Where profilink differs from the
//! Collector: `failed_*` and `requests{outcome="failure"}` stay 0 (profilink has no internal
//! errors apart from refusals: every error counts as refused, as in the Collector without its
//! `receiverhelper.newReceiverMetrics` gate).
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `otelcol_receiver_{accepted,refused}_profile_samples_total` | counter | `receiver`, `transport`, `sample_type` | sample records (OTLP `Sample` messages, Sentry `samples` entries) pushed into the pipeline / refused after decoding (invalid, or the pipeline refused), by `"<type>:<unit>"`; an `otel_metric_overflow="true"` series past 256 types |
//! | `otelcol_receiver_failed_profile_samples_total` | counter | `receiver`, `transport`, `sample_type` | always 0 (every error counts as refused) |
//! | `otelcol_receiver_{accepted,refused,failed}_spans_total` | counter | `receiver`, `transport` | the same for spans, when a traces pipeline runs |
//! | `otelcol_receiver_requests_total` | counter | `receiver`, `transport`, `outcome` | requests: `success`, `refused`, `failure` (0) |
//! | `profilink_receiver_accepted_samples_total` | counter | `receiver`, `transport` | observations (one timestamp or one value; one Sentry sample) accepted |
//! | `profilink_receiver_refused_samples_total` | counter | `receiver`, `transport` | observations refused after decoding (invalid, or the pipeline refused) |
//! | `profilink_receiver_accepted_profiles_total` | counter | `receiver`, `transport` | OTLP profiles / Sentry chunks and V1 profiles accepted |
//! | `profilink_receiver_refused_profiles_total` | counter | `receiver`, `transport` | profiles refused |
//! | `profilink_receiver_{accepted,refused}_spans_total` | counter | `receiver`, `transport` | spans of OTLP traces and Sentry span items accepted / refused |
//! | `profilink_receiver_accepted_requests_total` | counter | `receiver`, `transport` | requests answered with success |
//! | `profilink_receiver_refused_requests_total` | counter | `receiver`, `transport` | requests answered with an error |
//! | `profilink_receiver_refusals_total` | counter | `receiver`, `transport`, `reason` | the same by [`RefusalReason`](crate::RefusalReason) (`unsupported_version`, `full`, `invalid`, …) |
//! | `profilink_receiver_dropped_items_total` | counter | `receiver`, `type` | Sentry envelope items (and proxied requests) no pipeline consumes, dropped because the receiver has no `upstream` |
//! | `profilink_receiver_refused_items_total` | counter | `receiver`, `type`, `reason` | Sentry items refused: chunks failing the door check (validator rule id, `timestamp-out-of-range`), `invalid_json` and `unparsable` envelopes (still forwarded when there is an upstream), `rate_limited` (upstream limits their category; left out of the forwarded copy) |
//! | `profilink_otlp_decode_utf8_replacements_total` | counter | | invalid UTF-8 sequences in string fields of binary OTLP profiles requests (every path: gRPC, HTTP, Kafka, CLI) replaced with U+FFFD; the requests were accepted |
//! | `profilink_otlp_decode_layout_1_9_total` | counter | `reason` | binary OTLP profiles requests read in the proto 1.9 `Sample` layout: `decode_error` (they did not decode as 1.10), `inconsistent` (they decoded as 1.10 but broke the dictionary's bounds or the samples' shapes) |
//! | `profilink_otlp_decode_neither_layout_total` | counter | | binary OTLP profiles requests refused because they decode in both layouts and fit neither |
//!
//! The Sentry receiver's upstream forwarder (`profilink_receiver_upstream_*`) counts in the
//! exporter crate, which names its families (`profilink_exporter::telemetry`).

mod scrapes;
use crate::sample_records::RecordCounts;
use crate::{Counters, CountersSnapshot, Stats};
use profilink_consumer::telemetry::{Render, Text};
pub use scrapes::Scrapes;
use std::sync::Arc;

/// One receiver listener.
#[derive(Debug, Clone)]
pub struct ReceiverEntry {
    /// The receiver's component id (`otlp`, `sentry/2`…).
    pub id: String,
    /// `grpc`, `http`, `kafka`, or the pprof receiver's `scrape` (`remote` mode) and `file`.
    pub transport: &'static str,
    /// The receiver's counters (one [`Stats`] per receiver id).
    pub stats: Arc<Stats>,
}

impl ReceiverEntry {
    /// The receiver's component type: its id before any `/` (`sentry` for `sentry/2`).
    fn component_type(&self) -> &str {
        self.id.split_once('/').map_or(&self.id, |(t, _)| t)
    }

    /// The counters of this listener's transport.
    pub fn counters(&self) -> &Counters {
        match (self.component_type(), self.transport) {
            ("sentry", _) => &self.stats.sentry_http,
            ("kafka", _) => &self.stats.kafka,
            ("pprof", "scrape") => &self.stats.pprof_scrape,
            ("pprof", "file") => &self.stats.pprof_file,
            ("pprof", _) => &self.stats.pprof_http,
            ("pyroscope", _) => &self.stats.pyroscope_http,
            (_, "grpc") => &self.stats.otlp_grpc,
            _ => &self.stats.otlp_http,
        }
    }
}

type Count = fn(&CountersSnapshot) -> u64;
type RecordCount = fn(&RecordCounts) -> u64;

/// The Collector's `otelcol_receiver_*` families of every listener.
pub struct OtelcolReceivers<'a> {
    /// Every receiver listener.
    pub receivers: &'a [ReceiverEntry],
    /// True when a traces pipeline runs (the span families are served then).
    pub traces: bool,
}

impl Render for OtelcolReceivers<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let rows: Vec<_> = self
            .receivers
            .iter()
            .map(|r| (r, r.counters().snapshot()))
            .collect();
        self.sample_records(f);
        if self.traces {
            let families: [(&str, &str, Count); 3] = [
                (
                    "otelcol_receiver_accepted_spans_total",
                    "Number of spans successfully pushed into the pipeline.",
                    |s| s.accepted_spans,
                ),
                (
                    "otelcol_receiver_refused_spans_total",
                    "Number of spans that could not be pushed into the pipeline.",
                    |s| s.refused_spans,
                ),
                (
                    "otelcol_receiver_failed_spans_total",
                    "The number of spans that failed to be processed by the receiver due to internal errors.",
                    |_| 0,
                ),
            ];
            for (name, help, get) in families {
                f.header(name, "counter", help);
                for (r, s) in &rows {
                    f.sample(
                        name,
                        &[("receiver", &r.id), ("transport", r.transport)],
                        get(s),
                    );
                }
            }
        }
        let name = "otelcol_receiver_requests_total";
        f.header(name, "counter", "The number of requests performed.");
        for (r, s) in &rows {
            for (outcome, n) in [
                ("success", s.accepted_requests),
                ("refused", s.refused_requests),
                ("failure", 0),
            ] {
                let labels = [
                    ("receiver", r.id.as_str()),
                    ("transport", r.transport),
                    ("outcome", outcome),
                ];
                f.sample(name, &labels, n);
            }
        }
    }
}

impl OtelcolReceivers<'_> {
    /// `otelcol_receiver_{accepted,refused,failed}_profile_samples_total`: sample records by
    /// `sample_type`, as the Collector counts them since v0.165; one series per listener and
    /// sample type seen (none before the first profile), and an overflow series past the label
    /// bounds ([`crate::sample_records`]).
    fn sample_records(&self, f: &mut Text<'_>) {
        let rows: Vec<_> = self
            .receivers
            .iter()
            .map(|r| (r, r.counters().sample_records.snapshot()))
            .collect();
        let families: [(&str, &str, RecordCount); 3] = [
            (
                "otelcol_receiver_accepted_profile_samples_total",
                "Number of profile samples successfully pushed into the pipeline.",
                |c| c.accepted,
            ),
            (
                "otelcol_receiver_refused_profile_samples_total",
                "Number of profile samples that could not be pushed into the pipeline.",
                |c| c.refused,
            ),
            (
                "otelcol_receiver_failed_profile_samples_total",
                "The number of profile samples that failed to be processed by the receiver due to internal errors.",
                |_| 0,
            ),
        ];
        for (name, help, get) in families {
            f.header(name, "counter", help);
            for (r, snapshot) in &rows {
                let listener = [("receiver", r.id.as_str()), ("transport", r.transport)];
                for (sample_type, counts) in &snapshot.by_type {
                    let labels = [listener[0], listener[1], ("sample_type", sample_type)];
                    f.sample(name, &labels, get(counts));
                }
                if let Some(counts) = &snapshot.overflow {
                    let labels = [listener[0], listener[1], ("otel_metric_overflow", "true")];
                    f.sample(name, &labels, get(counts));
                }
            }
        }
    }
}

/// profilink's `profilink_receiver_*` families of every listener (the Sentry items' aside,
/// see [`SentryItems`]).
pub struct Receivers<'a>(pub &'a [ReceiverEntry]);

impl Render for Receivers<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let receivers: Vec<_> = self
            .0
            .iter()
            .map(|r| (r, r.counters().snapshot()))
            .collect();
        let receiver_families: [(&str, &str, Count); 8] = [
            (
                "profilink_receiver_accepted_samples_total",
                "Observations (one timestamp or one value of an OTLP sample, one Sentry sample) accepted by the pipeline.",
                |s| s.accepted_samples,
            ),
            (
                "profilink_receiver_refused_samples_total",
                "Observations refused (invalid, or refused by the pipeline after the body was decoded).",
                |s| s.refused_samples,
            ),
            (
                "profilink_receiver_accepted_profiles_total",
                "Profiles (OTLP profiles, Sentry chunks and V1 profiles) accepted.",
                |s| s.accepted_profiles,
            ),
            (
                "profilink_receiver_refused_profiles_total",
                "Profiles refused.",
                |s| s.refused_profiles,
            ),
            (
                "profilink_receiver_accepted_spans_total",
                "Spans (OTLP traces, Sentry span items) accepted.",
                |s| s.accepted_spans,
            ),
            (
                "profilink_receiver_refused_spans_total",
                "Spans refused (invalid, or refused by the pipeline).",
                |s| s.refused_spans,
            ),
            (
                "profilink_receiver_accepted_requests_total",
                "Requests answered with success.",
                |s| s.accepted_requests,
            ),
            (
                "profilink_receiver_refused_requests_total",
                "Requests answered with an error.",
                |s| s.refused_requests,
            ),
        ];
        for (name, help, get) in receiver_families {
            f.header(name, "counter", help);
            for (r, s) in &receivers {
                f.sample(
                    name,
                    &[("receiver", &r.id), ("transport", r.transport)],
                    get(s),
                );
            }
        }
        let name = "profilink_receiver_refusals_total";
        f.header(
            name,
            "counter",
            "Requests answered with an error, by reason (reasons that refused none are left out).",
        );
        for r in self.0 {
            for (reason, n) in r.counters().refusals() {
                let labels = [
                    ("receiver", r.id.as_str()),
                    ("transport", r.transport),
                    ("reason", reason.as_str()),
                ];
                f.sample(name, &labels, n);
            }
        }
    }
}

/// The Sentry receivers' items, as a Relay counts them: dropped (no upstream) and refused.
/// Listeners of other receivers are left out; no Sentry receiver, no families.
pub struct SentryItems<'a>(pub &'a [ReceiverEntry]);

impl Render for SentryItems<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let sentry: Vec<&ReceiverEntry> = self
            .0
            .iter()
            .filter(|r| r.component_type() == "sentry")
            .collect();
        if sentry.is_empty() {
            return;
        }
        let name = "profilink_receiver_dropped_items_total";
        f.header(
            name,
            "counter",
            "Sentry items no pipeline consumes, dropped because the receiver has no upstream.",
        );
        for r in &sentry {
            for (t, n) in r.stats.sentry_items.dropped() {
                f.sample(name, &[("receiver", &r.id), ("type", t)], n);
            }
        }
        let name = "profilink_receiver_refused_items_total";
        f.header(name, "counter", "Sentry items refused, by type and reason.");
        for r in &sentry {
            for (t, reason, n) in r.stats.sentry_items.refused() {
                f.sample(
                    name,
                    &[("receiver", &r.id), ("type", t), ("reason", reason)],
                    n,
                );
            }
        }
    }
}

/// Lenient decoding of binary OTLP profiles requests, process-wide
/// ([`profilink_proto::wire::counters`]).
pub struct OtlpDecoding;

impl Render for OtlpDecoding {
    fn render(&self, f: &mut Text<'_>) {
        use profilink_proto::wire::counters;
        let name = "profilink_otlp_decode_utf8_replacements_total";
        f.header(
            name,
            "counter",
            "Invalid UTF-8 sequences in OTLP profiles string fields replaced with U+FFFD.",
        );
        f.sample(name, &[], counters::utf8_replacements());
        let name = "profilink_otlp_decode_layout_1_9_total";
        f.header(
            name,
            "counter",
            "OTLP profiles requests read in the proto 1.9 Sample layout, by how it was detected.",
        );
        for (reason, n) in counters::layout_1_9() {
            f.sample(name, &[("reason", reason.as_str())], n);
        }
        let name = "profilink_otlp_decode_neither_layout_total";
        f.header(
            name,
            "counter",
            "OTLP profiles requests refused because neither the proto 1.10 nor the 1.9 layout fits them.",
        );
        f.sample(name, &[], counters::neither_layout());
    }
}
