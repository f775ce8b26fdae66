//! The profilink service: builds the receivers, pipelines and exporters of a [`Plan`], runs
//! them until a shutdown signal, and drains them.
//!
//! Start order: extensions (`health_check`, answering 503), exporters (each opens and replays
//! its durable queue), pipelines, `/metrics`, receivers (one instance per receiver id, fanning
//! out to every pipeline that lists it), then the health check turns 200.
//!
//! Shutdown (SIGTERM/SIGINT in the binary, any future here): the health check turns 503; the
//! receivers stop accepting connections and finish in-flight requests (each answered only
//! once its data is durable); then every exporter `shutdown(deadline)`s: accumulated
//! sessions are flushed into the queues and sent until the deadline, and whatever is left stays
//! queued for the next start. Finally the telemetry endpoints stop.

pub mod components;
pub mod default_config;

use crate::config::component_type;
use crate::telemetry::health::{self, Health, State};
use crate::telemetry::http::HttpServer;
use crate::telemetry::metrics::{self, ExporterEntry, ReceiverEntry, Registry};
use components::{ExporterSpec, ExtensionSpec, Plan, ProcessorSpec, ReceiverSpec};
use profilink_exporter::ObserverSlot;
use profilink_exporter::sentry::routing::Router;
use profilink_flamegraph::ProfileStore;
use profilink_processor::counters::ServiceCounters;
use profilink_processor::profiles::{Exporter, Fanout, Pipeline};
use profilink_processor::store::StoreWriter;
use profilink_processor::traces::{self, TracesOut, TracesPipeline};
use profilink_receiver::{ServerHandle, Stats, serve_otlp_grpc, serve_otlp_http, serve_sentry};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How the service runs, beyond its configuration.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// When the metrics endpoint cannot be bound, log a warning and run without it (the
    /// zero-config default) instead of failing.
    pub metrics_optional: bool,
    /// How long the drain may take: receivers finishing in-flight requests, then exporters
    /// sending what they can (default 10 s; `PROFILINK_SHUTDOWN_TIMEOUT` in the binary).
    pub shutdown_timeout: Duration,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            metrics_optional: false,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// The default drain deadline.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the service could not start (one line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError(pub String);

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ServiceError {}

/// Where a running receiver listens (reported in logs).
#[derive(Debug, Clone)]
pub struct Listener {
    /// Receiver id.
    pub receiver: String,
    /// `grpc` or `http`.
    pub transport: &'static str,
    /// Bound address.
    pub addr: std::net::SocketAddr,
}

/// What an exporter writes to, for the start-up log line (never the DSN's key).
pub fn describe_exporter(spec: &ExporterSpec) -> String {
    match spec {
        ExporterSpec::Sentry(c) => {
            let url = c
                .dsn
                .as_deref()
                .and_then(|d| Router::new(d, c.routing.as_ref()).ok())
                .map(|r| r.route("").url.clone())
                .unwrap_or_default();
            let routes = c.routing.as_ref().map_or(0, |r| r.dsns.len());
            let extra = if routes > 0 {
                format!(" (+{routes} routed DSNs)")
            } else {
                String::new()
            };
            let queue = if c.sending_queue.enabled {
                format!("queue in {}", c.queue_dir().display())
            } else {
                "in-memory queue".into()
            };
            format!("sending chunks to Sentry at {url}{extra}; {queue}")
        }
        ExporterSpec::File(c) => format!(
            "writing envelopes to {}; queue in {}",
            c.path.display(),
            c.queue_dir().display()
        ),
        ExporterSpec::Otlp(c) => format!(
            "sending OTLP ({:?}, {:?}) to {}",
            c.protocol, c.compression, c.endpoint
        )
        .to_lowercase(),
    }
}

fn waiter(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Runs `tick` every `every` until the receivers stop (the pipelines' periodic work: join
/// buffer releases, waiting traces).
fn spawn_ticker<F, Fut>(
    every: Duration,
    stop: &watch::Receiver<bool>,
    mut tick: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let stop = waiter(stop);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = interval.tick() => tick().await,
                _ = &mut stop => break,
            }
        }
    })
}

struct Running {
    receivers: Vec<(String, ServerHandle)>,
    fanouts: Vec<Arc<Fanout>>,
    pipelines: Vec<Arc<Pipeline>>,
    traces_pipelines: Vec<Arc<TracesPipeline>>,
    traces_outs: BTreeMap<String, Arc<TracesOut>>,
    tickers: Vec<tokio::task::JoinHandle<()>>,
    exporters: BTreeMap<String, Arc<Exporter>>,
    store: Option<RunningStore>,
    telemetry: Vec<HttpServer>,
    registry: Arc<Registry>,
}

