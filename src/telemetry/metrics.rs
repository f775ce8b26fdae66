//! Self-telemetry in the Prometheus text format (version 0.0.4), served at
//! `http://<service.telemetry.metrics.address>/metrics`, named like the Collector's own
//! metrics with a `profilink_` prefix.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `profilink_receiver_accepted_samples_total` | counter | `receiver`, `transport` | observations (one timestamp or one value) accepted |
//! | `profilink_receiver_refused_samples_total` | counter | `receiver`, `transport` | observations refused (invalid, or the pipeline refused) |
//! | `profilink_receiver_accepted_profiles_total` | counter | `receiver`, `transport` | OTLP profiles / Sentry chunks and V1 profiles accepted |
//! | `profilink_receiver_refused_profiles_total` | counter | `receiver`, `transport` | profiles refused |
//! | `profilink_receiver_{accepted,refused}_spans_total` | counter | `receiver`, `transport` | spans of OTLP traces and Sentry span items accepted / refused |
//! | `profilink_receiver_accepted_requests_total` | counter | `receiver`, `transport` | requests answered with success |
//! | `profilink_receiver_refused_requests_total` | counter | `receiver`, `transport` | requests answered with an error |
//! | `profilink_exporter_accepted_chunks_total` | counter | `exporter` | chunks (OTLP: requests) accepted by `export` |
//! | `profilink_exporter_refused_full_total` | counter | `exporter` | `export` calls refused because the queue was full |
//! | `profilink_exporter_sent_chunks_total` | counter | `exporter` | chunks (OTLP: requests) delivered |
//! | `profilink_exporter_send_failed_chunks_total` | counter | `exporter` | failed delivery attempts |
//! | `profilink_exporter_retries_total` | counter | `exporter` | retries scheduled |
//! | `profilink_exporter_rate_limited_total` | counter | `exporter` | responses that imposed a rate limit |
//! | `profilink_exporter_dropped_chunks_total` | counter | `exporter`, `reason` | chunks given up (`ratelimit_backoff`, `queue_overflow`, `network_error`, `send_error`) |
//! | `profilink_exporter_merged_chunks_total` | counter | `exporter` | merged chunks emitted by the accumulator |
//! | `profilink_exporter_sparse_samples_dropped_total` | counter | `exporter` | samples of threads Relay would drop (< 2 non-empty-stack samples in a merged chunk) that could not be grouped, dropped before sending |
//! | `profilink_exporter_sparse_samples_grouped_total` | counter | `exporter` | samples of such threads moved into group threads (`sparse_threads: group`) |
//! | `profilink_exporter_sparse_threads_grouped_total` | counter | `exporter` | threads whose samples were moved into group threads |
//! | `profilink_exporter_{accepted,replayed,sent}_samples_total` | counter | `exporter` | samples accepted by `export`, replayed from the queue at start, delivered |
//! | `profilink_exporter_dropped_samples_total` | counter | `exporter`, `reason` | samples of chunks given up (reasons as for chunks) |
//! | `profilink_queue_size_bytes` | gauge | `exporter` | bytes of unacknowledged records in the durable queue |
//! | `profilink_queue_capacity_bytes` | gauge | `exporter` | the queue's capacity |
//! | `profilink_translation_errors_total` | counter | `reason` | profiles / chunks that could not be translated (`index_out_of_range`, `sentry_index_out_of_range`, `invalid_timestamp`, `limit_exceeded`, `invalid`), and chunks removed because they failed the chunk validator (`invalid_chunk`: translated chunks, and received Sentry chunks bound for a chunk exporter; never sent) |
//! | `profilink_translated_chunks_total` | counter | | Sentry chunks produced from OTLP |
//! | `profilink_translated_profiles_total` | counter | | Sentry chunks and V1 profiles translated to OTLP |
//! | `profilink_translation_dropped_samples_total` | counter | `reason` | observations lost in OTLP → Sentry translation (`expansion`, `size`) |
//! | `profilink_sampling_dropped_chunks_total` | counter | | chunks dropped by `profile_sampling` |
//! | `profilink_sampling_dropped_profiles_total` | counter | | OTLP profiles and V1 profiles dropped by `profile_sampling` |
//! | `profilink_store_chunks_total` | counter | `outcome` | chunks offered to the `profile_store`: `stored`, `dropped` (its pending queue was full), `failed` (refused or not written) |
//! | `profilink_store_link_failures_total` | counter | | batches of transactions the `profile_store` could not link to chunks |
//! | `profilink_store_pending_bytes` | gauge | | estimated bytes of chunks waiting to be stored |
//! | `profilink_join_released_chunks_total` | counter | `pipeline`, `reason` | chunks released by a Sentry → OTLP pipeline's join buffer: `covered` (spans ended past their end by more than the session's longest span plus 1 s), `window`, `overflow` (bounds), `shutdown` |
//! | `profilink_join_unlinked_chunks_total` | counter | `pipeline` | chunks released with no span of their profiler overlapping them |
//! | `profilink_join_evicted_spans_total` | counter | `pipeline` | spans forgotten early to stay within `max_spans` |
//! | `profilink_join_dropped_requests_total` | counter | `pipeline` | linked requests dropped while OTLP exporters refused |
//! | `profilink_join_held_bytes`, `profilink_join_held_chunks`, `profilink_join_kept_spans` | gauge | `pipeline` | the join buffer's size |
//! | `profilink_traces_exporter_{accepted,refused,sent,send_failed}_spans_total` | counter | `exporter` | spans through the traces instance of an exporter (`refused`: its queue was full) |
//! | `profilink_traces_exporter_{retries,rate_limited}_total` | counter | `exporter` | retries and rate-limiting responses of a traces exporter |
//! | `profilink_traces_exporter_queue_size_bytes` | gauge | `exporter` | traces queued in memory |
//! | `profilink_linking_stamped_spans_total` | counter | `pipeline`, `source` | spans given `sentry.profiler_id`: from their linked `samples` or derived from their `resource` |
//! | `profilink_linking_thread_ids_total` | counter | `pipeline` | spans given `thread.id` from their linked samples |
//! | `profilink_linking_waiting_bytes` | gauge | `pipeline` | traces waiting for their profiles |
//! | `profilink_process_resident_memory_bytes` | gauge | | resident set size (Linux) |
//! | `profilink_build_info` | gauge | `version` | always 1 |

