//! The `kafka` receiver: one member of a Kafka consumer group, reading OTLP profiles (and
//! traces) messages and handing each to the pipeline's [`Consumer`] ([`crate::handover`]).
//!
//! **Hand-over.** Messages are handed over in rounds: the oldest received message of each
//! partition (up to 8 partitions) at once, each on its own task, and the next round once all
//! of them were answered. A partition's messages thus reach the pipeline one after the other,
//! in offset order (a session keyed to a partition merges in order), while several partitions'
//! messages share the pipeline's work and its durable queue's writes and syncs, as concurrent
//! OTLP requests do (one message at a time, each waited for its own fsync, took a third more
//! CPU per sample).
//!
//! **Offsets.** librdkafka's automatic offset store is off: the receiver stores a message's
//! offset (marks it) only once [`Consumer::consume`] returned `Ok` for it — the pipeline
//! took it, and with a durable exporter queue it is on disk — and commits what is stored every
//! `autocommit.interval`, synchronously before its partitions are revoked, and at shutdown.
//! A replica killed at any moment therefore loses nothing: what it had not marked is read
//! again by the partition's next owner. What it had marked but not yet committed (at most
//! about one `autocommit.interval` of messages) is read again too: the only duplicates,
//! re-deliveries of uncommitted messages.
//!
//! **Backpressure.** When the pipeline answers [`ConsumeError::Full`] (or fails,
//! [`ConsumeError::Internal`]) for a message, the receiver pauses every assigned partition,
//! keeps the messages it already received in order (that message first for its partition),
//! and retries after the wait the pipeline asked for (or `error_backoff`); the round's other
//! messages, of other partitions, are marked as they were answered. It keeps polling
//! meanwhile, so the group membership and rebalances go on. Nothing is dropped (unless
//! `message_marking.on_error` says to skip failed messages).
//!
//! **Permanent errors.** A message that can never be accepted
//! ([`Permanent`](crate::decode::Permanent): undecodable, unsupported version, invalid,
//! rejected) is counted, logged and skipped; its offset is marked when
//! `message_marking.on_permanent_error` is true, else it is committed with the next accepted
//! message of its partition. It never blocks its partition.
//!
//! **Rebalances.** Revocation runs inside the receiver's own poll, between two rounds (never
//! while messages are being handed over): the receiver commits what it marked, then releases
//! the messages of revoked partitions it had received but not handed over (counted in
//! `released`; the next owner reads them from the committed offset). No message of a revoked
//! partition is handed over after its revoke returned. The default strategy is
//! `cooperative-sticky`, so only moving partitions stop.
//!
//! [`ConsumeError::Full`]: profilink_receiver::ConsumeError::Full
//! [`ConsumeError::Internal`]: profilink_receiver::ConsumeError::Internal

use crate::config::KafkaReceiverConfig;
use crate::handover::{Handover, Outcome};
use crate::metrics::KafkaReceiverMetrics;
use profilink_receiver::{Consumer, Stats};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer as _, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why the receiver could not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// A setting is wrong (`key: problem`).
    #[error("{0}")]
    Config(String),
    /// librdkafka refused the consumer or the subscription.
    #[error("Kafka consumer: {0}")]
    Kafka(#[from] KafkaError),
}

/// The consumer's callbacks: rebalances, commits, statistics.
struct Context {
    metrics: Arc<KafkaReceiverMetrics>,
    /// Partitions revoked since the receiver last looked, to release.
    revoked: Mutex<Vec<(String, i32)>>,
    /// Commit synchronously in the revoke callback (without `autocommit`: librdkafka's
    /// automatic commit already commits what is stored before a revoke completes).
    commit_on_revoke: bool,
}

