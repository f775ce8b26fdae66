//! The join of the Sentry → OTLP route (see [`crate::join`]): configuring it, and what happens
//! to the chunks it releases. Each released chunk is translated into a request of its own, with
//! the links of its session's spans, so that a chunk sent again after a crash (its
//! acknowledgement lost) is the same request; the OTLP exporters take it, or it waits (parked)
//! and is retried every tick. A chunk's join log record is acknowledged once the exporters
//! accepted its request.

use super::SentryToOtlp;
use crate::join::buffer::{JoinConfig, Release};
use crate::join::{JoinMetrics, Parked, SentryJoin};
use crate::profiles::otlp_forward::OtlpForward;
use profilink_consumer::ConsumeError;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::sentry_to_otlp::{self, SentryInput};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What holding a request's chunks made due: released once the request's own exports are done.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(super) released: Vec<Release>,
    pub(super) own: HashSet<String>,
}

impl SentryToOtlp {
    /// Holds received chunks in a join buffer with `cfg` until their transactions arrive.
    pub(crate) fn with_join(mut self, cfg: Option<JoinConfig>) -> Self {
        self.join = cfg.map(SentryJoin::new);
        self
    }

    /// Keeps the join buffer (when there is one) in a join log in `dir`; see
    /// [`Pipeline::with_join_log`](crate::Pipeline::with_join_log).
    pub(crate) fn with_join_log(mut self, dir: Option<&Path>) -> std::io::Result<Self> {
        if let Some(dir) = dir
            && let Some(join) = self.join.take()
        {
            self.join = Some(join.with_log(dir)?);
        }
        Ok(self)
    }

    /// The join buffer's counters, when the route joins.
    pub(crate) fn join_metrics(&self) -> Option<Arc<JoinMetrics>> {
        self.join.as_ref().map(SentryJoin::metrics)
    }

    /// Translates released chunks and hands them to the OTLP exporters; what they refuse is
    /// parked and retried by [`SentryToOtlp::tick`].
    async fn release(&self, out: &OtlpForward, join: &SentryJoin, releases: Vec<Release>) {
        let reqs = self.translate_releases(releases);
        self.export_or_park(out, join, reqs).await;
    }

    /// Releases the chunks that a request's own `hold` made due. When they are all that
    /// request's chunks (always so with `join_window: 0s`), a refusing exporter refuses the
    /// request: its client sends it again, where parking would answer success for data held
    /// only in memory (with a join log their records are acknowledged: the retry brings them
    /// back). Chunks of earlier requests (already answered) are parked as before.
    pub(crate) async fn release_held(
        &self,
        out: &OtlpForward,
        held: Held,
    ) -> Result<(), ConsumeError> {
        let Some(join) = &self.join else {
            return Ok(());
        };
        let Held { released, own } = held;
        let all_own = released
            .iter()
            .all(|r| r.chunks.iter().all(|(_, c)| own.contains(&c.chunk_id)));
        if !all_own {
            self.release(out, join, released).await;
            return Ok(());
        }
        let mut reqs = self.translate_releases(released).into_iter();
        let mut accepted = Vec::new();
        while let Some(p) = reqs.next() {
            if let Err(e) = out.export(p.req).await {
                join.ack_chunks(accepted).await;
                let refused = p.records.into_iter().chain(reqs.flat_map(|p| p.records));
                join.ack_chunks(refused.collect()).await;
                return Err(e);
            }
            accepted.extend(p.records);
        }
        join.ack_chunks(accepted).await;
        Ok(())
    }

    /// One request per released chunk, with the links of its session's spans.
    fn translate_releases(&self, releases: Vec<Release>) -> Vec<Parked> {
        let mut out = Vec::new();
        for r in releases {
            for ((_, chunk), record) in r.chunks.into_iter().zip(r.records) {
                let chunks: [ProfileChunk; 1] = [chunk];
                let t = sentry_to_otlp::to_otlp(
                    &SentryInput {
                        chunks: &chunks,
                        v1_profiles: &[],
                    },
                    &r.links,
                    &self.s2o,
                );
                self.count_translation(&t, 1);
                // A chunk the translation rejected (counted) makes an empty request: the
                // exporters are not called, and its record is acknowledged with the rest.
                out.push(Parked {
                    req: t.request,
                    records: vec![record],
                });
            }
        }
        out
    }

    async fn export_or_park(&self, out: &OtlpForward, join: &SentryJoin, reqs: Vec<Parked>) {
        let mut failed = false;
        let mut accepted = Vec::new();
        for p in reqs {
            if failed {
                join.park(p);
                continue;
            }
            match out.export(p.req.clone()).await {
                Ok(()) => accepted.extend(p.records),
                Err(e) => {
                    tracing::debug!(pipeline = %self.name, error = ?e, "OTLP exporter refused linked profiles; retrying");
                    failed = true;
                    join.park(p);
                }
            }
        }
        join.ack_chunks(accepted).await;
    }

    /// Retries parked requests and releases the chunks whose window ran out (every
    /// [`crate::join::TICK`]).
    pub(crate) async fn tick(&self, out: &OtlpForward) {
        let Some(join) = &self.join else {
            return;
        };
        let parked = join.unpark();
        if !parked.is_empty() {
            self.export_or_park(out, join, parked).await;
        }
        let due = join.due().await;
        if !due.is_empty() {
            self.release(out, join, due).await;
        }
    }

    /// Shutdown, before the exporters stop. Parked requests get one more try and what is due
    /// is released. Held chunks: with a join log they stay there (the next start holds them
    /// for the rest of their window, with their spans), as do the chunks of requests the
    /// exporters still refuse; without one every held chunk is released now, and what the
    /// exporters refuse is dropped (logged).
    pub(crate) async fn flush(&self, out: &OtlpForward) {
        let Some(join) = &self.join else {
            return;
        };
        let parked = join.unpark();
        self.export_or_park(out, join, parked).await;
        if join.is_durable() {
            let due = join.due().await;
            self.release(out, join, due).await;
            let left = join.unpark().len();
            let held = join.metrics().held_chunks.load(Ordering::Relaxed);
            if held > 0 || left > 0 {
                tracing::info!(pipeline = %self.name, held_chunks = held, refused_requests = left, "join log keeps held chunks for the next start");
            }
            return;
        }
        let all = join.all();
        self.release(out, join, all).await;
        let left = join.unpark();
        if !left.is_empty() {
            tracing::warn!(pipeline = %self.name, requests = left.len(), "OTLP exporters refused linked profiles at shutdown; dropped");
        }
    }
}
