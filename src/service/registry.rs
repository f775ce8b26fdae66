//! Step 4 of the start: the service's own telemetry. The [`Registry`] of every counter the
//! receivers, pipelines, store and exporters keep, served at `/metrics` unless the address is
//! `none`.

use super::components::Plan;
use super::error::ServiceError;
use super::exporters::Exporters;
use super::extensions::RunningStore;
use super::options::ServiceOptions;
use super::pipelines::Pipelines;
use super::receivers::transports;
use super::stop::waiter;
use crate::telemetry::http::HttpServer;
use crate::telemetry::metrics::{self, ReceiverEntry, Registry};
use profilink_exporter::Forwarder;
use profilink_receiver::Stats;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// The registry of the running components.
pub fn registry(
    plan: &Plan,
    exporters: &Exporters,
    pipelines: &Pipelines,
    store: Option<&RunningStore>,
    stats: &BTreeMap<String, Arc<Stats>>,
    forwarders: &BTreeMap<String, Arc<Forwarder>>,
    kafka: &BTreeMap<String, Arc<profilink_kafka::KafkaReceiverMetrics>>,
) -> Registry {
    metrics::mark_start();
    let receivers = stats
        .iter()
        .flat_map(|(id, s)| {
            transports(&plan.components.receivers[id])
                .into_iter()
                .map(|transport| ReceiverEntry {
                    id: id.clone(),
                    transport,
                    stats: s.clone(),
                })
        })
        .collect();
    Registry {
        receivers,
        exporters: exporters.metrics.clone(),
        counters: pipelines.counters.clone(),
        store: store.map(|s| s.writer.counters()),
        joins: pipelines
            .profiles
            .iter()
            .filter_map(|(name, p)| p.join_metrics().map(|m| (name.clone(), m)))
            .collect(),
        symbolizers: pipelines
            .profiles
            .iter()
            .filter_map(|(name, p)| p.symbolize_metrics().map(|m| (name.clone(), m)))
            .collect(),
        traces_exporters: exporters.traces_metrics.clone(),
        stamping: pipelines
            .traces
            .iter()
            .map(|(name, p)| (name.clone(), p.counters()))
            .collect(),
        forwarders: forwarders
            .iter()
            .map(|(id, f)| (id.clone(), f.metrics()))
            .collect(),
        kafka_receivers: kafka
            .iter()
            .map(|(id, m)| (id.clone(), m.clone()))
            .collect(),
    }
}

/// Serves `registry` at `/metrics` on `service.telemetry.metrics.address` until `stop` says
/// stop; `None` when the address is `none`, or when it cannot be bound and metrics are
/// optional (the zero-config default).
pub async fn serve_metrics(
    plan: &Plan,
    options: &ServiceOptions,
    registry: Arc<Registry>,
    stop: &watch::Receiver<bool>,
) -> Result<Option<HttpServer>, ServiceError> {
    let address = &plan.config.service.telemetry.metrics.address;
    if address == "none" {
        return Ok(None);
    }
    match HttpServer::start(address, metrics::router(registry), waiter(stop)).await {
        Ok(server) => {
            tracing::info!(address = %server.local_addr(), "metrics at http://{}/metrics", server.local_addr());
            Ok(Some(server))
        }
        Err(e) if options.metrics_optional => {
            tracing::warn!("running without metrics: {e}");
            Ok(None)
        }
        Err(source) => Err(ServiceError::Metrics { source }),
    }
}
