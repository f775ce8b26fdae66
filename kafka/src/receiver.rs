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

use crate::align::{Aligner, Next, Partition};
use crate::closing::Closing;
use crate::config::KafkaReceiverConfig;
use crate::context::{Context, commit};
use crate::decode::{Permanent, WithResources, decode_message};
use crate::metrics::KafkaReceiverMetrics;
use profilink_consumer::{ConsumeError, Consumer, ReceiverKind, Transport};
use profilink_proto::signal::{Profiles, Traces};
use profilink_receiver::{IngestSignal, Split, Stats};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message, OwnedMessage};
use rdkafka::topic_partition_list::TopicPartitionList;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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

/// The signal a topic carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignalKind {
    Profiles,
    Traces,
}

/// Why [`Loop::drain`] stopped.
enum Drained {
    /// Nothing is waiting.
    Idle,
    /// The pipeline asked to wait this long.
    Wait(Duration),
    /// Alignment waits for a partition until this instant.
    Blocked(Instant),
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
    /// What was received and not yet handed over ([`crate::align`]).
    pending: Aligner,
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

    /// Takes in the partitions assigned since the last look, and drops the pending messages
    /// of those revoked.
    fn rebalanced(&mut self) {
        let take = |m: &Mutex<Vec<Partition>>| {
            std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner()))
        };
        let context = self.consumer.context();
        let (assigned, revoked) = (take(&context.assigned), take(&context.revoked));
        let now = Instant::now();
        if !assigned.is_empty() && !self.paused {
            // A partition paused for running ahead, revoked and assigned again, starts afresh.
            if let Err(e) = self.consumer.resume(&partition_list(&assigned)) {
                tracing::debug!(error = %e, "Kafka resume failed");
            }
        }
        for p in assigned {
            self.pending.assigned(p, now);
        }
        if revoked.is_empty() {
            return;
        }
        let released: u64 = revoked.iter().map(|p| self.pending.revoke(p) as u64).sum();
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

    /// Pauses the partitions that run ahead and resumes those back under their share.
    fn hold(&mut self) {
        let (hold, release) = self.pending.holds();
        if !hold.is_empty() {
            KafkaReceiverMetrics::add(&self.metrics.alignment_holds, hold.len() as u64);
            tracing::debug!(partitions = ?hold, "Kafka partitions ahead of the others paused");
            if let Err(e) = self.consumer.pause(&partition_list(&hold)) {
                tracing::debug!(error = %e, "Kafka pause failed");
            }
        }
        // While every partition is paused for backpressure, `resume` resumes these.
        if !release.is_empty()
            && !self.paused
            && let Err(e) = self.consumer.resume(&partition_list(&release))
        {
            tracing::debug!(error = %e, "Kafka resume failed");
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
        if let Ok(a) = self.consumer.assignment() {
            // Partitions held for running ahead stay paused.
            let held: BTreeSet<&Partition> = self.pending.held().collect();
            let to_resume: Vec<Partition> = a
                .elements()
                .iter()
                .map(|e| (e.topic().to_string(), e.partition()))
                .filter(|p| !held.contains(p))
                .collect();
            if let Err(e) = self.consumer.resume(&partition_list(&to_resume)) {
                tracing::debug!(error = %e, "Kafka resume failed");
            }
        }
        self.paused = false;
    }

    /// Offers pending messages in order; the wait before the next try when one must wait.
    async fn drain(&mut self) -> Drained {
        loop {
            let (seq, m) = match self.pending.pop(Instant::now()) {
                Next::Ready(seq, m) => (seq, m),
                Next::Blocked(until) => {
                    self.hold();
                    self.resume();
                    return Drained::Blocked(until);
                }
                Next::Empty => break,
            };
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
                    self.pending.put_back(seq, m);
                    self.pause();
                    return Drained::Wait(wait);
                }
            }
        }
        self.hold();
        self.resume();
        Drained::Idle
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut wait: Option<Duration> = None;
        let mut blocked: Option<Instant> = None;
        loop {
            self.rebalanced();
            if wait.is_none() {
                blocked = None;
                match self.drain().await {
                    Drained::Wait(w) => wait = Some(w),
                    Drained::Blocked(until) => blocked = Some(until),
                    Drained::Idle => {}
                }
            }
            let sleep = wait.unwrap_or(Duration::from_secs(3600));
            let unblock = blocked.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                received = self.consumer.recv() => match received {
                    Ok(m) => {
                        let m = m.detach();
                        self.metrics.received(m.topic(), m.partition(), m.offset(), m.payload().map_or(0, <[u8]>::len));
                        self.pending.push(m);
                        self.hold();
                    }
                    // `enable.partition.eof`: the partition is caught up, nothing to wait for.
                    Err(KafkaError::PartitionEOF(p)) => {
                        self.rebalanced();
                        self.pending.caught_up(p);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "Kafka consumer error");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                _ = tokio::time::sleep(sleep), if wait.is_some() => wait = None,
                _ = tokio::time::sleep_until(unblock.into()), if blocked.is_some() => {}
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

/// librdkafka's list of `partitions`.
fn partition_list(partitions: &[Partition]) -> TopicPartitionList {
    let mut l = TopicPartitionList::new();
    for (t, p) in partitions {
        l.add_partition(t, *p);
    }
    l
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
        // Alignment's "caught up" (an event the receiver's loop takes, not an error).
        .set("enable.partition.eof", "true")
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
            assigned: Mutex::new(Vec::new()),
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
        let pending = Aligner::new(cfg.alignment.clone());
        let l = Loop {
            cfg,
            consumer: Closing::new(consumer),
            pipeline,
            stats,
            metrics: metrics.clone(),
            traces_topics,
            pending,
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