use axum::Router;
use axum::routing::get;
use profilink_exporter::ExporterMetrics;
use profilink_exporter::TracesMetrics;
use profilink_processor::counters::{ServiceCounters, TRANSLATION_ERROR_REASONS};
use profilink_processor::join::JoinMetrics;
use profilink_processor::store::StoreCounters;
use profilink_processor::traces::StampCounters;
use profilink_receiver::{Counters, Stats};
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reads one counter of a component's metrics.
type Field<T> = fn(&T) -> &AtomicU64;

/// One receiver listener.
#[derive(Debug, Clone)]
pub struct ReceiverEntry {
    /// The receiver's component id (`otlp`, `sentry/2`…).
    pub id: String,
    /// `grpc` or `http`.
    pub transport: &'static str,
    /// The receiver's counters (one [`Stats`] per receiver id).
    pub stats: Arc<Stats>,
}

impl ReceiverEntry {
    /// The counters of this listener's transport.
    pub fn counters(&self) -> &Counters {
        match (crate::config::component_type(&self.id), self.transport) {
            ("sentry", _) => &self.stats.sentry_http,
            (_, "grpc") => &self.stats.otlp_grpc,
            _ => &self.stats.otlp_http,
        }
    }
}

/// One running exporter.
#[derive(Debug, Clone)]
pub struct ExporterEntry {
    /// The exporter's component id.
    pub id: String,
    /// Its counters.
    pub metrics: Arc<ExporterMetrics>,
}

