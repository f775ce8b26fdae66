//! The traces exporter: forwards OTLP trace export requests to an OTLP endpoint (gRPC or
//! HTTP/protobuf) or to Sentry's OTLP traces endpoint.
//!
//! * `otlp`: `opentelemetry.proto.collector.trace.v1.TraceService/Export` over gRPC (tonic),
//!   message compression gzip (default), zstd or none, extra metadata from `headers`.
//! * `otlp_http`: `POST {endpoint}/v1/traces`, `Content-Type: application/x-protobuf`,
//!   `Content-Encoding` gzip / zstd / none, extra `headers`.
//! * `sentry`: `POST {scheme}://{host}[:port]{path}api/{project_id}/integration/otlp/v1/traces`
//!   (from the DSN) with `x-sentry-auth: sentry sentry_key=<public key>`, protobuf body.
//!
//! The queue, its senders, retries and counters are the request exporter's
//! ([`crate::request`]); [`send`] supplies one attempt with each transport.
//!
//! Retries follow the OTLP rules for `otlp` / `otlp_http` (see [`crate::otlp`]: gRPC
//! `UNAVAILABLE` and friends, HTTP 429/502/503/504 honouring `Retry-After`, transport errors),
//! with the `retry_on_failure` backoff. For `sentry`: `X-Sentry-Rate-Limits` on any response
//! blocks the `span` and `transaction` categories (and all-category limits block everything);
//! a 429 without that header blocks for `Retry-After`, else `default_rate_limit` (60 s). While
//! blocked, requests wait (they are not dropped) and the queue fills, so `export` pushes back.
//! 408 and 5xx are retried with backoff; 400, 401, 403, 413 and other 4xx are permanent
//! (counted as `send_error`, logged without the key). Partial successes are logged and counted
//! (`rejected_spans`), never retried.
//!
//! Requests larger than `max_request_bytes` (default 10 MiB uncompressed, below Sentry's
//! 12 MiB body limit) are split by resource, scope and span ([`split`]) before queuing. The
//! sending queue ([`crate::send_queue`]) is bounded by requests and bytes and lives in memory,
//! or on disk with `sending_queue.storage` (each request persisted before `export` returns,
//! removed once delivered or given up, replayed at start); `export` answers
//! [`ExportError::Full`] when it is full. `num_consumers` senders (default 2) take requests in
//! FIFO order, so order is kept except around retries.
//!
//! Life cycle: [`TracesExporter::start`] → [`TracesExporter::export`] from any task →
//! [`TracesExporter::shutdown`], which sends what is queued until its deadline; what is left
//! stays queued with storage, else it is counted as dropped (`ratelimit_backoff` while rate
//! limited, else `network_error`).
//!
//! Files: [`config`] (`exporters.<otlp|otlp_http|sentry>` of a traces pipeline), `export` (the
//! exporter), [`send`] (one attempt per transport), [`split`], [`metrics`].

pub mod config;
mod export;
pub mod metrics;
pub mod send;
pub mod split;

pub use config::{OtlpTracesConfig, SentryTracesConfig, TracesExporterConfig};
pub use export::TracesExporter;
pub use metrics::{TracesMetrics, TracesMetricsSnapshot};