impl ClientContext for Context {
    fn stats(&self, statistics: Statistics) {
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                if *partition >= 0 && p.consumer_lag >= 0 {
                    self.metrics.set_lag(topic, *partition, p.consumer_lag);
                }
            }
        }
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(tpl) => {
                KafkaReceiverMetrics::add(&self.metrics.rebalances, 1);
                KafkaReceiverMetrics::add(&self.metrics.partition_close, tpl.count() as u64);
                // What was marked is committed before the partitions move (by librdkafka's
                // automatic commit, or here); unmarked messages are released below, for the
                // next owner.
                if self.commit_on_revoke {
                    commit(consumer, &self.metrics, "revoke");
                }
                let mut revoked = self.revoked.lock().unwrap_or_else(|p| p.into_inner());
                for e in tpl.elements() {
                    revoked.push((e.topic().to_string(), e.partition()));
                }
                tracing::info!(partitions = tpl.count(), "Kafka partitions revoked");
            }
            Rebalance::Assign(tpl) => {
                KafkaReceiverMetrics::add(&self.metrics.rebalances, 1);
                KafkaReceiverMetrics::add(&self.metrics.partition_start, tpl.count() as u64);
                tracing::info!(partitions = tpl.count(), "Kafka partitions assigned");
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "Kafka rebalance error"),
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, offsets: &TopicPartitionList) {
        match result {
            Ok(()) => {
                for e in offsets.elements() {
                    if let Offset::Offset(o) = e.offset() {
                        self.metrics.set_committed(e.topic(), e.partition(), o);
                    }
                }
            }
            Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => {
                KafkaReceiverMetrics::add(&self.metrics.commit_failures, 1);
                tracing::warn!(error = %e, "Kafka offset commit failed; it is retried with the next one");
            }
        }
    }
}

/// Commits the stored offsets synchronously (nothing stored is not an error).
fn commit<C: rdkafka::consumer::Consumer<Context>>(
    consumer: &C,
    metrics: &KafkaReceiverMetrics,
    why: &str,
) {
    match consumer.commit_consumer_state(CommitMode::Sync) {
        Ok(()) | Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
        Err(e) => {
            KafkaReceiverMetrics::add(&metrics.commit_failures, 1);
            tracing::warn!(error = %e, at = why, "Kafka offset commit failed");
        }
    }
}

/// Messages handed to the pipeline at once, at most one per partition.
const MAX_IN_FLIGHT: usize = 8;
/// Messages (and payload bytes) taken from librdkafka's queue ahead of their hand-over, so a
/// round finds the oldest message of several partitions (librdkafka delivers each partition's
/// messages in runs). Each is a copy of its payload.
const MAX_PENDING: usize = 256;
const MAX_PENDING_BYTES: usize = 16 << 20;

struct Loop<C> {
    handover: Handover<C>,
    consumer: StreamConsumer<Context>,
    metrics: Arc<KafkaReceiverMetrics>,
    pending: VecDeque<OwnedMessage>,
    paused: bool,
    /// The next wait after a pipeline error (grows with `error_backoff`).
    error_wait: Duration,
}

impl<C: Consumer> Loop<C> {
    fn cfg(&self) -> &KafkaReceiverConfig {
        &self.handover.cfg
    }

    fn mark(&self, m: &OwnedMessage) {
        if let Err(e) = self
            .consumer
            // librdkafka's rd_kafka_offset_store takes the message's offset and commits the
            // next one.
            .store_offset(m.topic(), m.partition(), m.offset())
        {
            // The partition was revoked meanwhile: its next owner reads the message again.
            tracing::debug!(error = %e, topic = m.topic(), partition = m.partition(), "Kafka offset not stored");
        }
    }

