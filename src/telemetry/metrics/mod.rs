//! Self-telemetry in the OpenMetrics text format (encoded by `prometheus-client` through its
//! [`Collector`] trait, which reads the components' atomics at every scrape), served at
//! `http://<service.telemetry.metrics.address>/metrics`: the OpenTelemetry Collector's own
//! names for what profilink shares with it ([`Otelcol`]), and profilink's `profilink_*` for
//! everything (the shared concepts under both names for one release). Counters are listed
//! with the `_total` their samples carry.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `otelcol_receiver_{accepted,refused}_profile_samples_total` | counter | `receiver`, `transport`, `sample_type` | sample records (OTLP `Sample` messages, Sentry `samples` entries) pushed into the pipeline / refused after decoding (invalid, or the pipeline refused), by `"<type>:<unit>"`; an `otel_metric_overflow="true"` series past 256 types |
//! | `otelcol_receiver_failed_profile_samples_total` | counter | `receiver`, `transport`, `sample_type` | always 0 (every error counts as refused) |
//! | `otelcol_receiver_{accepted,refused,failed}_spans_total` | counter | `receiver`, `transport` | the same for spans, when a traces pipeline runs |
//! | `otelcol_receiver_requests_total` | counter | `receiver`, `transport`, `outcome` | requests: `success`, `refused`, `failure` (0) |
//! | `otelcol_exporter_sent_profile_samples_total` | counter | `exporter` | samples delivered (chunk samples; OTLP exporters: observations) |
//! | `otelcol_exporter_send_failed_profile_samples_total` | counter | `exporter` | samples given up after sending failed (once per sample, after retries; not `queue_overflow`) |
//! | `otelcol_exporter_enqueue_failed_profile_samples_total` | counter | `exporter` | samples refused by a full queue |
//! | `otelcol_exporter_{sent,send_failed,enqueue_failed}_spans_total` | counter | `exporter` | the same for traces instances |
//! | `otelcol_exporter_queue_{size,capacity}` | gauge | `exporter`, `data_type` | sending queues with a byte bound, in bytes |
//! | `otelcol_process_uptime_total`, `otelcol_process_cpu_seconds_total` | counter | | seconds since start; user + system CPU seconds (Linux) |
//! | `otelcol_process_memory_rss` | gauge | | resident set size in bytes (Linux) |
//! | `otel_sdk_exporter_operation_duration_seconds` | histogram | `exporter`, `data_type`, `error_type` (failures) | duration of every delivery attempt |
//! | `profilink_receiver_accepted_samples_total` | counter | `receiver`, `transport` | observations (one timestamp or one value; one Sentry sample) accepted |
//! | `profilink_receiver_refused_samples_total` | counter | `receiver`, `transport` | observations refused after decoding (invalid, or the pipeline refused) |
//! | `profilink_receiver_accepted_profiles_total` | counter | `receiver`, `transport` | OTLP profiles / Sentry chunks and V1 profiles accepted |
//! | `profilink_receiver_refused_profiles_total` | counter | `receiver`, `transport` | profiles refused |
//! | `profilink_receiver_{accepted,refused}_spans_total` | counter | `receiver`, `transport` | spans of OTLP traces and Sentry span items accepted / refused |
//! | `profilink_receiver_accepted_requests_total` | counter | `receiver`, `transport` | requests answered with success |
//! | `profilink_receiver_refused_requests_total` | counter | `receiver`, `transport` | requests answered with an error |
//! | `profilink_receiver_refusals_total` | counter | `receiver`, `transport`, `reason` | the same by [`RefusalReason`](profilink_receiver::RefusalReason) (`unsupported_version`, `full`, `invalid`, …) |
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
//! | `profilink_exporter_sparse_samples_grouped_total` | counter | `exporter` | samples of such threads moved into group threads (`sparse_threads: group`) |
//! | `profilink_exporter_sparse_threads_grouped_total` | counter | `exporter` | threads whose samples were moved into group threads |
//! | `profilink_exporter_{accepted,replayed,sent}_samples_total` | counter | `exporter` | samples accepted by `export`, replayed from the queue at start, delivered |
//! | `profilink_exporter_dropped_samples_total` | counter | `exporter`, `reason` | samples of chunks given up (reasons as for chunks) |
//! | `profilink_exporter_tls_handshake_failures_total` | counter | | TLS handshakes of exporters that failed (untrusted, expired or mismatched certificate, refused client certificate, no common version); each is logged with its peer and retried like a network error |
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
//! | `profilink_symbolizer_frames_total` | counter | `pipeline`, `outcome` | native locations seen by a `symbolize` processor: `symbolized`, `no_debug_info`, `build_id_mismatch`, `fetch_failed`, `timeout`, `not_native` |
//! | `profilink_symbolizer_cache_{hits,misses}_total` | counter | `pipeline` | address lookups answered from the (build id, address) cache / from the debug information |
//! | `profilink_symbolizer_debuginfod_fetches_total` | counter | `pipeline`, `result` | debuginfod lookups: `ok`, `not_found`, `error` |
//! | `profilink_symbolizer_debuginfod_bytes_total` | counter | `pipeline` | bytes of debug files downloaded |
//! | `profilink_join_unlinked_chunks_total` | counter | `pipeline` | chunks released with no span of their profiler overlapping them |
//! | `profilink_join_evicted_spans_total` | counter | `pipeline` | spans forgotten early to stay within `max_spans` |
//! | `profilink_join_dropped_requests_total` | counter | `pipeline` | linked requests dropped from memory while OTLP exporters refused (with a join log their chunks come back at the next start) |
//! | `profilink_join_restored_chunks_total`, `profilink_join_restored_spans_total` | counter | `pipeline` | held chunks and spans read back from the join log at start |
//! | `profilink_join_log_corrupt_records_total` | counter | `pipeline` | join log records skipped at start because they did not read |
//! | `profilink_join_log_failures_total` | counter | `pipeline`, `operation` | join log writes that failed: `append` (the request was refused, 503) or `ack` (the records come back at the next start) |
//! | `profilink_join_held_bytes`, `profilink_join_held_chunks`, `profilink_join_kept_spans`, `profilink_join_log_bytes` | gauge | `pipeline` | the join buffer's size, in memory and (join log) on disk |
//! | `profilink_traces_exporter_{accepted,refused,sent,send_failed}_spans_total` | counter | `exporter` | spans through the traces instance of an exporter (`refused`: its queue was full) |
//! | `profilink_traces_exporter_{failed_attempts,retries,rate_limited}_total` | counter | `exporter` | failed attempts, retries and rate-limiting responses of a traces exporter |
//! | `profilink_traces_exporter_queue_size_bytes` | gauge | `exporter` | traces queued in memory |
//! | `profilink_linking_stamped_spans_total` | counter | `pipeline`, `source` | spans given `sentry.profiler_id`: from their linked `samples` or derived from their `resource` |
//! | `profilink_linking_thread_ids_total` | counter | `pipeline` | spans given `thread.id` from their linked samples |
//! | `profilink_linking_waiting_bytes` | gauge | `pipeline` | traces waiting for their profiles |
//! | `profilink_receiver_dropped_items_total` | counter | `receiver`, `type` | Sentry envelope items (and proxied requests) no pipeline consumes, dropped because the receiver has no `upstream` |
//! | `profilink_receiver_refused_items_total` | counter | `receiver`, `type`, `reason` | Sentry items refused: chunks failing the door check (validator rule id, `timestamp-out-of-range`), `invalid_json` and `unparsable` envelopes (still forwarded when there is an upstream), `rate_limited` (upstream limits their category; left out of the forwarded copy) |
//! | `profilink_receiver_upstream_{queued,sent,replayed}_requests_total` | counter | `receiver` | requests taken into the forward queue, delivered upstream, found queued at start |
//! | `profilink_receiver_upstream_{send_failed,retries,rate_limited,refused_full}_total` | counter | `receiver` | failed attempts, retries, answers with rate limits, requests refused (503) because the forward queue was full |
//! | `profilink_receiver_upstream_dropped_requests_total` | counter | `receiver`, `reason` | forwarded requests given up: `rate_limited` (429), `rejected` (other 4xx), `retries_exhausted`, `corrupt` |
//! | `profilink_receiver_upstream_queue_{size,capacity}_bytes` | gauge | `receiver` | the forward queue |
//! | `profilink_process_resident_memory_bytes` | gauge | | resident set size (Linux) |
//! | `profilink_build_info` | gauge | `version` | always 1 |

