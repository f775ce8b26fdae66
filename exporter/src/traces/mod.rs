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

pub use config::{OtlpTracesConfig, SentryTracesConfig, TracesExporterConfig, TracesQueueConfig};
pub use metrics::{TracesMetrics, TracesMetricsSnapshot};
pub use profilink_proto::otlp::ExportTraceServiceRequest;

use crate::ExportError;
use crate::clock::{SharedClock, system_clock};
use crate::metrics::DiscardReason;
use crate::send_queue::record::Queued;
use crate::send_queue::{PushError, SendQueue};
use send::{Item, Sender};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;

impl Queued for ExportTraceServiceRequest {
    const KIND: u8 = b'T';
}

type Queue = SendQueue<ExportTraceServiceRequest>;

/// Sets the queue gauges (requests and bytes waiting) from the queue.
fn gauges(queue: &Queue, metrics: &TracesMetrics) {
    metrics
        .queue_requests
        .store(queue.len() as u64, Ordering::Relaxed);
    metrics
        .queue_bytes
        .store(queue.waiting_bytes(), Ordering::Relaxed);
}

/// One sender: takes the oldest request, delivers it, removes it from the queue.
async fn consume(queue: Arc<Queue>, sender: Arc<Sender>, metrics: Arc<TracesMetrics>) {
    while let Some(next) = queue.pop().await {
        let (id, spans) = match &next {
            Ok(c) => (c.id, c.items),
            Err(c) => (c.id, c.items),
        };
        gauges(&queue, &metrics);
        match next {
            Ok(claimed) => {
                sender
                    .deliver(Item {
                        req: claimed.value,
                        spans,
                    })
                    .await;
            }
            Err(corrupt) => {
                metrics.add_dropped(DiscardReason::SendError, spans);
                tracing::warn!(
                    destination = %sender.destination(),
                    spans,
                    error = %corrupt.error,
                    reason = DiscardReason::SendError.as_str(),
                    "traces sending queue: a queued request does not read; it is dropped"
                );
            }
        }
        // Same poll as the outcome above (no await in between for an in-memory queue), so a
        // shutdown's abort never counts a request twice.
        if let Err(e) = queue.ack(id).await {
            tracing::warn!(error = %e, "traces sending queue: removing a sent request failed; it will be sent again after a restart");
        }
    }
}

/// Forwards OTLP traces. See the module docs.
pub struct TracesExporter {
    queue: Arc<Queue>,
    sender: Arc<Sender>,
    clock: SharedClock,
    workers: Vec<JoinHandle<()>>,
    max_request_bytes: u64,
    metrics: Arc<TracesMetrics>,
    kind: &'static str,
}

impl Drop for TracesExporter {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

impl std::fmt::Debug for TracesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracesExporter")
            .field("kind", &self.kind)
            .field("destination", &self.sender.destination())
            .finish_non_exhaustive()
    }
}

