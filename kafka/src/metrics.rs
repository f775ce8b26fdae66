//! The kafka receiver's own counters, under the Collector's `kafka_receiver_*` names where it
//! has them (what the receiver accepted and refused is counted in the receiver's
//! [`Counters`](profilink_receiver::Counters), the `otelcol_receiver_*` families with
//! `receiver="kafka"`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Per topic partition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionMetrics {
    /// Messages received (`kafka_receiver_messages`).
    pub messages: u64,
    /// Payload bytes received (`kafka_receiver_bytes`).
    pub bytes: u64,
    /// Offset of the last message received (`kafka_receiver_current_offset`).
    pub current_offset: i64,
    /// The consumer's lag behind the partition's high watermark, from librdkafka's statistics
    /// (`kafka_receiver_offset_lag`; -1 until known).
    pub offset_lag: i64,
    /// The last offset committed (-1 until a commit).
    pub committed_offset: i64,
}

/// The receiver's counters. See the module docs.
#[derive(Debug, Default)]
pub struct KafkaReceiverMetrics {
    partitions: Mutex<BTreeMap<(String, i32), PartitionMetrics>>,
    /// Rebalances this member took part in (`kafka_receiver_rebalances`: assignments and
    /// revocations).
    pub rebalances: AtomicU64,
    /// Partitions assigned (`kafka_receiver_partition_start`).
    pub partition_start: AtomicU64,
    /// Partitions revoked or lost (`kafka_receiver_partition_close`).
    pub partition_close: AtomicU64,
    /// Offset commits that failed (`kafka_receiver_commit_failures`).
    pub commit_failures: AtomicU64,
    /// Messages that did not decode (`kafka_receiver_unmarshal_failed_profiles`, `…_spans`).
    pub unmarshal_failed_profiles: AtomicU64,
    /// See `unmarshal_failed_profiles`.
    pub unmarshal_failed_spans: AtomicU64,
    /// Messages skipped for good: undecodable, unsupported version, refused by the pipeline,
    /// or dropped after a pipeline error with `on_error: true`
    /// (`kafka_receiver_messages_skipped`).
    pub skipped: AtomicU64,
    /// Times the receiver paused its partitions because the pipeline was full or failing
    /// (`kafka_receiver_backpressure_pauses`).
    pub pauses: AtomicU64,
    /// Received messages not yet accepted when their partition was revoked: released
    /// uncommitted, for the partition's next owner (`kafka_receiver_released_messages`).
    pub released: AtomicU64,
    /// Times a partition was paused because it ran ahead of the others of its topic
    /// (`alignment.max_buffered_bytes`, [`crate::align`]).
    pub alignment_holds: AtomicU64,
    /// librdkafka client errors: brokers unreachable, a TLS handshake or SASL authentication
    /// refused, … (`kafka_receiver_client_errors`; librdkafka retries by itself).
    pub client_errors: AtomicU64,
}

impl KafkaReceiverMetrics {
    /// Counts a received message.
    pub fn received(&self, topic: &str, partition: i32, offset: i64, bytes: usize) {
        let mut p = self.lock();
        let m = entry(&mut p, topic, partition);
        m.messages += 1;
        m.bytes += bytes as u64;
        m.current_offset = offset;
    }

    /// Sets a partition's lag.
    pub fn set_lag(&self, topic: &str, partition: i32, lag: i64) {
        if let Some(m) = self.lock().get_mut(&(topic.to_string(), partition)) {
            m.offset_lag = lag;
        }
    }

    /// Sets a partition's committed offset.
    pub fn set_committed(&self, topic: &str, partition: i32, offset: i64) {
        let mut p = self.lock();
        let m = entry(&mut p, topic, partition);
        m.committed_offset = offset;
    }

    /// Every partition seen, by topic and partition.
    pub fn partitions(&self) -> BTreeMap<(String, i32), PartitionMetrics> {
        self.lock().clone()
    }

    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, i32), PartitionMetrics>> {
        self.partitions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A partition's counters, new ones with lag and committed offset unknown (-1).
fn entry<'a>(
    partitions: &'a mut BTreeMap<(String, i32), PartitionMetrics>,
    topic: &str,
    partition: i32,
) -> &'a mut PartitionMetrics {
    partitions
        .entry((topic.to_string(), partition))
        .or_insert(PartitionMetrics {
            offset_lag: -1,
            committed_offset: -1,
            ..Default::default()
        })
}
