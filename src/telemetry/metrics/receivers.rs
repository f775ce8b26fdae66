//! `profilink_receiver_*`: the counters of each receiver listener.

use super::text::{Render, Text};
use profilink_receiver::{Counters, Stats};
use std::sync::Arc;

/// One receiver listener.
#[derive(Debug, Clone)]
pub struct ReceiverEntry {
    /// The receiver's component id (`otlp`, `sentry/2`…).
    pub id: String,
    /// `grpc`, `http` or `kafka`.
    pub transport: &'static str,
    /// The receiver's counters (one [`Stats`] per receiver id).
    pub stats: Arc<Stats>,
}

impl ReceiverEntry {
    /// The counters of this listener's transport.
    pub fn counters(&self) -> &Counters {
        match (crate::config::component_type(&self.id), self.transport) {
            ("sentry", _) => &self.stats.sentry_http,
            ("kafka", _) => &self.stats.kafka,
            (_, "grpc") => &self.stats.otlp_grpc,
            _ => &self.stats.otlp_http,
        }
    }
}

type ReceiverField = fn(&profilink_receiver::CountersSnapshot) -> u64;

impl Render for Vec<ReceiverEntry> {
    fn render(&self, f: &mut Text<'_>) {
        let receivers: Vec<_> = self.iter().map(|r| (r, r.counters().snapshot())).collect();
        let receiver_families: [(&str, &str, ReceiverField); 8] = [
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
        for r in self {
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