    /// Drops the pending messages of partitions revoked since the last look.
    fn release_revoked(&mut self) {
        let revoked: Vec<(String, i32)> = std::mem::take(
            &mut *self
                .consumer
                .context()
                .revoked
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        if revoked.is_empty() {
            return;
        }
        let before = self.pending.len();
        self.pending.retain(|m| {
            !revoked
                .iter()
                .any(|(t, p)| t == m.topic() && *p == m.partition())
        });
        let released = (before - self.pending.len()) as u64;
        if released > 0 {
            KafkaReceiverMetrics::add(&self.metrics.released, released);
            tracing::info!(
                messages = released,
                "Kafka messages of revoked partitions released uncommitted"
            );
        }
        if self.pending.is_empty() {
            self.resume();
        }
    }

    fn pause(&mut self) {
        if self.paused {
            return;
        }
        if let Ok(a) = self.consumer.assignment()
            && let Err(e) = self.consumer.pause(&a)
        {
            tracing::debug!(error = %e, "Kafka pause failed");
        }
        self.paused = true;
        KafkaReceiverMetrics::add(&self.metrics.pauses, 1);
    }

    fn resume(&mut self) {
        if !self.paused {
            return;
        }
        if let Ok(a) = self.consumer.assignment()
            && let Err(e) = self.consumer.resume(&a)
        {
            tracing::debug!(error = %e, "Kafka resume failed");
        }
        self.paused = false;
    }

    /// The oldest pending message of each partition (at most [`MAX_IN_FLIGHT`]), taken out of
    /// the pending messages, oldest first.
    fn take_round(&mut self) -> Vec<OwnedMessage> {
        let mut picked: Vec<usize> = Vec::new();
        let mut seen: Vec<(&str, i32)> = Vec::new();
        for (i, m) in self.pending.iter().enumerate() {
            if picked.len() == MAX_IN_FLIGHT {
                break;
            }
            let key = (m.topic(), m.partition());
            if !seen.contains(&key) {
                seen.push(key);
                picked.push(i);
            }
        }
        let mut round: Vec<OwnedMessage> = picked
            .iter()
            .rev()
            .filter_map(|&i| self.pending.remove(i))
            .collect();
        round.reverse();
        round
    }

    /// Hands one round over: the oldest pending message of each partition, concurrently (so
    /// each partition's messages reach the pipeline in order, and the pipeline's durable queue
    /// writes and syncs the round's messages together). The wait before the next try when one
    /// must wait; partitions resume once nothing is pending.
    async fn round(&mut self) -> Option<Duration> {
        let round = self.take_round();
        if round.is_empty() {
            self.resume();
            return None;
        }
        if !self.cfg().message_marking.after {
            for m in &round {
                self.mark(m);
            }
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (i, m) in round.into_iter().enumerate() {
            let h = self.handover.clone();
            tasks.spawn(async move {
                let outcome = h.offer(&m).await;
                (i, m, outcome)
            });
        }
        let mut done: Vec<(usize, OwnedMessage, Outcome)> = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(r) => done.push(r),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => return None,
            }
        }
        done.sort_by_key(|(i, _, _)| *i);
        let mut retry: Vec<OwnedMessage> = Vec::new();
        let mut full: Option<Duration> = None;
        let mut failed = false;
        for (_, m, outcome) in done {
            match outcome {
                Outcome::Accepted | Outcome::Skipped { mark: true } => self.mark(&m),
                Outcome::Skipped { mark: false } => {}
                Outcome::Full(wait) => {
                    full = Some(full.map_or(wait, |f| f.max(wait)));
                    retry.push(m);
                }
                Outcome::Failed => {
                    failed = true;
                    retry.push(m);
                }
            }
        }
        let initial = self.cfg().error_backoff.initial_interval;
        if retry.is_empty() {
            self.error_wait = initial;
            if self.pending.is_empty() {
                self.resume();
            }
            return None;
        }
        // Each was the oldest pending message of its partition: back in front, in order.
        for m in retry.into_iter().rev() {
            self.pending.push_front(m);
        }
        self.pause();
        if failed {
            let wait = self.error_wait;
            let b = &self.handover.cfg.error_backoff;
            if b.enabled {
                self.error_wait = Duration::from_secs_f64(
                    (wait.as_secs_f64() * b.multiplier.max(1.0)).min(b.max_interval.as_secs_f64()),
                );
            }
            Some(wait)
        } else {
            self.error_wait = initial;
            Some(full.unwrap_or(initial))
        }
    }

    /// Takes what librdkafka already holds, without waiting, up to [`MAX_PENDING`] messages
    /// or [`MAX_PENDING_BYTES`], so the next round finds several partitions' messages.
    async fn fill(&mut self) {
        let mut bytes: usize = self
            .pending
            .iter()
            .map(|m| m.payload().map_or(0, <[u8]>::len))
            .sum();
        while self.pending.len() < MAX_PENDING && bytes < MAX_PENDING_BYTES {
            match tokio::time::timeout(Duration::ZERO, self.consumer.recv()).await {
                Ok(Ok(m)) => {
                    let m = m.detach();
                    bytes += m.payload().map_or(0, <[u8]>::len);
                    self.keep(m);
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "Kafka consumer error");
                    break;
                }
                Err(_) => break,
            }
        }
    }

    /// Keeps a received message (detached from librdkafka's buffers) for its hand-over.
    fn keep(&mut self, m: OwnedMessage) {
        self.metrics.received(
            m.topic(),
            m.partition(),
            m.offset(),
            m.payload().map_or(0, <[u8]>::len),
        );
        self.pending.push_back(m);
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut wait: Option<Duration> = None;
        loop {
            self.release_revoked();
            if wait.is_none() {
                wait = self.round().await;
            }
            if stop.has_changed().unwrap_or(true) {
                break;
            }
            if wait.is_none() && !self.pending.is_empty() {
                // More to hand over: the next round, with what arrived meanwhile.
                self.fill().await;
                continue;
            }
            let sleep = wait.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                received = self.consumer.recv() => match received {
                    Ok(m) => {
                        self.keep(m.detach());
                        self.fill().await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "Kafka consumer error");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = tokio::time::sleep(sleep), if wait.is_some() => wait = None,
            }
        }
        // Stop: what was marked is committed; pending messages are released (read again by
        // the partitions' next owner).
        let left = self.pending.len() as u64;
        if left > 0 {
            KafkaReceiverMetrics::add(&self.metrics.released, left);
        }
        commit(&self.consumer, &self.metrics, "shutdown");
        self.consumer.unsubscribe();
        tracing::info!(released = left, "Kafka receiver stopped");
    }
}

