//! Step 3 of the start: the pipelines. `traces` pipelines with their span stamping, `profiles`
//! pipelines (with a join buffer when a `sentry` receiver feeds them), one [`Fanout`] per
//! receiver id to every pipeline that lists it, and the tickers of the pipelines' periodic
//! work.

use super::components::{
    ExporterSpec, Plan, ProcessorSpec, ReceiverSpec, is_traces_pipeline, join_log_dir,
};
use super::error::ServiceError;
use super::exporters::Exporters;
use super::extensions::RunningStore;
use super::stop::waiter;
use profilink_processor::{
    Budget, Fanout, LinkingConfig, Pipeline, ServiceCounters, TracesPipeline, span_threads,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// The running pipelines.
pub struct Pipelines {
    /// `profiles` pipelines by name.
    pub profiles: BTreeMap<String, Arc<Pipeline>>,
    /// `traces` pipelines by name.
    pub traces: BTreeMap<String, Arc<TracesPipeline>>,
    /// The consumer of each receiver id.
    pub fanouts: Vec<(String, Arc<Fanout>)>,
    /// The counters every profiles pipeline shares.
    pub counters: Arc<ServiceCounters>,
    /// The periodic work, until the receivers stop.
    pub tickers: Vec<tokio::task::JoinHandle<()>>,
}

/// The `profile_linking` config of the first traces pipeline that has one: it sizes the span →
/// thread memory every pipeline shares.
fn traces_linking(plan: &Plan) -> Option<LinkingConfig> {
    plan.config
        .service
        .pipelines
        .iter()
        .filter(|(name, _)| is_traces_pipeline(name))
        .flat_map(|(_, p)| p.processors.iter())
        .find_map(|id| match plan.components.processors.get(id) {
            Some(ProcessorSpec::Linking(c)) => Some(c.clone()),
            _ => None,
        })
}

/// Where the join log of pipeline `name` lives: under its `profile_linking` processor's
/// `storage`, else under the durable queue of its first OTLP exporter that has one (in the
/// order of its `exporters`); `None` (the join stays in memory) when neither is there.
fn join_log(plan: &Plan, name: &str, p: &crate::config::Pipeline) -> Option<PathBuf> {
    let comps = &plan.components;
    let linking = p
        .processors
        .iter()
        .find_map(|id| match comps.processors.get(id) {
            Some(ProcessorSpec::Linking(c)) => Some((id.as_str(), c)),
            _ => None,
        });
    let base = linking.and_then(|(_, c)| c.storage.clone()).or_else(|| {
        p.exporters
            .iter()
            .find_map(|id| match comps.exporters.get(id) {
                Some(spec @ ExporterSpec::Otlp(_)) => spec.queue_dir(),
                _ => None,
            })
    })?;
    let processor = linking.map_or("profile_linking", |(id, _)| id);
    Some(join_log_dir(&base, processor, name))
}

/// Builds the pipelines of `plan` over `exporters`; tickers run until `stop` says stop. Fails
/// when a pipeline's join log cannot be opened.
pub fn build_pipelines(
    plan: &Plan,
    exporters: &Exporters,
    store: Option<&RunningStore>,
    stop: &watch::Receiver<bool>,
) -> Result<Pipelines, ServiceError> {
    let config = &plan.config;
    let comps = &plan.components;
    let known = traces_linking(plan).as_ref().map(span_threads);

    let mut traces = BTreeMap::new();
    let mut profiles = BTreeMap::new();
    let counters = Arc::new(ServiceCounters::default());
    // One amplification budget for every pipeline: it bounds them together.
    let budget = Budget::default();
    for (name, p) in &config.service.pipelines {
        let processors: Vec<&ProcessorSpec> = p
            .processors
            .iter()
            .map(|id| &comps.processors[id])
            .collect();
        let linking = processors.iter().find_map(|p| match p {
            ProcessorSpec::Linking(c) => Some(c.clone()),
            _ => None,
        });
        if is_traces_pipeline(name) {
            let outs = p
                .exporters
                .iter()
                .map(|id| exporters.traces[id].clone())
                .collect();
            let stamping = linking.and_then(|c| known.clone().map(|k| (c, k)));
            traces.insert(
                name.clone(),
                Arc::new(TracesPipeline::new(name, outs, stamping)),
            );
            continue;
        }
        let chunks = p
            .exporters
            .iter()
            .filter_map(|id| exporters.chunks.get(id).cloned())
            .collect();
        let otlp = p
            .exporters
            .iter()
            .filter_map(|id| exporters.profiles.get(id).cloned())
            .collect();
        // Pipelines fed by a Sentry receiver join chunks with their transactions.
        let from_sentry = p
            .receivers
            .iter()
            .any(|id| matches!(comps.receivers.get(id), Some(ReceiverSpec::Sentry(_))));
        let join = from_sentry.then(|| linking.unwrap_or_default().join());
        let log = join.as_ref().and_then(|_| join_log(plan, name, p));
        let pipeline = Pipeline::new(name, &processors, chunks, otlp, counters.clone())
            .with_store(store.map(|s| s.writer.clone()))
            .with_join(join)
            .with_span_threads(known.clone())
            .with_budget(budget.clone())
            .with_join_log(log.as_deref())
            .map_err(|source| ServiceError::JoinLog {
                pipeline: name.clone(),
                path: log.clone().unwrap_or_default(),
                source,
            })?;
        if pipeline.join_metrics().is_some() && log.is_none() {
            tracing::info!(pipeline = %name, "trace-linking join buffer in memory: chunks it holds are lost if the process dies (set profile_linking.storage, or give the OTLP exporter a durable sending_queue)");
        }
        profiles.insert(name.clone(), Arc::new(pipeline));
    }

    // One receiver instance per id, fanning out to the pipelines that list it.
    let mut receiver_ids: Vec<&String> = config
        .service
        .pipelines
        .values()
        .flat_map(|p| p.receivers.iter())
        .collect();
    receiver_ids.sort();
    receiver_ids.dedup();
    let fanouts = receiver_ids
        .into_iter()
        .map(|id| {
            let listing = || {
                config
                    .service
                    .pipelines
                    .iter()
                    .filter(|(_, p)| p.receivers.contains(id))
                    .map(|(name, _)| name)
            };
            let to_profiles = listing().filter_map(|n| profiles.get(n).cloned()).collect();
            let to_traces = listing().filter_map(|n| traces.get(n).cloned()).collect();
            (
                id.clone(),
                Arc::new(Fanout::with_traces(to_profiles, to_traces)),
            )
        })
        .collect();

    let profile_list: Vec<_> = profiles.values().cloned().collect();
    let traces_list: Vec<_> = traces.values().cloned().collect();
    let tickers = profilink_processor::start_timers(&profile_list, &traces_list, || waiter(stop));
    Ok(Pipelines {
        profiles,
        traces,
        fanouts,
        counters,
        tickers,
    })
}
