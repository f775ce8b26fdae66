//! profilink exporters: deliver profile chunks to Sentry (or envelope files) and OTLP profiles
//! to an OTLP endpoint, without losing data.
//!
//! * [`SentryExporter`]: accumulates short chunks of one profiler session into chunks of up to
//!   a minute, persists everything in a durable queue before acknowledging it, and sends one
//!   `profile_chunk` envelope per chunk with Sentry's auth, compression, rate limits
//!   (`X-Sentry-Rate-Limits`, `Retry-After`), retries with backoff, dead letters, client
//!   reports and per-attribute DSN routing ([`Router`]).
//! * [`FileExporter`]: the same accumulation and queue, writing `<chunk_id>.envelope` files
//!   atomically ([`write_atomic`]).
//! * [`OtlpExporter`]: OTLP gRPC or HTTP with the OTLP retry rules and partial-success
//!   accounting, behind a sending queue that is in memory or, with `sending_queue.storage`,
//!   durable ([`QueueConfig`], the one `sending_queue` settings type of every exporter).
//! * [`Forwarder`]: the Sentry receiver's `upstream`: what SDKs send, passed on as received
//!   to their Sentry or Relay through a durable queue, in order per project, with retries and
//!   upstream rate limits handed back to the SDKs.
//! * [`TracesExporter`]: OTLP traces to an OTLP endpoint (gRPC / HTTP) or to Sentry's OTLP
//!   traces endpoint (DSN key auth, rate limits, request splitting).
//!
//! Every transport is built by the (private) `http` module: TLS from the exporter's `tls:`
//! settings ([`ClientTlsConfig`], the Collector's `configtls`), proxies from the environment,
//! request compression, and Sentry's rate-limit headers; TLS handshake failures are counted
//! ([`tls_handshake_failures`]).
//!
//! Life cycle of every exporter: `start(config)` (a [`StartError`] when it cannot start) →
//! `export(...)` any number of times (from any task) → `shutdown(deadline)`. Dropping an exporter without `shutdown` stops it like a crash:
//! accepted data stays in the queue and is delivered on the next start.
//!
//! Counters of every exporter are in [`ExporterMetrics`] (chunk and profile exporters) and
//! [`TracesMetrics`]; a [`ChunkObserver`](profilink_consumer::ChunkObserver) sees every merged chunk once it is durably queued
//! (the service's profile store). Time is read through a [`Clock`], so tests can drive it
//! ([`ManualClock`]).
//!
//! The request exporters (OTLP profiles, traces, and profilink-kafka's) share one queue
//! consumer and retry loop, [`RequestExporter`] (the Collector's `exporterhelper`): each
//! supplies only how to send one request once ([`RequestSender`]).
//!
//! Rooms (private modules unless re-exported above):
//! * exporters, one folder each with the same file names (as Vector's sinks): `mod.rs` (the
//!   module doc and re-exports), `config.rs` (its YAML settings, defaults and checks),
//!   `export.rs` (the exporter: start, its `Export` impl, shutdown), plus files named by idea:
//!   `sentry/` (`sink`, `routing`, `transport`, `client_report`), `file/` (`write`: atomic
//!   writes and envelope file names), `otlp/`, `traces/` (`send`, `split`, `metrics`), and
//!   `forward/` (the upstream forwarder, its own district: `queue`, `send`, `limits`,
//!   `metrics`; nothing else in the crate uses its files);
//! * chunk delivery (Sentry and file): `chunk_engine` (how a chunk exporter's config starts
//!   the engine), `engine` (durable queue → accumulator → ready log → concurrent
//!   deliveries), `accumulate` and `merge` (chunk accumulation), `queue` (the durable queue:
//!   record formats on `profilink_storage`'s segment logs, `input_writer`);
//! * request delivery (OTLP, traces, Kafka): `request` (`queue_sender`, `retry_sender`, the
//!   counters they update), `send_queue` (the sending queue, in memory or durable, and its
//!   record format), `otlp_client` (one OTLP client for any signal, shared by `otlp` and
//!   `traces`); the OTLP retry rules are `request`'s (`retry_rules`);
//! * shared: `config` (the settings several exporters share: compression, TLS, retry, OTLP
//!   protocol, chunk accumulation), `queue_config` (`sending_queue`, one type read by the
//!   chunk, request and forward queues), `start_error`, `contract` (the rule by which
//!   exporters refuse up front), `http` (clients, TLS, proxies, compression, rate-limit
//!   headers, responses), `client_auth` (authentication headers), `retry` (backoff), `clock`,
//!   `metrics`, `durations` (attempt duration histograms), `observer`.
//!
//! Inside the crate, dependencies go one way: the settings (`config`, `queue_config`) and the
//! shared rooms are below the queues, which are below the engines and request exporters,
//! which are below the exporters. Exporter folders do not import each other, except `sentry`
//! writing its dead letters through `file`'s atomic writes.
#![warn(missing_docs)]

