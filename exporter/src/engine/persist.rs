//! The engine's queue jobs, run on the blocking pool one of each kind at a time (so their order
//! is kept) while the engine goes on: "persist" serializes merged chunks and appends them to
//! the ready log, with consumption records for the inputs other chunks still hold
//! ([`crate::queue::consumed`]); "ack" records acknowledgements of inputs and delivered
//! chunks.

use super::sink::Sink;
use super::state::{Acked, Core, Persisted};
use crate::accumulate::Emitted;
use crate::metrics::ExporterMetrics;
use crate::queue::consumed::{self, Consumed};
use crate::queue::{Queue, ReadyMeta};
use profilink_proto::validate::validate_chunk_errors;
use std::collections::{BTreeMap, HashMap};

/// Merged chunks (by size estimate) serialized and appended per persist job.
const PERSIST_GROUP_BYTES: u64 = 8 << 20;

/// Merged chunks (by size estimate) that may wait to be persisted before the engine stops
/// taking input.
pub(super) const MAX_UNPERSISTED_BYTES: u64 = 3 * PERSIST_GROUP_BYTES;

/// Largest buffer reserved up front for a merged chunk's JSON.
const MAX_JSON_PREALLOC: u64 = 16 << 20;

impl<S: Sink> Core<S> {
    /// Starts a persist job for the oldest unpersisted chunks (about [`PERSIST_GROUP_BYTES`]),
    /// unless one is running.
    pub(super) fn start_persist(&mut self) {
        if self.persisting.is_some() || self.unpersisted.is_empty() {
            return;
        }
        let mut group = Vec::new();
        let mut est = 0u64;
        while let Some(e) = self.unpersisted.front() {
            if !group.is_empty() && est >= PERSIST_GROUP_BYTES {
                break;
            }
            est += e.est_bytes;
            if let Some(e) = self.unpersisted.pop_front() {
                group.push(e);
            }
        }
        let projects: Vec<Option<u64>> = if self.cfg.observer.0.is_some() {
            group
                .iter()
                .map(|e| self.sink.project_id(&e.key.route))
                .collect()
        } else {
            Vec::new()
        };
        // Inputs that stay held by other chunks after this group: what the group takes from
        // them is recorded in the input log too (see `crate::queue::consumed`).
        let mut holds: HashMap<u64, u32> = HashMap::new();
        for e in &group {
            for id in &e.inputs {
                *holds.entry(*id).or_insert(0) += 1;
            }
        }
        let mut taken: BTreeMap<u64, Vec<Consumed>> = BTreeMap::new();
        for e in &group {
            for c in &e.consumed {
                if self.acc.pending_count(c.input) > holds.get(&c.input).copied().unwrap_or(0) {
                    taken.entry(c.input).or_default().push(*c);
                }
            }
        }
        let observer = self.cfg.observer.clone();
        let queue = self.queue.clone();
        self.persisting_bytes = est;
        self.persisting = Some(tokio::task::spawn_blocking(move || {
            persist_group(&queue, group, taken, &observer, &projects, est)
        }));
    }

    pub(super) fn on_persisted(&mut self, res: Result<Persisted, tokio::task::JoinError>) {
        let done = match res {
            Ok(done) => done,
            Err(e) => {
                // The group is lost with the task; its inputs stay unacknowledged in the queue
                // and are merged again on the next start.
                tracing::error!(error = %e, "queue: persist task failed");
                self.unpersisted_bytes =
                    self.unpersisted_bytes.saturating_sub(self.persisting_bytes);
                return;
            }
        };
        ExporterMetrics::add(&self.metrics.invalid_chunks, done.invalid.0);
        ExporterMetrics::add(&self.metrics.invalid_samples, done.invalid.1);
        match done.result {
            Ok(metas) => {
                for (input, id) in done.consumption_records {
                    self.consumption_records.entry(input).or_default().push(id);
                }
                self.unpersisted_bytes = self.unpersisted_bytes.saturating_sub(done.est_bytes);
                ExporterMetrics::add(&self.metrics.merged_chunks, metas.len() as u64);
                for (m, json) in metas {
                    tracing::debug!(chunk_id = %m.chunk_id, route = %m.route, "merged chunk queued");
                    self.add_ready(m, Some(json));
                }
                for ids in done.inputs {
                    let released = self.acc.release(&ids);
                    self.input_acks.extend(released);
                }
            }
            Err((error, group)) => {
                tracing::error!(%error, "queue: could not persist merged chunks; will retry");
                for e in group.into_iter().rev() {
                    self.unpersisted.push_front(e);
                }
            }
        }
    }

    /// Starts recording the pending acknowledgements, unless a job is running.
    pub(super) fn start_acks(&mut self) {
        if self.acking.is_some() || (self.input_acks.is_empty() && self.ready_acks.is_empty()) {
            return;
        }
        let mut inputs = std::mem::take(&mut self.input_acks);
        let records: Vec<u64> = inputs
            .iter()
            .filter_map(|id| self.consumption_records.remove(id))
            .flatten()
            .collect();
        inputs.extend(records);
        let ready = std::mem::take(&mut self.ready_acks);
        let queue = self.queue.clone();
        self.acking = Some(tokio::task::spawn_blocking(move || {
            let res = queue
                .ack_inputs(&inputs)
                .and_then(|()| queue.ack_ready(&ready));
            Acked {
                error: res.err().map(|e| e.to_string()),
                inputs,
                ready,
            }
        }));
    }