/// Everything `/metrics` reports.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    /// The receivers' listeners.
    pub receivers: Vec<ReceiverEntry>,
    /// The exporters.
    pub exporters: Vec<ExporterEntry>,
    /// The pipelines' counters.
    pub counters: Arc<ServiceCounters>,
    /// The `profile_store` writer's counters, when the store runs.
    pub store: Option<Arc<StoreCounters>>,
    /// The join buffers of Sentry → OTLP pipelines, by pipeline.
    pub joins: Vec<(String, Arc<JoinMetrics>)>,
    /// The traces instances of exporters, by exporter id.
    pub traces_exporters: Vec<(String, Arc<TracesMetrics>)>,
    /// The span stamping of traces pipelines, by pipeline.
    pub stamping: Vec<(String, Arc<StampCounters>)>,
}

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    /// One family per `(name, help, field)` row, with one sample per entry labelled
    /// `label="<entry id>"`.
    fn per_entry<T>(
        &mut self,
        kind: &str,
        label: &str,
        entries: &[(String, Arc<T>)],
        rows: &[(&str, &str, Field<T>)],
    ) {
        if entries.is_empty() {
            return;
        }
        for (name, help, get) in rows {
            self.header(name, kind, help);
            for (id, m) in entries {
                self.sample(name, &[(label, id)], get(m).load(Ordering::Relaxed));
            }
        }
    }

    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// Escapes a label value (backslash, double quote, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Resident set size of this process in bytes (Linux `/proc/self/status` `VmRSS`), if known.
pub fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

type ReceiverField = fn(&profilink_receiver::CountersSnapshot) -> u64;
type ExporterField = fn(&profilink_exporter::MetricsSnapshot) -> u64;