mod exporters;
mod kafka;
mod otelcol;
mod pipelines;
mod process;
mod receivers;
mod relay;
mod symbolizer;
#[cfg(test)]
mod tests;
mod text;

pub use exporters::ExporterEntry;
pub use otelcol::Otelcol;
pub use process::{cpu_seconds, mark_start, resident_memory_bytes};
pub use receivers::ReceiverEntry;
pub use text::{Family, Render, Text, escape, scrape, scrape_f64};

use axum::Router;
use axum::routing::get;
use profilink_exporter::TracesMetrics;
use profilink_processor::{JoinMetrics, ServiceCounters, StampCounters, StoreCounters};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::sync::Arc;

/// The `Content-Type` of `/metrics`: the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    /// The `symbolize` processors of profiles pipelines, by pipeline.
    pub symbolizers: Vec<(String, Arc<profilink_symbolizer::SymbolizerMetrics>)>,
    /// The traces instances of exporters, by exporter id.
    pub traces_exporters: Vec<(String, Arc<TracesMetrics>)>,
    /// The span stamping of traces pipelines, by pipeline.
    pub stamping: Vec<(String, Arc<StampCounters>)>,
    /// The Sentry receivers' upstream forwarders, by receiver id.
    pub forwarders: Vec<(String, Arc<profilink_exporter::ForwardMetrics>)>,
    /// The `kafka` receivers' own counters, by receiver id.
    pub kafka_receivers: Vec<(String, Arc<profilink_kafka::KafkaReceiverMetrics>)>,
}