    pub(super) fn on_acked(&mut self, res: Result<Acked, tokio::task::JoinError>) {
        match res {
            Ok(Acked { error: None, .. }) => {}
            Ok(Acked {
                error: Some(error),
                inputs,
                ready,
            }) => {
                tracing::error!(%error, "queue: could not record acknowledgements; will retry");
                self.input_acks.extend(inputs);
                self.ready_acks.extend(ready);
            }
            Err(e) => {
                // Unrecorded acknowledgements only mean duplicates after a restart.
                tracing::error!(error = %e, "queue: ack task failed");
            }
        }
    }
}

/// Appends one consumption record per input of `taken` (see [`crate::queue::consumed`]);
/// returns (input, record id) pairs. On failure nothing is recorded: the ready records still
/// say what they hold until they are delivered.
pub(super) fn record_consumed(
    queue: &Queue,
    taken: &BTreeMap<u64, Vec<Consumed>>,
) -> Vec<(u64, u64)> {
    let bodies: Vec<Vec<u8>> = taken.values().map(|e| consumed::encode(e)).collect();
    match queue.append_consumed(&bodies) {
        Ok(ids) => taken.keys().copied().zip(ids).collect(),
        Err(e) => {
            tracing::error!(error = %e, "queue: could not record consumed samples");
            Vec::new()
        }
    }
}

/// The persist job: serializes a group of merged chunks, appends them to the ready log (one
/// write, one sync), then shows them to the observer.
fn persist_group(
    queue: &Queue,
    group: Vec<Emitted>,
    taken: BTreeMap<u64, Vec<Consumed>>,
    observer: &crate::ObserverSlot,
    projects: &[Option<u64>],
    est_bytes: u64,
) -> Persisted {
    let inputs: Vec<Vec<u64>> = group.iter().map(|e| e.inputs.clone()).collect();
    // Each chunk is serialized into one scratch buffer, sized from the estimate (an upper
    // bound, mostly, so it does not grow by doubling), and copied out at its exact length:
    // the copy may be held in memory until its first delivery, and the estimate is several
    // times the JSON (keeping the slack once held 136 MB of a 166 MB heap under load).
    let mut scratch = Vec::new();
    // Strict out: a merged chunk Relay would refuse is counted and logged, never sent. Its
    // inputs are released with the group's, as for a chunk left without samples.
    let verdicts: Vec<Verdict> = group.iter().map(verdict).collect();
    let invalid = group
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| **v == Verdict::Invalid)
        .fold((0, 0), |(c, s), (e, _)| {
            (c + 1, s + e.chunk.profile.samples.len() as u64)
        });
    let items: Vec<(ReadyMeta, Vec<u8>)> = group
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| **v == Verdict::Send)
        .map(|(e, _)| {
            let meta = ReadyMeta {
                id: 0,
                route: e.key.route.clone(),
                category: e.chunk.data_category().to_string(),
                chunk_id: e.chunk.chunk_id.clone(),
                platform: e.chunk.platform.clone(),
                bytes: 0,
                samples: e.chunk.profile.samples.len() as u64,
                consumed: e.consumed.clone(),
            };
            scratch.clear();
            scratch.reserve(e.est_bytes.min(MAX_JSON_PREALLOC) as usize);
            e.chunk.write_json(&mut scratch);
            let json = scratch.as_slice().to_vec();
            (meta, json)
        })
        .collect();
    match queue.append_ready_keep(items) {
        Ok(metas) => {
            let consumption_records = record_consumed(queue, &taken);
            if observer.0.is_some() {
                for (i, e) in group.iter().enumerate() {
                    if verdicts[i] == Verdict::Send {
                        observer.queued(projects.get(i).copied().flatten(), &e.chunk);
                    }
                }
            }
            Persisted {
                result: Ok(metas),
                inputs,
                est_bytes,
                consumption_records,
                invalid,
            }
        }
        Err(e) => Persisted {
            result: Err((e.to_string(), group)),
            inputs,
            est_bytes,
            consumption_records: Vec::new(),
            invalid: (0, 0),
        },
    }
}

/// What the persist job does with a merged chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Written to the ready log for delivery.
    Send,
    /// Left without samples: nothing to send.
    Empty,
    /// Failed the chunk validator (logged): counted, never sent.
    Invalid,
}

/// The [`Verdict`] on merged chunk `e`, logging the first error when it is invalid.
fn verdict(e: &Emitted) -> Verdict {
    if e.chunk.profile.samples.is_empty() {
        return Verdict::Empty;
    }
    // Error rules only: any finding keeps the chunk from being sent.
    let Some(f) = validate_chunk_errors(&e.chunk).into_iter().next() else {
        return Verdict::Send;
    };
    tracing::warn!(
        chunk_id = %e.chunk.chunk_id,
        profiler_id = %e.key.profiler_id,
        samples = e.chunk.profile.samples.len(),
        rule = f.rule,
        path = %f.path,
        message = %f.message,
        "a merged chunk failed the chunk validator and was dropped, not sent"
    );
    Verdict::Invalid
}
