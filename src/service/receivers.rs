//! Step 5 of the start: the receivers. One instance per receiver id, feeding its [`Fanout`];
//! an `otlp` receiver listens on each protocol it enables.

use super::auth::{Authenticators, with_receiver_auth};
use super::components::{Plan, ReceiverSpec};
use super::error::ServiceError;
use super::stop::waiter;
use crate::config::component_type;
use profilink_consumer::Upstream;
use profilink_exporter::Forwarder;
use profilink_kafka::KafkaReceiverMetrics;
use profilink_processor::Fanout;
use profilink_receiver::{
    ServerHandle, Stats, serve_otlp_grpc, serve_otlp_http, serve_pprof_http, serve_pyroscope,
    serve_sentry_with, start_pprof_file, start_pprof_remote,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The counters of each receiver id (shared by its listeners), created before the receivers
/// start so `/metrics` can show them.
pub fn receiver_stats(fanouts: &[(String, Arc<Fanout>)]) -> BTreeMap<String, Arc<Stats>> {
    fanouts
        .iter()
        .map(|(id, _)| (id.clone(), Arc::new(Stats::default())))
        .collect()
}

/// The counters of each `kafka` receiver, created before the receivers start so `/metrics`
/// can show them.
pub fn kafka_metrics(plan: &Plan) -> BTreeMap<String, Arc<KafkaReceiverMetrics>> {
    plan.components
        .receivers
        .iter()
        .filter(|(_, spec)| matches!(spec, ReceiverSpec::Kafka(_)))
        .map(|(id, _)| (id.clone(), Arc::new(KafkaReceiverMetrics::default())))
        .collect()
}

/// The transports receiver `spec` listens on (`grpc`, `http`), or pulls over (the `pprof`
/// receiver's `scrape` and `file`).
pub fn transports(spec: &ReceiverSpec) -> Vec<&'static str> {
    match spec {
        ReceiverSpec::Otlp { grpc, http } => [("grpc", grpc.is_some()), ("http", http.is_some())]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(t, _)| t)
            .collect(),
        ReceiverSpec::Sentry(_) => vec!["http"],
        ReceiverSpec::Kafka(_) => vec!["kafka"],
        ReceiverSpec::Pprof(c) => [
            ("http", c.server.is_some()),
            ("scrape", c.remote.is_some()),
            ("file", c.file.is_some()),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(t, _)| t)
        .collect(),
        ReceiverSpec::Pyroscope(_) => vec!["http"],
    }
}

/// Starts a `kafka` receiver feeding `fanout`; it stops (committing what it marked and
/// leaving its group, within `close_within`) once `stop` says stop.
fn start_kafka(
    id: &str,
    cfg: &profilink_kafka::KafkaReceiverConfig,
    fanout: &Arc<Fanout>,
    stats: &Arc<Stats>,
    metrics: Arc<KafkaReceiverMetrics>,
    (stop, close_within): (&watch::Receiver<bool>, Duration),
) -> Result<ServerHandle, ServiceError> {
    let r =
        profilink_kafka::KafkaReceiver::start(cfg.clone(), fanout.clone(), stats.clone(), metrics)
            .map_err(|e| ServiceError::Receiver {
                at: format!("receivers.{id}"),
                source: profilink_receiver::ReceiverError::Config(e.to_string()),
            })?;
    tracing::info!(receiver = %id, brokers = %cfg.brokers.join(","), group = %cfg.group_id, "reading OTLP messages from Kafka");
    let stopped = waiter(stop);
    // The service waits `close_within` for this task from the moment it says stop; the close
    // gets a little less, so that when a vanished broker holds it, the receiver's own warning
    // (what was abandoned and what is read again) is logged before the service stops waiting.
    let close_within = close_within.saturating_sub(close_margin(close_within));
    Ok(ServerHandle::without_listener(tokio::spawn(async move {
        stopped.await;
        r.shutdown(close_within).await;
        Ok(())
    })))
}

/// What a `kafka` receiver's close leaves of the service's shutdown deadline: a tenth of it,
/// at most half a second.
fn close_margin(deadline: Duration) -> Duration {
    (deadline / 10).min(Duration::from_millis(500))
}

