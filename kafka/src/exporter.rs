//! The `kafka` exporter: OTLP profiles (and traces) produced to Kafka, one request per
//! message, keyed per profiler session ([`crate::keying`]).
//!
//! `export` cuts the request into messages and puts them in the exporter's sending queue
//! (profilink-exporter's [`RequestExporter`], the OTLP exporters' queue and senders: in
//! memory, or durable with `sending_queue.storage`, persisted before `export` returns).
//! `num_consumers` senders take the oldest message, produce it and wait for the broker's
//! acknowledgement (`required_acks`), retrying with `retry_on_failure`'s backoff; a message is
//! removed from the queue only once it was acknowledged or given up (counted as dropped with a
//! reason). Delivery is at-least-once: a message whose acknowledgement was lost in a crash is
//! produced again. This module supplies one attempt ([`RequestSender`]); the queue, retries,
//! counters and shutdown are the request exporter's.

use crate::config::{Encoding, KafkaExporterConfig};
use crate::keying::{split_profiles, split_traces};
use crate::record::KafkaRecord;
use profilink_consumer::ExportError;
use profilink_exporter::{
    AttemptError, AttemptOutcome, ExporterMetrics, RequestExporter, RequestSender, RequestSettings,
    SendOutcome, SettingError, StartError,
};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportTraceServiceRequest, PROFILES_VERSION_HEADER,
};
use profilink_proto::otlp_json;
use profilink_proto::signal::{Signal, Traces, profile_counts};
use prost::Message;
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default number of senders (the Collector's `num_consumers`).
pub const DEFAULT_NUM_CONSUMERS: usize = 10;

/// Whether a produce error can never succeed for this message (it is then dropped as
/// `send_error`).
fn permanent(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::MessageSizeTooLarge
                | RDKafkaErrorCode::InvalidMessageSize
                | RDKafkaErrorCode::InvalidMessage
                | RDKafkaErrorCode::InvalidRecord
        )
    )
}

/// The producer's callbacks: librdkafka's log and client errors (a refused TLS handshake or
/// SASL authentication) as profilink log lines.
pub struct ProducerContext;

impl ClientContext for ProducerContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::client::log("producer", level, fac, log_message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        crate::client::error("producer", &error, reason);
    }
}

/// One attempt of a message: produce it and wait for the broker's acknowledgement.
struct MessageSender {
    producer: FutureProducer<ProducerContext>,
    /// The bootstrap servers, for log lines.
    destination: String,
}

impl RequestSender for MessageSender {
    type Request = KafkaRecord;
    type Metrics = ExporterMetrics;
    const NAME: &'static str = "Kafka";

    fn destination(&self) -> &str {
        &self.destination
    }

    async fn attempt(&self, rec: &KafkaRecord) -> SendOutcome {
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
        match self.producer.send(record, Duration::from_secs(0)).await {
            Ok(_) => SendOutcome::Delivered(None),
            Err((e, _)) => {
                let message = format!(
                    "Kafka produce to topic {} ({} bytes) failed: {e}",
                    rec.topic,
                    rec.payload.len()
                );
                SendOutcome::Failed(if permanent(&e) {
                    AttemptError::Permanent(message)
                } else {
                    AttemptError::Retryable {
                        after: None,
                        message,
                        network: true,
                    }
                })
            }
        }
    }

    /// Every failed produce is timed as a `network_error`, refusals for good included.
    fn failure_outcome(&self, _error: &AttemptError) -> AttemptOutcome {
        AttemptOutcome::NetworkError
    }
}

/// A setting's `key: problem` (what the config's checks say) as a start-up error.
fn setting(text: String) -> StartError {
    match text.split_once(": ") {
        Some((key, problem)) => SettingError::new(key, problem).into(),
        None => StartError::Invalid {
            what: "Kafka settings".into(),
            source: text.into(),
        },
    }
}

/// The producer's librdkafka settings from `cfg` (with `tls` and `auth`: they hold the SASL
/// password, so the result is never to be shown).
pub fn producer_config(cfg: &KafkaExporterConfig) -> Result<ClientConfig, StartError> {
    let mut c = ClientConfig::new();
    cfg.client().apply(&mut c).map_err(setting)?;
    c.set("acks", cfg.producer.required_acks.to_string())
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
    requests: RequestExporter<MessageSender>,
    metrics: Arc<ExporterMetrics>,
    cfg: KafkaExporterConfig,
    producer: FutureProducer<ProducerContext>,
}

impl KafkaExporter {
    /// Builds the producer (it connects lazily), opens the sending queue of `signal`
    /// (`profiles` or `traces`: its subdirectory of `sending_queue.storage`), replaying what an
    /// earlier run left there, and starts the senders.
    pub async fn start(cfg: KafkaExporterConfig, signal: &str) -> Result<Self, StartError> {
        cfg.check().map_err(setting)?;
        if cfg.client().deprecated_auth_tls() {
            tracing::warn!(
                "kafka exporter: auth.tls is deprecated (as in the Collector since v0.124.0); move it to tls"
            );
        }
        let settings = RequestSettings::new(
            &cfg.sending_queue,
            signal,
            1000,
            DEFAULT_NUM_CONSUMERS,
            cfg.retry_on_failure.clone(),
        )?;
        let producer: FutureProducer<ProducerContext> = producer_config(&cfg)?
            .create_with_context(ProducerContext)
            .map_err(|e| StartError::invalid("Kafka producer settings", e))?;
        let metrics = Arc::new(ExporterMetrics::default());
        let sender = MessageSender {
            producer: producer.clone(),
            destination: cfg.client().bootstrap_servers().unwrap_or_default(),
        };
        let requests = RequestExporter::start(sender, metrics.clone(), settings).await?;
        Ok(KafkaExporter {
            requests,
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
        let json = self.cfg.profiles_encoding() == Encoding::OtlpJson;
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
                    payload: if json {
                        otlp_json::encode_request(&r)
                    } else {
                        r.encode_to_vec()
                    },
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
        let json = self.cfg.traces_encoding() == Encoding::OtlpJson;
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
                payload: if json {
                    otlp_json::encode_traces_request(&r)
                } else {
                    r.encode_to_vec()
                },
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
        self.requests.export(values).await
    }

    /// The counters (the OTLP exporters' set: `sent_chunks` counts messages).
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight messages finish within `deadline`, flushes
    /// the producer, then stops. What is left is dropped and counted (`network_error`) for an
    /// in-memory queue; a durable queue keeps it for the next start.
    pub async fn shutdown(self, deadline: Duration) {
        let started = Instant::now();
        self.requests.shutdown(deadline).await;
        let rest = deadline.saturating_sub(started.elapsed());
        let producer = self.producer;
        let _ = tokio::task::spawn_blocking(move || producer.flush(rest)).await;
    }
}
