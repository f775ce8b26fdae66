//! The exporters' metric families, read from their [`ExporterMetrics`], [`TracesMetrics`]
//! and the Sentry receivers' upstream [`ForwardMetrics`]: the OpenTelemetry Collector's own
//! names (`otelcol_exporter_*`, from its `exporterhelper`) for what profilink shares with it,
//! the attempt-duration histograms under the semantic conventions'
//! `otel.sdk.exporter.operation.duration`, and profilink's `profilink_exporter_*`,
//! `profilink_queue_*`, `profilink_traces_exporter_*` and `profilink_receiver_upstream_*`. The
//! service's registry serves them at `/metrics`.
//!
//! Where profilink differs from the Collector: queue sizes are in bytes (the Collector's
//! `sizer: bytes`); the exporters' profile samples are the samples of Sentry chunks (one per
//! observation) and, for OTLP exporters, observations, not sample records.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `otelcol_exporter_sent_profile_samples_total` | counter | `exporter` | samples delivered (chunk samples; OTLP exporters: observations) |
//! | `otelcol_exporter_send_failed_profile_samples_total` | counter | `exporter` | samples given up after sending failed (once per sample, after retries; not `queue_overflow`) |
//! | `otelcol_exporter_enqueue_failed_profile_samples_total` | counter | `exporter` | samples refused by a full queue |
//! | `otelcol_exporter_{sent,send_failed,enqueue_failed}_spans_total` | counter | `exporter` | the same for traces instances |
//! | `otelcol_exporter_queue_{size,capacity}` | gauge | `exporter`, `data_type` | sending queues with a byte bound, in bytes |
//! | `otel_sdk_exporter_operation_duration_seconds` | histogram | `exporter`, `data_type`, `error_type` (failures) | duration of every delivery attempt |
//! | `profilink_exporter_accepted_chunks_total` | counter | `exporter` | chunks (OTLP: requests) accepted by `export` |
//! | `profilink_exporter_refused_full_total` | counter | `exporter` | `export` calls refused because the queue was full |
//! | `profilink_exporter_sent_chunks_total` | counter | `exporter` | chunks (OTLP: requests) delivered |
//! | `profilink_exporter_failed_attempts_total` | counter | `exporter` | failed delivery attempts (one per attempt, retried or not) |
//! | `profilink_exporter_send_failed_chunks_total` | counter | `exporter` | deprecated old name of `profilink_exporter_failed_attempts_total` |
//! | `profilink_exporter_retries_total` | counter | `exporter` | retries scheduled |
//! | `profilink_exporter_rate_limited_total` | counter | `exporter` | responses that imposed a rate limit |
//! | `profilink_exporter_dropped_chunks_total` | counter | `exporter`, `reason` | chunks given up (`ratelimit_backoff`, `queue_overflow`, `network_error`, `send_error`) |
//! | `profilink_exporter_merged_chunks_total` | counter | `exporter` | merged chunks emitted by the accumulator |
//! | `profilink_exporter_sparse_samples_dropped_total` | counter | `exporter` | samples of threads Relay would drop (< 2 non-empty-stack samples in a merged chunk) that could not be grouped, dropped before sending |
//! | `profilink_exporter_invalid_{chunks,samples}_total` | counter | `exporter` | merged chunks (and their samples) that failed the chunk validator's error rules on their way out: dropped, never sent, each logged as a warning with its rule |
//! | `profilink_exporter_sparse_samples_grouped_total` | counter | `exporter` | samples of such threads moved into group threads (`sparse_threads: group`) |
//! | `profilink_exporter_sparse_threads_grouped_total` | counter | `exporter` | threads whose samples were moved into group threads |
//! | `profilink_exporter_chunks_cut_early_total` | counter | `exporter`, `reason` | chunks cut before their window closed: `memory` (the open windows together reached `max_open_bytes`), `size` (the chunk reached `max_chunk_bytes`) |
//! | `profilink_exporter_chunks_closed_total` | counter | `exporter`, `reason` | chunks the accumulator emitted, by why: `duration` (the session's newest sample passed the window by `chunk_lateness`), `settled` (passed, and quiet for half of `chunk_idle_timeout`), `size`, `memory` (as above), `idle` (the session was idle for `chunk_idle_timeout`), `flush` (shutdown), `late` (samples for a window already past the lateness bound) |
//! | `profilink_exporter_{accepted,replayed,sent}_samples_total` | counter | `exporter` | samples accepted by `export`, replayed from the queue at start, delivered |
//! | `profilink_exporter_dropped_samples_total` | counter | `exporter`, `reason` | samples of chunks given up (reasons as for chunks) |
//! | `profilink_exporter_tls_handshake_failures_total` | counter | | TLS handshakes of exporters that failed (untrusted, expired or mismatched certificate, refused client certificate, no common version); each is logged with its peer and retried like a network error |
//! | `profilink_queue_size_bytes` | gauge | `exporter` | bytes of unacknowledged records in the durable queue |
//! | `profilink_queue_capacity_bytes` | gauge | `exporter` | the queue's capacity |
//! | `profilink_traces_exporter_{accepted,refused,sent,send_failed}_spans_total` | counter | `exporter` | spans through the traces instance of an exporter (`refused`: its queue was full) |
//! | `profilink_traces_exporter_{failed_attempts,retries,rate_limited}_total` | counter | `exporter` | failed attempts, retries and rate-limiting responses of a traces exporter |
//! | `profilink_traces_exporter_queue_size_bytes` | gauge | `exporter` | traces queued in memory |
//! | `profilink_receiver_upstream_{queued,sent,replayed}_requests_total` | counter | `receiver` | requests taken into the forward queue, delivered upstream, found queued at start |
//! | `profilink_receiver_upstream_{send_failed,retries,rate_limited,refused_full}_total` | counter | `receiver` | failed attempts, retries, answers with rate limits, requests refused (503) because the forward queue was full |
//! | `profilink_receiver_upstream_dropped_requests_total` | counter | `receiver`, `reason` | forwarded requests given up: `rate_limited` (429), `rejected` (other 4xx), `retries_exhausted`, `corrupt` |
//! | `profilink_receiver_upstream_queue_{size,capacity}_bytes` | gauge | `receiver` | the forward queue |