impl Registry {
    /// Renders every metric in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        let mut f = Family { out: &mut out };
        let receivers: Vec<_> = self
            .receivers
            .iter()
            .map(|r| (r, r.counters().snapshot()))
            .collect();
        let receiver_families: [(&str, &str, ReceiverField); 8] = [
            (
                "profilink_receiver_accepted_samples_total",
                "Observations (one timestamp or one value) accepted by the pipeline.",
                |s| s.accepted_samples,
            ),
            (
                "profilink_receiver_refused_samples_total",
                "Observations refused (invalid, or refused by the pipeline).",
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

        let exporters: Vec<_> = self
            .exporters
            .iter()
            .map(|e| (e, e.metrics.snapshot()))
            .collect();
        let exporter_families: [(&str, &str, &str, ExporterField); 15] = [
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
                "profilink_exporter_send_failed_chunks_total",
                "counter",
                "Delivery attempts that failed (retried or not).",
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

        let c = &self.counters;
        let name = "profilink_translation_errors_total";
        f.header(
            name,
            "counter",
            "Profiles or chunks that could not be translated, by reason.",
        );
        for reason in TRANSLATION_ERROR_REASONS {
            f.sample(name, &[("reason", reason)], c.translation_errors(reason));
        }
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let name = "profilink_translation_dropped_samples_total";
        f.header(
            name,
            "counter",
            "Observations lost in OTLP to Sentry translation, by reason.",
        );
        f.sample(
            name,
            &[("reason", "expansion")],
            load(&c.dropped_samples_expansion),
        );
        f.sample(name, &[("reason", "size")], load(&c.dropped_samples_size));
        let plain: [(&str, &str, &AtomicU64); 4] = [
            (
                "profilink_translated_chunks_total",
                "Sentry chunks produced from OTLP profiles.",
                &c.translated_chunks,
            ),
            (
                "profilink_translated_profiles_total",
                "Sentry chunks and V1 profiles translated to OTLP.",
                &c.translated_profiles,
            ),
            (
                "profilink_sampling_dropped_chunks_total",
                "Chunks dropped by profile_sampling.",
                &c.sampling_dropped_chunks,
            ),
            (
                "profilink_sampling_dropped_profiles_total",
                "OTLP and V1 profiles dropped by profile_sampling.",
                &c.sampling_dropped_profiles,
            ),
        ];
        for (name, help, v) in plain {
            f.header(name, "counter", help);
            f.sample(name, &[], load(v));
        }
        if let Some(st) = &self.store {
            let name = "profilink_store_chunks_total";
            f.header(
                name,
                "counter",
                "Chunks offered to the profile store, by outcome.",
            );
            f.sample(name, &[("outcome", "stored")], load(&st.stored));
            f.sample(name, &[("outcome", "dropped")], load(&st.dropped));
            f.sample(name, &[("outcome", "failed")], load(&st.failed));
            let name = "profilink_store_link_failures_total";
            f.header(
                name,
                "counter",
                "Batches of transactions the profile store could not link.",
            );
            f.sample(name, &[], load(&st.failed_links));
            let name = "profilink_store_pending_bytes";
            f.header(
                name,
                "gauge",
                "Estimated bytes of chunks waiting to be stored.",
            );
            f.sample(name, &[], load(&st.pending_bytes));
        }
        if !self.joins.is_empty() {
            let name = "profilink_join_released_chunks_total";
            f.header(
                name,
                "counter",
                "Chunks released by the trace-linking join buffer, by reason.",
            );
            for (p, m) in &self.joins {
                for (reason, v) in [
                    ("covered", &m.released_covered),
                    ("window", &m.released_window),
                    ("overflow", &m.released_overflow),
                    ("shutdown", &m.released_shutdown),
                ] {
                    f.sample(name, &[("pipeline", p), ("reason", reason)], load(v));
                }
            }
            f.per_entry(
                "counter",
                "pipeline",
                &self.joins,
                &[
                    (
                        "profilink_join_unlinked_chunks_total",
                        "Chunks released with no span of their profiler overlapping them.",
                        |m| &m.unlinked,
                    ),
                    (
                        "profilink_join_evicted_spans_total",
                        "Spans forgotten early to stay within max_spans.",
                        |m| &m.spans_evicted,
                    ),
                    (
                        "profilink_join_dropped_requests_total",
                        "Linked OTLP requests dropped because too many waited for a refusing exporter.",
                        |m| &m.dropped_requests,
                    ),
                ],
            );
            f.per_entry(
                "gauge",
                "pipeline",
                &self.joins,
                &[
                    (
                        "profilink_join_held_bytes",
                        "Estimated bytes of chunks held by the join buffer.",
                        |m| &m.held_bytes,
                    ),
                    (
                        "profilink_join_held_chunks",
                        "Chunks held by the join buffer.",
                        |m| &m.held_chunks,
                    ),
                    (
                        "profilink_join_kept_spans",
                        "Spans kept by the join buffer for linking.",
                        |m| &m.kept_spans,
                    ),
                ],
            );
        }
        f.per_entry(
            "counter",
            "exporter",
            &self.traces_exporters,
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
            &self.traces_exporters,
            &[(
                "profilink_traces_exporter_queue_size_bytes",
                "Bytes of traces queued in a traces exporter.",
                |m| &m.queue_bytes,
            )],
        );
        if !self.stamping.is_empty() {
            let name = "profilink_linking_stamped_spans_total";
            f.header(
                name,
                "counter",
                "Spans given sentry.profiler_id, by where it came from.",
            );
            for (p, c) in &self.stamping {
                f.sample(
                    name,
                    &[("pipeline", p), ("source", "samples")],
                    load(&c.profiler_from_samples),
                );
                f.sample(
                    name,
                    &[("pipeline", p), ("source", "resource")],
                    load(&c.profiler_from_resource),
                );
            }
            f.per_entry(
                "counter",
                "pipeline",
                &self.stamping,
                &[(
                    "profilink_linking_thread_ids_total",
                    "Spans given thread.id from their linked samples.",
                    |c| &c.thread_ids,
                )],
            );
            f.per_entry(
                "gauge",
                "pipeline",
                &self.stamping,
                &[(
                    "profilink_linking_waiting_bytes",
                    "Bytes of traces waiting for their profiles.",
                    |c| &c.waiting_bytes,
                )],
            );
        }
        if let Some(rss) = resident_memory_bytes() {
            let name = "profilink_process_resident_memory_bytes";
            f.header(name, "gauge", "Resident set size in bytes.");
            f.sample(name, &[], rss);
        }
        let name = "profilink_build_info";
        f.header(name, "gauge", "Build information; always 1.");
        f.sample(name, &[("version", env!("CARGO_PKG_VERSION"))], 1);
        out
    }
}

/// The router serving `GET /metrics`.
pub fn router(registry: Arc<Registry>) -> Router {
    Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    registry.render(),
                )
            }
        }),
    )
}

