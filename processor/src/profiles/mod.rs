//! [`Pipeline`]: one `profiles` entry of `service.pipelines`: its processor chain
//! ([`chain`]) and the routes its exporters call for, built once from the configuration. One
//! file per route:
//!
//! | data | chunk exporters (`sentry`, `file`) | OTLP exporters (`otlp`) |
//! |---|---|---|
//! | OTLP | [`otlp_to_chunks`]: translated to chunks | [`otlp_forward`]: forwarded as is (gateway) |
//! | Sentry chunks | [`sentry_chunks`]: passed through | [`sentry_to_otlp`]: translated to OTLP, linked to the envelope's transactions (or held by the [`crate::join`] buffer until they arrive) |
//! | Sentry V1 profiles | [`sentry_chunks`]: translated to OTLP and back into chunks | [`sentry_to_otlp`]: translated to OTLP with their transaction |
//!
//! `profile_sampling` processors drop whole profiler sessions, `symbolize` names OTLP's native
//! frames before any route sees it; `batch` processors pass data through (the exporters
//! batch).
//!
//! Backpressure: an exporter whose durable queue is full refuses with
//! [`ExportError::Full`](profilink_consumer::ExportError::Full), which becomes
//! [`ConsumeError::Full`] (gRPC `UNAVAILABLE` with `RetryInfo`, HTTP 503/429 with
//! `Retry-After`); [`Pipeline::check_ready`] refuses before a request body is even read while a
//! queue is full.

use crate::budget::Budget;
use crate::counters::ServiceCounters;
use crate::export::{ChunkExporter, ProfileExporter};
use crate::join::JoinMetrics;
use crate::join::buffer::JoinConfig;
use crate::spec::ProcessorSpec;
use crate::store::StoreWriter;
use crate::traces::SharedSpanThreads;
use crate::translation::otlp_to_sentry_options;
use chain::Chain;
use otlp_forward::OtlpForward;
use otlp_to_chunks::OtlpToChunks;
use profilink_consumer::{ConsumeError, DEFAULT_RETRY_AFTER, Payload, SentryBatch};
use profilink_proto::otlp::ProfilesData;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::{SampleProfileV1, Transaction};
use profilink_translator::sentry_to_otlp::V1WithTransaction;
use sentry_chunks::SentryChunks;
use sentry_to_otlp::SentryToOtlp;
use std::path::Path;
use std::sync::Arc;

pub(crate) mod chain;
pub(crate) mod otlp_forward;
pub(crate) mod otlp_to_chunks;
pub(crate) mod sentry_chunks;
pub(crate) mod sentry_to_otlp;

/// One pipeline. See the module docs.
#[derive(Debug)]
pub struct Pipeline {
    name: String,
    chain: Chain,
    counters: Arc<ServiceCounters>,
    store: Option<Arc<StoreWriter>>,
    budget: Budget,
    /// The routes to the chunk exporters, when the pipeline has any.
    chunks: Option<ChunkRoutes>,
    /// The routes to the OTLP exporters, when the pipeline has any.
    otlp: Option<OtlpRoutes>,
}

/// The routes to a pipeline's chunk exporters: OTLP → chunks (which also delivers), and
/// Sentry chunks through it.
#[derive(Debug)]
struct ChunkRoutes {
    from_otlp: OtlpToChunks,
    from_sentry: SentryChunks,
}

/// The routes to a pipeline's OTLP exporters: OTLP forwarded (which also delivers), and
/// Sentry → OTLP through it.
#[derive(Debug)]
struct OtlpRoutes {
    forward: OtlpForward,
    from_sentry: SentryToOtlp,
}

