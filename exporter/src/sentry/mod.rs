//! The Sentry exporter: merged profile chunks as envelopes to Sentry's envelope endpoint.
//!
//! Per chunk: one envelope with headers `sent_at` (RFC 3339 UTC), `dsn` and
//! `sdk: {"name": "profilink", "version": <crate version>}`, and exactly one `profile_chunk`
//! item (Relay answers 413 to two) with headers `type`, `length`, `content_type` and
//! `platform` (equal to the payload's). `POST {scheme}://{host}[:port]{path}api/{project}/envelope/`
//! with `X-Sentry-Auth: Sentry sentry_key=…, sentry_version=7, sentry_client=profilink/<ver>`,
//! `Content-Type: application/x-sentry-envelope` and `Content-Encoding` gzip (default), zstd or
//! none.
//!
//! Responses:
//! * 2xx: delivered (an `X-Sentry-Rate-Limits` header on it is honoured too);
//! * 429: `X-Sentry-Rate-Limits` (else `Retry-After`, else `default_rate_limit`, 60 s) blocks the
//!   named categories (`profile_chunk`, `profile_chunk_ui`, or all) for that DSN; chunks of a
//!   blocked category wait in the queue while the limit is short. While it is long (a quota
//!   reason such as `usage_exceeded`, or more than `rate_limit_max_wait` left, default 5 min)
//!   they are dropped and reported as `ratelimit_backoff`, as the SDKs do, instead of holding
//!   the queue and pushing back on every agent;
//! * 400, 401, 403, 413 (and other 4xx but 408): permanent — logged with the start of the body,
//!   counted as `send_error`, written to `dead_letter_dir` if set;
//! * 408, 5xx, timeouts, connection errors: retried with exponential backoff and jitter; when
//!   `max_elapsed_time` runs out the chunk is dropped and counted (`send_error` /
//!   `network_error`).
//!
//! Discards are reported to Sentry in `client_report` envelopes every `client_report_interval`
//! and at shutdown.
//!
//! Files: [`config`] (`exporters.sentry`), `export` (the exporter), `sink` (one delivery),
//! [`routing`] (DSN per resource attribute), [`transport`] (the HTTP client),
//! [`client_report`] (discard reports).

pub mod client_report;
pub mod config;
mod export;
pub mod routing;
mod sink;
pub mod transport;

pub use config::{RoutingConfig, SentryExporterConfig};
pub use export::SentryExporter;
pub use routing::{Route, Router};
