//! The pipelines: [`Consumer`]s that translate what the receivers accept and hand it to the
//! exporters.
//!
//! * [`Exporter`]: one running exporter (`sentry`, `file` or `otlp`), shared by every pipeline
//!   that lists it.
//! * [`Pipeline`]: one `service.pipelines` entry. What it does depends on the data and the
//!   exporter:
//!
//!   | data | `sentry` / `file` exporters | `otlp` exporters |
//!   |---|---|---|
//!   | OTLP | translated to chunks (sparse threads kept and not grouped: the exporters merge 5 s chunks into 60 s ones and group or drop them then), each with its origin resource's attributes for routing and the thread ids its trace links name (see [`Pipeline::otlp_to_chunks`]) | forwarded as is (gateway) |
//!   | Sentry chunks | passed through (every thread marked linked: SDK threads keep their ids) | translated to OTLP, linked to the envelope's transactions |
//!   | Sentry V1 profiles | translated to OTLP and back into chunks | translated to OTLP with their transaction |
//!
//!   `profile_sampling` processors drop whole profiler sessions first (see
//!   [`crate::sampling`]); `batch` processors pass data through (the exporters batch).
//! * [`Fanout`]: the consumer of one receiver: every pipeline that lists the receiver gets the
//!   batch. It succeeds only when every pipeline (and every exporter) accepted; a refusal
//!   (queue full) makes the client retry, and exporters that had already accepted will see
//!   that data again (at-least-once, as the Collector's fan-out).
//!
//! Backpressure: an exporter whose durable queue is full refuses with
//! [`ExportError::Full`], which becomes [`ConsumeError::Full`] (gRPC `UNAVAILABLE` with
//! `RetryInfo`, HTTP 503/429 with `Retry-After`); [`Consumer::check_ready`] refuses before a
//! request body is even read while a queue is full.

use crate::counters::ServiceCounters;
use crate::join::buffer::{JoinConfig, Release};
use crate::join::{JoinMetrics, SentryJoin};
use crate::sampling::Sampler;
use crate::spec::{ExporterSpec, ProcessorSpec};
use crate::store::StoreWriter;
use crate::traces::{SharedSpanThreads, TracesPipeline};
use profilink_exporter::{
    ExportChunk, ExportError, ExporterMetrics, FileExporter, OtlpExporter, Overflow, SentryExporter,
};
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesData, ResourceProfiles};
use profilink_proto::sentry::{CompactString, ProfileChunk};
use profilink_receiver::{Batch, ConsumeError, Consumer, Payload, SentryBatch};
use profilink_translator::dictionary::Dictionary;
use profilink_translator::linking::{
    NoLinks, TransactionLinks, span_intervals, span_item_interval,
};
use profilink_translator::otlp_to_sentry::{
    self, ProcessIdentity, SparseThreadGrouping, SparseThreadPolicy, derive_profiler_id,
};
use profilink_translator::sentry_to_otlp::{self, SentryInput, V1WithTransaction};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

enum Kind {
    Sentry(SentryExporter),
    File(FileExporter),
    Otlp(OtlpExporter),
}

/// A running exporter.
pub struct Exporter {
    id: String,
    kind: Kind,
    metrics: Arc<ExporterMetrics>,
    backpressure: bool,
    routing_attribute: Option<String>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("id", &self.id)
            .field("kind", &self.kind_name())
            .finish()
    }
}