/// Starts every receiver (a Sentry receiver with its upstream forwarder from `forwarders`, an
/// OTLP listener with the authenticator its `auth` names from `auths`); they stop accepting
/// once `stop` says stop (a `kafka` receiver then has a little less than `shutdown_timeout`
/// to commit and leave its group, see [`close_margin`]).
pub async fn build_receivers(
    plan: &Plan,
    fanouts: &[(String, Arc<Fanout>)],
    stats: &BTreeMap<String, Arc<Stats>>,
    kafka: &BTreeMap<String, Arc<KafkaReceiverMetrics>>,
    forwarders: &BTreeMap<String, Arc<Forwarder>>,
    auths: &Authenticators,
    (stop, shutdown_timeout): (&watch::Receiver<bool>, Duration),
) -> Result<Vec<(String, ServerHandle)>, ServiceError> {
    let mut receivers = Vec::new();
    for (id, fanout) in fanouts {
        let s = stats[id].clone();
        let failed = |at: String| move |source| ServiceError::Receiver { at, source };
        let mut handles = Vec::new();
        match &with_receiver_auth(&plan.components.receivers[id], auths) {
            ReceiverSpec::Otlp { grpc, http } => {
                if let Some(c) = grpc {
                    let h = serve_otlp_grpc(c, fanout.clone(), s.clone(), waiter(stop))
                        .await
                        .map_err(failed(format!("receivers.{id}.protocols.grpc")))?;
                    handles.push(("grpc", h));
                }
                if let Some(c) = http {
                    let h = serve_otlp_http(c, fanout.clone(), s.clone(), waiter(stop))
                        .await
                        .map_err(failed(format!("receivers.{id}.protocols.http")))?;
                    handles.push(("http", h));
                }
            }
            ReceiverSpec::Kafka(c) => {
                let metrics = kafka.get(id).cloned().unwrap_or_default();
                let h = start_kafka(id, c, fanout, &s, metrics, (stop, shutdown_timeout))?;
                receivers.push((id.clone(), h));
            }
            ReceiverSpec::Pprof(c) => {
                let at = |mode: &str| format!("receivers.{id}.{mode}");
                if let Some(server) = &c.server {
                    let h = serve_pprof_http(server, fanout.clone(), s.clone(), waiter(stop))
                        .await
                        .map_err(failed(at("server")))?;
                    handles.push(("http", h));
                }
                if let Some(remote) = &c.remote {
                    let h = start_pprof_remote(remote, fanout.clone(), s.clone(), waiter(stop))
                        .map_err(failed(at("remote")))?;
                    tracing::info!(receiver = %id, endpoint = %remote.endpoint, "scraping pprof from {} every {:?}", remote.endpoint, remote.collection_interval);
                    receivers.push((id.clone(), h));
                }
                if let Some(file) = &c.file {
                    let h = start_pprof_file(file, fanout.clone(), s.clone(), waiter(stop))
                        .map_err(failed(at("file")))?;
                    tracing::info!(receiver = %id, include = %file.include, "reading pprof files {} every {:?}", file.include, file.collection_interval);
                    receivers.push((id.clone(), h));
                }
            }
            ReceiverSpec::Pyroscope(c) => {
                let h = serve_pyroscope(c, fanout.clone(), s.clone(), waiter(stop))
                    .await
                    .map_err(failed(format!("receivers.{id}")))?;
                handles.push(("http", h));
            }
            ReceiverSpec::Sentry(c) => {
                let upstream = forwarders.get(id).map(|f| f.clone() as Arc<dyn Upstream>);
                let h = serve_sentry_with(c, fanout.clone(), s.clone(), upstream, waiter(stop))
                    .await
                    .map_err(failed(format!("receivers.{id}")))?;
                handles.push(("http", h));
            }
        }
        for (transport, handle) in handles {
            let what = match (component_type(id), transport) {
                ("sentry", _) => "Sentry envelopes (POST /api/<project>/envelope/)",
                ("pprof", _) => "pprof profiles (POST /v1/pprof)",
                ("pyroscope", _) => {
                    "Pyroscope profiles (POST /ingest, POST /push.v1.PusherService/Push)"
                }
                (_, "grpc") => "OTLP/gRPC",
                _ => "OTLP/HTTP (POST /v1development/profiles)",
            };
            tracing::info!(receiver = %id, address = %handle.local_addr(), "listening for {what} on {}", handle.local_addr());
            receivers.push((id.clone(), handle));
        }
    }
    Ok(receivers)
}