mod accumulate;
mod chunk_engine;
mod client_auth;
mod clock;
// `#[macro_use]`: the chunk exporters' configs (`sentry`, `file`) take their accumulation
// part from `config`'s `chunk_exporter_parts!`.
#[macro_use]
mod config;
mod contract;
mod durations;
mod emit_reason;
mod engine;
mod file;
mod forward;
mod http;
mod merge;
mod metrics;
mod observer;
mod otlp;
mod otlp_client;
mod queue;
mod queue_config;
mod request;
mod retry;
mod send_queue;
mod sentry;
mod start_error;
pub mod telemetry;
mod traces;

pub use client_auth::{AuthSlot, ClientAuth};
pub use clock::{Clock, ManualClock, SharedClock};
pub use config::{
    AccumulateConfig, ClientTlsConfig, Compression, CompressionParams, OtlpProtocol, RetryConfig,
    SparseThreads,
};
pub use contract::nearly_full;
pub use durations::{AttemptDurations, AttemptOutcome, HistogramSnapshot};
pub use emit_reason::EmitReason;
pub use file::{
    FileExporter, FileExporterConfig, WritebackFile, envelope_file_name, write_atomic,
    write_atomic_with,
};
pub use forward::{ForwardConfig, ForwardMetrics, Forwarder};
pub use http::tls_handshake_failures;
pub use merge::{content_checksum, merged_chunk_id};
pub use metrics::{DiscardReason, ExporterMetrics, MetricsSnapshot};
pub use observer::ObserverSlot;
pub use otlp::{OtlpExporter, OtlpExporterConfig};
pub use queue_config::{Overflow, QueueConfig, QueueLimits, QueueSizer, SettingError};
pub use request::{
    AttemptError, QueueLevels, RequestExporter, RequestMetrics, RequestSender, RequestSettings,
    SendOutcome,
};
pub use send_queue::record::Queued;
pub use sentry::{Route, Router, RoutingConfig, SentryExporter, SentryExporterConfig};
pub use start_error::StartError;
pub use traces::{
    OtlpTracesConfig, SentryTracesConfig, TracesExporter, TracesExporterConfig, TracesMetrics,
    TracesMetricsSnapshot,
};

#[doc(hidden)]
pub mod testing {
    //! Internals that the workspace's benches and fuzz targets drive directly, stage by stage:
    //! the accumulator, the durable queue's record codecs and body compression. Not part of
    //! the API (hidden from the docs, may change with any release); tests of behaviour go
    //! through the exporters.
    pub use crate::accumulate::{ChunkAccumulator, Emitted};
    pub use crate::http::{compress, compress_level, compress_written};
    pub use crate::queue::consumed::decode as decode_consumed;
    pub use crate::queue::decode_ready;
    pub use crate::queue::input::{ChunkInfo, decode as decode_input, encode_batch, encode_legacy};
    pub use crate::send_queue::record::{
        Queued, decode as decode_otlp_record, encode as encode_otlp_record,
    };
}

/// The SDK name profilink reports (`sdk.name`, `sentry_client`).
pub const SDK_NAME: &str = "profilink";
/// This crate's version (`sdk.version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