impl TracesExporter {
    /// Validates the config (endpoint, DSN, headers), builds the client (connections are made
    /// lazily) and starts `num_consumers` senders. Must run inside a tokio runtime.
    pub async fn start(cfg: TracesExporterConfig) -> Result<Self, ExportError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`TracesExporter::start`] with an injected clock: rate limits and the backoff's
    /// `max_elapsed_time` are measured on it (tests advance a [`crate::ManualClock`]).
    pub async fn start_with_clock(
        cfg: TracesExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, ExportError> {
        let metrics = Arc::new(TracesMetrics::default());
        let sender = match &cfg {
            TracesExporterConfig::Otlp(c) => Sender::grpc(c, clock.clone(), metrics.clone())?,
            TracesExporterConfig::OtlpHttp(c) => Sender::http(c, clock.clone(), metrics.clone())?,
            TracesExporterConfig::Sentry(c) => Sender::sentry(c, clock.clone(), metrics.clone())?,
        };
        let q = cfg.sending_queue();
        let limits = q.limits(crate::send_queue::config::DEFAULT_QUEUE_SIZE)?;
        metrics
            .queue_capacity_bytes
            .store(limits.max_bytes, Ordering::Relaxed);
        metrics
            .queue_capacity_requests
            .store(limits.max_requests.unwrap_or(0), Ordering::Relaxed);
        let dir = q.dir("traces");
        let fsync = q.fsync;
        let (queue, recovered) =
            tokio::task::spawn_blocking(move || Queue::open(dir.as_deref(), fsync, limits))
                .await??;
        gauges(&queue, &metrics);
        if recovered.corrupt > 0 {
            // Their spans are unknown: the records did not read.
            tracing::warn!(
                records = recovered.corrupt,
                "traces sending queue: unreadable records refused at start"
            );
        }
        if let Some(dir) = queue.dir() {
            tracing::info!(
                dir = %dir.display(),
                requests = recovered.requests,
                spans = recovered.items,
                "traces sending queue opened"
            );
        }
        let queue = Arc::new(queue);
        let sender = Arc::new(sender);
        let workers = (0..cfg.num_consumers())
            .map(|_| tokio::spawn(consume(queue.clone(), sender.clone(), metrics.clone())))
            .collect();
        tracing::debug!(kind = cfg.kind(), destination = %sender.destination(), "traces exporter started");
        Ok(TracesExporter {
            queue,
            sender,
            clock,
            workers,
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
        if self.queue.is_closed() {
            return Err(ExportError::Closed);
        }
        let spans = split::span_count(&req);
        if spans == 0 {
            return Ok(());
        }
        let items: Vec<(ExportTraceServiceRequest, u64)> =
            split::split_request(req, self.max_request_bytes)
                .into_iter()
                .map(|req| {
                    let spans = split::span_count(&req);
                    (req, spans)
                })
                .filter(|(_, spans)| *spans > 0)
                .collect();
        let pieces = items.len() as u64;
        match self.queue.push_all(items).await {
            Ok(()) => {
                TracesMetrics::add(&self.metrics.accepted_requests, 1);
                TracesMetrics::add(&self.metrics.accepted_spans, spans);
                TracesMetrics::add(&self.metrics.split_requests, pieces.saturating_sub(1));
                gauges(&self.queue, &self.metrics);
                Ok(())
            }
            Err(PushError::Closed) => Err(ExportError::Closed),
            Err(PushError::Full { .. }) => {
                TracesMetrics::add(&self.metrics.refused_full, 1);
                TracesMetrics::add(&self.metrics.refused_full_spans, spans);
                Err(ExportError::Full {
                    retry_after: self.retry_after(),
                })
            }
            Err(PushError::Io(e)) => {
                tracing::error!(kind = self.kind, error = %e, "traces sending queue: a request could not be stored; refused");
                Err(e.into())
            }
        }
    }

    /// The wait suggested to producers when the queue is full: the rest of an active rate
    /// limit (1 s to 60 s), else 1 s.
    fn retry_after(&self) -> Duration {
        let now = self.clock.now();
        self.sender
            .blocked_until(now)
            .map(|until| {
                until
                    .saturating_duration_since(now)
                    .clamp(Duration::from_secs(1), Duration::from_secs(60))
            })
            .unwrap_or(Duration::from_secs(1))
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
        self.sender.destination()
    }

    /// Stops accepting, sends what is queued (retries and rate-limit waits included) until
    /// `deadline`, then stops the senders. Spans still queued or in flight then stay queued for
    /// the next start with storage; in memory they are counted as dropped:
    /// `ratelimit_backoff` while a rate limit is active, else `network_error`.
    pub async fn shutdown(mut self, deadline: Duration) {
        let workers = std::mem::take(&mut self.workers);
        let (requests, spans) = self.queue.close_and_stop(workers, deadline).await;
        if requests == 0 {
            return;
        }
        if let Some(dir) = self.queue.dir() {
            tracing::info!(
                kind = self.kind,
                destination = %self.sender.destination(),
                requests,
                spans,
                dir = %dir.display(),
                "traces exporter shut down; unsent spans stay queued for the next start"
            );
            return;
        }
        self.queue.drain_memory();
        gauges(&self.queue, &self.metrics);
        let reason = if self.sender.blocked_until(self.clock.now()).is_some() {
            DiscardReason::RatelimitBackoff
        } else {
            DiscardReason::NetworkError
        };
        self.metrics.add_dropped(reason, spans);
        tracing::warn!(
            kind = self.kind,
            destination = %self.sender.destination(),
            requests,
            spans,
            reason = reason.as_str(),
            "traces exporter shut down with unsent spans"
        );
    }
}
