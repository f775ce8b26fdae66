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

pub mod config;
pub mod metrics;
pub mod send;
pub mod split;

pub use config::{OtlpTracesConfig, SentryTracesConfig, TracesExporterConfig};
pub use metrics::{TracesMetrics, TracesMetricsSnapshot};
pub use profilink_proto::otlp::ExportTraceServiceRequest;

use crate::clock::{SharedClock, system_clock};
use crate::config::OtlpProtocol;
use crate::queue_config::DEFAULT_QUEUE_SIZE;
use crate::request::{RequestExporter, RequestSettings};
use crate::send_queue::record::Queued;
use crate::start_error::StartError;
use profilink_consumer::ExportError;
use send::Sender;
use std::sync::Arc;
use std::time::Duration;

impl Queued for ExportTraceServiceRequest {
    const KIND: u8 = b'T';
}

/// Forwards OTLP traces. See the module docs.
pub struct TracesExporter {
    requests: RequestExporter<Sender>,
    max_request_bytes: u64,
    metrics: Arc<TracesMetrics>,
    kind: &'static str,
}

impl std::fmt::Debug for TracesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracesExporter")
            .field("kind", &self.kind)
            .field("destination", &self.destination())
            .finish_non_exhaustive()
    }
}

impl TracesExporter {
    /// Validates the config (endpoint, DSN, headers), builds the client (connections are made
    /// lazily) and starts `num_consumers` senders. Must run inside a tokio runtime.
    pub async fn start(cfg: TracesExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`TracesExporter::start`] with an injected clock: rate limits and the backoff's
    /// `max_elapsed_time` are measured on it (tests advance a [`crate::ManualClock`]).
    pub async fn start_with_clock(
        cfg: TracesExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        let metrics = Arc::new(TracesMetrics::default());
        let sender = match &cfg {
            TracesExporterConfig::Otlp(c) => {
                Sender::otlp(OtlpProtocol::Grpc, c, clock.clone(), metrics.clone())?
            }
            TracesExporterConfig::OtlpHttp(c) => {
                Sender::otlp(OtlpProtocol::Http, c, clock.clone(), metrics.clone())?
            }
            TracesExporterConfig::Sentry(c) => Sender::sentry(c, clock.clone(), metrics.clone())?,
        };
        let settings = RequestSettings::new(
            cfg.sending_queue(),
            "traces",
            DEFAULT_QUEUE_SIZE,
            cfg.num_consumers(),
            cfg.retry_on_failure().clone(),
        )?
        .with_clock(clock);
        let requests = RequestExporter::start(sender, metrics.clone(), settings).await?;
        tracing::debug!(kind = cfg.kind(), destination = %requests.sender().destination(), "traces exporter started");
        Ok(TracesExporter {
            requests,
            max_request_bytes: cfg.max_request_bytes(),
            metrics,
            kind: cfg.kind(),
        })
    }

    /// Queues a request (split above `max_request_bytes`) and returns; delivery happens in the
    /// background. Requests without spans are accepted and not sent.
    ///
    /// Errors: [`ExportError::Full`] when the queue cannot take the whole request (answer the
    /// producer UNAVAILABLE / 429 with `retry_after`), [`ExportError::Closed`] after shutdown.
    pub async fn export(&self, req: ExportTraceServiceRequest) -> Result<(), ExportError> {
        if self.requests.is_closed() {
            return Err(ExportError::Closed);
        }
        if split::span_count(&req) == 0 {
            return Ok(());
        }
        let pieces = split::split_request(req, self.max_request_bytes)
            .into_iter()
            .map(|req| {
                let spans = split::span_count(&req);
                (req, spans)
            })
            .filter(|(_, spans)| *spans > 0)
            .collect();
        self.requests.export(pieces).await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<TracesMetrics> {
        self.metrics.clone()
    }

    /// The exporter kind (`otlp`, `otlp_http` or `sentry`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Where requests go (a URL without credentials), for logs.
    pub fn destination(&self) -> &str {
        self.requests.sender().destination()
    }

    /// Stops accepting, sends what is queued (retries and rate-limit waits included) until
    /// `deadline`, then stops the senders. Spans still queued or in flight then stay queued for
    /// the next start with storage; in memory they are counted as dropped:
    /// `ratelimit_backoff` while a rate limit is active, else `network_error`.
    pub async fn shutdown(self, deadline: Duration) {
        self.requests.shutdown(deadline).await;
    }
}
