//! The engine shared by the Sentry and file exporters:
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
//! ([`MAX_UNPERSISTED_BYTES`]): beyond that the engine stops taking input and `export` waits.
//!
//! Dropping a [`Pipeline`] without [`Pipeline::shutdown`] aborts the task like a crash would:
//! whatever was not acknowledged stays in the queue for the next start.

use crate::ExportError;
use crate::accumulate::{ChunkAccumulator, Emitted};
use crate::clock::SharedClock;
use crate::config::{AccumulateConfig, RetryConfig};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::consumed::{self, Consumed, ConsumedIndex};
use crate::queue::input_writer::InputWriter;
use crate::queue::{Queue, QueueError, ReadyMeta, Recovery, input};
use crate::retry::Backoff;
use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

/// The result of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Accepted by the destination.
    Delivered,
    /// Refused because of a rate limit that the sink has recorded: wait, do not count a retry.
    RateLimited,
    /// Failed in a way worth retrying (5xx, timeout, connection error).
    Retry {
        /// A delay the server asked for.
        after: Option<Duration>,
        /// The reason to report if retries run out.
        reason: DiscardReason,
        /// What went wrong.
        message: String,
    },
    /// Refused for good (already logged and dead-lettered by the sink).
    Permanent {
        /// What went wrong.
        message: String,
    },
}

/// A destination for merged chunks.
pub trait Sink: Send + Sync + 'static {
    /// The instant until which chunks of `category` for `route` must not be sent, if limited.
    fn blocked_until(&self, route: &str, category: &str, now: Instant) -> Option<Instant>;
    /// Delivers one merged chunk (`json` is its payload).
    fn deliver(&self, meta: ReadyMeta, json: Vec<u8>) -> impl Future<Output = Delivery> + Send;
    /// True when chunks of `category` for `route` are limited for so long that they are
    /// dropped (`ratelimit_backoff`) instead of waiting.
    fn dropping(&self, _route: &str, _category: &str, _now: Instant) -> bool {
        false
    }
    /// Records that `n` chunks like `meta` were given up for `reason`.
    fn discarded(&self, meta: &ReadyMeta, reason: DiscardReason, n: u64);
    /// The Sentry project chunks of `route` go to, if the sink knows one.
    fn project_id(&self, _route: &str) -> Option<u64> {
        None
    }
}

/// Engine settings.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Accumulation.
    pub accumulate: AccumulateConfig,
    /// Backoff.
    pub retry: RetryConfig,
    /// Concurrent deliveries.
    pub num_consumers: usize,
    /// Longest sleep between deadline checks.
    pub tick: Duration,
    /// Sees each merged chunk once it is durably queued.
    pub observer: crate::ObserverSlot,
    /// Cut open chunks at shutdown even with a durable queue (without one they always are).
    pub flush_on_shutdown: bool,
}

/// Merged chunks (by size estimate) serialized and appended per persist job.
const PERSIST_GROUP_BYTES: u64 = 8 << 20;

/// Merged chunks (by size estimate) that may wait to be persisted before the engine stops
/// taking input.
pub const MAX_UNPERSISTED_BYTES: u64 = 3 * PERSIST_GROUP_BYTES;

/// Largest buffer reserved up front for a merged chunk's JSON.
const MAX_JSON_PREALLOC: u64 = 16 << 20;

/// Export batches buffered between `export` and the engine.
const INPUT_BATCHES: usize = 4;

struct Input {
    id: u64,
    /// The chunk's index within its record.
    part: u32,
    route: String,
    chunk: ProfileChunk,
    /// `frame_hash` of each of the chunk's frames.
    frame_hashes: Vec<u64>,
    /// Thread ids spans may reference (never grouped).
    linked: Vec<CompactString>,
    bytes: u64,
    accepted_at: Instant,
}

enum Control {
    Shutdown {
        deadline: tokio::time::Instant,
        done: oneshot::Sender<()>,
    },
}

/// A running engine.
pub struct Pipeline<S: Sink> {
    queue: Arc<Queue>,
    clock: SharedClock,
    sink: Arc<S>,
    metrics: Arc<ExporterMetrics>,
    input_tx: mpsc::Sender<Vec<Input>>,
    control_tx: mpsc::UnboundedSender<Control>,
    task: Option<JoinHandle<()>>,
    /// Group-commit writer of the input log.
    writer: InputWriter,
}

