//! The kafka receiver's consumer callbacks: rebalances (what was revoked and assigned, for
//! the receiver's loop to act on between two messages), commits, statistics.

use crate::metrics::KafkaReceiverMetrics;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::sync::{Arc, Mutex};

/// The consumer's callbacks: rebalances, commits, statistics.
pub(crate) struct Context {
    pub(crate) metrics: Arc<KafkaReceiverMetrics>,
    /// Partitions revoked since the receiver last looked, to release.
    pub(crate) revoked: Mutex<Vec<(String, i32)>>,
    /// Partitions assigned since the receiver last looked, for alignment to wait on.
    pub(crate) assigned: Mutex<Vec<(String, i32)>>,
    /// Commit synchronously in the revoke callback (without `autocommit`: librdkafka's
    /// automatic commit already commits what is stored before a revoke completes).
    pub(crate) commit_on_revoke: bool,
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        crate::client::log("consumer", level, fac, log_message);
    }

    /// Client errors (brokers down, a refused TLS handshake or SASL authentication): logged
    /// and counted; librdkafka keeps retrying.
    fn error(&self, error: KafkaError, reason: &str) {
        // `enable.partition.eof` (alignment): reaching a partition's end is news, not an error.
        if matches!(
            error,
            KafkaError::Global(RDKafkaErrorCode::PartitionEOF) | KafkaError::PartitionEOF(_)
        ) {
            return;
        }
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
                let mut assigned = self.assigned.lock().unwrap_or_else(|p| p.into_inner());
                for e in tpl.elements() {
                    assigned.push((e.topic().to_string(), e.partition()));
                }
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
pub(crate) fn commit<C: rdkafka::consumer::Consumer<Context>>(
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
