//! Route Sentry → OTLP: chunks and V1 profiles received from SDKs translated to OTLP for the
//! `otlp` exporters (through the pipeline's `OtlpForward`), linked to their transactions and
//! spans. V1 profiles come with their
//! transaction and are translated at once; chunks of a pipeline fed by a `sentry` receiver wait
//! in the join buffer ([`crate::join`], see [`join`]) until the spans of their window arrive,
//! else they are linked to the transactions of their own envelope.

use crate::counters::ServiceCounters;
use crate::join::SentryJoin;
use profilink_consumer::ConsumeError;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{ProfileChunk, SpanItem, Transaction};
use profilink_translator::TransactionLinks;
use profilink_translator::sentry_to_otlp::{self, SentryInput, V1WithTransaction};
use profilink_translator::{span_intervals, span_item_interval};
use std::collections::HashSet;
use std::sync::Arc;

mod join;

pub(crate) use join::Held;

/// The Sentry → OTLP route of one pipeline; it delivers through the pipeline's `OtlpForward`
/// (the same OTLP exporters).
#[derive(Debug)]
pub(crate) struct SentryToOtlp {
    name: String,
    s2o: sentry_to_otlp::OtlpOptions,
    counters: Arc<ServiceCounters>,
    join: Option<SentryJoin>,
}

impl SentryToOtlp {
    /// The route, translating with `s2o`, without a join buffer.
    pub(crate) fn new(
        name: &str,
        s2o: sentry_to_otlp::OtlpOptions,
        counters: Arc<ServiceCounters>,
    ) -> Self {
        SentryToOtlp {
            name: name.to_string(),
            s2o,
            counters,
            join: None,
        }
    }

    /// True while the join buffer is full.
    pub(crate) fn is_full(&self) -> bool {
        self.join.as_ref().is_some_and(SentryJoin::is_full)
    }

    /// Whether chunks wait in a join buffer.
    pub(crate) fn joins(&self) -> bool {
        self.join.is_some()
    }

    /// Holds `chunks` in the join buffer (with the spans of `transactions` and `spans`) and
    /// returns what that made due, to be released once the request's own exports are done.
    pub(crate) async fn hold(
        &self,
        chunks: Vec<ProfileChunk>,
        project_id: u64,
        transactions: &[Transaction],
        spans: &[SpanItem],
    ) -> Result<Held, ConsumeError> {
        let Some(join) = &self.join else {
            return Ok(Held::default());
        };
        let intervals = transactions
            .iter()
            .flat_map(span_intervals)
            .chain(spans.iter().filter_map(span_item_interval))
            .collect();
        let own: HashSet<String> = chunks.iter().map(|c| c.chunk_id.clone()).collect();
        let released = join.add(chunks, project_id, intervals).await?;
        Ok(Held { released, own })
    }

    /// Translates `chunks` (linked to `transactions`) and `v1` now, for the exporters; `None`
    /// when there is nothing to translate.
    pub(crate) fn translate(
        &self,
        chunks: &[ProfileChunk],
        v1: &[V1WithTransaction],
        transactions: &[Transaction],
    ) -> Option<ExportProfilesServiceRequest> {
        if chunks.is_empty() && v1.is_empty() {
            return None;
        }
        let links = TransactionLinks::new(transactions);
        let t = sentry_to_otlp::to_otlp(
            &SentryInput {
                chunks,
                v1_profiles: v1,
            },
            &links,
            &self.s2o,
        );
        self.count_translation(&t, chunks.len() + v1.len());
        Some(t.request)
    }

    fn count_translation(&self, t: &sentry_to_otlp::OtlpTranslation, items: usize) {
        for r in &t.rejected {
            self.counters.translation_error(&r.error);
            tracing::debug!(pipeline = %self.name, item = %r.item, error = %r.error, "Sentry item not translated");
        }
        ServiceCounters::add(
            &self.counters.translated_profiles,
            items.saturating_sub(t.rejected.len()) as u64,
        );
    }
}
