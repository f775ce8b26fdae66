//! The `kafka` receiver: one member of a Kafka consumer group, reading OTLP profiles (and
//! traces) messages and handing each to the pipeline's [`Consumer`].
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
//! **Backpressure.** When the pipeline answers [`ConsumeError::Full`] (or fails: any
//! [`ConsumeError`] but `Rejected`), the receiver pauses every assigned partition, keeps the
//! messages it already received in order, and retries the oldest after the wait the pipeline
//! asked for (or `error_backoff`); it keeps polling meanwhile, so the group membership and
//! rebalances go on. Nothing is dropped (unless `message_marking.on_error` says to skip
//! failed messages).
//!
//! **Permanent errors.** A message that can never be accepted ([`Permanent`]: undecodable,
//! unsupported version, invalid, rejected) is counted, logged and skipped; its offset is
//! marked when `message_marking.on_permanent_error` is true, else it is committed with the
//! next accepted message of its partition. It never blocks its partition.
//!
//! **Rebalances.** Revocation runs inside the receiver's own poll, between two messages: the
//! receiver commits what it marked, then releases the messages of revoked partitions it had
//! received but not handed over (counted in `released`; the next owner reads them from the
//! committed offset). No message of a revoked partition is handed over after its revoke
//! returned. The default strategy is `cooperative-sticky`, so only moving partitions stop.

use crate::closing::Closing;
use crate::config::KafkaReceiverConfig;
use crate::decode::{Permanent, WithResources, decode_message};
use crate::metrics::KafkaReceiverMetrics;
use profilink_consumer::{ConsumeError, Consumer, ReceiverKind, Transport};
use profilink_proto::signal::{Profiles, Traces};
use profilink_receiver::{IngestSignal, Split, Stats};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer as _, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message, OwnedMessage};
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
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::client::log("consumer", level, fac, log_message);
    }

    /// Client errors (brokers down, a refused TLS handshake or SASL authentication): logged
    /// and counted; librdkafka keeps retrying.
    fn error(&self, error: KafkaError, reason: &str) {
        KafkaReceiverMetrics::add(&self.metrics.client_errors, 1);
        crate::client::error("consumer", &error, reason);
    }

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

/// The signal a topic carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignalKind {
    Profiles,
    Traces,
}

/// What became of one message.
enum Outcome {
    /// Taken by the pipeline (or had nothing valid): mark it.
    Accepted,
    /// Skipped for good; mark it when `mark`.
    Skipped { mark: bool },
    /// Retry after the wait.
    Wait(Duration),
}

struct Loop<C> {
    cfg: KafkaReceiverConfig,
    consumer: Closing<StreamConsumer<Context>>,
    pipeline: Arc<C>,
    stats: Arc<Stats>,
    metrics: Arc<KafkaReceiverMetrics>,
    traces_topics: BTreeSet<String>,
    pending: VecDeque<OwnedMessage>,
    paused: bool,
    /// The next wait after a pipeline error (grows with `error_backoff`).
    error_wait: Duration,
}

impl<C: Consumer> Loop<C> {
    fn signal_of(&self, topic: &str) -> SignalKind {
        if self.traces_topics.contains(topic) {
            SignalKind::Traces
        } else {
            SignalKind::Profiles
        }
    }

    fn extracted(&self, m: &OwnedMessage) -> Vec<(String, String)> {
        let h = &self.cfg.header_extraction;
        if !h.extract_headers {
            return Vec::new();
        }
        let Some(headers) = m.headers() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for wanted in &h.headers {
            for header in headers.iter() {
                if header.key == wanted
                    && let Some(v) = header.value
                {
                    out.push((
                        format!("kafka.header.{wanted}"),
                        String::from_utf8_lossy(v).into_owned(),
                    ));
                }
            }
        }
        out
    }

    async fn offer<S>(&mut self, m: &OwnedMessage, signal: SignalKind) -> Outcome
    where
        S: IngestSignal,
        S::Request: WithResources,
    {
        let headers = crate::decode::message_headers(m);
        let encoding = match signal {
            SignalKind::Profiles => self.cfg.profiles_encoding(),
            SignalKind::Traces => self.cfg.traces.encoding,
        };
        let extracted = self.extracted(m);
        let split = decode_message::<S>(
            m.payload().unwrap_or_default(),
            &headers,
            encoding,
            &extracted,
        );
        let Split {
            payload,
            valid,
            rejected,
            error_message,
        } = match split {
            Ok(s) => s,
            Err(e) => return self.permanent(m, signal, e),
        };
        if valid.counts.items > 0 {
            let batch = payload.into_batch(ReceiverKind::Kafka, Transport::Kafka, valid.counts);
            match self.pipeline.consume(batch).await {
                Ok(()) => {}
                Err(ConsumeError::Full { retry_after }) => {
                    self.error_wait = self.cfg.error_backoff.initial_interval;
                    return Outcome::Wait(retry_after.max(self.cfg.error_backoff.initial_interval));
                }
                Err(ConsumeError::Rejected(message)) => {
                    S::count_refused(&self.stats.kafka, &valid.plus(&rejected));
                    return self.permanent(m, signal, Permanent::Rejected(message));
                }
                Err(failure) => {
                    if self.cfg.message_marking.on_error {
                        S::count_refused(&self.stats.kafka, &valid.plus(&rejected));
                        KafkaReceiverMetrics::add(&self.metrics.skipped, 1);
                        tracing::warn!(topic = m.topic(), partition = m.partition(), offset = m.offset(), error = %failure, "Kafka message dropped after a pipeline error (message_marking.on_error)");
                        return Outcome::Skipped { mark: true };
                    }
                    let wait = self.error_wait;
                    let b = &self.cfg.error_backoff;
                    if b.enabled {
                        self.error_wait = Duration::from_secs_f64(
                            (wait.as_secs_f64() * b.multiplier.max(1.0))
                                .min(b.max_interval.as_secs_f64()),
                        );
                    }
                    tracing::warn!(topic = m.topic(), partition = m.partition(), offset = m.offset(), error = %failure, ?wait, "Kafka message: the pipeline failed; retrying");
                    return Outcome::Wait(wait);
                }
            }
        }
        self.error_wait = self.cfg.error_backoff.initial_interval;
        S::count_accepted(&self.stats.kafka, &valid);
        S::count_refused(&self.stats.kafka, &rejected);
        self.stats.kafka.request_accepted();
        if rejected.counts.items > 0 {
            tracing::debug!(topic = m.topic(), partition = m.partition(), offset = m.offset(), message = %error_message, "Kafka message: invalid items rejected");
        }
        Outcome::Accepted
    }

