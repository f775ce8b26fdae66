//! Route OTLP → chunks: received OTLP translated to Sentry chunks for the chunk exporters
//! (`sentry`, `file`). Sparse threads are kept and not grouped (the exporters merge 5 s chunks
//! into 60 s ones and group or drop them then); each chunk carries its origin resource's
//! attributes for routing and the thread ids its trace links name. The amplification budget
//! ([`crate::budget`]) bounds what a request may expand to.

use super::chain::Chain;
use crate::budget::{Budget, Reservation};
use crate::counters::ServiceCounters;
use crate::export::{ChunkExporter, export_all};
use crate::traces::SharedSpanThreads;
use crate::translation::resource_attributes;
use profilink_consumer::{ConsumeError, ExportChunk};
use profilink_proto::otlp::{ProfilesData, ProfilesDictionary, ResourceProfiles};
use profilink_proto::sentry::CompactString;
use profilink_translator::otlp_to_sentry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The OTLP → chunks route of one pipeline.
#[derive(Debug)]
pub(crate) struct OtlpToChunks {
    pub(super) name: String,
    pub(super) exporters: Vec<Arc<ChunkExporter>>,
    routing_attributes: Vec<String>,
    pub(super) o2s: otlp_to_sentry::ChunkOptions,
    pub(super) span_threads: Option<SharedSpanThreads>,
    counters: Arc<ServiceCounters>,
}

impl OtlpToChunks {
    /// The route to `exporters` (at least one), translating with `o2s`.
    pub(crate) fn new(
        name: &str,
        exporters: Vec<Arc<ChunkExporter>>,
        o2s: otlp_to_sentry::ChunkOptions,
        counters: Arc<ServiceCounters>,
    ) -> Self {
        let mut routing_attributes: Vec<String> = exporters
            .iter()
            .filter_map(|e| e.routing_attribute().map(str::to_owned))
            .collect();
        routing_attributes.sort();
        routing_attributes.dedup();
        OtlpToChunks {
            name: name.to_string(),
            exporters,
            routing_attributes,
            o2s,
            span_threads: None,
            counters,
        }
    }

    /// Refuses while a chunk exporter's queue is full.
    pub(crate) fn is_full(&self) -> bool {
        self.exporters.iter().any(|e| e.is_full())
    }

    /// Claims room in `budget` for what `data` may expand to, or refuses it (counted).
    pub(crate) fn admit(
        &self,
        data: &ProfilesData,
        budget: &Budget,
    ) -> Result<Reservation, ConsumeError> {
        let claims = otlp_to_sentry::expansion_claims(
            data.dictionary.as_ref(),
            &data.resource_profiles,
            &self.o2s,
        );
        budget.admit(&claims).inspect_err(|e| self.over_budget(e))
    }

    /// Translates `data` within `reservation`, samples and exports the chunks. The
    /// reservation is held until the exporters have the chunks (their queues bound them from
    /// there).
    pub(crate) async fn consume(
        &self,
        data: &ProfilesData,
        mut reservation: Reservation,
        chain: &Chain,
    ) -> Result<(), ConsumeError> {
        let chunks = self.translate(data, Some(&mut reservation));
        reservation.outcome().inspect_err(|e| self.over_budget(e))?;
        let chunks = self.sample(chunks, chain);
        self.export(chunks).await?;
        drop(reservation);
        Ok(())
    }

    /// Hands `chunks` to every chunk exporter.
    pub(crate) async fn export(&self, chunks: Vec<ExportChunk>) -> Result<(), ConsumeError> {
        if chunks.is_empty() {
            return Ok(());
        }
        export_all(&self.exporters, chunks).await
    }

    fn sample(&self, chunks: Vec<ExportChunk>, chain: &Chain) -> Vec<ExportChunk> {
        if !chain.samples() {
            return chunks;
        }
        let before = chunks.len();
        let kept: Vec<ExportChunk> = chunks
            .into_iter()
            .filter(|c| chain.keep(&c.chunk.profiler_id))
            .collect();
        ServiceCounters::add(
            &self.counters.sampling_dropped_chunks,
            (before - kept.len()) as u64,
        );
        kept
    }

    /// Counts and logs a request refused by the amplification budget.
    fn over_budget(&self, e: &ConsumeError) {
        self.counters.budget_refusal(e);
        tracing::debug!(pipeline = %self.name, error = %e, "request refused by the amplification budget");
    }

    /// OTLP → chunks, keeping only the chunks that fit `reservation` (when given; its outcome
    /// then says whether any was left out). Consecutive `ResourceProfiles` that agree on the
    /// exporters' routing attributes are translated together (one dictionary pass instead of
    /// one per resource); every chunk carries the resource attributes its run of resources has
    /// in common (all of them for a run of one), which always include the routing attributes.
    pub(crate) fn translate(
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
        dict: Option<&ProfilesDictionary>,
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
        c.skipped_sample_types(&t.skipped_sample_types);
        ServiceCounters::add(
            &c.skipped_sibling_profiles,
            t.stats.profiles_skipped_sibling,
        );
        if !t.skipped_sample_types.is_empty() {
            tracing::debug!(pipeline = %self.name, skipped = ?t.skipped_sample_types, "non-CPU profiles not translated to chunks");
        }
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
}