impl Registry {
    /// Reads every counter into its metric family.
    pub fn families(&self) -> Vec<Family> {
        let mut families = Vec::with_capacity(128);
        let mut f = Text {
            families: &mut families,
        };
        let relay = relay::Relay {
            receivers: &self.receivers,
            forwarders: &self.forwarders,
        };
        let otelcol = Otelcol {
            receivers: &self.receivers,
            exporters: &self.exporters,
            traces_exporters: &self.traces_exporters,
            traces: !self.stamping.is_empty(),
        };
        let mut sections: Vec<&dyn Render> = vec![
            &otelcol,
            &self.receivers,
            &self.exporters,
            &*self.counters,
            &exporters::TlsHandshakes,
        ];
        if let Some(store) = &self.store {
            sections.push(&**store);
        }
        sections.extend([
            &self.joins as &dyn Render,
            &self.symbolizers,
            &self.traces_exporters,
            &self.stamping,
            &self.kafka_receivers,
            &relay,
            &process::Process,
        ]);
        for s in sections {
            s.render(&mut f);
        }
        families
    }

    /// Renders every metric in the OpenMetrics text format, as `/metrics` serves it.
    pub fn render(&self) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(self.clone()));
        encode(&registry)
    }
}

impl Collector for Registry {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        text::encode(&self.families(), &mut encoder)
    }
}

/// Encodes `registry` in the OpenMetrics text format.
fn encode(registry: &prometheus_client::registry::Registry) -> String {
    let mut out = String::with_capacity(16384);
    // Writing into a String cannot fail, and the families hold nothing the encoder refuses.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// The router serving `GET /metrics`: `registry`, read at every scrape through
/// `prometheus-client`'s [`Collector`].
pub fn router(registry: Arc<Registry>) -> Router {
    process::mark_start();
    let mut exposition = prometheus_client::registry::Registry::default();
    exposition.register_collector(Box::new(registry));
    let exposition = Arc::new(exposition);
    Router::new().route(
        "/metrics",
        get(move || {
            let exposition = exposition.clone();
            async move { ([("content-type", CONTENT_TYPE)], encode(&exposition)) }
        }),
    )
}