use crate::{
    AttemptDurations, DiscardReason, EmitReason, ExporterMetrics, ForwardMetrics,
    HistogramSnapshot, MetricsSnapshot, TracesMetrics, TracesMetricsSnapshot,
};
use profilink_consumer::telemetry::{Field, Histogram, Render, Text};
use std::sync::Arc;

/// One running exporter.
#[derive(Debug, Clone)]
pub struct ExporterEntry {
    /// The exporter's component id.
    pub id: String,
    /// Its counters.
    pub metrics: Arc<ExporterMetrics>,
}

impl From<HistogramSnapshot> for Histogram {
    fn from(h: HistogramSnapshot) -> Histogram {
        Histogram {
            buckets: h.buckets,
            count: h.count,
            sum: h.sum_seconds,
        }
    }
}

type ProfilesCount = fn(&MetricsSnapshot) -> u64;
type SpansCount = fn(&TracesMetricsSnapshot) -> u64;

/// The Collector's `otelcol_exporter_*` families and the attempt-duration histograms of every
/// exporter's profiles and traces instances.
pub struct OtelcolExporters<'a> {
    /// The exporters' profiles instances.
    pub exporters: &'a [ExporterEntry],
    /// The exporters' traces instances, by exporter id.
    pub traces_exporters: &'a [(String, Arc<TracesMetrics>)],
}

impl Render for OtelcolExporters<'_> {
    fn render(&self, f: &mut Text<'_>) {
        self.counters(f);
        self.durations(f);
    }
}

impl OtelcolExporters<'_> {
    fn counters(&self, f: &mut Text<'_>) {
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
            None => f.histogram(
                name,
                &[("exporter", id), ("data_type", data_type)],
                h.into(),
            ),
            Some(_) if h.count == 0 => {}
            Some(error) => f.histogram(
                name,
                &[
                    ("exporter", id),
                    ("data_type", data_type),
                    ("error_type", error),
                ],
                h.into(),
            ),
        }
    }
}

/// profilink's `profilink_exporter_*` and `profilink_queue_*` families of every exporter.
pub struct Exporters<'a>(pub &'a [ExporterEntry]);