/// A running kafka receiver. See the module docs.
pub struct KafkaReceiver {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
    metrics: Arc<KafkaReceiverMetrics>,
}

/// librdkafka's consumer settings from `cfg`.
pub fn consumer_config(cfg: &KafkaReceiverConfig) -> Result<ClientConfig, String> {
    let servers = cfg.client().bootstrap_servers()?;
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", servers)
        .set("client.id", &cfg.client_id)
        .set("group.id", &cfg.group_id)
        .set("enable.auto.offset.store", "false")
        .set("enable.auto.commit", cfg.autocommit.enable.to_string())
        .set(
            "auto.commit.interval.ms",
            cfg.autocommit
                .interval
                .as_millis()
                .clamp(1, i32::MAX as u128)
                .to_string(),
        )
        .set(
            "auto.offset.reset",
            if cfg.initial_offset == "earliest" {
                "earliest"
            } else {
                "latest"
            },
        )
        .set(
            "session.timeout.ms",
            cfg.session_timeout
                .as_millis()
                .clamp(1, i32::MAX as u128)
                .to_string(),
        )
        .set(
            "heartbeat.interval.ms",
            cfg.heartbeat_interval
                .as_millis()
                .clamp(1, i32::MAX as u128)
                .to_string(),
        )
        .set(
            "partition.assignment.strategy",
            &cfg.group_rebalance_strategy,
        )
        // Bounds what is fetched ahead (and so what a paused receiver holds).
        .set("queued.max.messages.kbytes", "16384")
        .set("statistics.interval.ms", "5000");
    Ok(c)
}

impl KafkaReceiver {
    /// Joins the group and starts reading the profiles topics (and the traces topics when
    /// `pipeline` takes traces), counting what it accepts and refuses in `stats.kafka` (the
    /// `otelcol_receiver_*` families with `receiver="kafka"`).
    pub fn start<C: Consumer>(
        cfg: KafkaReceiverConfig,
        pipeline: Arc<C>,
        stats: Arc<Stats>,
        metrics: Arc<KafkaReceiverMetrics>,
    ) -> Result<KafkaReceiver, StartError> {
        cfg.check().map_err(StartError::Config)?;
        let context = Context {
            metrics: metrics.clone(),
            revoked: Mutex::new(Vec::new()),
            commit_on_revoke: !cfg.autocommit.enable,
        };
        let consumer: StreamConsumer<Context> = consumer_config(&cfg)
            .map_err(StartError::Config)?
            .create_with_context(context)?;
        let mut topics: Vec<String> = cfg.profiles_topics();
        let traces_topics: BTreeSet<String> = if pipeline.accepts_traces() {
            cfg.traces_topics().into_iter().collect()
        } else {
            BTreeSet::new()
        };
        topics.extend(traces_topics.iter().cloned());
        let excluded: BTreeSet<&String> = cfg
            .profiles
            .exclude_topics
            .iter()
            .chain(cfg.traces.exclude_topics.iter())
            .collect();
        topics.retain(|t| !t.trim().is_empty() && !excluded.contains(t));
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&refs)?;
        tracing::info!(group = %cfg.group_id, topics = ?topics, "Kafka receiver joining its group");
        let (stop, stop_rx) = watch::channel(false);
        let error_wait = cfg.error_backoff.initial_interval;
        let l = Loop {
            handover: Handover::new(cfg, pipeline, stats, metrics.clone(), traces_topics),
            consumer,
            metrics: metrics.clone(),
            pending: VecDeque::new(),
            paused: false,
            error_wait,
        };
        let task = tokio::spawn(l.run(stop_rx));
        Ok(KafkaReceiver {
            task,
            stop,
            metrics,
        })
    }

    /// The receiver's counters.
    pub fn metrics(&self) -> Arc<KafkaReceiverMetrics> {
        self.metrics.clone()
    }

    /// Stops reading, commits what was marked and leaves the group (its partitions go to the
    /// other members), within `deadline`.
    pub async fn shutdown(self, deadline: Duration) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(deadline, &mut task).await.is_err() {
            task.abort();
        }
    }
}