impl Pipeline {
    /// A pipeline named `name` with its processors (in order) and its chunk and OTLP
    /// exporters.
    pub fn new(
        name: &str,
        processors: &[&ProcessorSpec],
        chunk_exporters: Vec<Arc<ChunkExporter>>,
        otlp_exporters: Vec<Arc<ProfileExporter>>,
        counters: Arc<ServiceCounters>,
    ) -> Pipeline {
        let s2o = profilink_translator::sentry_to_otlp::OtlpOptions::default();
        let chunks = !chunk_exporters.is_empty();
        let otlp = !otlp_exporters.is_empty();
        Pipeline {
            name: name.to_string(),
            chain: Chain::new(processors),
            store: None,
            budget: Budget::default(),
            chunks: chunks.then(|| ChunkRoutes {
                from_otlp: OtlpToChunks::new(
                    name,
                    chunk_exporters,
                    otlp_to_sentry_options(),
                    counters.clone(),
                ),
                from_sentry: SentryChunks::new(s2o.clone(), counters.clone()),
            }),
            otlp: otlp.then(|| OtlpRoutes {
                forward: OtlpForward::new(otlp_exporters, counters.clone()),
                from_sentry: SentryToOtlp::new(name, s2o, counters.clone()),
            }),
            counters,
        }
    }

    /// Translates OTLP within `budget` (share one between the pipelines of a service, so it
    /// bounds all of them together; see [`Budget`]). Default: a budget of its own with
    /// the default bounds.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Remembers, for the `traces` pipelines' stamping, where the samples linked to each span
    /// ran (from the OTLP this pipeline translates to chunks).
    pub fn with_span_threads(mut self, known: Option<SharedSpanThreads>) -> Self {
        if let Some(r) = &mut self.chunks {
            r.from_otlp.span_threads = known;
        }
        self
    }

    /// Keeps the Sentry chunks this pipeline receives in the `profile_store` when it has no
    /// chunk exporter (with one, the exporter's merged chunks are stored instead, see
    /// [`StoreWriter`]).
    pub fn with_store(mut self, store: Option<Arc<StoreWriter>>) -> Self {
        self.store = store;
        self
    }

    /// Holds received Sentry chunks in a join buffer with `cfg` until their transactions
    /// arrive, when the pipeline has OTLP exporters (see [`JoinConfig`](crate::JoinConfig)).
    /// Without it chunks are linked only to the transactions of their own envelope.
    pub fn with_join(mut self, cfg: Option<JoinConfig>) -> Self {
        if let Some(r) = self.otlp.take() {
            self.otlp = Some(OtlpRoutes {
                from_sentry: r.from_sentry.with_join(cfg),
                ..r
            });
        }
        self
    }

    /// Keeps the join buffer (when the pipeline has one) in a join log in `dir` (two segment
    /// logs, `chunks/` and `spans/`): what the `sentry` receiver answers 200 for is on disk
    /// first (a write that fails refuses the request), a chunk is acknowledged once the OTLP
    /// exporters accepted the request carrying it, and what an earlier run left there is held
    /// again, each chunk for the rest of its window with the spans that had arrived. At
    /// shutdown held chunks stay in the log. Blocking I/O; fails when the directory cannot be
    /// created or is in use by another pipeline or process.
    pub fn with_join_log(mut self, dir: Option<&Path>) -> std::io::Result<Self> {
        if let Some(r) = self.otlp.take() {
            self.otlp = Some(OtlpRoutes {
                from_sentry: r.from_sentry.with_join_log(dir)?,
                ..r
            });
        }
        Ok(self)
    }

    /// The pipeline id.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `symbolize` processor's counters, when the pipeline has one.
    pub fn symbolize_metrics(&self) -> Option<Arc<profilink_symbolizer::SymbolizerMetrics>> {
        self.chain.symbolize_metrics()
    }

    /// The join buffer's counters, when the pipeline joins.
    pub fn join_metrics(&self) -> Option<Arc<JoinMetrics>> {
        self.otlp
            .as_ref()
            .and_then(|r| r.from_sentry.join_metrics())
    }

