//! [`Pipeline`]: one `profiles` entry of `service.pipelines`. What it does depends on the data
//! and the exporters:
//!
//! | data | chunk exporters (`sentry`, `file`) | OTLP exporters (`otlp`) |
//! |---|---|---|
//! | OTLP | translated to chunks (sparse threads kept and not grouped: the exporters merge 5 s chunks into 60 s ones and group or drop them then), each with its origin resource's attributes for routing and the thread ids its trace links name (see [`Pipeline::otlp_to_chunks`]) | forwarded as is (gateway) |
//! | Sentry chunks | passed through (every thread marked linked: SDK threads keep their ids) | translated to OTLP, linked to the envelope's transactions (or held by the [`crate::join`] buffer until they arrive) |
//! | Sentry V1 profiles | translated to OTLP and back into chunks | translated to OTLP with their transaction |
//!
//! `profile_sampling` processors drop whole profiler sessions first (see
//! [`crate::sampling`]); `batch` processors pass data through (the exporters batch).
//!
//! Backpressure: an exporter whose durable queue is full refuses with
//! [`profilink_exporter::ExportError::Full`], which becomes [`ConsumeError::Full`] (gRPC
//! `UNAVAILABLE` with `RetryInfo`, HTTP 503/429 with `Retry-After`);
//! [`Pipeline::check_ready`] refuses before a request body is even read while a queue is full.

use crate::budget::{Budget, Reservation};
use crate::counters::ServiceCounters;
use crate::export::{ChunkExporter, ProfileExporter, export_all};
use crate::join::SentryJoin;
use crate::sampling::Sampler;
use crate::spec::ProcessorSpec;
use crate::store::StoreWriter;
use crate::symbolize::SymbolizeStage;
use crate::traces::SharedSpanThreads;
use crate::translation::{
    all_threads, otlp_to_sentry_options, profile_count, resource_attributes, resource_profiler_id,
};
use profilink_exporter::ExportChunk;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesData, ResourceProfiles};
use profilink_proto::sentry::{CompactString, ProfileChunk};
use profilink_receiver::{ConsumeError, Payload, SentryBatch};
use profilink_translator::otlp_to_sentry;
use profilink_translator::sentry_to_otlp::{self, SentryInput, V1WithTransaction};
use profilink_translator::{NoLinks, TransactionLinks, span_intervals, span_item_interval};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod release;

/// How long a client is asked to wait when a queue is full and the exporter gave no delay.
pub const FULL_RETRY_AFTER: Duration = Duration::from_secs(1);

