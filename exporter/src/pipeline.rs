//! The engine shared by the Sentry and file exporters:
//! `export` → durable queue (input log) → [`ChunkAccumulator`] → durable queue (ready log) →
//! up to `num_consumers` concurrent deliveries through a [`Sink`], with retries, rate limits and
//! acknowledgements.
//!
//! One task owns the accumulator and the scheduling state; `export` calls only append to the
//! queue (durably) and hand the chunks to that task. Dropping a [`Pipeline`] without
//! [`Pipeline::shutdown`] aborts the task like a crash would: whatever was not acknowledged stays
//! in the queue for the next start.

use crate::ExportError;
use crate::accumulate::{ChunkAccumulator, Emitted};
use crate::clock::SharedClock;
use crate::config::{AccumulateConfig, RetryConfig};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::{Queue, QueueError, ReadyMeta, Recovery};
use crate::retry::Backoff;
use profilink_proto::sentry::ProfileChunk;
use std::collections::{BTreeMap, HashMap};
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
}

/// Merged chunks serialized per queue append.
const PERSIST_GROUP_BYTES: usize = 8 << 20;

/// Export batches buffered between `export` and the engine.
const INPUT_BATCHES: usize = 2;

struct Input {
    id: u64,
    route: String,
    chunk: ProfileChunk,
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
}