/// The `profile_store` extension while the service runs.
struct RunningStore {
    writer: Arc<StoreWriter>,
    retention: tokio::task::JoinHandle<()>,
}

/// The chunk exporters whose merged chunks the `profile_store` keeps: one per pipeline that
/// has chunk exporters (a `sentry` exporter when there is one, as its chunks carry their
/// project), so that no chunk is stored twice.
fn observed_exporters(plan: &Plan) -> std::collections::BTreeSet<String> {
    let comps = &plan.components;
    let mut observed = std::collections::BTreeSet::new();
    for p in plan.config.service.pipelines.values() {
        let chunk_exporters: Vec<&String> = p
            .exporters
            .iter()
            .filter(|id| comps.exporters.get(*id).is_some_and(|e| e.takes_chunks()))
            .collect();
        if chunk_exporters.iter().any(|id| observed.contains(*id)) {
            continue;
        }
        let pick = chunk_exporters
            .iter()
            .find(|id| matches!(comps.exporters.get(**id), Some(ExporterSpec::Sentry(_))))
            .or(chunk_exporters.first());
        if let Some(id) = pick {
            observed.insert((*id).clone());
        }
    }
    observed
}

/// How often the store's retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// Opens the `profile_store` of `plan` (if it runs one) and starts its writer, retention task
/// and cache warm-up.
async fn open_store(plan: &Plan) -> Result<Option<RunningStore>, ServiceError> {
    let Some((id, cfg)) = plan.profile_store() else {
        return Ok(None);
    };
    let cfg = cfg.clone();
    let path = cfg.path.clone();
    let store = tokio::task::spawn_blocking(move || ProfileStore::open(&cfg))
        .await
        .map_err(|e| ServiceError(format!("extensions.{id}: {e}")))?
        .map_err(|e| {
            ServiceError(format!(
                "extensions.{id}: cannot open {}: {e}",
                path.display()
            ))
        })?;
    let store = Arc::new(store);
    let warm = store.clone();
    tokio::task::spawn_blocking(move || match warm.warm_cache() {
        Ok(n) if n > 0 => tracing::debug!(chunks = n, "profile store cache warmed"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "profile store: cache warm-up failed"),
    });
    let retention = store.spawn_retention_task(RETENTION_EVERY);
    let writer = StoreWriter::start(store)
        .map_err(|e| ServiceError(format!("extensions.{id}: cannot start its writer: {e}")))?;
    tracing::info!(extension = %id, path = %path.display(), "keeping chunks in the profile store");
    Ok(Some(RunningStore {
        writer: Arc::new(writer),
        retention,
    }))
}

/// Runs the service of `plan` until `shutdown` resolves, then drains it. `Err` when a
/// component cannot start (a port in use, a queue directory that cannot be written).
pub async fn run<F>(plan: Plan, options: ServiceOptions, shutdown: F) -> Result<(), ServiceError>
where
    F: Future<Output = ()>,
{
    let health = Arc::new(Health::default());
    let (stop_receivers, receivers_rx) = watch::channel(false);
    let (stop_telemetry, telemetry_rx) = watch::channel(false);
    let running = start(&plan, &options, &health, &receivers_rx, &telemetry_rx).await;
    let running = match running {
        Ok(r) => r,
        Err(e) => {
            let _ = stop_receivers.send(true);
            let _ = stop_telemetry.send(true);
            return Err(e);
        }
    };
    health.set(State::Ready);
    tracing::info!("profilink is ready");

    shutdown.await;
    health.set(State::Draining);
    tracing::info!(
        timeout = ?options.shutdown_timeout,
        "shutting down: receivers stop accepting, exporters flush"
    );
    drain(running, &options, stop_receivers).await;
    let _ = stop_telemetry.send(true);
    tracing::info!("profilink stopped");
    Ok(())
}

