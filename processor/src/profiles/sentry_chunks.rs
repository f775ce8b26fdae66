//! Route Sentry → chunks: chunks received from SDKs passed through to the chunk exporters
//! (every thread marked linked: spans reference SDK threads by id, so none is grouped), after
//! the strict-out check; V1 profiles turned into chunks through OTLP (a V1 profile is not a
//! chunk, and Sentry's continuous profiling only takes chunks).

use super::otlp_to_chunks::OtlpToChunks;
use crate::counters::ServiceCounters;
use crate::translation::all_threads;
use profilink_consumer::{ConsumeError, ExportChunk};
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::NoLinks;
use profilink_translator::otlp_to_sentry;
use profilink_translator::sentry_to_otlp::{self, SentryInput, V1WithTransaction};
use std::sync::Arc;

/// The Sentry → chunks route of one pipeline; it delivers through the pipeline's
/// [`OtlpToChunks`] route (the same chunk exporters, the same translation for V1 profiles).
#[derive(Debug)]
pub(crate) struct SentryChunks {
    s2o: sentry_to_otlp::OtlpOptions,
    counters: Arc<ServiceCounters>,
}

impl SentryChunks {
    /// The route, translating V1 profiles with `s2o`.
    pub(crate) fn new(s2o: sentry_to_otlp::OtlpOptions, counters: Arc<ServiceCounters>) -> Self {
        SentryChunks { s2o, counters }
    }

    /// Hands `chunks` (checked) and `v1` (as chunks) to `out`'s exporters.
    pub(crate) async fn consume(
        &self,
        out: &OtlpToChunks,
        mut chunks: Vec<ProfileChunk>,
        v1: &[V1WithTransaction],
    ) -> Result<(), ConsumeError> {
        let mut export: Vec<ExportChunk> = Vec::with_capacity(chunks.len() + v1.len());
        if !v1.is_empty() {
            export.extend(self.v1_to_chunks(out, v1));
        }
        // Strict out for received chunks bound for Sentry: what fails the chunk validator is
        // not sent (the OTLP route is not Relay's to judge).
        let received = chunks.len();
        chunks.retain(|c| match otlp_to_sentry::blocking_error(c, &out.o2s) {
            None => true,
            Some(f) => {
                tracing::warn!(
                    pipeline = %out.name,
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
        export.extend(chunks.into_iter().map(|c| {
            let linked_threads = all_threads(&c);
            ExportChunk {
                linked_threads,
                ..ExportChunk::new(c)
            }
        }));
        out.export(export).await
    }

    /// V1 profiles as chunks: V1 → OTLP → chunks.
    fn v1_to_chunks(&self, out: &OtlpToChunks, v1: &[V1WithTransaction]) -> Vec<ExportChunk> {
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
        let mut chunks = out.translate(&data, None);
        for c in &mut chunks {
            c.linked_threads = all_threads(&c.chunk);
        }
        chunks
    }
}
