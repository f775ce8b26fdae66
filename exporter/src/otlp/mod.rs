//! The OTLP profiles exporter (the way back, Sentry → OTLP): gRPC (tonic, gzip) or HTTP
//! (`POST {endpoint}/v1development/profiles`, protobuf, gzip), through the OTLP client of
//! [`crate::otlp_client`]; the retry rules are the request
//! exporter's ([`crate::request::retry_rules`]).
//!
//! Partial successes are never retried; they are logged (`rejected_profiles` and the message)
//! and counted. Requests wait in the exporter's sending queue ([`crate::send_queue`]): in
//! memory, or durable with `sending_queue.storage` (persisted before `export` returns,
//! removed once delivered or given up, replayed at start); `export` answers
//! [`ExportError::Full`](profilink_consumer::ExportError::Full) when it is full. The queue, its
//! senders, the retries and the counters are the request exporter's ([`crate::request`]); this
//! module supplies one attempt.
//!
//! Files: [`config`] (`exporters.otlp`), `export` (the exporter and its one attempt). The OTLP
//! client ([`crate::otlp_client`]) is shared with the traces exporter.

pub mod config;
mod export;

pub use config::OtlpExporterConfig;
pub use export::OtlpExporter;