impl Render for Exporters<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let exporters: Vec<_> = self.0.iter().map(|e| (e, e.metrics.snapshot())).collect();
        let exporter_families: [(&str, &str, &str, ProfilesCount); 18] = [
            (
                "profilink_exporter_accepted_chunks_total",
                "counter",
                "Chunks (OTLP exporters: requests) accepted by export.",
                |s| s.accepted_chunks,
            ),
            (
                "profilink_exporter_refused_full_total",
                "counter",
                "Export calls refused because the queue was full.",
                |s| s.refused_full,
            ),
            (
                "profilink_exporter_sent_chunks_total",
                "counter",
                "Chunks (OTLP exporters: requests) delivered.",
                |s| s.sent_chunks,
            ),
            (
                "profilink_exporter_failed_attempts_total",
                "counter",
                "Delivery attempts that failed (retried or not): one per attempt.",
                |s| s.send_failed_chunks,
            ),
            (
                "profilink_exporter_send_failed_chunks_total",
                "counter",
                "Deprecated: the old name of profilink_exporter_failed_attempts_total (failed attempts, not chunks given up; see otelcol_exporter_send_failed_profile_samples_total).",
                |s| s.send_failed_chunks,
            ),
            (
                "profilink_exporter_retries_total",
                "counter",
                "Retries scheduled.",
                |s| s.retries,
            ),
            (
                "profilink_exporter_rate_limited_total",
                "counter",
                "Responses that imposed a rate limit.",
                |s| s.rate_limited,
            ),
            (
                "profilink_exporter_merged_chunks_total",
                "counter",
                "Merged chunks emitted by the accumulator.",
                |s| s.merged_chunks,
            ),
            (
                "profilink_exporter_sparse_samples_dropped_total",
                "counter",
                "Samples of threads with fewer than 2 non-empty-stack samples in a merged chunk, dropped as Relay would.",
                |s| s.sparse_samples_dropped,
            ),
            (
                "profilink_exporter_invalid_chunks_total",
                "counter",
                "Merged chunks that failed the chunk validator on their way out, dropped instead of sent.",
                |s| s.invalid_chunks,
            ),
            (
                "profilink_exporter_invalid_samples_total",
                "counter",
                "Samples of merged chunks that failed the chunk validator on their way out.",
                |s| s.invalid_samples,
            ),
            (
                "profilink_exporter_accepted_samples_total",
                "counter",
                "Samples accepted by the exporter's export.",
                |s| s.accepted_samples,
            ),
            (
                "profilink_exporter_replayed_samples_total",
                "counter",
                "Samples replayed from the durable queue at start.",
                |s| s.replayed_samples,
            ),
            (
                "profilink_exporter_sent_samples_total",
                "counter",
                "Samples in delivered chunks.",
                |s| s.sent_samples,
            ),
            (
                "profilink_exporter_sparse_samples_grouped_total",
                "counter",
                "Samples of threads Relay would drop, moved into group threads it keeps.",
                |s| s.sparse_samples_grouped,
            ),
            (
                "profilink_exporter_sparse_threads_grouped_total",
                "counter",
                "Threads of merged chunks whose samples were moved into group threads.",
                |s| s.sparse_threads_grouped,
            ),
            (
                "profilink_queue_size_bytes",
                "gauge",
                "Bytes of unacknowledged records in the exporter's queue.",
                |s| s.queue_size_bytes,
            ),
            (
                "profilink_queue_capacity_bytes",
                "gauge",
                "Capacity of the exporter's queue in bytes.",
                |s| s.queue_capacity_bytes,
            ),
        ];
        for (name, kind, help, get) in exporter_families {
            f.header(name, kind, help);
            for (e, s) in &exporters {
                f.sample(name, &[("exporter", &e.id)], get(s));
            }
        }
        type ByReason = fn(&MetricsSnapshot) -> &[(DiscardReason, u64)];
        let by_reason: [(&str, &str, ByReason); 2] = [
            (
                "profilink_exporter_dropped_chunks_total",
                "Chunks given up, by reason.",
                |s| &s.dropped,
            ),
            (
                "profilink_exporter_dropped_samples_total",
                "Samples of chunks given up, by reason.",
                |s| &s.dropped_samples,
            ),
        ];
        let by_close: [(&str, &str, &[EmitReason]); 2] = [
            (
                "profilink_exporter_chunks_cut_early_total",
                "Chunks cut before their window closed, by the bound that cut them: memory (max_open_bytes), size (max_chunk_bytes).",
                &[EmitReason::Memory, EmitReason::Size],
            ),
            (
                "profilink_exporter_chunks_closed_total",
                "Chunks the accumulator emitted, by why: duration (lateness bound passed), settled, size, memory, idle, flush, late.",
                &EmitReason::ALL,
            ),
        ];
        for (name, help, reasons) in by_close {
            f.header(name, "counter", help);
            for (e, s) in &exporters {
                for &reason in reasons {
                    let n = s.chunks_closed[reason.index()];
                    f.sample(name, &[("exporter", &e.id), ("reason", reason.as_str())], n);
                }
            }
        }
        for (name, help, values) in by_reason {
            f.header(name, "counter", help);
            for (e, s) in &exporters {
                for (reason, n) in values(s) {
                    f.sample(
                        name,
                        &[("exporter", &e.id), ("reason", reason.as_str())],
                        *n,
                    );
                }
            }
        }
    }
}

/// profilink's `profilink_traces_exporter_*` families of the exporters' traces instances.
pub struct TracesExporters<'a>(pub &'a [(String, Arc<TracesMetrics>)]);