/// One pipeline. See the module docs.
#[derive(Debug)]
pub struct Pipeline {
    name: String,
    samplers: Vec<Sampler>,
    chunk_exporters: Vec<Arc<ChunkExporter>>,
    otlp_exporters: Vec<Arc<ProfileExporter>>,
    routing_attributes: Vec<String>,
    counters: Arc<ServiceCounters>,
    o2s: otlp_to_sentry::ChunkOptions,
    s2o: sentry_to_otlp::OtlpOptions,
    store: Option<Arc<StoreWriter>>,
    join: Option<SentryJoin>,
    span_threads: Option<SharedSpanThreads>,
    budget: Budget,
    symbolize: Option<SymbolizeStage>,
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
        let samplers = processors
            .iter()
            .filter_map(|p| match p {
                ProcessorSpec::Sampling(c) => Some(Sampler::new(c)),
                _ => None,
            })
            .collect();
        // OTLP is symbolized once, by the first `symbolize` processor listed.
        let symbolize = processors.iter().find_map(|p| match p {
            ProcessorSpec::Symbolize(c) => Some(SymbolizeStage::new(c)),
            _ => None,
        });
        let mut routing_attributes: Vec<String> = chunk_exporters
            .iter()
            .filter_map(|e| e.routing_attribute().map(str::to_owned))
            .collect();
        routing_attributes.sort();
        routing_attributes.dedup();
        Pipeline {
            name: name.to_string(),
            samplers,
            chunk_exporters,
            otlp_exporters,
            routing_attributes,
            counters,
            o2s: otlp_to_sentry_options(),
            s2o: sentry_to_otlp::OtlpOptions::default(),
            store: None,
            join: None,
            span_threads: None,
            budget: Budget::default(),
            symbolize,
        }
    }

    /// Translates OTLP within `budget` (share one between the pipelines of a service, so it
    /// bounds all of them together; see [`Budget`]). Default: a budget of its own with
    /// the default bounds.
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The `symbolize` processor's counters, when the pipeline has one.
    pub fn symbolize_metrics(&self) -> Option<Arc<profilink_symbolizer::SymbolizerMetrics>> {
        self.symbolize.as_ref().map(SymbolizeStage::metrics)
    }

    /// Remembers, for the `traces` pipelines' stamping, where the samples linked to each span
    /// ran (from the OTLP this pipeline translates to chunks).
    pub fn with_span_threads(mut self, known: Option<SharedSpanThreads>) -> Self {
        self.span_threads = known;
        self
    }

    /// Keeps the Sentry chunks this pipeline receives in the `profile_store` when it has no
    /// chunk exporter (with one, the exporter's merged chunks are stored instead, see
    /// [`StoreWriter`]).
    pub fn with_store(mut self, store: Option<Arc<StoreWriter>>) -> Self {
        self.store = store;
        self
    }

    /// The pipeline id.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn keep(&self, profiler_id: &str) -> bool {
        self.samplers.iter().all(|s| s.keep(profiler_id))
    }

    /// Refuses while an exporter's queue is full.
    pub fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.chunk_exporters.iter().any(|e| e.is_full())
            || self.join.as_ref().is_some_and(SentryJoin::is_full)
        {
            return Err(ConsumeError::Full {
                retry_after: FULL_RETRY_AFTER,
            });
        }
        Ok(())
    }

    /// Translates, samples and exports one payload.
    pub async fn consume(&self, payload: Payload) -> Result<(), ConsumeError> {
        match payload {
            Payload::Otlp(data) => self.consume_otlp(data).await,
            Payload::Sentry(batch) => self.consume_sentry(batch).await,
            // Traces go to traces pipelines (see `Fanout`).
            Payload::Traces(_) => Ok(()),
        }
    }

    /// OTLP → chunks. Consecutive `ResourceProfiles` that agree on the exporters' routing
    /// attributes are translated together (one dictionary pass instead of one per resource);
    /// every chunk carries the resource attributes its run of resources has in common (all of
    /// them for a run of one), which always include the routing attributes.
    pub fn otlp_to_chunks(&self, data: &ProfilesData) -> Vec<ExportChunk> {
        self.otlp_to_chunks_within(data, None)
    }

    /// [`Pipeline::otlp_to_chunks`] keeping only the chunks that fit `reservation` (see
    /// [`crate::budget`]; its outcome then says whether any was left out).
    fn otlp_to_chunks_within(
        &self,
        data: &ProfilesData,
        mut reservation: Option<&mut Reservation>,
    ) -> Vec<ExportChunk> {
        let dict = data.dictionary.as_ref();
        let rps = &data.resource_profiles;
        let attrs: Vec<BTreeMap<String, String>> =
            rps.iter().map(|rp| resource_attributes(dict, rp)).collect();
        let route = |a: &BTreeMap<String, String>| -> Vec<Option<String>> {
            self.routing_attributes
                .iter()
                .map(|k| a.get(k).cloned())
                .collect()
        };
        let mut out = Vec::new();
        let mut start = 0;
        while start < rps.len() {
            let key = route(&attrs[start]);
            let mut end = start + 1;
            while end < rps.len() && route(&attrs[end]) == key {
                end += 1;
            }
            let mut common = attrs[start].clone();
            for a in &attrs[start + 1..end] {
                common.retain(|k, v| a.get(k) == Some(v));
            }
            self.translate_run(
                dict,
                &rps[start..end],
                common,
                reservation.as_deref_mut(),
                &mut out,
            );
            start = end;
        }
        out
    }

    fn translate_run(
        &self,
        dict: Option<&profilink_proto::otlp::ProfilesDictionary>,
        rps: &[ResourceProfiles],
        resource: BTreeMap<String, String>,
        mut reservation: Option<&mut Reservation>,
        out: &mut Vec<ExportChunk>,
    ) {
        let c = &self.counters;
        let mut chunks = Vec::new();
        let mut t = otlp_to_sentry::to_chunks_with(dict, rps, &self.o2s, &mut |chunk| {
            if reservation.as_deref_mut().is_none_or(|r| r.keep(&chunk)) {
                chunks.push(chunk);
            }
        });
        t.chunks = chunks;
        if let Some(known) = &self.span_threads
            && !t.links.is_empty()
        {
            let mut k = known.lock().unwrap_or_else(|p| p.into_inner());
            k.record(&t.links, std::time::Instant::now());
        }
        for r in &t.rejected {
            c.translation_error(&r.error);
            tracing::debug!(pipeline = %self.name, path = %r.path, error = %r.error, "profile not translated");
        }
        // Strict out: chunks that failed the chunk validator were removed by the translator.
        c.invalid_chunks(t.invalid_chunks.len() as u64);
        for ic in &t.invalid_chunks {
            tracing::warn!(
                pipeline = %self.name,
                chunk_id = %ic.chunk_id,
                profiler_id = %ic.profiler_id,
                samples = ic.samples,
                reason = ic.finding.rule,
                finding = %ic.finding,
                "invalid chunk not sent"
            );
        }
        ServiceCounters::add(
            &c.dropped_samples_expansion,
            t.stats.samples_dropped_expansion,
        );
        ServiceCounters::add(&c.dropped_samples_size, t.stats.samples_dropped_size);
        ServiceCounters::add(&c.translated_chunks, t.chunks.len() as u64);
        // The threads each session's links name: spans are stamped with them, so the
        // exporters must not group them.
        let mut linked: BTreeMap<&str, Vec<CompactString>> = BTreeMap::new();
        for l in &t.links {
            let v = linked.entry(l.profiler_id.as_str()).or_default();
            if !v.iter().any(|t| *t == l.thread_id) {
                v.push(CompactString::from(l.thread_id.as_str()));
            }
        }
        let n = t.chunks.len();
        let mut resource = Some(resource);
        for (i, chunk) in t.chunks.into_iter().enumerate() {
            let resource = if i + 1 == n {
                resource.take().unwrap_or_default()
            } else {
                resource.clone().unwrap_or_default()
            };
            let linked_threads = linked
                .get(chunk.profiler_id.as_str())
                .cloned()
                .unwrap_or_default();
            out.push(ExportChunk {
                chunk,
                resource,
                linked_threads,
            });
        }
    }

    fn sample_chunks(&self, chunks: Vec<ExportChunk>) -> Vec<ExportChunk> {
        if self.samplers.is_empty() {
            return chunks;
        }
        let before = chunks.len();
        let kept: Vec<ExportChunk> = chunks
            .into_iter()
            .filter(|c| self.keep(&c.chunk.profiler_id))
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_chunks,
            (before - kept.len()) as u64,
        );
        kept
    }

    async fn export_chunks(&self, chunks: Vec<ExportChunk>) -> Result<(), ConsumeError> {
        if chunks.is_empty() {
            return Ok(());
        }
        export_all(&self.chunk_exporters, chunks).await
    }

    async fn export_otlp(&self, req: ExportProfilesServiceRequest) -> Result<(), ConsumeError> {
        if req.resource_profiles.is_empty() {
            return Ok(());
        }
        export_all(&self.otlp_exporters, req).await
    }

    async fn consume_otlp(&self, data: ProfilesData) -> Result<(), ConsumeError> {
        // The budget first: a request refused for its claims costs no symbolization.
        let reservation = if self.chunk_exporters.is_empty() {
            None
        } else {
            let claims = otlp_to_sentry::expansion_claims(
                data.dictionary.as_ref(),
                &data.resource_profiles,
                &self.o2s,
            );
            Some(
                self.budget
                    .admit(&claims)
                    .inspect_err(|e| self.over_budget(e))?,
            )
        };
        let data = match &self.symbolize {
            Some(s) => s.apply(data).await.map_err(ConsumeError::Internal)?,
            None => data,
        };
        if let Some(mut reservation) = reservation {
            let chunks = self.otlp_to_chunks_within(&data, Some(&mut reservation));
            reservation.outcome().inspect_err(|e| self.over_budget(e))?;
            let chunks = self.sample_chunks(chunks);
            self.export_chunks(chunks).await?;
            // Held until the exporters have the chunks (their queues bound them from here).
            drop(reservation);
        }
        if !self.otlp_exporters.is_empty() {
            let mut data = data;
            if !self.samplers.is_empty() {
                let dict = data.dictionary.clone();
                let mut dropped = 0;
                data.resource_profiles.retain(|rp| {
                    let keep = self.keep(&resource_profiler_id(dict.as_ref(), rp));
                    if !keep {
                        dropped += profile_count(rp);
                    }
                    keep
                });
                ServiceCounters::add(&self.counters.sampling_dropped_profiles, dropped);
            }
            self.export_otlp(profilink_proto::otlp::request_from_data(data))
                .await?;
        }
        Ok(())
    }

    async fn consume_sentry(&self, batch: SentryBatch) -> Result<(), ConsumeError> {
        let SentryBatch {
            project_id: batch_project,
            chunks,
            v1_profiles,
            transactions,
            spans: span_items,
            ..
        } = batch;
        let before = chunks.len();
        let mut chunks: Vec<ProfileChunk> = chunks
            .into_iter()
            .filter(|c| self.keep(&c.profiler_id))
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_chunks,
            (before - chunks.len()) as u64,
        );
        let before = v1_profiles.len();
        let v1: Vec<V1WithTransaction> = v1_profiles
            .into_iter()
            .filter(|(p, _)| self.keep(p.event_id.as_deref().unwrap_or_default()))
            .map(|(profile, transaction)| V1WithTransaction {
                profile,
                transaction,
            })
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_profiles,
            (before - v1.len()) as u64,
        );
        if let Some(store) = &self.store {
            store.link(&transactions, &span_items);
            if self.chunk_exporters.is_empty() {
                for c in &chunks {
                    store.offer(c.clone(), batch_project, Vec::new());
                }
            }
        }
        let mut released = Vec::new();
        let mut own = std::collections::HashSet::new();
        if let Some(join) = &self.join {
            // Chunks wait for their transactions; V1 profiles come with theirs.
            let spans = transactions
                .iter()
                .flat_map(span_intervals)
                .chain(span_items.iter().filter_map(span_item_interval))
                .collect();
            let held = if self.chunk_exporters.is_empty() {
                std::mem::take(&mut chunks)
            } else {
                chunks.clone()
            };
            own = held.iter().map(|c| c.chunk_id.clone()).collect();
            released = join.add(held, batch_project, spans).await?;
        }
        if chunks.is_empty() && v1.is_empty() {
            return self.release_for(released, &own).await;
        }

        let otlp_chunks: &[ProfileChunk] = if self.join.is_some() { &[] } else { &chunks };
        let otlp = if self.otlp_exporters.is_empty() || (otlp_chunks.is_empty() && v1.is_empty()) {
            None
        } else {
            let links = TransactionLinks::new(&transactions);
            let t = sentry_to_otlp::to_otlp(
                &SentryInput {
                    chunks: otlp_chunks,
                    v1_profiles: &v1,
                },
                &links,
                &self.s2o,
            );
            self.count_sentry_translation(&t, otlp_chunks.len() + v1.len());
            Some(t.request)
        };

        if !self.chunk_exporters.is_empty() {
            let mut out: Vec<ExportChunk> = Vec::with_capacity(chunks.len() + v1.len());
            if !v1.is_empty() {
                out.extend(self.v1_to_chunks(&v1));
            }
            // Strict out for received chunks bound for Sentry: what fails the chunk validator
            // is not sent (the OTLP path above is not Relay's to judge).
            let received = chunks.len();
            chunks.retain(|c| match otlp_to_sentry::blocking_error(c, &self.o2s) {
                None => true,
                Some(f) => {
                    tracing::warn!(
                        pipeline = %self.name,
                        chunk_id = %c.chunk_id,
                        profiler_id = %c.profiler_id,
                        reason = f.rule,
                        finding = %f,
                        "invalid chunk not sent"
                    );
                    false
                }
            });
            self.counters
                .invalid_chunks((received - chunks.len()) as u64);
            // SDK chunks: spans reference their threads, so none is grouped.
            out.extend(chunks.into_iter().map(|c| {
                let linked_threads = all_threads(&c);
                ExportChunk {
                    linked_threads,
                    ..ExportChunk::new(c)
                }
            }));
            self.export_chunks(out).await?;
        }
        if let Some(req) = otlp {
            self.export_otlp(req).await?;
        }
        self.release_for(released, &own).await
    }

    /// Counts and logs a request refused by the amplification budget.
    fn over_budget(&self, e: &ConsumeError) {
        self.counters.budget_refusal(e);
        tracing::debug!(pipeline = %self.name, error = %e, "request refused by the amplification budget");
    }

    fn count_sentry_translation(&self, t: &sentry_to_otlp::OtlpTranslation, items: usize) {
        for r in &t.rejected {
            self.counters.translation_error(&r.error);
            tracing::debug!(pipeline = %self.name, item = %r.item, error = %r.error, "Sentry item not translated");
        }
        ServiceCounters::add(
            &self.counters.translated_profiles,
            items.saturating_sub(t.rejected.len()) as u64,
        );
    }

    /// V1 profiles as chunks: V1 → OTLP → chunks (a V1 profile is not a chunk; Sentry's
    /// continuous profiling only takes chunks).
    fn v1_to_chunks(&self, v1: &[V1WithTransaction]) -> Vec<ExportChunk> {
        let t = sentry_to_otlp::to_otlp(
            &SentryInput {
                chunks: &[],
                v1_profiles: v1,
            },
            &NoLinks,
            &self.s2o,
        );
        for r in &t.rejected {
            self.counters.translation_error(&r.error);
        }
        let data = profilink_proto::otlp::data_from_request(t.request);
        // Threads of an SDK's profile, which its transaction references: never grouped.
        let mut chunks = self.otlp_to_chunks(&data);
        for c in &mut chunks {
            c.linked_threads = all_threads(&c.chunk);
        }
        chunks
    }
}