async fn start(
    plan: &Plan,
    options: &ServiceOptions,
    health: &Arc<Health>,
    receivers_rx: &watch::Receiver<bool>,
    telemetry_rx: &watch::Receiver<bool>,
) -> Result<Running, ServiceError> {
    let config = &plan.config;
    let comps = &plan.components;
    let mut telemetry = Vec::new();

    let store = open_store(plan).await?;
    for id in &config.service.extensions {
        if let (Some(ExtensionSpec::FlamegraphApi(c)), Some(s)) = (comps.extensions.get(id), &store)
        {
            let router = profilink_flamegraph::router(s.writer.store().clone(), c);
            let server = HttpServer::start(&c.endpoint, router, waiter(telemetry_rx))
                .await
                .map_err(|e| ServiceError(format!("extensions.{id}: {e}")))?;
            let addr = server.local_addr();
            tracing::info!(extension = %id, address = %addr, "flamegraph API and viewer at http://{addr}/ui/");
            telemetry.push(server);
        }
        if let Some(ExtensionSpec::HealthCheck(c)) = comps.extensions.get(id) {
            let server = HttpServer::start(
                &c.endpoint,
                health::router(c, health.clone()),
                waiter(telemetry_rx),
            )
            .await
            .map_err(|e| ServiceError(format!("extensions.{id}: {e}")))?;
            tracing::info!(extension = %id, address = %server.local_addr(), path = %c.path, "health check listening");
            telemetry.push(server);
        }
    }

    let observed = match &store {
        Some(_) => observed_exporters(plan),
        None => Default::default(),
    };
    let is_traces = |name: &str| component_type(name) == "traces";
    let mut exporters: BTreeMap<String, Arc<Exporter>> = BTreeMap::new();
    for (name, p) in &config.service.pipelines {
        if is_traces(name) {
            continue;
        }
        for id in &p.exporters {
            if exporters.contains_key(id) {
                continue;
            }
            let spec = &comps.exporters[id];
            let mut spec = spec.clone();
            if let Some(s) = &store
                && observed.contains(id)
            {
                let observer = ObserverSlot::new(s.writer.clone());
                match &mut spec {
                    ExporterSpec::Sentry(c) => c.observer = observer,
                    ExporterSpec::File(c) => c.observer = observer,
                    ExporterSpec::Otlp(_) => {}
                }
            }
            let spec = &spec;
            let e = Exporter::start(id, spec)
                .await
                .map_err(|e| ServiceError(format!("exporters.{id}: cannot start: {e}")))?;
            tracing::info!(exporter = %id, "{}", describe_exporter(spec));
            exporters.insert(id.clone(), Arc::new(e));
        }
    }

    // Traces: their exporters, the span → thread memory the stamping reads, the pipelines.
    let linking = config
        .service
        .pipelines
        .iter()
        .filter(|(name, _)| is_traces(name))
        .flat_map(|(_, p)| p.processors.iter())
        .find_map(|id| match comps.processors.get(id) {
            Some(ProcessorSpec::Linking(c)) => Some(c.clone()),
            _ => None,
        });
    let known = linking.as_ref().map(traces::span_threads);
    let mut traces_outs: BTreeMap<String, Arc<TracesOut>> = BTreeMap::new();
    let mut traces_pipelines: BTreeMap<String, Arc<TracesPipeline>> = BTreeMap::new();
    for (name, p) in config
        .service
        .pipelines
        .iter()
        .filter(|(n, _)| is_traces(n))
    {
        let mut outs = Vec::new();
        for id in &p.exporters {
            if !traces_outs.contains_key(id) {
                let out = TracesOut::start(id, &comps.exporters[id])
                    .await
                    .map_err(|e| {
                        ServiceError(format!("exporters.{id}: cannot start for traces: {e}"))
                    })?;
                tracing::info!(exporter = %id, "sending traces to {}", out.destination());
                traces_outs.insert(id.clone(), Arc::new(out));
            }
            outs.push(traces_outs[id].clone());
        }
        let stamping = p
            .processors
            .iter()
            .find_map(|id| match comps.processors.get(id) {
                Some(ProcessorSpec::Linking(c)) => known.clone().map(|k| (c.clone(), k)),
                _ => None,
            });
        traces_pipelines.insert(
            name.clone(),
            Arc::new(TracesPipeline::new(name, outs, stamping)),
        );
    }

    let counters = Arc::new(ServiceCounters::default());
    let mut pipelines: BTreeMap<String, Arc<Pipeline>> = BTreeMap::new();
    for (name, p) in &config.service.pipelines {
        if is_traces(name) {
            continue;
        }
        let processors: Vec<_> = p
            .processors
            .iter()
            .map(|id| &comps.processors[id])
            .collect();
        let exps = p.exporters.iter().map(|id| exporters[id].clone()).collect();
        // Pipelines fed by a Sentry receiver join chunks with their transactions.
        let from_sentry = p
            .receivers
            .iter()
            .any(|id| matches!(comps.receivers.get(id), Some(ReceiverSpec::Sentry(_))));
        let join = from_sentry.then(|| {
            processors
                .iter()
                .find_map(|p| match p {
                    ProcessorSpec::Linking(c) => Some(c.clone()),
                    _ => None,
                })
                .unwrap_or_default()
                .join()
        });
        pipelines.insert(
            name.clone(),
            Arc::new(
                Pipeline::new(name, &processors, exps, counters.clone())
                    .with_store(store.as_ref().map(|s| s.writer.clone()))
                    .with_join(join)
                    .with_span_threads(known.clone()),
            ),
        );
    }

    // One receiver instance per id, fanning out to the pipelines that list it.
    let mut fanouts: Vec<(String, Arc<Fanout>)> = Vec::new();
    let mut receiver_ids: Vec<&String> = config
        .service
        .pipelines
        .values()
        .flat_map(|p| p.receivers.iter())
        .collect();
    receiver_ids.sort();
    receiver_ids.dedup();
    for id in receiver_ids {
        let listing = || {
            config
                .service
                .pipelines
                .iter()
                .filter(|(_, p)| p.receivers.contains(id))
                .map(|(name, _)| name)
        };
        let targets = listing()
            .filter_map(|n| pipelines.get(n).cloned())
            .collect();
        let traces = listing()
            .filter_map(|n| traces_pipelines.get(n).cloned())
            .collect();
        fanouts.push((id.clone(), Arc::new(Fanout::with_traces(targets, traces))));
    }

    let mut tickers = Vec::new();
    for p in pipelines.values().filter(|p| p.join_metrics().is_some()) {
        let p = p.clone();
        tickers.push(spawn_ticker(
            profilink_processor::join::TICK,
            receivers_rx,
            move || {
                let p = p.clone();
                async move { p.tick().await }
            },
        ));
    }
    for p in traces_pipelines.values().filter(|p| p.waits()) {
        let p = p.clone();
        tickers.push(spawn_ticker(traces::TICK, receivers_rx, move || {
            let p = p.clone();
            async move { p.release(false).await }
        }));
    }

    let mut registry = Registry {
        counters,
        store: store.as_ref().map(|s| s.writer.counters()),
        joins: pipelines
            .iter()
            .filter_map(|(name, p)| p.join_metrics().map(|m| (name.clone(), m)))
            .collect(),
        traces_exporters: traces_outs
            .iter()
            .map(|(id, o)| (id.clone(), o.metrics()))
            .collect(),
        stamping: traces_pipelines
            .iter()
            .map(|(name, p)| (name.clone(), p.counters()))
            .collect(),
        ..Default::default()
    };
    let mut stats: BTreeMap<String, Arc<Stats>> = BTreeMap::new();
    for (id, _) in &fanouts {
        let s = Arc::new(Stats::default());
        stats.insert(id.clone(), s.clone());
        let transports: Vec<&'static str> = match &comps.receivers[id] {
            ReceiverSpec::Otlp { grpc, http } => {
                [("grpc", grpc.is_some()), ("http", http.is_some())]
                    .into_iter()
                    .filter(|(_, on)| *on)
                    .map(|(t, _)| t)
                    .collect()
            }
            ReceiverSpec::Sentry(_) => vec!["http"],
        };
        for transport in transports {
            registry.receivers.push(ReceiverEntry {
                id: id.clone(),
                transport,
                stats: s.clone(),
            });
        }
    }
    registry.exporters = exporters
        .iter()
        .map(|(id, e)| ExporterEntry {
            id: id.clone(),
            metrics: e.metrics(),
        })
        .collect();
    let registry = Arc::new(registry);
    let address = &config.service.telemetry.metrics.address;
    if address != "none" {
        match HttpServer::start(
            address,
            metrics::router(registry.clone()),
            waiter(telemetry_rx),
        )
        .await
        {
            Ok(server) => {
                tracing::info!(address = %server.local_addr(), "metrics at http://{}/metrics", server.local_addr());
                telemetry.push(server);
            }
            Err(e) if options.metrics_optional => {
                tracing::warn!("running without metrics: {e}");
            }
            Err(e) => {
                return Err(ServiceError(format!(
                    "service.telemetry.metrics.address: {e}"
                )));
            }
        }
    }

    let mut receivers = Vec::new();
    for (id, fanout) in &fanouts {
        let s = stats[id].clone();
        let mut listeners: Vec<(&'static str, Result<ServerHandle, String>)> = Vec::new();
        match &comps.receivers[id] {
            ReceiverSpec::Otlp { grpc, http } => {
                if let Some(c) = grpc {
                    let r =
                        serve_otlp_grpc(c, fanout.clone(), s.clone(), waiter(receivers_rx)).await;
                    listeners.push((
                        "grpc",
                        r.map_err(|e| format!("receivers.{id}.protocols.grpc: {e}")),
                    ));
                }
                if let Some(c) = http {
                    let r =
                        serve_otlp_http(c, fanout.clone(), s.clone(), waiter(receivers_rx)).await;
                    listeners.push((
                        "http",
                        r.map_err(|e| format!("receivers.{id}.protocols.http: {e}")),
                    ));
                }
            }
            ReceiverSpec::Sentry(c) => {
                let r = serve_sentry(c, fanout.clone(), s.clone(), waiter(receivers_rx)).await;
                listeners.push(("http", r.map_err(|e| format!("receivers.{id}: {e}"))));
            }
        }
        for (transport, r) in listeners {
            let handle = r.map_err(ServiceError)?;
            let what = match (component_type(id), transport) {
                ("sentry", _) => "Sentry envelopes (POST /api/<project>/envelope/)",
                (_, "grpc") => "OTLP/gRPC",
                _ => "OTLP/HTTP (POST /v1development/profiles)",
            };
            tracing::info!(receiver = %id, address = %handle.local_addr(), "listening for {what} on {}", handle.local_addr());
            receivers.push((id.clone(), handle));
        }
    }

    Ok(Running {
        receivers,
        fanouts: fanouts.into_iter().map(|(_, f)| f).collect(),
        pipelines: pipelines.into_values().collect(),
        traces_pipelines: traces_pipelines.into_values().collect(),
        traces_outs,
        tickers,
        exporters,
        store,
        telemetry,
        registry,
    })
}

