//! The `kafka` exporter: OTLP profiles (and traces) produced to Kafka, one request per
//! message, keyed per profiler session ([`crate::keying`]).
//!
//! `export` cuts the request into messages and puts them in the exporter's sending queue
//! (profilink-exporter's [`SendQueue`], the OTLP exporters' queue: in memory, or durable with
//! `sending_queue.storage`, persisted before `export` returns). `num_consumers` senders take
//! the oldest message, produce it and wait for the broker's acknowledgement (`required_acks`),
//! retrying with `retry_on_failure`'s backoff; a message is removed from the queue only once
//! it was acknowledged or given up (counted as dropped with a reason). Delivery is
//! at-least-once: a message whose acknowledgement was lost in a crash is produced again.

use crate::config::KafkaExporterConfig;
use crate::keying::{split_profiles, split_traces};
use crate::record::KafkaRecord;
use profilink_exporter::{Backoff, DiscardReason, ExportError, ExporterMetrics, SendQueue};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportTraceServiceRequest, PROFILES_VERSION_HEADER,
};
use profilink_proto::signal::{Signal, Traces, profile_counts};
use prost::Message;
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

type Queue = SendQueue<KafkaRecord>;

/// The default number of senders (the Collector's `num_consumers`).
pub const DEFAULT_NUM_CONSUMERS: usize = 10;

struct Shared {
    producer: FutureProducer,
    cfg: KafkaExporterConfig,
    metrics: Arc<ExporterMetrics>,
}

/// Whether a produce error can never succeed for this message.
fn permanent(e: &KafkaError) -> Option<DiscardReason> {
    match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidMessageSize) => {
            Some(DiscardReason::SendError)
        }
        Some(RDKafkaErrorCode::InvalidMessage | RDKafkaErrorCode::InvalidRecord) => {
            Some(DiscardReason::SendError)
        }
        _ => None,
    }
}

impl Shared {
    async fn send_with_retry(&self, rec: &KafkaRecord) {
        let retry = &self.cfg.retry_on_failure;
        let mut backoff = Backoff::new(retry);
        loop {
            let started = Instant::now();
            let mut record: FutureRecord<'_, str, [u8]> =
                FutureRecord::to(&rec.topic).payload(&rec.payload[..]);
            if !rec.key.is_empty() {
                record = record.key(&rec.key[..]);
            }
            if rec.profiles {
                record = record.headers(OwnedHeaders::new().insert(Header {
                    key: PROFILES_VERSION_HEADER,
                    value: Some("1"),
                }));
            }
            // The message's own timeout (`message.timeout.ms`) bounds the wait.
            let result = self.producer.send(record, Duration::from_secs(0)).await;
            let outcome = match &result {
                Ok(_) => profilink_exporter::AttemptOutcome::Success,
                Err(_) => profilink_exporter::AttemptOutcome::NetworkError,
            };
            self.metrics
                .attempt_durations
                .record(outcome, started.elapsed());
            let error = match result {
                Ok(_) => {
                    ExporterMetrics::add(&self.metrics.sent_chunks, 1);
                    ExporterMetrics::add(&self.metrics.sent_samples, rec.samples);
                    return;
                }
                Err((e, _)) => e,
            };
            ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
            if let Some(reason) = permanent(&error) {
                self.give_up(rec, reason, &error);
                return;
            }
            match backoff.next(retry, Instant::now(), None) {
                Some(wait) => {
                    ExporterMetrics::add(&self.metrics.retries, 1);
                    tracing::debug!(error = %error, ?wait, topic = %rec.topic, "Kafka produce failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    self.give_up(rec, DiscardReason::NetworkError, &error);
                    return;
                }
            }
        }
    }

    fn give_up(&self, rec: &KafkaRecord, reason: DiscardReason, error: &KafkaError) {
        self.metrics.add_dropped(reason, 1);
        self.metrics.add_dropped_samples(reason, rec.samples);
        tracing::warn!(
            error = %error,
            topic = %rec.topic,
            bytes = rec.payload.len(),
            samples = rec.samples,
            reason = reason.as_str(),
            "Kafka produce failed; message dropped"
        );
    }
}

/// One sender: takes the oldest message, produces it (with retries), removes it.
async fn consume(queue: Arc<Queue>, shared: Arc<Shared>) {
    while let Some(next) = queue.pop().await {
        let id = match next {
            Ok(claimed) => {
                shared.send_with_retry(&claimed.value).await;
                claimed.id
            }
            Err(corrupt) => {
                ExporterMetrics::add(&shared.metrics.corrupt_records, 1);
                tracing::warn!(id = corrupt.id, error = %corrupt.error, "Kafka sending queue: a queued message does not read; it is removed");
                corrupt.id
            }
        };
        if let Err(e) = queue.ack(id).await {
            tracing::warn!(error = %e, "Kafka sending queue: removing a sent message failed; it will be produced again after a restart");
        }
        shared
            .metrics
            .queue_size_bytes
            .store(queue.bytes(), Ordering::Relaxed);
    }
}

/// The producer's librdkafka settings from `cfg`.
pub fn producer_config(cfg: &KafkaExporterConfig) -> Result<ClientConfig, ExportError> {
    let servers = cfg
        .client()
        .bootstrap_servers()
        .map_err(ExportError::Config)?;
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", servers)
        .set("client.id", &cfg.client_id)
        .set("acks", cfg.producer.required_acks.to_string())
        .set("compression.type", &cfg.producer.compression)
        .set(
            "message.max.bytes",
            cfg.producer.max_message_bytes.to_string(),
        )
        .set(
            "batch.num.messages",
            cfg.producer.flush_max_messages.max(1).to_string(),
        )
        .set(
            "message.timeout.ms",
            cfg.timeout
                .as_millis()
                .clamp(1, i32::MAX as u128)
                .to_string(),
        )
        .set("linger.ms", "5");
    Ok(c)
}

/// Sends OTLP profiles and traces to Kafka. See the module docs.
pub struct KafkaExporter {
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
    metrics: Arc<ExporterMetrics>,
    cfg: KafkaExporterConfig,
    producer: FutureProducer,
}

impl Drop for KafkaExporter {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

impl KafkaExporter {
    /// Builds the producer (it connects lazily), opens the sending queue of `signal`
    /// (`profiles` or `traces`: its subdirectory of `sending_queue.storage`), replaying what an
    /// earlier run left there, and starts the senders.
    pub async fn start(cfg: KafkaExporterConfig, signal: &str) -> Result<Self, ExportError> {
        cfg.check().map_err(ExportError::Config)?;
        let q = &cfg.sending_queue;
        let limits = q.limits(1000)?;
        let consumers = q.consumers(DEFAULT_NUM_CONSUMERS);
        let producer: FutureProducer =
            producer_config(&cfg)?
                .create()
                .map_err(|e| ExportError::Invalid {
                    what: "Kafka producer settings".into(),
                    source: Arc::new(e),
                })?;
        let metrics = Arc::new(ExporterMetrics::default());
        let dir = q.dir(signal);
        let fsync = q.fsync;
        let (queue, recovered) =
            tokio::task::spawn_blocking(move || Queue::open(dir.as_deref(), fsync, limits))
                .await
                .map_err(|e| ExportError::Config(format!("queue open task failed: {e}")))??;
        let queue = Arc::new(queue);
        metrics
            .queue_capacity_bytes
            .store(limits.max_bytes, Ordering::Relaxed);
        metrics
            .queue_size_bytes
            .store(queue.bytes(), Ordering::Relaxed);
        ExporterMetrics::add(&metrics.corrupt_records, recovered.corrupt);
        if let Some(dir) = queue.dir() {
            tracing::info!(dir = %dir.display(), messages = recovered.requests, corrupt = recovered.corrupt, "Kafka sending queue opened");
        }
        let shared = Arc::new(Shared {
            producer: producer.clone(),
            cfg: cfg.clone(),
            metrics: metrics.clone(),
        });
        let workers = (0..consumers)
            .map(|_| tokio::spawn(consume(queue.clone(), shared.clone())))
            .collect();
        Ok(KafkaExporter {
            queue,
            workers,
            metrics,
            cfg,
            producer,
        })
    }

