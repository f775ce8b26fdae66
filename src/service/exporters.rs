//! Step 2 of the start: the exporters. Each exporter id listed in a `profiles` pipeline starts
//! once (opening and replaying its durable queue) as a chunk exporter (`sentry`, `file`) or an
//! OTLP profiles exporter (`otlp`); each listed in a `traces` pipeline starts a traces
//! instance of its own. One chunk exporter per pipeline also offers its merged chunks to the
//! `profile_store` (see [`observed_exporters`]).

use super::auth::{Authenticators, with_exporter_auth};
use super::components::{ExporterSpec, Plan, is_traces_pipeline, traces_exporter_config};
use super::error::ServiceError;
use super::extensions::RunningStore;
use crate::telemetry::metrics::ExporterEntry;
use profilink_exporter::Router;
use profilink_exporter::{FileExporter, ObserverSlot, OtlpExporter, SentryExporter};
use profilink_exporter::{TracesExporter, TracesMetrics};
use profilink_processor::{ChunkExporter, Exporter, ProfileExporter, TraceExporter};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The running exporters, by id.
#[derive(Default)]
pub struct Exporters {
    /// `sentry` and `file` exporters of profiles pipelines.
    pub chunks: BTreeMap<String, Arc<ChunkExporter>>,
    /// `otlp` exporters of profiles pipelines.
    pub profiles: BTreeMap<String, Arc<ProfileExporter>>,
    /// The traces instances of exporters listed in traces pipelines.
    pub traces: BTreeMap<String, Arc<TraceExporter>>,
    /// The counters of the chunk and profiles exporters, by id.
    pub metrics: Vec<ExporterEntry>,
    /// The counters of the traces instances, by id.
    pub traces_metrics: Vec<(String, Arc<TracesMetrics>)>,
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
        ExporterSpec::Otlp(c) => {
            let queue = match c.sending_queue.dir("profiles") {
                Some(dir) => format!("queue in {}", dir.display()),
                None => "in-memory queue".into(),
            };
            let to = format!(
                "sending OTLP ({:?}, {:?}) to {}",
                c.protocol, c.compression, c.endpoint
            )
            .to_lowercase();
            format!("{to}; {queue}")
        }
        ExporterSpec::Kafka(c) => {
            let queue = match c.sending_queue.dir("profiles") {
                Some(dir) => format!("queue in {}", dir.display()),
                None => "in-memory queue".into(),
            };
            let keys = if c.partition_profiles_by_session {
                "keyed per profiler session"
            } else {
                "unkeyed"
            };
            format!(
                "producing OTLP profiles to Kafka {} topic {} ({keys}); {queue}",
                c.brokers.join(","),
                c.profiles_topic()
            )
        }
    }
}

/// The chunk exporters whose merged chunks the `profile_store` keeps: one per pipeline that
/// has chunk exporters (a `sentry` exporter when there is one, as its chunks carry their
/// project), so that no chunk is stored twice.
pub fn observed_exporters(plan: &Plan) -> BTreeSet<String> {
    let comps = &plan.components;
    let mut observed = BTreeSet::new();
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

/// Starts every exporter the pipelines of `plan` list (an OTLP exporter with the header of its
/// `auth` from `auths`).
pub async fn build_exporters(
    plan: &Plan,
    store: Option<&RunningStore>,
    auths: &Authenticators,
) -> Result<Exporters, ServiceError> {
    let observed = match store {
        Some(_) => observed_exporters(plan),
        None => BTreeSet::new(),
    };
    let mut out = Exporters::default();
    let mut metrics = BTreeMap::new();
    for (name, p) in &plan.config.service.pipelines {
        for id in &p.exporters {
            let spec = &with_exporter_auth(id, &plan.components.exporters[id], plan, auths)?;
            if is_traces_pipeline(name) {
                if let ExporterSpec::Kafka(c) = spec {
                    if !out.traces.contains_key(id) {
                        let e = profilink_kafka::KafkaExporter::start(c.clone(), "traces")
                            .await
                            .map_err(|source| ServiceError::Exporter {
                                id: id.clone(),
                                source,
                            })?;
                        tracing::info!(exporter = %id, "producing OTLP traces to Kafka topic {}", c.traces_topic());
                        let e = profilink_kafka::KafkaTracesExporter(e);
                        out.traces
                            .insert(id.clone(), Arc::new(Exporter::new(id, e)));
                    }
                    continue;
                }
                if !out.traces.contains_key(id) {
                    let (e, m) = start_traces(id, spec).await?;
                    out.traces.insert(id.clone(), Arc::new(e));
                    out.traces_metrics.push((id.clone(), m));
                }
                continue;
            }
            if out.chunks.contains_key(id) || out.profiles.contains_key(id) {
                continue;
            }
            let mut spec = spec.clone();
            if let Some(s) = store
                && observed.contains(id)
            {
                let observer = ObserverSlot::new(s.writer.clone());
                match &mut spec {
                    ExporterSpec::Sentry(c) => c.observer = observer,
                    ExporterSpec::File(c) => c.observer = observer,
                    ExporterSpec::Otlp(_) | ExporterSpec::Kafka(_) => {}
                }
            }
            let failed = |source| ServiceError::Exporter {
                id: id.clone(),
                source,
            };
            match &spec {
                ExporterSpec::Sentry(c) => {
                    let e = SentryExporter::start(c.clone()).await.map_err(failed)?;
                    metrics.insert(id.clone(), e.metrics());
                    let routing = c.routing.as_ref().map(|r| r.attribute.clone());
                    let e = Exporter::new(id, e).with_routing_attribute(routing);
                    out.chunks.insert(id.clone(), Arc::new(e));
                }
                ExporterSpec::File(c) => {
                    let e = FileExporter::start(c.clone()).await.map_err(failed)?;
                    metrics.insert(id.clone(), e.metrics());
                    let e = Exporter::new(id, e);
                    out.chunks.insert(id.clone(), Arc::new(e));
                }
                ExporterSpec::Kafka(c) => {
                    let e = profilink_kafka::KafkaExporter::start(c.clone(), "profiles")
                        .await
                        .map_err(failed)?;
                    metrics.insert(id.clone(), e.metrics());
                    out.profiles
                        .insert(id.clone(), Arc::new(Exporter::new(id, e)));
                }
                ExporterSpec::Otlp(c) => {
                    let e = OtlpExporter::start(c.clone()).await.map_err(failed)?;
                    metrics.insert(id.clone(), e.metrics());
                    out.profiles
                        .insert(id.clone(), Arc::new(Exporter::new(id, e)));
                }
            }
            tracing::info!(exporter = %id, "{}", describe_exporter(&spec));
        }
    }
    out.metrics = metrics
        .into_iter()
        .map(|(id, metrics)| ExporterEntry { id, metrics })
        .collect();
    out.traces_metrics.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Starts the traces instance of exporter `id`.
async fn start_traces(
    id: &str,
    spec: &ExporterSpec,
) -> Result<(TraceExporter, Arc<TracesMetrics>), ServiceError> {
    let cfg = traces_exporter_config(spec).map_err(|source| ServiceError::NotForTraces {
        id: id.to_string(),
        source,
    })?;
    let e = TracesExporter::start(cfg)
        .await
        .map_err(|source| ServiceError::TracesExporter {
            id: id.to_string(),
            source,
        })?;
    tracing::info!(exporter = %id, "sending traces to {}", e.destination());
    let m = e.metrics();
    Ok((Exporter::new(id, e), m))
}
