//! Handing one Kafka message to the pipeline: the message decoded and validated
//! ([`decode`](crate::decode)), header extraction, the pipeline's answer turned into what the
//! receiver does with the message's offset ([`Outcome`]), and the counting of what was
//! accepted, refused and skipped. The receiver ([`crate::receiver`]) runs several of these at
//! once, one message per partition.

use crate::config::KafkaReceiverConfig;
use crate::decode::{Permanent, WithResources, decode_message};
use crate::metrics::KafkaReceiverMetrics;
use profilink_proto::signal::{Profiles, Traces};
use profilink_receiver::{
    ConsumeError, Consumer, IngestSignal, ReceiverKind, Split, Stats, Transport,
};
use rdkafka::message::{Headers, Message, OwnedMessage};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// The signal a topic carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SignalKind {
    Profiles,
    Traces,
}

/// What became of one message.
pub(crate) enum Outcome {
    /// Taken by the pipeline (or had nothing valid): mark it.
    Accepted,
    /// Skipped for good; mark it when `mark`.
    Skipped { mark: bool },
    /// The pipeline is full: retry after this wait.
    Full(Duration),
    /// The pipeline failed: retry after the error backoff.
    Failed,
}

/// Everything a hand-over needs, shared by the receiver and its hand-overs in flight.
pub(crate) struct Handover<C> {
    pub(crate) cfg: Arc<KafkaReceiverConfig>,
    pipeline: Arc<C>,
    stats: Arc<Stats>,
    metrics: Arc<KafkaReceiverMetrics>,
    traces_topics: Arc<BTreeSet<String>>,
}

impl<C> Clone for Handover<C> {
    fn clone(&self) -> Self {
        Handover {
            cfg: self.cfg.clone(),
            pipeline: self.pipeline.clone(),
            stats: self.stats.clone(),
            metrics: self.metrics.clone(),
            traces_topics: self.traces_topics.clone(),
        }
    }
}

impl<C: Consumer> Handover<C> {
    /// Hands over messages of `traces_topics` as traces and every other as profiles.
    pub(crate) fn new(
        cfg: KafkaReceiverConfig,
        pipeline: Arc<C>,
        stats: Arc<Stats>,
        metrics: Arc<KafkaReceiverMetrics>,
        traces_topics: BTreeSet<String>,
    ) -> Self {
        Handover {
            cfg: Arc::new(cfg),
            pipeline,
            stats,
            metrics,
            traces_topics: Arc::new(traces_topics),
        }
    }

    /// Offers `m` to the pipeline once.
    pub(crate) async fn offer(&self, m: &OwnedMessage) -> Outcome {
        if self.traces_topics.contains(m.topic()) {
            self.offer_as::<Traces>(m, SignalKind::Traces).await
        } else {
            self.offer_as::<Profiles>(m, SignalKind::Profiles).await
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

    async fn offer_as<S>(&self, m: &OwnedMessage, signal: SignalKind) -> Outcome
    where
        S: IngestSignal,
        S::Request: WithResources,
    {
        let headers: Vec<(String, Vec<u8>)> = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|x| (x.key.to_string(), x.value.unwrap_or_default().to_vec()))
                    .collect()
            })
            .unwrap_or_default();
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
                    return Outcome::Full(retry_after.max(self.cfg.error_backoff.initial_interval));
                }
                Err(ConsumeError::Rejected(message)) => {
                    S::count_refused(&self.stats.kafka, &valid.plus(&rejected));
                    return self.permanent(m, signal, Permanent::Rejected(message));
                }
                Err(ConsumeError::Internal(message)) => {
                    if self.cfg.message_marking.on_error {
                        S::count_refused(&self.stats.kafka, &valid.plus(&rejected));
                        KafkaReceiverMetrics::add(&self.metrics.skipped, 1);
                        tracing::warn!(topic = m.topic(), partition = m.partition(), offset = m.offset(), error = %message, "Kafka message dropped after a pipeline error (message_marking.on_error)");
                        return Outcome::Skipped { mark: true };
                    }
                    tracing::warn!(topic = m.topic(), partition = m.partition(), offset = m.offset(), error = %message, "Kafka message: the pipeline failed; retrying after error_backoff");
                    return Outcome::Failed;
                }
            }
        }
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
}
