//! Self-telemetry in the OpenMetrics text format, served at
//! `http://<service.telemetry.metrics.address>/metrics`: the OpenTelemetry Collector's own
//! names for what profilink shares with it, and profilink's `profilink_*` for everything (the
//! shared concepts under both names for one release). Counters are listed with the `_total`
//! their samples carry.
//!
//! This module is a registry: each crate names its own metric families beside the counters
//! they read, in its `telemetry` module, through the neutral [`Render`] interface of
//! `profilink-consumer`; the [`Registry`] holds the running components' counters (by
//! component id and by pipeline), puts their families in order (the Collector's names first)
//! and encodes them with the `prometheus-client` crate through its [`Collector`] trait, which
//! reads the atomics at every scrape.
//!
//! | families | named in (each with its table of metrics) |
//! |---|---|
//! | `otelcol_receiver_*`, `profilink_receiver_*` (but `profilink_receiver_upstream_*`) | [`profilink_receiver::telemetry`] |
//! | `otelcol_exporter_*`, `otel_sdk_exporter_operation_duration_seconds`, `profilink_exporter_*`, `profilink_queue_*`, `profilink_traces_exporter_*`, `profilink_receiver_upstream_*` (the Sentry receivers' forwarders) | [`profilink_exporter::telemetry`] |
//! | `profilink_translation_*`, `profilink_translated_*`, `profilink_sampling_*`, `profilink_store_*`, `profilink_join_*`, `profilink_linking_*` | [`profilink_processor::telemetry`] |
//! | `profilink_symbolizer_*` | [`profilink_symbolizer::telemetry`] |
//! | `otelcol_kafka_receiver_*`, `profilink_kafka_receiver_*` | [`profilink_kafka::telemetry`] |
//! | the process's own, below | this module |
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `otelcol_process_uptime_total`, `otelcol_process_cpu_seconds_total` | counter | | seconds since start; user + system CPU seconds (Linux) |
//! | `otelcol_process_memory_rss` | gauge | | resident set size in bytes (Linux) |
//! | `profilink_process_resident_memory_bytes` | gauge | | resident set size (Linux) |
//! | `profilink_build_info` | gauge | `version` | always 1 |

mod encode;
mod process;
mod scrape;
#[cfg(test)]
mod tests;

pub use process::{cpu_seconds, mark_start, resident_memory_bytes};
/// The listeners and exporters the registry reads, as the receiver and exporter crates name them.
pub use profilink_exporter::telemetry::ExporterEntry;
pub use profilink_receiver::telemetry::ReceiverEntry;
pub use scrape::{scrape, scrape_f64};

use axum::Router;
use axum::routing::get;
use profilink_consumer::telemetry::{Family, Render, Text};
use profilink_exporter::TracesMetrics;
use profilink_exporter::telemetry::{
    Exporters, Forwarders, OtelcolExporters, TlsHandshakes, TracesExporters,
};
use profilink_kafka::telemetry::KafkaReceivers;
use profilink_processor::telemetry::{Joins, Stamping};
use profilink_processor::{JoinMetrics, ServiceCounters, StampCounters, StoreCounters};
use profilink_receiver::telemetry::{OtelcolReceivers, Receivers, Scrapes, SentryItems};
use profilink_symbolizer::telemetry::Symbolizers;
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
    /// Reads every counter into its metric family, in the order `/metrics` serves them.
    pub fn families(&self) -> Vec<Family> {
        let mut families = Vec::with_capacity(128);
        let mut f = Text {
            families: &mut families,
        };
        let (receivers, exporters) = (&self.receivers, &self.exporters);
        let otelcol_receivers = OtelcolReceivers {
            receivers,
            traces: !self.stamping.is_empty(),
        };
        let otelcol_exporters = OtelcolExporters {
            exporters,
            traces_exporters: &self.traces_exporters,
        };
        let (profilink_receivers, profilink_exporters) =
            (Receivers(receivers), Exporters(exporters));
        let joins = Joins(&self.joins);
        let symbolizers = Symbolizers(&self.symbolizers);
        let traces_exporters = TracesExporters(&self.traces_exporters);
        let stamping = Stamping(&self.stamping);
        let kafka_receivers = KafkaReceivers(&self.kafka_receivers);
        let (sentry_items, forwarders) = (SentryItems(receivers), Forwarders(&self.forwarders));
        let scrapes = Scrapes(receivers);
        let mut sections: Vec<&dyn Render> = vec![
            &otelcol_receivers,
            &otelcol_exporters,
            &profilink_receivers,
            &profilink_exporters,
            &*self.counters,
            &TlsHandshakes,
            &profilink_receiver::telemetry::OtlpDecoding,
        ];
        if let Some(store) = &self.store {
            sections.push(&**store);
        }
        sections.extend([
            &joins as &dyn Render,
            &symbolizers,
            &traces_exporters,
            &stamping,
            &kafka_receivers,
            &scrapes,
            &sentry_items,
            &forwarders,
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
        encode::encode(&self.families(), &mut encoder)
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