impl<S: Sink> Drop for Pipeline<S> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl<S: Sink> Pipeline<S> {
    /// Starts the engine on `queue`, replaying what `recovery` found.
    pub fn start(
        queue: Arc<Queue>,
        recovery: Recovery,
        sink: Arc<S>,
        cfg: PipelineConfig,
        clock: SharedClock,
        metrics: Arc<ExporterMetrics>,
    ) -> Self {
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
            unpersisted: Vec::new(),
            input_acks: Vec::new(),
            ready_acks: Vec::new(),
        };
        engine.recover(recovery);
        let task = tokio::spawn(engine.run(input_rx, control_rx));
        Pipeline {
            queue,
            clock,
            sink,
            metrics,
            input_tx,
            control_tx,
            task: Some(task),
        }
    }

    /// Durably queues `chunks` (routing key, chunk); `Ok` only once they are on disk.
    pub async fn export(&self, chunks: Vec<(String, ProfileChunk)>) -> Result<(), ExportError> {
        if chunks.is_empty() {
            return Ok(());
        }
        if self.input_tx.is_closed() {
            return Err(ExportError::Closed);
        }
        let items: Vec<(String, Vec<u8>)> = chunks
            .iter()
            .map(|(route, chunk)| (route.clone(), chunk.to_json()))
            .collect();
        let sizes: Vec<u64> = items.iter().map(|(_, j)| j.len() as u64).collect();
        let queue = self.queue.clone();
        let result = tokio::task::spawn_blocking(move || queue.append_inputs(&items))
            .await
            .map_err(|e| ExportError::Io(e.to_string()))?;
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
            self.sink.discarded(meta, DiscardReason::QueueOverflow, 1);
        }
        ExporterMetrics::add(&self.metrics.accepted_chunks, ids.len() as u64);
        let accepted_at = self.clock.now();
        let batch: Vec<Input> = ids
            .into_iter()
            .zip(chunks)
            .zip(sizes)
            .map(|((id, (route, chunk)), bytes)| Input {
                id,
                route,
                chunk,
                bytes,
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
    unpersisted: Vec<Emitted>,
    input_acks: Vec<u64>,
    ready_acks: Vec<u64>,
}

impl<S: Sink> Engine<S> {
    fn recover(&mut self, recovery: Recovery) {
        for meta in recovery.ready {
            self.add_ready(meta);
        }
        let count = recovery.inputs.len();
        for input in recovery.inputs {
            match ProfileChunk::from_json(&input.json) {
                Ok(chunk) => self.accept_one(Input {
                    id: input.id,
                    route: input.route,
                    bytes: input.json.len() as u64,
                    chunk,
                    accepted_at: self.clock.now(),
                }),
                Err(e) => {
                    tracing::warn!(id = input.id, error = %e, "queue: unreadable chunk skipped");
                    ExporterMetrics::add(&self.metrics.corrupt_records, 1);
                    self.input_acks.push(input.id);
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

    fn accept_one(&mut self, input: Input) {
        let out = self.acc.push(
            input.id,
            &input.route,
            &input.chunk,
            input.bytes,
            input.accepted_at,
        );
        self.unpersisted.extend(out.emitted);
        self.input_acks.extend(out.ack_now);
    }

    async fn run(
        mut self,
        mut input_rx: mpsc::Receiver<Vec<Input>>,
        mut control_rx: mpsc::UnboundedReceiver<Control>,
    ) {
        loop {
            self.step().await;
            let tick = self.cfg.tick;
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
                Some(batch) = input_rx.recv() => {
                    for input in batch {
                        self.accept_one(input);
                    }
                    while let Ok(batch) = input_rx.try_recv() {
                        for input in batch {
                            self.accept_one(input);
                        }
                    }
                }
                Some(res) = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.on_joined(res);
                }
                _ = tokio::time::sleep(tick) => {}
            }
        }
    }

    async fn step(&mut self) {
        let now = self.clock.now();
        let idle = self.acc.poll(now);
        self.unpersisted.extend(idle);
        self.persist().await;
        self.flush_acks().await;
        self.dispatch(self.clock.now());
    }

    async fn persist(&mut self) {
        // Serialized in groups of about PERSIST_GROUP_BYTES, each chunk struct dropped once
        // serialized, so a burst of emitted chunks (every session closing its minute at once)
        // does not hold every chunk twice in memory.
        while !self.unpersisted.is_empty() {
            let mut group: Vec<(ReadyMeta, Vec<u8>)> = Vec::new();
            let mut inputs: Vec<Vec<u64>> = Vec::new();
            let mut bytes = 0usize;
            let mut taken = 0usize;
            for e in &self.unpersisted {
                if bytes >= PERSIST_GROUP_BYTES {
                    break;
                }
                taken += 1;
                inputs.push(e.inputs.clone());
                ExporterMetrics::add(
                    &self.metrics.sparse_samples_dropped,
                    e.sparse_samples_dropped as u64,
                );
                if e.chunk.profile.samples.is_empty() {
                    continue;
                }
                let json = e.chunk.to_json();
                bytes += json.len();
                let meta = ReadyMeta {
                    id: 0,
                    route: e.key.route.clone(),
                    category: e.chunk.data_category().to_string(),
                    chunk_id: e.chunk.chunk_id.clone(),
                    platform: e.chunk.platform.clone(),
                    bytes: 0,
                };
                group.push((meta, json));
            }
            let queue = self.queue.clone();
            let n = group.len() as u64;
            let res = tokio::task::spawn_blocking(move || queue.append_ready(group)).await;
            match res {
                Ok(Ok(metas)) => {
                    if self.cfg.observer.0.is_some() {
                        for e in &self.unpersisted[..taken] {
                            if !e.chunk.profile.samples.is_empty() {
                                let project = self.sink.project_id(&e.key.route);
                                self.cfg.observer.queued(project, &e.chunk);
                            }
                        }
                    }
                    self.unpersisted.drain(..taken);
                    ExporterMetrics::add(&self.metrics.merged_chunks, n);
                    for m in metas {
                        tracing::debug!(chunk_id = %m.chunk_id, route = %m.route, "merged chunk queued");
                        self.add_ready(m);
                    }
                    for ids in inputs {
                        let done = self.acc.release(&ids);
                        self.input_acks.extend(done);
                    }
                }
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "queue: could not persist merged chunks; will retry");
                    return;
                }
                Err(e) => {
                    tracing::error!(error = %e, "queue: persist task failed; will retry");
                    return;
                }
            }
        }
    }

    async fn flush_acks(&mut self) {
        if self.input_acks.is_empty() && self.ready_acks.is_empty() {
            return;
        }
        let inputs = std::mem::take(&mut self.input_acks);
        let ready = std::mem::take(&mut self.ready_acks);
        let queue = self.queue.clone();
        let (i2, r2) = (inputs.clone(), ready.clone());
        let res = tokio::task::spawn_blocking(move || {
            queue.ack_inputs(&i2)?;
            queue.ack_ready(&r2)
        })
        .await;
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "queue: could not record acknowledgements; will retry");
                self.input_acks = inputs;
                self.ready_acks = ready;
            }
            Err(e) => {
                tracing::error!(error = %e, "queue: ack task failed; will retry");
                self.input_acks = inputs;
                self.ready_acks = ready;
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
                self.ready.remove(&id);
                self.ready_acks.push(id);
            }
            Outcome::Sent(Delivery::RateLimited) => {
                if let Some(item) = self.ready.get_mut(&id) {
                    item.in_flight = false;
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

    async fn shutdown(
        &mut self,
        deadline: tokio::time::Instant,
        input_rx: &mut mpsc::Receiver<Vec<Input>>,
    ) {
        while let Ok(batch) = input_rx.try_recv() {
            for input in batch {
                self.accept_one(input);
            }
        }
        let flushed = self.acc.flush_all();
        self.unpersisted.extend(flushed);
        loop {
            self.persist().await;
            self.flush_acks().await;
            let now = self.clock.now();
            self.dispatch(now);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break;
            }
            if self.inflight.is_empty() && self.unpersisted.is_empty() {
                match self.next_due(now) {
                    None => break,
                    Some(t) if t.saturating_duration_since(now) >= left => break,
                    Some(_) => {}
                }
            }
            let nap = self.cfg.tick.min(left);
            tokio::select! {
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
        self.flush_acks().await;
        let left_behind = self.ready.len();
        if left_behind > 0 {
            tracing::info!(
                chunks = left_behind,
                "shutdown: undelivered chunks stay queued for the next start"
            );
        }
    }
}