impl Render for TracesExporters<'_> {
    fn render(&self, f: &mut Text<'_>) {
        f.per_entry(
            "counter",
            "exporter",
            self.0,
            &[
                (
                    "profilink_traces_exporter_accepted_spans_total",
                    "Spans accepted by the traces instance of an exporter.",
                    |m| &m.accepted_spans,
                ),
                (
                    "profilink_traces_exporter_refused_spans_total",
                    "Spans refused because the traces exporter's queue was full.",
                    |m| &m.refused_full_spans,
                ),
                (
                    "profilink_traces_exporter_sent_spans_total",
                    "Spans delivered by a traces exporter.",
                    |m| &m.sent_spans,
                ),
                (
                    "profilink_traces_exporter_send_failed_spans_total",
                    "Spans a traces exporter gave up on.",
                    |m| &m.send_failed_spans,
                ),
                (
                    "profilink_traces_exporter_failed_attempts_total",
                    "Delivery attempts of a traces exporter that failed (retried or not).",
                    |m| &m.failed_attempts,
                ),
                (
                    "profilink_traces_exporter_retries_total",
                    "Retries scheduled by a traces exporter.",
                    |m| &m.retries,
                ),
                (
                    "profilink_traces_exporter_rate_limited_total",
                    "Responses that imposed a rate limit on a traces exporter.",
                    |m| &m.rate_limited,
                ),
            ],
        );
        f.per_entry(
            "gauge",
            "exporter",
            self.0,
            &[(
                "profilink_traces_exporter_queue_size_bytes",
                "Bytes of traces queued in a traces exporter.",
                |m| &m.queue_bytes,
            )],
        );
    }
}

/// `profilink_exporter_tls_handshake_failures_total`: failed TLS handshakes of every exporter.
pub struct TlsHandshakes;

impl Render for TlsHandshakes {
    fn render(&self, f: &mut Text<'_>) {
        let name = "profilink_exporter_tls_handshake_failures_total";
        f.header(
            name,
            "counter",
            "TLS handshakes of exporters that failed (retried like network errors).",
        );
        f.sample(name, &[], crate::tls_handshake_failures());
    }
}

/// `profilink_receiver_upstream_*`: the Sentry receivers' upstream forwarders, by receiver id
/// (named for the receiver they serve; no forwarder, no families).
pub struct Forwarders<'a>(pub &'a [(String, Arc<ForwardMetrics>)]);

impl Render for Forwarders<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let forwarders = self.0;
        if forwarders.is_empty() {
            return;
        }
        let rows: [(&str, &str, &str, Field<ForwardMetrics>); 9] = [
            (
                "profilink_receiver_upstream_queued_requests_total",
                "counter",
                "Requests taken into the forward queue.",
                |m| &m.queued,
            ),
            (
                "profilink_receiver_upstream_sent_requests_total",
                "counter",
                "Requests delivered upstream.",
                |m| &m.sent,
            ),
            (
                "profilink_receiver_upstream_replayed_requests_total",
                "counter",
                "Requests found in the forward queue at start.",
                |m| &m.replayed,
            ),
            (
                "profilink_receiver_upstream_send_failed_total",
                "counter",
                "Failed attempts to forward (network errors, 5xx).",
                |m| &m.send_failed,
            ),
            (
                "profilink_receiver_upstream_retries_total",
                "counter",
                "Forwarding retries scheduled.",
                |m| &m.retries,
            ),
            (
                "profilink_receiver_upstream_rate_limited_total",
                "counter",
                "Upstream answers that carried rate limits.",
                |m| &m.rate_limited,
            ),
            (
                "profilink_receiver_upstream_refused_full_total",
                "counter",
                "Requests refused (503) because the forward queue was full.",
                |m| &m.refused_full,
            ),
            (
                "profilink_receiver_upstream_queue_size_bytes",
                "gauge",
                "Bytes in the forward queue.",
                |m| &m.queue_bytes,
            ),
            (
                "profilink_receiver_upstream_queue_capacity_bytes",
                "gauge",
                "The forward queue's bound in bytes.",
                |m| &m.queue_capacity,
            ),
        ];
        for (name, kind, help, get) in rows {
            f.per_entry(kind, "receiver", forwarders, &[(name, help, get)]);
        }
        let name = "profilink_receiver_upstream_dropped_requests_total";
        f.header(name, "counter", "Forwarded requests given up, by reason.");
        for (id, m) in forwarders {
            for (reason, n) in m.dropped() {
                f.sample(name, &[("receiver", id), ("reason", reason)], n);
            }
        }
    }
}