impl<S: Sink> Drop for Pipeline<S> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl<S: Sink> Pipeline<S> {
    /// Starts the engine on `queue`, replaying what `recovery` found (fails only when the
    /// input log's writer thread cannot be started).
    pub fn start(
        queue: Arc<Queue>,
        recovery: Recovery,
        sink: Arc<S>,
        cfg: PipelineConfig,
        clock: SharedClock,
        metrics: Arc<ExporterMetrics>,
    ) -> std::io::Result<Self> {
        let writer = InputWriter::start(queue.clone())?;
        // Bounded: when the engine lags, `export` waits (after its durable write) instead of
        // piling decoded chunks up in memory.
        let (input_tx, input_rx) = mpsc::channel(INPUT_BATCHES);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let mut engine = Engine {
            queue: queue.clone(),
            sink: sink.clone(),
            clock: clock.clone(),
            metrics: metrics.clone(),
            acc: ChunkAccumulator::new(cfg.accumulate.clone()),
            cfg,
            ready: BTreeMap::new(),
            inflight: JoinSet::new(),
            task_ids: HashMap::new(),
            unpersisted: VecDeque::new(),
            unpersisted_bytes: 0,
            persisting: None,
            persisting_bytes: 0,
            acking: None,
            input_acks: Vec::new(),
            ready_acks: Vec::new(),
            consumption_records: HashMap::new(),
            keep_open_windows: false,
            last_drop_sweep: None,
        };
        engine.recover(recovery);
        let task = tokio::spawn(engine.run(input_rx, control_rx));
        Ok(Pipeline {
            queue,
            clock,
            sink,
            metrics,
            input_tx,
            control_tx,
            task: Some(task),
            writer,
        })
    }

    /// Durably queues `chunks` (routing key, chunk); `Ok` only once they are on disk.
    pub async fn export(&self, chunks: Vec<(String, ProfileChunk)>) -> Result<(), ExportError> {
        self.export_linked(chunks, Vec::new()).await
    }

    /// [`Pipeline::export`] with `linked[i]` the thread ids of chunk `i` that spans may
    /// reference (persisted with it; see [`crate::ExportChunk::linked_threads`]).
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
            Err(QueueError::Full { .. }) => {
                ExporterMetrics::add(&self.metrics.refused_full, 1);
                return Err(ExportError::Full {
                    retry_after: Duration::from_secs(1),
                });
            }
            Err(QueueError::Io(e)) => return Err(ExportError::Io(e.to_string())),
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

    /// The queue.
    pub fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }
}

struct ReadyItem {
    meta: ReadyMeta,
    next_attempt: Option<Instant>,
    backoff: Backoff,
    in_flight: bool,
}

enum Outcome {
    Sent(Delivery),
    Gone,
    Unreadable(String),
}

/// What a persist job reports.
struct Persisted {
    /// The ready records written, or why not (with the chunks, to try again).
    result: Result<Vec<ReadyMeta>, (String, Vec<Emitted>)>,
    /// The inputs of each chunk of the group.
    inputs: Vec<Vec<u64>>,
    /// Size estimate of the group.
    est_bytes: u64,
    /// Consumption records written: (input, record id).
    consumption_records: Vec<(u64, u64)>,
}

/// What an acknowledgement job reports: on failure, the ids to record again.
struct Acked {
    error: Option<String>,
    inputs: Vec<u64>,
    ready: Vec<u64>,
}

struct Engine<S: Sink> {
    queue: Arc<Queue>,
    sink: Arc<S>,
    clock: SharedClock,
    metrics: Arc<ExporterMetrics>,
    acc: ChunkAccumulator,
    cfg: PipelineConfig,
    ready: BTreeMap<u64, ReadyItem>,
    inflight: JoinSet<(u64, Outcome)>,
    task_ids: HashMap<tokio::task::Id, u64>,
    /// Merged chunks not yet handed to a persist job, oldest first.
    unpersisted: VecDeque<Emitted>,
    /// Size estimate of `unpersisted` plus the running persist job's group.
    unpersisted_bytes: u64,
    persisting: Option<JoinHandle<Persisted>>,
    /// Size estimate of the running persist job's group.
    persisting_bytes: u64,
    acking: Option<JoinHandle<Acked>>,
    input_acks: Vec<u64>,
    ready_acks: Vec<u64>,
    /// Consumption records (see [`crate::queue::consumed`]) by the input they describe; they
    /// are acknowledged with it.
    consumption_records: HashMap<u64, Vec<u64>>,
    /// Set while draining with open windows kept for the next start: no idle cuts.
    keep_open_windows: bool,
    /// When ready chunks were last checked for long rate limits (real time).
    last_drop_sweep: Option<Instant>,
}