    fn permanent(&self, m: &OwnedMessage, signal: SignalKind, e: Permanent) -> Outcome {
        if matches!(e, Permanent::Undecodable { .. } | Permanent::Version(_)) {
            let c = match signal {
                SignalKind::Profiles => &self.metrics.unmarshal_failed_profiles,
                SignalKind::Traces => &self.metrics.unmarshal_failed_spans,
            };
            KafkaReceiverMetrics::add(c, 1);
        }
        KafkaReceiverMetrics::add(&self.metrics.skipped, 1);
        self.stats.kafka.request_refused_for(match e {
            Permanent::Version(_) => profilink_receiver::RefusalReason::UnsupportedVersion,
            Permanent::Rejected(_) => profilink_receiver::RefusalReason::Rejected,
            _ => profilink_receiver::RefusalReason::Invalid,
        });
        let mark = self.cfg.message_marking.permanent();
        tracing::warn!(
            topic = m.topic(),
            partition = m.partition(),
            offset = m.offset(),
            error = %e,
            marked = mark,
            "Kafka message skipped: it can never be accepted"
        );
        Outcome::Skipped { mark }
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

    /// Offers pending messages in order; the wait before the next try when one must wait.
    async fn drain(&mut self) -> Option<Duration> {
        while let Some(m) = self.pending.pop_front() {
            if !self.cfg.message_marking.after {
                self.mark(&m);
            }
            let signal = self.signal_of(m.topic());
            let outcome = match signal {
                SignalKind::Profiles => self.offer::<Profiles>(&m, signal).await,
                SignalKind::Traces => self.offer::<Traces>(&m, signal).await,
            };
            match outcome {
                Outcome::Accepted | Outcome::Skipped { mark: true } => self.mark(&m),
                Outcome::Skipped { mark: false } => {}
                Outcome::Wait(wait) => {
                    self.pending.push_front(m);
                    self.pause();
                    return Some(wait);
                }
            }
        }
        self.resume();
        None
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut wait: Option<Duration> = None;
        loop {
            self.release_revoked();
            if wait.is_none() {
                wait = self.drain().await;
            }
            let sleep = wait.unwrap_or(Duration::from_secs(3600));
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                received = self.consumer.recv() => match received {
                    Ok(m) => {
                        let m = m.detach();
                        self.metrics.received(m.topic(), m.partition(), m.offset(), m.payload().map_or(0, <[u8]>::len));
                        self.pending.push_back(m);
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
        // the partitions' next owner). The commit and the close run on a thread of their own
        // (`closing`): with the brokers gone they may never end.
        let Loop {
            consumer,
            metrics,
            pending,
            pipeline,
            ..
        } = self;
        // The pipeline is let go before the close is waited for: the exporters behind it can
        // only be flushed once nothing else holds it.
        drop(pipeline);
        let left = pending.len() as u64;
        if left > 0 {
            KafkaReceiverMetrics::add(&metrics.released, left);
        }
        let closed = consumer.close(move |c| {
            commit(c, &metrics, "shutdown");
            c.unsubscribe();
        });
        let _ = closed.await;
        tracing::info!(released = left, "Kafka receiver stopped");
    }
}

/// A running kafka receiver. See the module docs.
pub struct KafkaReceiver {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
    metrics: Arc<KafkaReceiverMetrics>,
}

/// librdkafka's consumer settings from `cfg` (with `tls` and `auth`: they hold the SASL
/// password, so the result is never to be shown).
pub fn consumer_config(cfg: &KafkaReceiverConfig) -> Result<ClientConfig, String> {
    let mut c = ClientConfig::new();
    cfg.client().apply(&mut c)?;
    c.set("group.id", &cfg.group_id)
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
        if cfg.client().deprecated_auth_tls() {
            tracing::warn!(
                "kafka receiver: auth.tls is deprecated (as in the Collector since v0.124.0); move it to tls"
            );
        }
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
            cfg,
            consumer: Closing::new(consumer),
            pipeline,
            stats,
            metrics: metrics.clone(),
            traces_topics,
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
            tracing::warn!(
                ?deadline,
                "Kafka receiver: the final commit and leaving the group did not end within the \
                 shutdown deadline (brokers unreachable?); abandoned. Messages marked since the \
                 last commit are read again by the partitions' next owner"
            );
        }
    }
}
