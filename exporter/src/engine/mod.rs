//! The delivery engine shared by the Sentry and file exporters:
//! `export` → durable queue (input log) → [`ChunkAccumulator`] → durable queue (ready log) →
//! up to `num_consumers` concurrent deliveries through a [`Sink`], with retries, rate limits and
//! acknowledgements.
//!
//! `export` encodes its batch ([`crate::queue::input`]) on the caller's task, appends it to the
//! input log (one writer thread, concurrent calls sharing one write and fsync:
//! [`crate::queue::input_writer`]) and hands the chunks to the engine task. The engine
//! task owns the accumulator and the scheduling state and never waits on the disk itself:
//! serializing merged chunks and appending them to the ready log ("persist"), and recording
//! acknowledgements, run as background jobs on the blocking pool (one of each at a time, so
//! their order is kept), while the engine goes on merging new input and dispatching
//! deliveries. An input is acknowledged only after the persist job holding its last merged
//! chunk has finished; merged chunks waiting to be persisted are bounded
//! ([`persist::MAX_UNPERSISTED_BYTES`]): beyond that the engine stops taking input and `export` waits.
//!
//! Files: this one holds the handle ([`Engine`]: open, start, export, shutdown); `sink` what the
//! engine delivers to; `state` the settings, the inputs and the engine task's state;
//! `event_loop` its one loop (running and draining); `recover` the replay at start; `persist` the queue jobs (ready log, consumption
//! records, acknowledgements); `dispatch` deliveries, retries and drops; `summary` the
//! account of a run.
//!
//! Dropping an [`Engine`] without [`Engine::shutdown`] aborts the task like a crash would:
//! whatever was not acknowledged stays in the queue for the next start.

mod dispatch;
mod event_loop;
mod held_json;
mod persist;
mod recover;
mod sink;
mod state;
mod summary;
#[cfg(test)]
mod tests;

pub use sink::{Delivery, Sink};
pub use state::EngineConfig;

use crate::clock::SharedClock;
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::input_writer::InputWriter;
use crate::queue::{Queue, QueueError, Recovery, input};
use crate::queue_config::QueueConfig;
use profilink_consumer::{ExportChunk, ExportError};
use profilink_proto::sentry::{CompactString, ProfileChunk};
use state::{Control, Core, Input};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Export batches buffered between `export` and the engine.
const INPUT_BATCHES: usize = 4;

/// A running engine.
pub struct Engine<S: Sink> {
    clock: SharedClock,
    sink: Arc<S>,
    metrics: Arc<ExporterMetrics>,
    input_tx: mpsc::Sender<Vec<Input>>,
    control_tx: mpsc::UnboundedSender<Control>,
    task: Option<JoinHandle<()>>,
    /// Group-commit writer of the input log.
    writer: InputWriter,
}

impl<S: Sink> Drop for Engine<S> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl<S: Sink> Engine<S> {
    /// Opens the durable queue in `dir` with the `sending_queue` settings on the blocking pool
    /// (replaying what an earlier run left there), then [starts](Engine::start) the engine on
    /// it.
    pub async fn open(
        sending_queue: &QueueConfig,
        dir: PathBuf,
        sink: Arc<S>,
        cfg: EngineConfig,
        clock: SharedClock,
        metrics: Arc<ExporterMetrics>,
    ) -> Result<Self, ExportError> {
        let queue_cfg = sending_queue.clone();
        let queue_metrics = metrics.clone();
        let (queue, recovery) =
            tokio::task::spawn_blocking(move || Queue::open(&queue_cfg, &dir, queue_metrics))
                .await??;
        Ok(Self::start(
            Arc::new(queue),
            recovery,
            sink,
            cfg,
            clock,
            metrics,
        )?)
    }

    /// Starts the engine on `queue`, replaying what `recovery` found (fails only when the
    /// input log's writer thread cannot be started).
    pub fn start(
        queue: Arc<Queue>,
        recovery: Recovery,
        sink: Arc<S>,
        cfg: EngineConfig,
        clock: SharedClock,
        metrics: Arc<ExporterMetrics>,
    ) -> std::io::Result<Self> {
        let writer = InputWriter::start(queue.clone())?;
        // Bounded: when the engine lags, `export` waits (after its durable write) instead of
        // piling decoded chunks up in memory.
        let (input_tx, input_rx) = mpsc::channel(INPUT_BATCHES);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let mut engine = Core::new(
            queue.clone(),
            sink.clone(),
            cfg,
            clock.clone(),
            metrics.clone(),
        );
        engine.recover(recovery);
        let task = tokio::spawn(engine.run(input_rx, control_rx));
        Ok(Engine {
            clock,
            sink,
            metrics,
            input_tx,
            control_tx,
            task: Some(task),
            writer,
        })
    }

