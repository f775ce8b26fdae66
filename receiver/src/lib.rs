//! profilink receivers: the doors agents and SDKs send profiles to.
//!
//! * [`serve_otlp_grpc`]: OTLP/gRPC `ProfilesService/Export`, and `TraceService/Export` when the
//!   consumer takes traces (default `127.0.0.1:4317`).
//! * [`serve_otlp_http`]: OTLP/HTTP `POST /v1development/profiles`, and `POST /v1/traces` when the
//!   consumer takes traces (default `127.0.0.1:4318`).
//! * [`serve_pprof_http`], [`start_pprof_remote`], [`start_pprof_file`]: the `pprof`
//!   receiver's modes ([`pprof`]: `POST /v1/pprof`, scrapes of `/debug/pprof/...`, pprof
//!   files), each profile translated to OTLP.
//! * [`serve_pyroscope`]: the Pyroscope doors ([`pyroscope`]: `POST /ingest`,
//!   `POST /push.v1.PusherService/Push`; default `127.0.0.1:4040`).
//! * [`serve_sentry`]: Sentry's `POST /api/{project_id}/envelope/` (default `127.0.0.1:9000`),
//!   optionally forwarding everything to an [`Upstream`](profilink_consumer::Upstream)
//!   ([`serve_sentry_with`]) and then proxying the other ingest paths SDKs use (store,
//!   security, minidump, OTLP integration) too.
//!
//! The source is laid out by door: `otlp/` (both transports, and one file per signal:
//! `profiles.rs`, `traces.rs`, with what they share in `ingest.rs`), `sentry/` (the envelope
//! endpoint and the proxied paths), and `server/` for what the doors share (binding and
//! serving, TLS, connection limits, request bodies, CORS).
//!
//! Each server takes its config ([`OtlpGrpcConfig`], [`OtlpHttpConfig`],
//! [`SentryReceiverConfig`]), an `Arc` of a [`Consumer`](profilink_consumer::Consumer) (the
//! pipeline), an `Arc<`[`Stats`]`>` and a shutdown future; it binds at once (port 0 picks a
//! free port, see [`ServerHandle::local_addr`]) and serves until the future resolves, then
//! finishes in-flight requests. A request is answered with success only after the consumer
//! returned `Ok`. Backpressure: a consumer that is full is asked before the body is read
//! ([`Consumer::check_ready`](profilink_consumer::Consumer::check_ready)) and again when the
//! batch is offered; requests are never queued inside the receivers.
//!
//! ```no_run
//! # async fn run() -> Result<(), profilink_receiver::ReceiverError> {
//! use profilink_consumer::ChannelConsumer;
//! use profilink_receiver::{OtlpGrpcConfig, Stats, serve_otlp_grpc};
//! use std::sync::Arc;
//! let (consumer, mut batches) = ChannelConsumer::new(16);
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = serve_otlp_grpc(
//!     &OtlpGrpcConfig::default(),
//!     Arc::new(consumer),
//!     Arc::new(Stats::default()),
//!     async { let _ = stopped.await; },
//! )
//! .await?;
//! tokio::spawn(async move { while let Some(batch) = batches.recv().await { /* … */ } });
//! // … later:
//! let _ = stop.send(());
//! server.wait().await
//! # }
//! ```
//!
//! # Status codes
//!
//! OTLP (both transports; HTTP errors carry a `google.rpc.Status` in the request's format):
//!
//! | case | gRPC | HTTP |
//! |---|---|---|
//! | accepted (maybe with `partial_success`) | `OK` | 200 |
//! | profiles: `otlp-profiles-development-version` repeated, malformed or not `1` (checked before the body is read; [`profiles_version`]) | `INVALID_ARGUMENT` | 400 |
//! | undecodable protobuf / invalid OTLP/JSON | `INVALID_ARGUMENT` | 400 |
//! | dictionary with errors (whole request unusable) | `INVALID_ARGUMENT` | 400 |
//! | some profiles invalid | `OK`, `partial_success.rejected_profiles` = count | 200, same |
//! | message/body over the limit (after decompression) | `RESOURCE_EXHAUSTED` | 413 |
//! | corrupt compressed body | `INTERNAL` (tonic, as grpc-go) | 400 |
//! | unsupported `Content-Encoding` | `UNIMPLEMENTED` (tonic) | 400 (as the Collector) |
//! | unsupported `Content-Type` | — | 415 |
//! | missing/wrong token (`auth` or `bearer_token` configured) | `UNAUTHENTICATED` | 401 |
//! | pipeline full ([`ConsumeError::Full`](profilink_consumer::ConsumeError::Full)) | `UNAVAILABLE` + `google.rpc.RetryInfo` | 503 + `Retry-After` (+ `RetryInfo` detail) |
//! | pipeline rejected ([`ConsumeError::Rejected`](profilink_consumer::ConsumeError::Rejected)) | `INVALID_ARGUMENT` | 400 |
//! | pipeline failed (any other [`ConsumeError`](profilink_consumer::ConsumeError): closed, an exporter failing, a stage's task or log failing) | `UNAVAILABLE` | 503 |
//! | unknown method / path | `UNIMPLEMENTED` | 404 |
//! | other HTTP method on the path | — | 405 (`Allow: POST`) |
//!
//! OTLP traces follow the same table, with spans for profiles: a span whose `trace_id` is not
//! 16 bytes, `span_id` not 8 bytes or `parent_span_id` neither empty nor 8 bytes is rejected
//! (`partial_success.rejected_spans`), the others go on. Both signals go
//! through the same code ([`ExportService`], the HTTP handlers), generic over
//! the signal ([`IngestSignal`]). A consumer that does not take traces
//! ([`Consumer::accepts_traces`](profilink_consumer::Consumer::accepts_traces), the default)
//! makes `TraceService/Export` `UNIMPLEMENTED` and `/v1/traces` 404, as a Collector without a
//! traces pipeline on the receiver answers.
//!
//! Sentry envelopes (error bodies `{"detail":"…"}`, as Relay):
//!
//! | case | HTTP |
//! |---|---|
//! | accepted | 200 `{"id":"<event_id>"}`, or `{}` without `event_id` |
//! | no auth, several auth sources, unparsable auth or envelope `dsn` | 401 |
//! | key not allowed for the project (`allowed_keys`) | 401 |
//! | key not 32 characters, `sentry_version` > 7, `dsn` header not matching | 400 |
//! | project id not a number | 400 |
//! | unsupported `Content-Encoding` | 415 |
//! | over the size limit after decompression | 413 |
//! | more than one `profile`/`profile_chunk` item, or one over 50 MiB | 413 |
//! | empty body, corrupt compression, malformed envelope (bad item `length`…), bad `event_id` / `sent_at` | 400 |
//! | more than 500 items | 400 |
//! | a chunk, V1 profile or transaction that is not valid JSON for its type | 400 (item index + JSON path) |
//! | a `span` item (or a span in it) that cannot be read | 200; the span is skipped and counted ([`SentryBatch::invalid_spans`](profilink_consumer::SentryBatch::invalid_spans)) |
//! | a chunk failing the door check (the chunk validator's error rules, [`validate_chunk_errors`](profilink_proto::validate::validate_chunk_errors), and plausible Unix-second timestamps) | 400 naming the rule; with an upstream 200, counted with the rule as reason and forwarded |
//! | pipeline full, or the upstream queue full | 503 + `Retry-After` (as Relay; never a category-less 429) |
//! | an item whose category upstream rate-limits (with an [`Upstream`](profilink_consumer::Upstream)) | 429 + `X-Sentry-Rate-Limits` naming the matched limits + `Retry-After`; the other items are still forwarded |
//! | pipeline rejected / failed | 400 / 503 |
//! | path without the trailing slash, other paths | 404 |
//! | other HTTP method | 405 (`OPTIONS` answers CORS preflights) |
#![warn(missing_docs)]

pub mod auth;
mod config;
mod converted;
mod error;
mod otlp;
pub mod pprof;
pub mod pyroscope;
pub mod sample_records;
mod sentry;
mod server;
mod stats;
pub mod telemetry;
mod upstream;

pub use config::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig, TlsConfig};
pub use error::ReceiverError;
pub use otlp::grpc::{
    ExportService, OtlpGrpcHandler, OtlpGrpcService, OtlpTracesGrpcService, TRACES_EXPORT_PATH,
    serve_otlp_grpc,
};
pub use otlp::http::{TRACES_HTTP_PATH, otlp_http_router, serve_otlp_http};
pub use otlp::ingest::{IngestSignal, Refused, Split, Tally};
pub use otlp::profiles_version;
pub use pprof::config::{
    PprofFileConfig, PprofReceiverConfig, PprofRemoteConfig, PprofServerConfig,
};
pub use pprof::file::start_pprof_file;
pub use pprof::remote::start_pprof_remote;
pub use pprof::server::{PUSH_PATH as PPROF_PUSH_PATH, pprof_router, serve_pprof_http};
pub use pyroscope::config::PyroscopeReceiverConfig;
pub use pyroscope::{pyroscope_router, serve_pyroscope};
pub use sentry::envelope::{sentry_router, sentry_router_with, serve_sentry, serve_sentry_with};
pub use server::cors::CorsConfig;
pub use server::detach::Detached;
pub use server::http::HttpServerSettings;
pub use server::tls::MAX_HANDSHAKES as MAX_TLS_HANDSHAKES;
pub use server::{ServerHandle, bind_and_serve};
pub use stats::items::ItemCounters;
pub use stats::{Counters, CountersSnapshot, RefusalReason, Stats};

#[doc(hidden)]
pub mod testing {
    //! The body decoder the fuzz targets drive directly. Not part of the API (hidden from the
    //! docs, may change with any release); tests of behaviour go through the servers.
    pub use crate::server::decompress::{BodyError, Encoding, decode_bytes, decode_frames};
}