async fn drain(running: Running, options: &ServiceOptions, stop_receivers: watch::Sender<bool>) {
    let Running {
        receivers,
        fanouts,
        pipelines,
        traces_pipelines,
        traces_outs,
        tickers,
        exporters,
        store,
        telemetry,
        registry,
    } = running;
    let deadline = options.shutdown_timeout;
    let _ = stop_receivers.send(true);
    let started = tokio::time::Instant::now();
    for (id, handle) in receivers {
        let left = deadline.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, handle.wait()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(receiver = %id, error = %e, "receiver stopped with an error")
            }
            Err(_) => {
                tracing::warn!(receiver = %id, "in-flight requests did not finish in time");
            }
        }
    }
    drop(fanouts);
    // Receivers are done: release what the join buffers hold before the exporters stop.
    for t in tickers {
        let _ = t.await;
    }
    for p in &pipelines {
        p.flush_join().await;
    }
    for p in &traces_pipelines {
        p.release(true).await;
    }
    drop(pipelines);
    drop(traces_pipelines);

    // The receivers' tasks held the last other references; wait briefly for them to go.
    let mut owned = Vec::new();
    for (id, e) in exporters {
        let mut e = e;
        let mut tries = 0;
        loop {
            match Arc::try_unwrap(e) {
                Ok(x) => {
                    owned.push((id, x));
                    break;
                }
                Err(back) if tries < 50 => {
                    e = back;
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => {
                    tracing::warn!(exporter = %id, "exporter still in use; its queue is kept for the next start");
                    break;
                }
            }
        }
    }
    let left = deadline
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(500));
    let mut set = tokio::task::JoinSet::new();
    for (id, out) in traces_outs {
        match Arc::try_unwrap(out) {
            Ok(out) => {
                set.spawn(async move {
                    out.shutdown(left).await;
                    format!("{id} (traces)")
                });
            }
            Err(_) => tracing::warn!(exporter = %id, "traces exporter still in use; not flushed"),
        }
    }
    for (id, e) in owned {
        set.spawn(async move {
            e.shutdown(left).await;
            id
        });
    }
    while let Some(r) = set.join_next().await {
        if let Ok(id) = r {
            tracing::info!(exporter = %id, "exporter stopped");
        }
    }
    if let Some(s) = store {
        // The exporters' final flushes were offered to the store; write them before exiting.
        let left = deadline
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(2));
        s.writer.close(left).await;
        s.retention.abort();
    }
    crate::telemetry::summary::log_run_summary(&registry);
    drop(telemetry);
}