    /// Cuts a profiles request into messages (per profiler session unless
    /// `partition_profiles_by_session: false`) and queues them.
    pub async fn export_profiles(
        &self,
        req: ExportProfilesServiceRequest,
    ) -> Result<(), ExportError> {
        let topic = self.cfg.profiles_topic().to_string();
        let parts = if self.cfg.partition_profiles_by_session {
            split_profiles(req)
        } else {
            vec![(String::new(), req)]
        };
        let records = parts
            .into_iter()
            .map(|(key, r)| {
                let samples = profile_counts(&r.resource_profiles).samples;
                KafkaRecord {
                    topic: topic.clone(),
                    key,
                    payload: r.encode_to_vec(),
                    samples,
                    profiles: true,
                }
            })
            .collect();
        self.push(records).await
    }

    /// Cuts a traces request into messages (per trace id unless
    /// `partition_traces_by_id: false`) and queues them.
    pub async fn export_traces(&self, req: ExportTraceServiceRequest) -> Result<(), ExportError> {
        let topic = self.cfg.traces_topic().to_string();
        let parts = if self.cfg.partition_traces_by_id {
            split_traces(req)
        } else {
            vec![(String::new(), req)]
        };
        let records = parts
            .into_iter()
            .map(|(key, r)| KafkaRecord {
                topic: topic.clone(),
                key,
                samples: Traces::counts(&r).items,
                payload: r.encode_to_vec(),
                profiles: false,
            })
            .collect();
        self.push(records).await
    }

    async fn push(&self, records: Vec<KafkaRecord>) -> Result<(), ExportError> {
        let values = records
            .into_iter()
            .map(|r| {
                let s = r.samples;
                (r, s)
            })
            .collect();
        self.queue
            .export_counted(values, &self.metrics, "Kafka sending queue")
            .await
    }

    /// The counters (the OTLP exporters' set: `sent_chunks` counts messages).
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight messages finish within `deadline`, flushes
    /// the producer, then stops. What is left is dropped and counted (`network_error`) for an
    /// in-memory queue; a durable queue keeps it for the next start.
    pub async fn shutdown(mut self, deadline: Duration) {
        let started = Instant::now();
        let workers = std::mem::take(&mut self.workers);
        let (left, samples) = self.queue.close_and_stop(workers, deadline).await;
        let rest = deadline.saturating_sub(started.elapsed());
        let producer = self.producer.clone();
        let _ = tokio::task::spawn_blocking(move || producer.flush(rest)).await;
        if left == 0 {
            return;
        }
        match self.queue.dir() {
            Some(dir) => {
                tracing::info!(messages = left, samples, dir = %dir.display(), "Kafka exporter shut down; unsent messages stay queued for the next start")
            }
            None => {
                self.queue.drain_memory();
                self.metrics.add_dropped(DiscardReason::NetworkError, left);
                self.metrics
                    .add_dropped_samples(DiscardReason::NetworkError, samples);
                tracing::warn!(
                    messages = left,
                    "Kafka exporter shut down with unsent messages"
                );
            }
        }
    }
}
