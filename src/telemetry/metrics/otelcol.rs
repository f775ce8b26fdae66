//! The OpenTelemetry Collector's own metric names, labels and meanings (`otelcol_*`, from its
//! `receiverhelper` and `exporterhelper`) for what profilink shares with it, read from the same
//! counters as the `profilink_*` families; and the attempt-duration histograms under the
//! semantic conventions' `otel.sdk.exporter.operation.duration`.
//!
//! The receivers' profile samples are sample records labelled `sample_type="<type>:<unit>"`,
//! as the Collector counts them since v0.165 (profilink's observations are
//! `profilink_receiver_*_samples_total`). Where profilink differs from the Collector it says so
//! here and in `docs/configuration.md`: `failed_*` and `requests{outcome="failure"}` stay 0 (profilink has
//! no internal errors apart from refusals: every error counts as refused, as in the Collector
//! without its `receiverhelper.newReceiverMetrics` gate); queue sizes are in bytes (the
//! Collector's `sizer: bytes`); the exporters' profile samples are the samples of Sentry
//! chunks (one per observation) and, for OTLP exporters, observations, not sample records.

use super::exporters::ExporterEntry;
use super::receivers::ReceiverEntry;
use super::text::{Render, Text};
use profilink_exporter::{AttemptDurations, MetricsSnapshot, TracesMetrics, TracesMetricsSnapshot};
use std::sync::Arc;

/// The `otelcol_*` families and the duration histograms, as one [`Render`] section.
pub struct Otelcol<'a> {
    /// Every receiver listener.
    pub receivers: &'a [ReceiverEntry],
    /// The exporters' profiles instances.
    pub exporters: &'a [ExporterEntry],
    /// The exporters' traces instances, by exporter id.
    pub traces_exporters: &'a [(String, Arc<TracesMetrics>)],
    /// True when a traces pipeline runs (the span families are served then).
    pub traces: bool,
}

impl Render for Otelcol<'_> {
    fn render(&self, f: &mut Text<'_>) {
        self.receivers(f);
        self.exporters(f);
        self.durations(f);
    }
}

type Count = fn(&profilink_receiver::CountersSnapshot) -> u64;
type RecordCount = fn(&profilink_receiver::sample_records::RecordCounts) -> u64;
type ProfilesCount = fn(&MetricsSnapshot) -> u64;
type SpansCount = fn(&TracesMetricsSnapshot) -> u64;

impl Otelcol<'_> {
    fn receivers(&self, f: &mut Text<'_>) {
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

    /// `otelcol_receiver_{accepted,refused,failed}_profile_samples_total`: sample records by
    /// `sample_type`, as the Collector counts them since v0.165; one series per listener and
    /// sample type seen (none before the first profile), and an overflow series past the label
    /// bounds ([`profilink_receiver::sample_records`]).
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

    fn exporters(&self, f: &mut Text<'_>) {
        let profiles: Vec<_> = self
            .exporters
            .iter()
            .map(|e| (e.id.as_str(), e.metrics.snapshot()))
            .collect();
        let counters: [(&str, &str, ProfilesCount); 3] = [
            (
                "otelcol_exporter_sent_profile_samples_total",
                "Number of profile samples successfully sent to destination.",
                |s| s.sent_samples,
            ),
            (
                "otelcol_exporter_send_failed_profile_samples_total",
                "Number of profile samples given up after failed attempts to send to destination (once per sample, after retries).",
                |s| s.send_failed_samples(),
            ),
            (
                "otelcol_exporter_enqueue_failed_profile_samples_total",
                "Number of profile samples failed to be added to the sending queue.",
                |s| s.refused_full_samples,
            ),
        ];
        for (name, help, get) in counters {
            f.header(name, "counter", help);
            for (id, s) in &profiles {
                f.sample(name, &[("exporter", id)], get(s));
            }
        }
        let traces: Vec<_> = self
            .traces_exporters
            .iter()
            .map(|(id, m)| (id.as_str(), m.snapshot()))
            .collect();
        if !traces.is_empty() {
            let counters: [(&str, &str, SpansCount); 3] = [
                (
                    "otelcol_exporter_sent_spans_total",
                    "Number of spans successfully sent to destination.",
                    |s| s.sent_spans,
                ),
                (
                    "otelcol_exporter_send_failed_spans_total",
                    "Number of spans given up after failed attempts to send to destination (once per span, after retries).",
                    |s| s.send_failed_spans,
                ),
                (
                    "otelcol_exporter_enqueue_failed_spans_total",
                    "Number of spans failed to be added to the sending queue.",
                    |s| s.refused_full_spans,
                ),
            ];
            for (name, help, get) in counters {
                f.header(name, "counter", help);
                for (id, s) in &traces {
                    f.sample(name, &[("exporter", id)], get(s));
                }
            }
        }
        // Queue gauges, in bytes; only for queues that have a byte bound.
        let mut queues: Vec<(&str, &str, u64, u64)> = profiles
            .iter()
            .map(|(id, s)| (*id, "profiles", s.queue_size_bytes, s.queue_capacity_bytes))
            .collect();
        queues.extend(
            traces
                .iter()
                .map(|(id, s)| (*id, "traces", s.queue_bytes, s.queue_capacity_bytes)),
        );
        queues.retain(|q| q.3 > 0);
        for (name, help, size) in [
            (
                "otelcol_exporter_queue_size",
                "Current size of the sending queue (in bytes).",
                true,
            ),
            (
                "otelcol_exporter_queue_capacity",
                "Fixed capacity of the sending queue (in bytes).",
                false,
            ),
        ] {
            f.header(name, "gauge", help);
            for (id, data_type, used, capacity) in &queues {
                let v = if size { *used } else { *capacity };
                f.sample(name, &[("exporter", id), ("data_type", data_type)], v);
            }
        }
    }

    fn durations(&self, f: &mut Text<'_>) {
        let name = "otel_sdk_exporter_operation_duration_seconds";
        f.header(
            name,
            "histogram",
            "The duration of one export attempt (one request to the destination), by outcome.",
        );
        let all = self
            .exporters
            .iter()
            .map(|e| (e.id.as_str(), "profiles", &e.metrics.attempt_durations))
            .chain(
                self.traces_exporters
                    .iter()
                    .map(|(id, m)| (id.as_str(), "traces", &m.attempt_durations)),
            );
        for (id, data_type, durations) in all {
            histograms(f, name, id, data_type, durations);
        }
    }
}

/// One histogram per outcome of `durations`; successes always, failures once they happened.
fn histograms(
    f: &mut Text<'_>,
    name: &str,
    id: &str,
    data_type: &str,
    durations: &AttemptDurations,
) {
    for (outcome, h) in durations.snapshot() {
        match outcome.error_type() {
            None => f.histogram(name, &[("exporter", id), ("data_type", data_type)], &h),
            Some(_) if h.count == 0 => {}
            Some(error) => f.histogram(
                name,
                &[
                    ("exporter", id),
                    ("data_type", data_type),
                    ("error_type", error),
                ],
                &h,
            ),
        }
    }
}