/// Reads one sample from Prometheus text: the value of the line `name{labels}` whose labels
/// include every `want` pair (all lines of `name` summed). For tests and tools.
pub fn scrape(text: &str, name: &str, want: &[(&str, &str)]) -> Option<u64> {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, labels) = match series.split_once('{') {
            Some((m, l)) => (m, l.trim_end_matches('}')),
            None => (series, ""),
        };
        if metric != name {
            continue;
        }
        let ok = want
            .iter()
            .all(|(k, v)| labels.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
        if ok {
            let v: u64 = value.parse().ok()?;
            found = Some(found.unwrap_or(0) + v);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_translator::TranslateError;

    #[test]
    fn renders_and_scrapes() {
        let stats = Arc::new(Stats::default());
        stats.otlp_grpc.accept(2, 189);
        let m = Arc::new(ExporterMetrics::default());
        ExporterMetrics::add(&m.sent_chunks, 3);
        m.add_dropped(profilink_exporter::DiscardReason::SendError, 1);
        let counters = Arc::new(ServiceCounters::default());
        counters.translation_error(&TranslateError::Invalid("x".into()));
        counters.invalid_chunks(2);
        let r = Registry {
            receivers: vec![ReceiverEntry {
                id: "otlp".into(),
                transport: "grpc",
                stats,
            }],
            exporters: vec![ExporterEntry {
                id: "sentry".into(),
                metrics: m,
            }],
            counters,
            store: Some(Arc::new(StoreCounters::default())),
            joins: vec![("profiles/x".into(), Arc::new(JoinMetrics::default()))],
            traces_exporters: vec![("sentry".into(), Arc::new(TracesMetrics::default()))],
            stamping: vec![("traces".into(), Arc::new(StampCounters::default()))],
        };
        r.traces_exporters[0]
            .1
            .sent_spans
            .fetch_add(5, Ordering::Relaxed);
        r.stamping[0].1.thread_ids.fetch_add(2, Ordering::Relaxed);
        r.joins[0].1.released_window.fetch_add(3, Ordering::Relaxed);
        if let Some(st) = &r.store {
            st.dropped.fetch_add(4, Ordering::Relaxed);
        }
        let text = r.render();
        assert!(text.contains("profilink_store_chunks_total{outcome=\"dropped\"} 4\n"));
        assert_eq!(
            scrape(
                &text,
                "profilink_traces_exporter_sent_spans_total",
                &[("exporter", "sentry")]
            ),
            Some(5)
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_linking_thread_ids_total",
                &[("pipeline", "traces")]
            ),
            Some(2)
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_join_released_chunks_total",
                &[("pipeline", "profiles/x"), ("reason", "window")]
            ),
            Some(3)
        );
        assert!(text.contains("# TYPE profilink_receiver_accepted_samples_total counter\n"));
        assert!(
            text.contains(
                "profilink_receiver_accepted_samples_total{receiver=\"otlp\",transport=\"grpc\"} 189\n"
            ),
            "{text}"
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_exporter_sent_chunks_total",
                &[("exporter", "sentry")]
            ),
            Some(3)
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_exporter_dropped_chunks_total",
                &[("reason", "send_error")]
            ),
            Some(1)
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_translation_errors_total",
                &[("reason", "invalid")]
            ),
            Some(1)
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_translation_errors_total",
                &[("reason", "invalid_chunk")]
            ),
            Some(2)
        );
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
