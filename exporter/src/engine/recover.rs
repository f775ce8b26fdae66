//! Recovery at start: what the queue holds goes back into the engine.

use super::persist::record_consumed;
use super::sink::Sink;
use super::state::{Core, Input};
use crate::metrics::ExporterMetrics;
use crate::queue::consumed::{self, Consumed, ConsumedIndex};
use crate::queue::{Recovery, input};
use std::collections::BTreeMap;

impl<S: Sink> Core<S> {
    /// Replays what the queue holds: merged chunks go back to sending; unacknowledged inputs
    /// go back into the accumulator in queue order, less the samples that persisted chunks
    /// already hold (see [`crate::queue::consumed`]). The accumulator's windows are aligned to
    /// the samples' timestamps, so every replayed sample lands in the window it was in: the
    /// open windows are rebuilt as the first run held them, and chunks are cut where an
    /// uninterrupted run cuts them.
    pub(super) fn recover(&mut self, recovery: Recovery) {
        let mut ledger = ConsumedIndex::default();
        let mut inputs = Vec::with_capacity(recovery.inputs.len());
        let mut records = Vec::new();
        for record in recovery.inputs {
            match consumed::decode(&record.body) {
                None => inputs.push(record),
                Some(Ok(entries)) => {
                    ledger.extend(&entries);
                    records.push((record.id, entries));
                }
                Some(Err(e)) => {
                    tracing::warn!(id = record.id, error = %e, "queue: unreadable consumption record skipped");
                    ExporterMetrics::add(&self.metrics.corrupt_records, 1);
                    self.input_acks.push(record.id);
                }
            }
        }
        let live: std::collections::HashSet<u64> = inputs.iter().map(|r| r.id).collect();
        for (id, entries) in records {
            match entries
                .first()
                .map(|c| c.input)
                .filter(|i| live.contains(i))
            {
                Some(input) => self.consumption_records.entry(input).or_default().push(id),
                None => self.input_acks.push(id),
            }
        }
        // What merged chunks say they hold must outlive their own records, which are
        // acknowledged once delivered: record it for the inputs still to be replayed.
        let mut from_ready: BTreeMap<u64, Vec<Consumed>> = BTreeMap::new();
        for c in recovery.ready.iter().flat_map(|m| &m.consumed) {
            if live.contains(&c.input) {
                from_ready.entry(c.input).or_default().push(*c);
            }
        }
        ledger.extend(from_ready.values().flatten());
        for (input, id) in record_consumed(&self.queue, &from_ready) {
            self.consumption_records.entry(input).or_default().push(id);
        }
        for meta in recovery.ready {
            ExporterMetrics::add(&self.metrics.replayed_samples, meta.samples);
            self.add_ready(meta, None);
        }
        let count = inputs.len();
        let now = self.clock.now();
        for record in inputs {
            match input::decode(&record.body) {
                Ok(chunks) => {
                    let mut skipped = 0;
                    let mut samples = 0;
                    let batch = chunks
                        .into_iter()
                        .enumerate()
                        .map(|(part, mut d)| {
                            let before = d.chunk.profile.samples.len();
                            let removed = self.acc.filter_replayed(&mut d.chunk, |ts| {
                                ledger.covers(record.id, part as u32, ts)
                            });
                            skipped += removed;
                            samples += d.chunk.profile.samples.len();
                            // The estimate of what is left, so each sample weighs what it
                            // weighed in the first run and size and memory cuts fall where
                            // they fell.
                            let bytes = if removed > 0 && before > 0 {
                                let left = (before - removed) as u128;
                                (u128::from(d.approx_bytes) * left / before as u128) as u64
                            } else {
                                d.approx_bytes
                            };
                            Input {
                                id: record.id,
                                part: part as u32,
                                route: d.route,
                                chunk: d.chunk,
                                linked: d.linked_threads,
                                frame_hashes: d.frame_hashes,
                                bytes,
                                accepted_at: now,
                            }
                        })
                        .collect();
                    ExporterMetrics::add(&self.metrics.replay_skipped_samples, skipped as u64);
                    ExporterMetrics::add(&self.metrics.replayed_samples, samples as u64);
                    self.accept(batch);
                }
                Err(e) => {
                    tracing::warn!(id = record.id, error = %e, "queue: unreadable input record skipped");
                    ExporterMetrics::add(&self.metrics.corrupt_records, 1);
                    self.input_acks.push(record.id);
                }
            }
        }
        if count > 0 || !self.ready.is_empty() {
            tracing::info!(
                inputs = count,
                ready = self.ready.len(),
                "queue: replaying unacknowledged chunks"
            );
        }
    }
}
