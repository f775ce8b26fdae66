//! `profilink_exporter_*`, `profilink_queue_*`: the counters of each exporter; and
//! `profilink_traces_exporter_*`: those of the traces instances.

use super::text::{Render, Text};
use profilink_exporter::{ExporterMetrics, TracesMetrics};
use std::sync::Arc;

/// One running exporter.
#[derive(Debug, Clone)]
pub struct ExporterEntry {
    /// The exporter's component id.
    pub id: String,
    /// Its counters.
    pub metrics: Arc<ExporterMetrics>,
}

type ExporterField = fn(&profilink_exporter::MetricsSnapshot) -> u64;

impl Render for Vec<ExporterEntry> {
    fn render(&self, f: &mut Text<'_>) {
        let exporters: Vec<_> = self.iter().map(|e| (e, e.metrics.snapshot())).collect();
        let exporter_families: [(&str, &str, &str, ExporterField); 16] = [
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
        type ByReason =
            fn(&profilink_exporter::MetricsSnapshot) -> &[(profilink_exporter::DiscardReason, u64)];
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

impl Render for Vec<(String, Arc<TracesMetrics>)> {
    fn render(&self, f: &mut Text<'_>) {
        f.per_entry(
            "counter",
            "exporter",
            self,
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
            self,
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
        f.sample(name, &[], profilink_exporter::tls_handshake_failures());
    }
}