/// How long a client is asked to wait when a queue is full and the exporter gave no delay.
pub const FULL_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Room kept free in a durable queue: requests are refused up front once less than this (or a
/// tenth of the capacity, whichever is smaller) is left.
pub const QUEUE_HEADROOM: u64 = 16 << 20;

/// How long a client is asked to wait when too many requests are being processed.
pub const BUSY_RETRY_AFTER: Duration = Duration::from_millis(200);

/// Maps an exporter error to the receivers' consume error.
pub fn consume_error(id: &str, e: ExportError) -> ConsumeError {
    match e {
        ExportError::Full { retry_after } => ConsumeError::Full { retry_after },
        ExportError::Closed => ConsumeError::Internal(format!("exporter {id} is shutting down")),
        other => ConsumeError::Internal(format!("exporter {id}: {other}")),
    }
}

impl Exporter {
    /// Starts the exporter `id` (opening and replaying its durable queue).
    pub async fn start(id: &str, spec: &ExporterSpec) -> Result<Exporter, ExportError> {
        let (kind, backpressure) = match spec {
            ExporterSpec::Sentry(c) => (
                Kind::Sentry(SentryExporter::start(c.clone()).await?),
                c.sending_queue.overflow == Overflow::Backpressure,
            ),
            ExporterSpec::File(c) => (
                Kind::File(FileExporter::start(c.clone()).await?),
                c.sending_queue.overflow == Overflow::Backpressure,
            ),
            ExporterSpec::Otlp(c) => (Kind::Otlp(OtlpExporter::start(c.clone()).await?), false),
        };
        let metrics = match &kind {
            Kind::Sentry(e) => e.metrics(),
            Kind::File(e) => e.metrics(),
            Kind::Otlp(e) => e.metrics(),
        };
        let routing_attribute = match spec {
            ExporterSpec::Sentry(c) => c.routing.as_ref().map(|r| r.attribute.clone()),
            _ => None,
        };
        Ok(Exporter {
            id: id.to_string(),
            kind,
            metrics,
            backpressure,
            routing_attribute,
        })
    }

    /// The component id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `sentry`, `file` or `otlp`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Sentry(_) => "sentry",
            Kind::File(_) => "file",
            Kind::Otlp(_) => "otlp",
        }
    }

    /// The resource attribute this exporter routes chunks by, if it routes.
    pub fn routing_attribute(&self) -> Option<&str> {
        self.routing_attribute.as_deref()
    }

    /// True for exporters that take Sentry chunks.
    pub fn takes_chunks(&self) -> bool {
        !matches!(self.kind, Kind::Otlp(_))
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// True while the durable queue is (nearly) at capacity and full queues push back: within
    /// [`QUEUE_HEADROOM`] of it, so requests are refused before they are read rather than after
    /// they were decoded and translated.
    pub fn is_full(&self) -> bool {
        if !self.backpressure {
            return false;
        }
        let cap = self.metrics.queue_capacity_bytes.load(Ordering::Relaxed);
        let headroom = (cap / 10).min(QUEUE_HEADROOM);
        cap > 0 && self.metrics.queue_size_bytes.load(Ordering::Relaxed) + headroom >= cap
    }

    /// Exports chunks (`sentry` / `file`); `Ok` once durable.
    pub async fn export_chunks(&self, chunks: Vec<ExportChunk>) -> Result<(), ExportError> {
        match &self.kind {
            Kind::Sentry(e) => e.export(chunks).await,
            Kind::File(e) => e.export(chunks).await,
            Kind::Otlp(_) => Err(ExportError::Config(
                "an OTLP exporter takes OTLP requests".into(),
            )),
        }
    }

    /// Exports an OTLP request (`otlp`).
    pub async fn export_otlp(&self, req: ExportProfilesServiceRequest) -> Result<(), ExportError> {
        match &self.kind {
            Kind::Otlp(e) => e.export(req).await,
            _ => Err(ExportError::Config(
                "a Sentry or file exporter takes chunks".into(),
            )),
        }
    }

    /// Flushes and stops within `deadline` (see each exporter's `shutdown`).
    pub async fn shutdown(self, deadline: Duration) {
        match self.kind {
            Kind::Sentry(e) => e.shutdown(deadline).await,
            Kind::File(e) => e.shutdown(deadline).await,
            Kind::Otlp(e) => e.shutdown(deadline).await,
        }
    }
}

/// One pipeline. See the module docs.
#[derive(Debug)]
pub struct Pipeline {
    name: String,
    samplers: Vec<Sampler>,
    chunk_exporters: Vec<Arc<Exporter>>,
    otlp_exporters: Vec<Arc<Exporter>>,
    routing_attributes: Vec<String>,
    counters: Arc<ServiceCounters>,
    o2s: otlp_to_sentry::Options,
    s2o: sentry_to_otlp::Options,
    store: Option<Arc<StoreWriter>>,
    join: Option<SentryJoin>,
    span_threads: Option<SharedSpanThreads>,
}