/// Waits for an optional job; never ready when there is none.
async fn join_opt<T>(job: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match job.as_mut() {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

impl<S: Sink> Engine<S> {
    /// Replays what the queue holds: merged chunks go back to sending; unacknowledged inputs
    /// go back into the accumulator, less the samples that persisted chunks already hold (see
    /// [`crate::queue::consumed`]), so chunks are cut where an uninterrupted run cuts them.
    fn recover(&mut self, recovery: Recovery) {
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
            self.add_ready(meta);
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
                            skipped += ledger.filter(record.id, part as u32, &mut d.chunk);
                            samples += d.chunk.profile.samples.len();
                            Input {
                                id: record.id,
                                part: part as u32,
                                route: d.route,
                                chunk: d.chunk,
                                linked: d.linked_threads,
                                frame_hashes: d.frame_hashes,
                                bytes: d.approx_bytes,
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

    fn add_ready(&mut self, meta: ReadyMeta) {
        self.ready.insert(
            meta.id,
            ReadyItem {
                meta,
                next_attempt: None,
                backoff: Backoff::new(&self.cfg.retry),
                in_flight: false,
            },
        );
    }

    /// Pushes a batch (the chunks of one record are consecutive); a record that ends up in no
    /// open or unpersisted chunk is acknowledged at once.
    fn accept(&mut self, batch: Vec<Input>) {
        let mut emitted = Vec::new();
        let mut current: Option<u64> = None;
        for input in batch {
            if let Some(prev) = current
                && prev != input.id
                && self.acc.finish_input(prev)
            {
                self.input_acks.push(prev);
            }
            current = Some(input.id);
            self.acc.push_part(
                input.id,
                input.part,
                &input.route,
                &input.chunk,
                &input.linked,
                Some(&input.frame_hashes),
                input.bytes,
                input.accepted_at,
                &mut emitted,
            );
        }
        if let Some(last) = current
            && self.acc.finish_input(last)
        {
            self.input_acks.push(last);
        }
        self.add_emitted(emitted);
    }

    fn add_emitted(&mut self, emitted: Vec<Emitted>) {
        for e in emitted {
            ExporterMetrics::add(
                &self.metrics.sparse_samples_dropped,
                e.sparse_samples_dropped as u64,
            );
            ExporterMetrics::add(
                &self.metrics.sparse_samples_grouped,
                e.sparse_samples_grouped as u64,
            );
            ExporterMetrics::add(
                &self.metrics.sparse_threads_grouped,
                e.sparse_threads_grouped as u64,
            );
            self.unpersisted_bytes += e.est_bytes;
            self.unpersisted.push_back(e);
        }
    }

    fn accepting(&self) -> bool {
        self.unpersisted_bytes < MAX_UNPERSISTED_BYTES
    }

    async fn run(
        mut self,
        mut input_rx: mpsc::Receiver<Vec<Input>>,
        mut control_rx: mpsc::UnboundedReceiver<Control>,
    ) {
        loop {
            self.step();
            let tick = self.cfg.tick;
            let accepting = self.accepting();
            tokio::select! {
                c = control_rx.recv() => {
                    match c {
                        Some(Control::Shutdown { deadline, done }) => {
                            self.shutdown(deadline, &mut input_rx).await;
                            let _ = done.send(());
                        }
                        None => self.inflight.shutdown().await,
                    }
                    return;
                }
                Some(batch) = input_rx.recv(), if accepting => {
                    self.accept(batch);
                    while self.accepting() {
                        match input_rx.try_recv() {
                            Ok(batch) => self.accept(batch),
                            Err(_) => break,
                        }
                    }
                }
                res = join_opt(&mut self.persisting) => {
                    self.persisting = None;
                    self.on_persisted(res);
                }
                res = join_opt(&mut self.acking) => {
                    self.acking = None;
                    self.on_acked(res);
                }
                Some(res) = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.on_joined(res);
                }
                _ = tokio::time::sleep(tick) => {}
            }
        }
    }

    fn step(&mut self) {
        let now = self.clock.now();
        if !self.keep_open_windows {
            let idle = self.acc.poll(now);
            self.add_emitted(idle);
        }
        self.start_persist();
        self.start_acks();
        self.drop_rate_limited(self.clock.now());
        self.dispatch(self.clock.now());
    }

    /// Gives up (`ratelimit_backoff`) the waiting chunks whose category is limited for long
    /// ([`Sink::dropping`]); at most once per tick, as it looks at every ready chunk.
    fn drop_rate_limited(&mut self, now: Instant) {
        let real = Instant::now();
        if self
            .last_drop_sweep
            .is_some_and(|t| real.saturating_duration_since(t) < self.cfg.tick)
        {
            return;
        }
        self.last_drop_sweep = Some(real);
        let ids: Vec<u64> = self
            .ready
            .iter()
            .filter(|(_, i)| {
                !i.in_flight && self.sink.dropping(&i.meta.route, &i.meta.category, now)
            })
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return;
        }
        for id in &ids {
            self.give_up(*id, DiscardReason::RatelimitBackoff);
        }
        tracing::warn!(
            chunks = ids.len(),
            "chunks dropped: their category is rate limited for longer than rate_limit_max_wait or over quota (ratelimit_backoff)"
        );
    }

    /// Starts a persist job for the oldest unpersisted chunks (about [`PERSIST_GROUP_BYTES`]),
    /// unless one is running.
    fn start_persist(&mut self) {
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

    fn on_persisted(&mut self, res: Result<Persisted, tokio::task::JoinError>) {
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
        match done.result {
            Ok(metas) => {
                for (input, id) in done.consumption_records {
                    self.consumption_records.entry(input).or_default().push(id);
                }
                self.unpersisted_bytes = self.unpersisted_bytes.saturating_sub(done.est_bytes);
                ExporterMetrics::add(&self.metrics.merged_chunks, metas.len() as u64);
                for m in metas {
                    tracing::debug!(chunk_id = %m.chunk_id, route = %m.route, "merged chunk queued");
                    self.add_ready(m);
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
    fn start_acks(&mut self) {
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

    fn on_acked(&mut self, res: Result<Acked, tokio::task::JoinError>) {
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

    fn dispatchable(&self, item: &ReadyItem, now: Instant) -> bool {
        !item.in_flight
            && item.next_attempt.is_none_or(|t| t <= now)
            && self
                .sink
                .blocked_until(&item.meta.route, &item.meta.category, now)
                .is_none()
    }

    fn dispatch(&mut self, now: Instant) {
        let limit = self.cfg.num_consumers.max(1);
        if self.inflight.len() >= limit {
            return;
        }
        let mut start = Vec::new();
        for (id, item) in &self.ready {
            if self.inflight.len() + start.len() >= limit {
                break;
            }
            if self.dispatchable(item, now) {
                start.push(*id);
            }
        }
        for id in start {
            if !self.queue.lease(id) {
                self.ready.remove(&id);
                continue;
            }
            let Some(item) = self.ready.get_mut(&id) else {
                continue;
            };
            item.in_flight = true;
            let meta = item.meta.clone();
            let queue = self.queue.clone();
            let sink = self.sink.clone();
            let handle = self.inflight.spawn(async move {
                let read = tokio::task::spawn_blocking(move || queue.read_ready(id)).await;
                let outcome = match read {
                    Ok(Ok(Some((_, json)))) => Outcome::Sent(sink.deliver(meta, json).await),
                    Ok(Ok(None)) => Outcome::Gone,
                    Ok(Err(e)) => Outcome::Unreadable(e.to_string()),
                    Err(e) => Outcome::Unreadable(e.to_string()),
                };
                (id, outcome)
            });
            self.task_ids.insert(handle.id(), id);
        }
    }

    fn on_joined(
        &mut self,
        res: Result<(tokio::task::Id, (u64, Outcome)), tokio::task::JoinError>,
    ) {
        let (id, outcome) = match res {
            Ok((task, (id, outcome))) => {
                self.task_ids.remove(&task);
                (id, outcome)
            }
            Err(e) => {
                let Some(id) = self.task_ids.remove(&e.id()) else {
                    return;
                };
                (
                    id,
                    Outcome::Unreadable(format!("delivery task failed: {e}")),
                )
            }
        };
        self.queue.unlease(id);
        let now = self.clock.now();
        match outcome {
            Outcome::Gone => {
                self.ready.remove(&id);
            }
            Outcome::Sent(Delivery::Delivered) => {
                ExporterMetrics::add(&self.metrics.sent_chunks, 1);
                if let Some(item) = self.ready.remove(&id) {
                    ExporterMetrics::add(&self.metrics.sent_samples, item.meta.samples);
                }
                self.ready_acks.push(id);
            }
            Outcome::Sent(Delivery::RateLimited) => {
                let mut drop = false;
                if let Some(item) = self.ready.get_mut(&id) {
                    item.in_flight = false;
                    drop = self
                        .sink
                        .dropping(&item.meta.route, &item.meta.category, now);
                    if drop {
                        tracing::warn!(chunk_id = %item.meta.chunk_id, category = %item.meta.category, "chunk dropped: rate limited for longer than rate_limit_max_wait or over quota (ratelimit_backoff)");
                    }
                }
                if drop {
                    self.give_up(id, DiscardReason::RatelimitBackoff);
                }
            }
            Outcome::Sent(Delivery::Permanent { message }) => {
                ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                tracing::debug!(id, %message, "chunk refused for good");
                self.give_up(id, DiscardReason::SendError);
            }
            Outcome::Sent(Delivery::Retry {
                after,
                reason,
                message,
            }) => {
                ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                self.retry_later(id, now, after, reason, &message);
            }
            Outcome::Unreadable(message) => {
                tracing::error!(id, %message, "queue: could not read a queued chunk");
                self.retry_later(id, now, None, DiscardReason::SendError, &message);
            }
        }
    }

    fn retry_later(
        &mut self,
        id: u64,
        now: Instant,
        after: Option<Duration>,
        reason: DiscardReason,
        message: &str,
    ) {
        let retry = self.cfg.retry.clone();
        let Some(item) = self.ready.get_mut(&id) else {
            return;
        };
        item.in_flight = false;
        match item.backoff.next(&retry, now, after) {
            Some(wait) => {
                ExporterMetrics::add(&self.metrics.retries, 1);
                tracing::debug!(chunk_id = %item.meta.chunk_id, ?wait, %message, "delivery failed; retrying");
                item.next_attempt = Some(now + wait);
            }
            None => {
                tracing::warn!(
                    chunk_id = %item.meta.chunk_id,
                    route = %item.meta.route,
                    %message,
                    "delivery failed and retries are exhausted; chunk dropped"
                );
                self.give_up(id, reason);
            }
        }
    }

    fn give_up(&mut self, id: u64, reason: DiscardReason) {
        if let Some(item) = self.ready.remove(&id) {
            self.metrics.add_dropped(reason, 1);
            self.metrics.add_dropped_samples(reason, item.meta.samples);
            self.sink.discarded(&item.meta, reason, 1);
        }
        self.ready_acks.push(id);
    }

    /// The earliest instant something not in flight may be sent.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        self.ready
            .values()
            .filter(|i| !i.in_flight)
            .map(|i| {
                let attempt = i.next_attempt.unwrap_or(now);
                let unblock = self
                    .sink
                    .blocked_until(&i.meta.route, &i.meta.category, now)
                    .unwrap_or(now);
                attempt.max(unblock)
            })
            .min()
    }

    /// True while queue work (persisting, acknowledging) is pending or running.
    fn queue_work_left(&self) -> bool {
        !self.unpersisted.is_empty()
            || self.persisting.is_some()
            || self.acking.is_some()
            || !self.input_acks.is_empty()
            || !self.ready_acks.is_empty()
    }

    async fn shutdown(
        &mut self,
        deadline: tokio::time::Instant,
        input_rx: &mut mpsc::Receiver<Vec<Input>>,
    ) {
        while let Ok(batch) = input_rx.try_recv() {
            self.accept(batch);
        }
        // On disk, open windows stay as they are (unless configured otherwise): their inputs
        // are unacknowledged and the next start replays them and goes on filling the same
        // windows, so a restart does not change where chunks are cut. In memory there is no
        // next start: cut them now.
        if self.cfg.flush_on_shutdown || !self.queue.is_durable() {
            let flushed = self.acc.flush_all();
            self.add_emitted(flushed);
        } else {
            // Nor does a long drain make them idle: no input arrives because the receivers
            // stopped, not because the producers did.
            self.keep_open_windows = true;
        }
        loop {
            self.step();
            let now = self.clock.now();
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            if self.inflight.is_empty() && !self.queue_work_left() {
                match self.next_due(now) {
                    None => break,
                    Some(t) if t.saturating_duration_since(now) >= left => break,
                    Some(_) => {}
                }
            }
            let nap = self.cfg.tick.min(left);
            tokio::select! {
                res = join_opt(&mut self.persisting) => {
                    self.persisting = None;
                    self.on_persisted(res);
                }
                res = join_opt(&mut self.acking) => {
                    self.acking = None;
                    self.on_acked(res);
                }
                Some(res) = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.on_joined(res);
                }
                _ = tokio::time::sleep(nap) => {}
            }
        }
        self.inflight.shutdown().await;
        for id in self.task_ids.drain().map(|(_, id)| id) {
            self.queue.unlease(id);
        }
        // Let running queue jobs finish (they are short disk writes), then record the last
        // acknowledgements.
        if self.persisting.is_some() {
            let res = join_opt(&mut self.persisting).await;
            self.persisting = None;
            self.on_persisted(res);
        }
        for _ in 0..2 {
            if self.acking.is_some() {
                let res = join_opt(&mut self.acking).await;
                self.acking = None;
                self.on_acked(res);
            }
            self.start_acks();
        }
        let left_behind = self.ready.len();
        if left_behind > 0 {
            tracing::info!(
                chunks = left_behind,
                "shutdown: undelivered chunks stay queued for the next start"
            );
        }
        let summary = self.summary();
        tracing::info!(
            accepted = summary.accepted,
            replayed = summary.replayed,
            replay_skipped = summary.replay_skipped,
            delivered = summary.delivered,
            queued = summary.queued,
            sparse_dropped = summary.sparse_dropped,
            dropped = %summary.dropped_text(),
            "exporter run summary (samples)"
        );
    }

    /// Where every sample of this run went (see [`RunSummary`]).
    fn summary(&self) -> RunSummary {
        let m = self.metrics.snapshot();
        let open = self.acc.pending_samples() as u64;
        let unpersisted: u64 = self
            .unpersisted
            .iter()
            .map(|e| e.chunk.profile.samples.len() as u64)
            .sum();
        let ready: u64 = self.ready.values().map(|i| i.meta.samples).sum();
        RunSummary {
            accepted: m.accepted_samples,
            replayed: m.replayed_samples,
            replay_skipped: m.replay_skipped_samples,
            delivered: m.sent_samples,
            queued: open + unpersisted + ready,
            sparse_dropped: m.sparse_samples_dropped,
            dropped: m.dropped_samples,
        }
    }
}

/// Where the samples of one run of an exporter went, logged when it stops. Every sample taken
/// in (`accepted` by `export`, plus `replayed` from the queue at start) is either
/// `delivered`, still `queued` (open windows, merged chunks not yet persisted or not yet
/// delivered: sent after the next start), dropped as sparse (`sparse_dropped`, threads Relay
/// would drop), or dropped for a reason (`dropped`); `replay_skipped` counts replayed samples
/// left out because a persisted chunk already held them (they are counted in `queued` or
/// `delivered` through that chunk).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Samples accepted by `export` in this run.
    pub accepted: u64,
    /// Samples replayed from the queue at start.
    pub replayed: u64,
    /// Replayed samples a persisted chunk already held.
    pub replay_skipped: u64,
    /// Samples in delivered chunks.
    pub delivered: u64,
    /// Samples still queued at exit.
    pub queued: u64,
    /// Samples of threads Relay would drop, dropped before sending.
    pub sparse_dropped: u64,
    /// Samples of dropped chunks, by reason.
    pub dropped: Vec<(DiscardReason, u64)>,
}

impl RunSummary {
    /// `reason=n` pairs of the non-zero drop reasons, or `none`.
    pub fn dropped_text(&self) -> String {
        let parts: Vec<String> = self
            .dropped
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{}={n}", r.as_str()))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(",")
        }
    }
}

/// Appends one consumption record per input of `taken` (see [`crate::queue::consumed`]);
/// returns (input, record id) pairs. On failure nothing is recorded: the ready records still
/// say what they hold until they are delivered.
fn record_consumed(queue: &Queue, taken: &BTreeMap<u64, Vec<Consumed>>) -> Vec<(u64, u64)> {
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
    let items: Vec<(ReadyMeta, Vec<u8>)> = group
        .iter()
        .filter(|e| !e.chunk.profile.samples.is_empty())
        .map(|e| {
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
            // Sized from the estimate (an upper bound, mostly), so the buffer does not grow
            // by doubling.
            let mut json = Vec::with_capacity(e.est_bytes.min(MAX_JSON_PREALLOC) as usize);
            // Plain data with string keys always serializes.
            let _ = serde_json::to_writer(&mut json, &e.chunk);
            (meta, json)
        })
        .collect();
    match queue.append_ready(items) {
        Ok(metas) => {
            let consumption_records = record_consumed(queue, &taken);
            if observer.0.is_some() {
                for (i, e) in group.iter().enumerate() {
                    if !e.chunk.profile.samples.is_empty() {
                        observer.queued(projects.get(i).copied().flatten(), &e.chunk);
                    }
                }
            }
            Persisted {
                result: Ok(metas),
                inputs,
                est_bytes,
                consumption_records,
            }
        }
        Err(e) => Persisted {
            result: Err((e.to_string(), group)),
            inputs,
            est_bytes,
            consumption_records: Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QueueConfig;
    use crate::queue::input::encode_legacy;
    use profilink_proto::sentry::{Frame, Sample};
    use std::sync::Mutex;

    /// Records what it is given.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<ProfileChunk>>);

    impl Sink for Recorder {
        fn blocked_until(&self, _route: &str, _category: &str, _now: Instant) -> Option<Instant> {
            None
        }
        async fn deliver(&self, _meta: ReadyMeta, json: Vec<u8>) -> Delivery {
            match ProfileChunk::from_json(&json) {
                Ok(c) => {
                    self.0.lock().unwrap().push(c);
                    Delivery::Delivered
                }
                Err(e) => Delivery::Permanent {
                    message: e.to_string(),
                },
            }
        }
        fn discarded(&self, _meta: &ReadyMeta, _reason: DiscardReason, _n: u64) {}
    }

    fn chunk(profiler: char, start: f64, n: usize) -> ProfileChunk {
        let mut c = ProfileChunk {
            chunk_id: "1".repeat(32),
            profiler_id: profiler.to_string().repeat(32),
            platform: "rust".into(),
            version: "2".into(),
            ..Default::default()
        };
        c.profile.frames = vec![std::sync::Arc::new(Frame {
            function: Some("main".into()),
            ..Default::default()
        })];
        c.profile.stacks = vec![vec![0]];
        c.profile.samples = (0..n)
            .map(|i| Sample {
                timestamp: start + i as f64 * 0.05,
                stack_id: 0,
                thread_id: "1".into(),
            })
            .collect();
        c
    }

    /// An engine whose sessions go idle after 200 ms.
    fn start(queue: Arc<Queue>, recovery: Recovery, sink: Arc<Recorder>) -> Pipeline<Recorder> {
        start_idle(queue, recovery, sink, Duration::from_millis(200))
    }

    fn start_idle(
        queue: Arc<Queue>,
        recovery: Recovery,
        sink: Arc<Recorder>,
        idle: Duration,
    ) -> Pipeline<Recorder> {
        let cfg = PipelineConfig {
            accumulate: AccumulateConfig {
                chunk_idle_timeout: idle,
                ..AccumulateConfig::default()
            },
            retry: RetryConfig::default(),
            num_consumers: 2,
            tick: Duration::from_millis(20),
            observer: Default::default(),
            flush_on_shutdown: false,
        };
        let metrics = Arc::new(ExporterMetrics::default());
        Pipeline::start(
            queue,
            recovery,
            sink,
            cfg,
            crate::clock::system_clock(),
            metrics,
        )
        .unwrap()
    }

    /// Waits until `sink` holds `n` chunks (at most 10 s), then stops `p`.
    async fn deliver(p: Pipeline<Recorder>, sink: &Recorder, n: usize) {
        let start = std::time::Instant::now();
        while sink.0.lock().unwrap().len() < n && start.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p.shutdown(Duration::from_secs(5)).await;
    }

    fn open(dir: &std::path::Path) -> (Arc<Queue>, Recovery) {
        let (q, r) = Queue::open(
            &QueueConfig::default(),
            dir,
            Arc::new(ExporterMetrics::default()),
        )
        .unwrap();
        (Arc::new(q), r)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn legacy_and_batch_records_are_replayed_and_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        {
            // A queue left by an older version (one JSON record per chunk) plus a batch record
            // holding two sessions and an empty chunk.
            let (q, _) = open(dir.path());
            let mut empty = chunk('c', 0.0, 0);
            empty.profile.samples.clear();
            let (batch, _) = input::encode_batch(&[
                (String::new(), chunk('a', 1005.0, 30)),
                (String::new(), empty),
                (String::new(), chunk('b', 1000.0, 20)),
            ]);
            let mut bodies = vec![encode_legacy("", &chunk('a', 1000.0, 10))];
            bodies.extend(batch.into_iter().map(|r| r.body));
            q.append_inputs(&bodies).unwrap();
        }
        let (q, rec) = open(dir.path());
        assert_eq!(rec.inputs.len(), 2);
        let sink = Arc::new(Recorder::default());
        deliver(start(q, rec, sink.clone()), &sink, 2).await;
        let got = sink.0.lock().unwrap().clone();
        let samples = |p: char| -> usize {
            got.iter()
                .filter(|c| c.profiler_id.starts_with(p))
                .map(|c| c.profile.samples.len())
                .sum()
        };
        assert_eq!((samples('a'), samples('b'), samples('c')), (40, 20, 0));
        // Session a: the legacy and the batch record merged into one chunk.
        assert_eq!(got.len(), 2);
        // Everything is acknowledged: nothing is replayed on the next start.
        let (_, rec) = open(dir.path());
        assert!(rec.inputs.is_empty() && rec.ready.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_after_export_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (q, rec) = open(dir.path());
        let sink = Arc::new(Recorder::default());
        let p = start(q.clone(), rec, sink.clone());
        for i in 0..3 {
            let t = 2000.0 + 5.0 * f64::from(i);
            p.export(vec![
                (String::new(), chunk('a', t, 100)),
                (String::new(), chunk('b', t, 100)),
            ])
            .await
            .unwrap();
        }
        // A crash: the engine stops without flushing its open sessions.
        drop(p);
        drop(q);
        let (q, rec) = open(dir.path());
        assert_eq!(rec.inputs.len(), 3);
        deliver(start(q, rec, sink.clone()), &sink, 2).await;
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|c| c.profile.samples.len() == 300));
    }

    /// Sends `inputs` (one export each) through an engine, stopping and restarting it after
    /// the inputs listed in `stops` (a crash when `crash`, else a shutdown), and returns what
    /// was delivered once everything went idle.
    async fn run_with_stops(
        inputs: &[Vec<ProfileChunk>],
        stops: &[usize],
        crash: bool,
    ) -> Vec<ProfileChunk> {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(Recorder::default());
        // Long idle timeout: only window ends (and the final idle flush below) cut chunks.
        let idle = Duration::from_secs(3600);
        let (q, rec) = open(dir.path());
        let mut p = start_idle(q, rec, sink.clone(), idle);
        for (i, batch) in inputs.iter().enumerate() {
            let items = batch.iter().map(|c| (String::new(), c.clone())).collect();
            p.export(items).await.unwrap();
            if stops.contains(&i) {
                // Let merged chunks of closed windows be persisted and delivered first.
                tokio::time::sleep(Duration::from_millis(150)).await;
                if crash {
                    drop(p);
                } else {
                    p.shutdown(Duration::from_secs(5)).await;
                }
                let (q, rec) = open(dir.path());
                p = start_idle(q, rec, sink.clone(), idle);
            }
        }
        p.shutdown(Duration::from_secs(5)).await;
        // The last start flushes the open windows by going idle.
        let (q, rec) = open(dir.path());
        let before = sink.0.lock().unwrap().len();
        let p = start_idle(q, rec, sink.clone(), Duration::from_millis(100));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let n = before + 2;
        deliver(p, &sink, n).await;
        let mut got = sink.0.lock().unwrap().clone();
        got.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
        // A crash between a delivery and its acknowledgement sends that chunk again: the same
        // id with the same content (at least once), never other content under an id.
        for w in got.windows(2) {
            if w[0].chunk_id == w[1].chunk_id {
                assert_eq!(w[0], w[1], "two chunks with one id");
            }
        }
        got.dedup_by(|a, b| a.chunk_id == b.chunk_id);
        got
    }

    /// 5 s inputs of two sessions over 150 s. The sessions start within the first input
    /// (a at +2.5 s, b at +4 s), so their 60 s windows end inside later inputs.
    fn steady_stream() -> Vec<Vec<ProfileChunk>> {
        let mut v = vec![vec![chunk('a', 3002.5, 50), chunk('b', 3004.0, 20)]];
        v.extend((1..30).map(|i| {
            let t = 3000.0 + 5.0 * f64::from(i);
            vec![chunk('a', t, 100), chunk('b', t, 100)]
        }));
        v
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn restarts_and_crashes_deliver_exactly_the_uninterrupted_chunks() {
        let inputs = steady_stream();
        let reference = run_with_stops(&inputs, &[], false).await;
        let total: usize = reference.iter().map(|c| c.profile.samples.len()).sum();
        assert_eq!(total, 29 * 2 * 100 + 70);
        let ids = |v: &[ProfileChunk]| v.iter().map(|c| c.chunk_id.clone()).collect::<Vec<_>>();
        // Stops right after a window closed (inputs straddling it half persisted), inside a
        // window, and twice in a row.
        for (stops, crash) in [
            (vec![11], true),
            (vec![11], false),
            (vec![4, 12, 13, 25], true),
            (vec![4, 12, 13, 25], false),
        ] {
            let got = run_with_stops(&inputs, &stops, crash).await;
            assert_eq!(
                ids(&got),
                ids(&reference),
                "stops {stops:?} (crash: {crash}): different chunks"
            );
            assert_eq!(got, reference, "stops {stops:?} (crash: {crash})");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn linked_threads_survive_a_crash_and_are_not_grouped_on_replay() {
        // Threads 5, 6 and 7 are seen once each, in two inputs; 7 is linked (spans reference
        // it). Merged after a replay, 5 and 6 are grouped and 7 keeps its id (and, being
        // alone, is dropped as Relay would): the queue remembered that 7 is linked.
        let with_one = |start: f64, tids: &[&str]| {
            let mut c = chunk('a', start, 20);
            for (i, t) in tids.iter().enumerate() {
                c.profile.samples.push(Sample {
                    timestamp: start + 0.01 + i as f64 * 0.05,
                    stack_id: 0,
                    thread_id: (*t).into(),
                });
            }
            c
        };
        let dir = tempfile::tempdir().unwrap();
        let (q, rec) = open(dir.path());
        let sink = Arc::new(Recorder::default());
        let p = start_idle(q.clone(), rec, sink.clone(), Duration::from_secs(3600));
        p.export_linked(vec![(String::new(), with_one(3000.0, &["5"]))], vec![])
            .await
            .unwrap();
        p.export_linked(
            vec![(String::new(), with_one(3005.0, &["6", "7"]))],
            vec![vec!["7".into()]],
        )
        .await
        .unwrap();
        drop(p);
        drop(q);
        let (q, rec) = open(dir.path());
        assert_eq!(rec.inputs.len(), 2);
        deliver(start(q, rec, sink.clone()), &sink, 1).await;
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        let mut threads: Vec<&str> = got[0]
            .profile
            .samples
            .iter()
            .map(|s| s.thread_id.as_str())
            .collect();
        threads.sort();
        threads.dedup();
        let group = profilink_proto::sentry::thread_groups::group_id(b"other").to_string();
        assert_eq!(threads, vec!["1", group.as_str()]);
        assert_eq!(got[0].profile.samples.len(), 42);
    }
}