    /// Refuses while an exporter's queue is full.
    pub fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.chunks.as_ref().is_some_and(|r| r.from_otlp.is_full())
            || self.otlp.as_ref().is_some_and(|r| r.from_sentry.is_full())
        {
            return Err(ConsumeError::Full {
                retry_after: DEFAULT_RETRY_AFTER,
            });
        }
        Ok(())
    }

    /// Runs the chain and the routes on one payload.
    pub async fn consume(&self, payload: Payload) -> Result<(), ConsumeError> {
        match payload {
            Payload::Otlp(data) => self.consume_otlp(data).await,
            Payload::Sentry(batch) => self.consume_sentry(batch).await,
            // Traces go to traces pipelines (see `Fanout`).
            Payload::Traces(_) => Ok(()),
        }
    }

    async fn consume_otlp(&self, data: ProfilesData) -> Result<(), ConsumeError> {
        // The budget first: a request refused for its claims costs no symbolization.
        let reservation = match &self.chunks {
            Some(r) => Some(r.from_otlp.admit(&data, &self.budget)?),
            None => None,
        };
        let data = self.chain.process_otlp(data).await?;
        if let (Some(r), Some(reservation)) = (&self.chunks, reservation) {
            r.from_otlp.consume(&data, reservation, &self.chain).await?;
        }
        if let Some(r) = &self.otlp {
            r.forward.consume(data, &self.chain).await?;
        }
        Ok(())
    }

    async fn consume_sentry(&self, batch: SentryBatch) -> Result<(), ConsumeError> {
        let SentryBatch {
            project_id,
            chunks,
            v1_profiles,
            transactions,
            spans,
            ..
        } = batch;
        let (mut chunks, v1) = self.sample_sentry(chunks, v1_profiles);
        if let Some(store) = &self.store {
            store.link(&transactions, &spans);
            if self.chunks.is_none() {
                for c in &chunks {
                    store.offer(c.clone(), project_id, Vec::new());
                }
            }
        }
        // Chunks of a joining pipeline wait for their transactions (V1 profiles come with
        // theirs); the others are translated with their envelope's transactions now.
        let joining = self.otlp.as_ref().filter(|r| r.from_sentry.joins());
        let mut held = Default::default();
        if let Some(r) = joining {
            let hold = if self.chunks.is_none() {
                std::mem::take(&mut chunks)
            } else {
                chunks.clone()
            };
            held = r
                .from_sentry
                .hold(hold, project_id, &transactions, &spans)
                .await?;
        }
        if chunks.is_empty() && v1.is_empty() {
            return self.release_held(held).await;
        }
        let now: &[ProfileChunk] = if joining.is_some() { &[] } else { &chunks };
        let otlp = self
            .otlp
            .as_ref()
            .and_then(|r| r.from_sentry.translate(now, &v1, &transactions));
        if let Some(r) = &self.chunks {
            r.from_sentry.consume(&r.from_otlp, chunks, &v1).await?;
        }
        if let (Some(req), Some(r)) = (otlp, &self.otlp) {
            r.forward.export(req).await?;
        }
        self.release_held(held).await
    }

    /// Sentry chunks and V1 profiles of the sessions the chain keeps (counted).
    fn sample_sentry(
        &self,
        chunks: Vec<ProfileChunk>,
        v1_profiles: Vec<(SampleProfileV1, Option<Transaction>)>,
    ) -> (Vec<ProfileChunk>, Vec<V1WithTransaction>) {
        let before = chunks.len();
        let chunks: Vec<ProfileChunk> = chunks
            .into_iter()
            .filter(|c| self.chain.keep(&c.profiler_id))
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_chunks,
            (before - chunks.len()) as u64,
        );
        let before = v1_profiles.len();
        let v1: Vec<V1WithTransaction> = v1_profiles
            .into_iter()
            .filter(|(p, _)| self.chain.keep(p.event_id.as_deref().unwrap_or_default()))
            .map(|(profile, transaction)| V1WithTransaction {
                profile,
                transaction,
            })
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_profiles,
            (before - v1.len()) as u64,
        );
        (chunks, v1)
    }

    async fn release_held(&self, held: sentry_to_otlp::Held) -> Result<(), ConsumeError> {
        match &self.otlp {
            Some(r) => r.from_sentry.release_held(&r.forward, held).await,
            None => Ok(()),
        }
    }

    /// Retries parked requests and releases the chunks whose window ran out (run every
    /// 250 ms (the join's `TICK`) by the pipeline's timer, see [`start_timers`](crate::start_timers)).
    pub async fn tick(&self) {
        if let Some(r) = &self.otlp {
            r.from_sentry.tick(&r.forward).await;
        }
    }

    /// Shutdown, before the exporters stop: see the join route's flush (held chunks stay in a
    /// join log, or are released now without one).
    pub async fn flush_join(&self) {
        if let Some(r) = &self.otlp {
            r.from_sentry.flush(&r.forward).await;
        }
    }
}