/// The options the service translates OTLP with: the translator's defaults, but sparse
/// threads are kept as they are (a thread seen once in a 5 s request is not sparse in the 60 s
/// chunk the exporter's accumulator builds, which groups or drops what is sparse then).
pub fn otlp_to_sentry_options() -> otlp_to_sentry::Options {
    otlp_to_sentry::Options {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..Default::default()
    }
}

/// Every thread id of `chunk`'s samples: for chunks whose threads spans may reference (an
/// SDK's chunks), so the exporters never group them.
pub fn all_threads(chunk: &ProfileChunk) -> Vec<CompactString> {
    let mut out: Vec<CompactString> = Vec::new();
    for s in &chunk.profile.samples {
        if out.last() != Some(&s.thread_id) && !out.contains(&s.thread_id) {
            out.push(s.thread_id.clone());
        }
    }
    out
}

/// Resource attributes as text (`key` → value), for exporter routing.
pub fn resource_attributes(
    dictionary: Option<&profilink_proto::otlp::ProfilesDictionary>,
    rp: &ResourceProfiles,
) -> BTreeMap<String, String> {
    let Some(resource) = &rp.resource else {
        return BTreeMap::new();
    };
    let dict = Dictionary::new(dictionary);
    match dict.key_values(&resource.attributes) {
        Ok(attrs) => attrs
            .iter()
            .filter_map(|a| a.value.to_text().map(|v| (a.key.to_owned(), v)))
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

/// The profiler id the translator derives from a resource's attributes alone.
pub fn resource_profiler_id(
    dictionary: Option<&profilink_proto::otlp::ProfilesDictionary>,
    rp: &ResourceProfiles,
) -> String {
    let dict = Dictionary::new(dictionary);
    let attrs = rp
        .resource
        .as_ref()
        .and_then(|r| dict.key_values(&r.attributes).ok())
        .unwrap_or_default();
    derive_profiler_id(&ProcessIdentity::from_attributes(&attrs, &[]))
}

fn profile_count(rp: &ResourceProfiles) -> u64 {
    rp.scope_profiles
        .iter()
        .map(|sp| sp.profiles.len() as u64)
        .sum()
}

impl Pipeline {
    /// A pipeline named `name` with its processors (in order) and exporters.
    pub fn new(
        name: &str,
        processors: &[&ProcessorSpec],
        exporters: Vec<Arc<Exporter>>,
        counters: Arc<ServiceCounters>,
    ) -> Pipeline {
        let samplers = processors
            .iter()
            .filter_map(|p| match p {
                ProcessorSpec::Sampling(c) => Some(Sampler::new(c)),
                ProcessorSpec::Batch(_) | ProcessorSpec::Linking(_) => None,
            })
            .collect();
        let (chunk_exporters, otlp_exporters): (Vec<_>, Vec<_>) =
            exporters.into_iter().partition(|e| e.takes_chunks());
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
            s2o: sentry_to_otlp::Options::default(),
            store: None,
            join: None,
            span_threads: None,
        }
    }

    /// Remembers, for the `traces` pipelines' stamping, where the samples linked to each span
    /// ran (from the OTLP this pipeline translates to chunks).
    pub fn with_span_threads(mut self, known: Option<SharedSpanThreads>) -> Self {
        self.span_threads = known;
        self
    }

    /// Holds received Sentry chunks in a join buffer with `cfg` until their transactions
    /// arrive, when the pipeline has OTLP exporters (see [`crate::join`]). Without it
    /// chunks are linked only to the transactions of their own envelope.
    pub fn with_join(mut self, cfg: Option<JoinConfig>) -> Self {
        self.join = cfg
            .filter(|_| !self.otlp_exporters.is_empty())
            .map(SentryJoin::new);
        self
    }

    /// The join buffer's counters, when the pipeline joins.
    pub fn join_metrics(&self) -> Option<Arc<JoinMetrics>> {
        self.join.as_ref().map(SentryJoin::metrics)
    }

    /// Translates released chunks (each profiler session with the links of its spans) and
    /// hands them to the OTLP exporters; what they refuse is parked and retried by
    /// [`Pipeline::tick`].
    async fn release(&self, releases: Vec<Release>) {
        let Some(join) = &self.join else {
            return;
        };
        let mut reqs = Vec::with_capacity(releases.len());
        for r in releases {
            let chunks: Vec<ProfileChunk> = r.chunks.into_iter().map(|(_, c)| c).collect();
            let t = sentry_to_otlp::translate(
                &SentryInput {
                    chunks: &chunks,
                    v1_profiles: &[],
                },
                &r.links,
                &self.s2o,
            );
            self.count_sentry_translation(&t, chunks.len());
            if !t.request.resource_profiles.is_empty() {
                reqs.push(t.request);
            }
        }
        self.export_or_park(join, reqs).await;
    }

    async fn export_or_park(&self, join: &SentryJoin, reqs: Vec<ExportProfilesServiceRequest>) {
        let mut failed = false;
        for req in reqs {
            if failed {
                join.park(req);
                continue;
            }
            if let Err(e) = self.export_otlp(req.clone()).await {
                tracing::debug!(pipeline = %self.name, error = ?e, "OTLP exporter refused linked profiles; retrying");
                failed = true;
                join.park(req);
            }
        }
    }

    /// Retries parked requests and releases the chunks whose window ran out (run every
    /// [`crate::join::TICK`] by the service).
    pub async fn tick(&self) {
        let Some(join) = &self.join else {
            return;
        };
        let parked = join.unpark();
        if !parked.is_empty() {
            self.export_or_park(join, parked).await;
        }
        let due = join.due();
        if !due.is_empty() {
            self.release(due).await;
        }
    }

    /// Releases every held chunk (shutdown, before the exporters stop).
    pub async fn flush_join(&self) {
        let Some(join) = &self.join else {
            return;
        };
        let parked = join.unpark();
        self.export_or_park(join, parked).await;
        let all = join.all();
        self.release(all).await;
        let left = join.unpark();
        if !left.is_empty() {
            tracing::warn!(pipeline = %self.name, requests = left.len(), "OTLP exporters refused linked profiles at shutdown; dropped");
        }
    }

    /// Keeps the Sentry chunks this pipeline receives in the `profile_store` when it has no
    /// chunk exporter (with one, the exporter's merged chunks are stored instead, see
    /// [`crate::store`]).
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
            self.translate_run(dict, &rps[start..end], common, &mut out);
            start = end;
        }
        out
    }

    fn translate_run(
        &self,
        dict: Option<&profilink_proto::otlp::ProfilesDictionary>,
        rps: &[ResourceProfiles],
        resource: BTreeMap<String, String>,
        out: &mut Vec<ExportChunk>,
    ) {
        let c = &self.counters;
        let t = otlp_to_sentry::translate(dict, rps, &self.o2s);
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
        let n = self.chunk_exporters.len();
        let mut chunks = Some(chunks);
        for (i, e) in self.chunk_exporters.iter().enumerate() {
            let batch = if i + 1 == n {
                chunks.take().unwrap_or_default()
            } else {
                chunks.clone().unwrap_or_default()
            };
            e.export_chunks(batch)
                .await
                .map_err(|err| consume_error(e.id(), err))?;
        }
        Ok(())
    }

    async fn export_otlp(&self, req: ExportProfilesServiceRequest) -> Result<(), ConsumeError> {
        if req.resource_profiles.is_empty() {
            return Ok(());
        }
        let n = self.otlp_exporters.len();
        let mut req = Some(req);
        for (i, e) in self.otlp_exporters.iter().enumerate() {
            let r = if i + 1 == n {
                req.take().unwrap_or_default()
            } else {
                req.clone().unwrap_or_default()
            };
            e.export_otlp(r)
                .await
                .map_err(|err| consume_error(e.id(), err))?;
        }
        Ok(())
    }

    async fn consume_otlp(&self, data: ProfilesData) -> Result<(), ConsumeError> {
        if !self.chunk_exporters.is_empty() {
            let chunks = self.otlp_to_chunks(&data);
            let chunks = self.sample_chunks(chunks);
            self.export_chunks(chunks).await?;
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
            released = join.add(held, batch_project, spans);
        }
        if chunks.is_empty() && v1.is_empty() {
            self.release(released).await;
            return Ok(());
        }

        let otlp_chunks: &[ProfileChunk] = if self.join.is_some() { &[] } else { &chunks };
        let otlp = if self.otlp_exporters.is_empty() || (otlp_chunks.is_empty() && v1.is_empty()) {
            None
        } else {
            let links = TransactionLinks::new(&transactions);
            let t = sentry_to_otlp::translate(
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
        self.release(released).await;
        Ok(())
    }

    fn count_sentry_translation(&self, t: &sentry_to_otlp::Translation, items: usize) {
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
        let t = sentry_to_otlp::translate(
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

/// The consumer of one receiver: hands every batch to each pipeline that lists it.
///
/// It also bounds the requests being translated and exported at once
/// ([`Fanout::max_in_flight`]): beyond that, requests are refused before their body is read
/// ([`ConsumeError::Full`] with a short delay), so an overload costs memory for at most that
/// many decoded requests.
#[derive(Debug)]
pub struct Fanout {
    pipelines: Vec<Arc<Pipeline>>,
    traces: Vec<Arc<TracesPipeline>>,
    in_flight: AtomicUsize,
    max_in_flight: usize,
}

/// The default bound on requests in the pipelines at once: 4 per CPU, at least 8.
pub fn default_max_in_flight() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (4 * cpus).max(8)
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Fanout {
    /// A fan-out to `pipelines` (at least one), bounded by [`default_max_in_flight`].
    pub fn new(pipelines: Vec<Arc<Pipeline>>) -> Self {
        Self::with_traces(pipelines, Vec::new())
    }

    /// A fan-out of profiles to `pipelines` and of traces to `traces` pipelines (a receiver
    /// with no traces pipeline refuses traces, as the Collector's does).
    pub fn with_traces(pipelines: Vec<Arc<Pipeline>>, traces: Vec<Arc<TracesPipeline>>) -> Self {
        Fanout {
            pipelines,
            traces,
            in_flight: AtomicUsize::new(0),
            max_in_flight: default_max_in_flight(),
        }
    }

    /// Requests in the pipelines at once beyond which new ones are refused.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }
}

impl Consumer for Fanout {
    async fn consume(&self, batch: Batch) -> Result<(), ConsumeError> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _guard = InFlight(&self.in_flight);
        if let Payload::Traces(req) = batch.payload {
            let n = self.traces.len();
            let mut req = Some(req);
            for (i, p) in self.traces.iter().enumerate() {
                let r = if i + 1 == n { req.take() } else { req.clone() };
                if let Some(r) = r {
                    p.consume(r).await?;
                }
            }
            return Ok(());
        }
        if self.pipelines.is_empty() {
            return Err(ConsumeError::Rejected(
                "no profiles pipeline uses this receiver".into(),
            ));
        }
        let n = self.pipelines.len();
        let mut payload = Some(batch.payload);
        for (i, p) in self.pipelines.iter().enumerate() {
            let pl = if i + 1 == n {
                payload.take()
            } else {
                payload.clone()
            };
            if let Some(pl) = pl {
                p.consume(pl).await?;
            }
        }
        Ok(())
    }

    fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.in_flight.load(Ordering::Acquire) >= self.max_in_flight {
            return Err(ConsumeError::Full {
                retry_after: BUSY_RETRY_AFTER,
            });
        }
        self.pipelines.iter().try_for_each(|p| p.check_ready())
    }

    fn accepts_traces(&self) -> bool {
        !self.traces.is_empty()
    }
}