    /// Durably queues exported `chunks`, each under the routing key `route` gives it, with its
    /// linked threads ([`Engine::export_linked`]); `Ok` only once they are on disk.
    pub async fn export_chunks(
        &self,
        chunks: Vec<ExportChunk>,
        route: impl Fn(&ExportChunk) -> String,
    ) -> Result<(), ExportError> {
        let mut linked = Vec::with_capacity(chunks.len());
        let items = chunks
            .into_iter()
            .map(|c| {
                let key = route(&c);
                linked.push(c.linked_threads);
                (key, c.chunk)
            })
            .collect();
        self.export_linked(items, linked).await
    }

    /// Durably queues `chunks` (routing key, chunk), with `linked[i]` the thread ids of chunk
    /// `i` that spans may reference (persisted with it; see
    /// [`profilink_consumer::ExportChunk::linked_threads`]); `Ok` only once they are on disk.
    pub async fn export_linked(
        &self,
        chunks: Vec<(String, ProfileChunk)>,
        linked: Vec<Vec<CompactString>>,
    ) -> Result<(), ExportError> {
        if chunks.is_empty() {
            return Ok(());
        }
        if self.input_tx.is_closed() {
            return Err(ExportError::Closed);
        }
        let (records, infos) = input::encode_batch_linked(&chunks, &linked);
        let (bodies, ranges): (Vec<Vec<u8>>, Vec<std::ops::Range<usize>>) =
            records.into_iter().map(|r| (r.body, r.chunks)).unzip();
        let result = self.writer.append(bodies).await;
        let (ids, dropped) = match result {
            Ok(v) => v,
            Err(QueueError::Full {
                needed, capacity, ..
            }) if needed > capacity => {
                // It could never fit: "retry later" would have the client retry forever.
                tracing::warn!(
                    needed,
                    capacity,
                    "a batch larger than the whole queue was refused for good"
                );
                return Err(ExportError::TooLarge { needed, capacity });
            }
            Err(QueueError::Full { .. }) => {
                ExporterMetrics::add(&self.metrics.refused_full, 1);
                let samples: usize = chunks.iter().map(|(_, c)| c.profile.samples.len()).sum();
                ExporterMetrics::add(&self.metrics.refused_full_samples, samples as u64);
                return Err(ExportError::Full {
                    retry_after: profilink_consumer::DEFAULT_RETRY_AFTER,
                });
            }
            Err(e @ QueueError::Io(_)) => return Err(e.into()),
        };
        for meta in &dropped {
            tracing::warn!(chunk_id = %meta.chunk_id, "queue full: dropped the oldest queued chunk");
            self.metrics.add_dropped(DiscardReason::QueueOverflow, 1);
            self.metrics
                .add_dropped_samples(DiscardReason::QueueOverflow, meta.samples);
            self.sink.discarded(meta, DiscardReason::QueueOverflow, 1);
        }
        ExporterMetrics::add(&self.metrics.accepted_chunks, chunks.len() as u64);
        let accepted_at = self.clock.now();
        let mut record_of = vec![(0u64, 0u32); chunks.len()];
        for (id, range) in ids.iter().zip(ranges) {
            for (part, slot) in record_of.get_mut(range).into_iter().flatten().enumerate() {
                *slot = (*id, part as u32);
            }
        }
        let samples: usize = chunks.iter().map(|(_, c)| c.profile.samples.len()).sum();
        ExporterMetrics::add(&self.metrics.accepted_samples, samples as u64);
        let mut linked = linked.into_iter();
        let batch: Vec<Input> = chunks
            .into_iter()
            .zip(infos)
            .zip(record_of)
            .map(|(((route, chunk), info), (id, part))| Input {
                id,
                part,
                route,
                chunk,
                linked: linked.next().unwrap_or_default(),
                frame_hashes: info.frame_hashes,
                bytes: info.approx_bytes,
                accepted_at,
            })
            .collect();
        // Already durable: if the engine is gone the chunks are delivered on the next start.
        let _ = self.input_tx.send(batch).await;
        Ok(())
    }

    /// Flushes the accumulator into the queue, keeps sending until everything is delivered or
    /// `deadline` passes, then stops; undelivered chunks stay in the queue.
    pub async fn shutdown(mut self, deadline: Duration) {
        let (done_tx, done_rx) = oneshot::channel();
        let end = tokio::time::Instant::now() + deadline;
        if self
            .control_tx
            .send(Control::Shutdown {
                deadline: end,
                done: done_tx,
            })
            .is_ok()
        {
            let _ = tokio::time::timeout(deadline + Duration::from_secs(2), done_rx).await;
        }
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }
}
