//! profilink's Kafka doors, compatible with the OpenTelemetry Collector's `kafka` receiver and
//! exporter (topic `otlp_profiles`, encoding `otlp_proto`: one `ExportProfilesServiceRequest`
//! per message).
//!
//! * [`KafkaExporter`] ([`exporter`]): produces OTLP profiles (and traces) to Kafka through
//!   the OTLP exporters' sending queue, one message per profiler session keyed with its
//!   profiler id ([`keying`]), so a downstream consumer group keeps a session on one
//!   consumer.
//! * [`KafkaReceiver`] ([`receiver`]): a consumer-group member that hands each message to the
//!   pipeline's [`Consumer`](profilink_consumer::Consumer) and marks its offset only once the
//!   pipeline accepted it (with a durable exporter queue: once it is on disk), so a replica
//!   killed at any moment loses nothing; backpressure pauses the partitions; a message that
//!   can never be accepted is counted, logged and skipped ([`decode`]).
//!
//! The client is librdkafka (the `rdkafka` crate, its bundled static build, with the system's
//! OpenSSL): TLS and SASL `PLAIN` / `SCRAM-SHA-256` / `SCRAM-SHA-512` to the brokers
//! ([`auth`]). Configuration: [`config`], with the Collector's keys.
#![warn(missing_docs)]

pub mod align;
pub mod auth;
mod client;
mod closing;
pub mod config;
mod context;
mod contract;
pub mod decode;
pub mod exporter;
pub mod keying;
pub mod metrics;
pub mod receiver;
pub mod record;
pub mod telemetry;
#[doc(hidden)]
pub mod testing;

pub use config::{KafkaExporterConfig, KafkaReceiverConfig};
pub use contract::KafkaTracesExporter;
pub use exporter::KafkaExporter;
pub use metrics::{KafkaReceiverMetrics, PartitionMetrics};
pub use receiver::KafkaReceiver;
