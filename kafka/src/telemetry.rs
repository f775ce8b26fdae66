//! The `kafka` receivers' own metric families, read from their [`KafkaReceiverMetrics`]: the
//! Collector's `kafka_receiver_*` families (served as `otelcol_kafka_receiver_*`, as a
//! Collector's scrape shows them) and profilink's `profilink_kafka_receiver_*`. What a kafka
//! receiver accepts and refuses is counted in the receivers' families
//! (`profilink_receiver::telemetry`); the service's registry serves both at `/metrics`.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `otelcol_kafka_receiver_{messages,bytes}_total` | counter | `receiver`, `topic`, `partition` | messages and payload bytes received |
//! | `otelcol_kafka_receiver_current_offset` | gauge | `receiver`, `topic`, `partition` | offset of the last message received |
//! | `otelcol_kafka_receiver_offset_lag` | gauge | `receiver`, `topic`, `partition` | messages behind the high watermark (-1 until known) |
//! | `profilink_kafka_receiver_committed_offset` | gauge | `receiver`, `topic`, `partition` | the last offset this member committed (-1 before a commit) |
//! | `otelcol_kafka_receiver_partition_{start,close}_total` | counter | `receiver` | partitions assigned / revoked |
//! | `otelcol_kafka_receiver_unmarshal_failed_{profiles,spans}_total` | counter | `receiver` | messages whose version header or payload did not decode |
//! | `profilink_kafka_receiver_{rebalances,commit_failures,skipped_messages,pauses,alignment_holds,released_messages}_total` | counter | `receiver` | rebalances, failed commits, messages skipped for good, pauses of a full or failing pipeline, partitions paused for running ahead of their topic's others (`alignment`), messages left uncommitted for the partition's next owner |
//! | `profilink_kafka_receiver_client_errors_total` | counter | `receiver` | librdkafka client errors: brokers unreachable, TLS handshakes or SASL authentications refused |

use crate::{KafkaReceiverMetrics, PartitionMetrics};
use profilink_consumer::telemetry::{Render, Text};
use std::sync::Arc;

/// The `kafka` receivers' own counters, by receiver id (none, no families).
pub struct KafkaReceivers<'a>(pub &'a [(String, Arc<KafkaReceiverMetrics>)]);

impl Render for KafkaReceivers<'_> {
    fn render(&self, f: &mut Text<'_>) {
        if self.0.is_empty() {
            return;
        }
        type PartField = fn(&PartitionMetrics) -> f64;
        let per_partition: [(&str, &str, &str, PartField); 5] = [
            (
                "otelcol_kafka_receiver_messages_total",
                "counter",
                "Messages received, per topic partition.",
                |p| p.messages as f64,
            ),
            (
                "otelcol_kafka_receiver_bytes_total",
                "counter",
                "Payload bytes received, per topic partition.",
                |p| p.bytes as f64,
            ),
            (
                "otelcol_kafka_receiver_current_offset",
                "gauge",
                "Offset of the last message received, per topic partition.",
                |p| p.current_offset as f64,
            ),
            (
                "otelcol_kafka_receiver_offset_lag",
                "gauge",
                "Messages behind the partition's high watermark (librdkafka statistics; -1 until known).",
                |p| p.offset_lag as f64,
            ),
            (
                "profilink_kafka_receiver_committed_offset",
                "gauge",
                "The group's last committed offset by this member, per topic partition (-1 until a commit).",
                |p| p.committed_offset as f64,
            ),
        ];
        let snapshots: Vec<_> = self.0.iter().map(|(id, m)| (id, m.partitions())).collect();
        for (name, kind, help, get) in per_partition {
            f.header(name, kind, help);
            for (id, parts) in &snapshots {
                for ((topic, partition), p) in parts {
                    let partition = partition.to_string();
                    f.sample_f64(
                        name,
                        &[
                            ("receiver", id),
                            ("topic", topic),
                            ("partition", &partition),
                        ],
                        get(p),
                    );
                }
            }
        }
        f.per_entry(
            "counter",
            "receiver",
            self.0,
            &[
                (
                    "otelcol_kafka_receiver_partition_start_total",
                    "Partitions assigned to this member.",
                    |m| &m.partition_start,
                ),
                (
                    "otelcol_kafka_receiver_partition_close_total",
                    "Partitions revoked from this member.",
                    |m| &m.partition_close,
                ),
                (
                    "otelcol_kafka_receiver_unmarshal_failed_profiles_total",
                    "Profiles messages whose version header or payload did not decode.",
                    |m| &m.unmarshal_failed_profiles,
                ),
                (
                    "otelcol_kafka_receiver_unmarshal_failed_spans_total",
                    "Traces messages whose payload did not decode.",
                    |m| &m.unmarshal_failed_spans,
                ),
                (
                    "profilink_kafka_receiver_rebalances_total",
                    "Rebalances this member took part in (assignments and revocations).",
                    |m| &m.rebalances,
                ),
                (
                    "profilink_kafka_receiver_commit_failures_total",
                    "Offset commits that failed (retried with the next commit).",
                    |m| &m.commit_failures,
                ),
                (
                    "profilink_kafka_receiver_skipped_messages_total",
                    "Messages skipped for good (undecodable, unsupported version, invalid, rejected, or dropped after a pipeline error with message_marking.on_error).",
                    |m| &m.skipped,
                ),
                (
                    "profilink_kafka_receiver_pauses_total",
                    "Times the partitions were paused because the pipeline was full or failing.",
                    |m| &m.pauses,
                ),
                (
                    "profilink_kafka_receiver_alignment_holds_total",
                    "Times a partition was paused because it ran ahead of the others of its topic (alignment.max_buffered_bytes).",
                    |m| &m.alignment_holds,
                ),
                (
                    "profilink_kafka_receiver_released_messages_total",
                    "Messages received but not handed over when their partition was revoked or the receiver stopped: left uncommitted for the partition's next owner.",
                    |m| &m.released,
                ),
                (
                    "profilink_kafka_receiver_client_errors_total",
                    "librdkafka client errors (brokers unreachable, TLS handshakes or SASL authentications refused); librdkafka retries by itself.",
                    |m| &m.client_errors,
                ),
            ],
        );
    }
}
