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

pub mod client_report;
pub mod routing;
pub mod transport;

use crate::chunk_engine::start_engine;
use crate::clock::{SharedClock, system_clock};
use crate::config::SentryExporterConfig;
use crate::engine::{Delivery, Engine, Sink};
use crate::file::{envelope_file_name, write_atomic};
use crate::http::{compress_level, parse_retry_after};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::ReadyMeta;
use crate::start_error::StartError;
use crate::{SDK_NAME, VERSION};
use client_report::{Discards, client_report_envelope, rfc3339};
use profilink_consumer::{ExportChunk, ExportError};
use profilink_proto::sentry::Envelope;
use routing::Router;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use transport::Transport;

/// Bodies larger than this are compressed on the blocking pool.
const INLINE_COMPRESS_LIMIT: usize = 64 << 10;

/// The part of the exporter the engine calls.
pub struct SentrySink {
    router: Router,
    transport: Transport,
    clock: SharedClock,
    metrics: Arc<ExporterMetrics>,
    discards: Discards,
    dead_letter_dir: Option<PathBuf>,
    default_rate_limit: Duration,
    rate_limit_max_wait: Duration,
}

impl SentrySink {
    /// `raw` compressed; `raw` is handed back (for the dead-letter directory).
    async fn compressed(&self, raw: Vec<u8>) -> (Vec<u8>, std::io::Result<Vec<u8>>) {
        let (c, level) = (self.transport.compression(), self.transport.level());
        if raw.len() <= INLINE_COMPRESS_LIMIT {
            let body = compress_level(&raw, c, level);
            return (raw, body);
        }
        let res = tokio::task::spawn_blocking(move || {
            let body = compress_level(&raw, c, level);
            (raw, body)
        })
        .await;
        match res {
            Ok(v) => v,
            Err(e) => (Vec::new(), Err(std::io::Error::other(e))),
        }
    }

    async fn dead_letter(&self, chunk_id: &str, raw: Vec<u8>) {
        let Some(dir) = self.dead_letter_dir.clone() else {
            return;
        };
        let name = envelope_file_name(chunk_id);
        let res = tokio::task::spawn_blocking(move || write_atomic(&dir, &name, &raw)).await;
        match res {
            Ok(Ok(path)) => {
                ExporterMetrics::add(&self.metrics.dead_lettered, 1);
                tracing::info!(path = %path.display(), "refused envelope written to the dead-letter directory");
            }
            Ok(Err(e)) => tracing::error!(error = %e, "could not write the dead-letter envelope"),
            Err(e) => tracing::error!(error = %e, "could not write the dead-letter envelope"),
        }
    }

    /// Sends pending client reports (one envelope per DSN); counts that cannot be sent are kept.
    pub async fn send_client_reports(&self) {
        let now = self.clock.now();
        for key in self.discards.routes() {
            let route = self.router.route(&key).clone();
            if route.limits().all_blocked(now) {
                continue;
            }
            let entries = self.discards.take(&key);
            if entries.is_empty() {
                continue;
            }
            let env = client_report_envelope(&route.dsn, &entries, self.clock.wall());
            let body = match self.compressed(env.to_bytes()).await.1 {
                Ok(b) => b,
                Err(_) => {
                    self.discards.restore(&key, &entries);
                    continue;
                }
            };
            match self.transport.post(&route, body).await {
                Ok(r) if (200..300).contains(&r.status) => {
                    ExporterMetrics::add(&self.metrics.client_reports_sent, 1);
                }
                Ok(r) if r.status == 429 || r.status >= 500 => {
                    if let Some(h) = &r.rate_limits {
                        route.limits().apply_header(h, self.clock.now());
                    }
                    self.discards.restore(&key, &entries);
                }
                Ok(r) => {
                    tracing::warn!(status = r.status, body = %r.body, "client report refused");
                }
                Err(e) => {
                    let error = crate::http::request_error(&e);
                    tracing::debug!(%error, "client report not sent; will retry");
                    self.discards.restore(&key, &entries);
                }
            }
        }
    }
}

impl Sink for SentrySink {
    fn blocked_until(&self, route: &str, category: &str, now: Instant) -> Option<Instant> {
        self.router
            .route(route)
            .limits()
            .blocked_until(category, now)
    }

    async fn deliver(&self, meta: ReadyMeta, json: Vec<u8>) -> Delivery {
        let route = self.router.route(&meta.route).clone();
        let mut env = Envelope::for_chunk_json(json, &meta.platform, SDK_NAME, VERSION);
        env.headers
            .insert("sent_at".into(), rfc3339(self.clock.wall()).into());
        env.headers.insert("dsn".into(), route.dsn.clone().into());
        let raw = env.to_bytes();
        drop(env);
        let (raw, body) = self.compressed(raw).await;
        let body = match body {
            Ok(b) => b,
            Err(e) => {
                return Delivery::Retry {
                    after: None,
                    reason: DiscardReason::SendError,
                    message: format!("compression failed: {e}"),
                };
            }
        };
        let resp = match self.transport.post(&route, body).await {
            Ok(r) => r,
            Err(e) => {
                return Delivery::Retry {
                    after: None,
                    reason: DiscardReason::NetworkError,
                    message: format!(
                        "request to {} failed: {}",
                        route.url,
                        crate::http::request_error(&e)
                    ),
                };
            }
        };
        let now = self.clock.now();
        if let Some(h) = &resp.rate_limits {
            let limits = route.limits().apply_header(h, now);
            ExporterMetrics::add(&self.metrics.rate_limited, 1);
            for l in limits {
                if l.is_quota() || l.retry_after > self.rate_limit_max_wait {
                    tracing::warn!(
                        route = %route.url,
                        categories = ?l.categories,
                        retry_after = ?l.retry_after,
                        reason = l.reason.as_deref().unwrap_or(""),
                        "Sentry rate limit longer than rate_limit_max_wait or over quota; chunks of these categories are dropped while it lasts"
                    );
                }
            }
        }
        match resp.status {
            200..=299 => Delivery::Delivered,
            429 => {
                if resp.rate_limits.is_none() {
                    let after = resp
                        .retry_after
                        .as_deref()
                        .and_then(|v| parse_retry_after(v, self.clock.wall()))
                        .unwrap_or(self.default_rate_limit);
                    route.limits().apply(&[], after, now);
                    ExporterMetrics::add(&self.metrics.rate_limited, 1);
                }
                if route.limits().blocked_until(&meta.category, now).is_some() {
                    tracing::debug!(chunk_id = %meta.chunk_id, category = %meta.category, "rate limited; chunk waits");
                    Delivery::RateLimited
                } else {
                    Delivery::Retry {
                        after: None,
                        reason: DiscardReason::SendError,
                        message: "429 without a limit for this category".into(),
                    }
                }
            }
            408 | 500..=599 => Delivery::Retry {
                after: resp
                    .retry_after
                    .as_deref()
                    .and_then(|v| parse_retry_after(v, self.clock.wall())),
                reason: DiscardReason::SendError,
                message: format!("HTTP {}: {}", resp.status, resp.body),
            },
            status => {
                tracing::warn!(
                    status,
                    chunk_id = %meta.chunk_id,
                    route = %route.url,
                    body = %resp.body,
                    "Sentry refused the envelope; not retrying"
                );
                self.dead_letter(&meta.chunk_id, raw).await;
                Delivery::Permanent {
                    message: format!("HTTP {status}: {}", resp.body),
                }
            }
        }
    }

    fn dropping(&self, route: &str, category: &str, now: Instant) -> bool {
        self.router
            .route(route)
            .limits()
            .dropping(category, now, self.rate_limit_max_wait)
    }

    fn discarded(&self, meta: &ReadyMeta, reason: DiscardReason, n: u64) {
        self.discards.add(&meta.route, reason, &meta.category, n);
    }

    fn project_id(&self, route: &str) -> Option<u64> {
        self.router.route(route).project_id
    }
}

/// Sends profile chunks to Sentry. See the module docs.
pub struct SentryExporter {
    engine: Option<Engine<SentrySink>>,
    sink: Arc<SentrySink>,
    metrics: Arc<ExporterMetrics>,
    /// `sending_queue.overflow: backpressure`: refuse requests up front near full.
    backpressure: bool,
    report_stop: watch::Sender<bool>,
    report_task: Option<JoinHandle<()>>,
}

impl Drop for SentryExporter {
    fn drop(&mut self) {
        if let Some(t) = self.report_task.take() {
            t.abort();
        }
    }
}

impl SentryExporter {
    /// Parses the DSNs, opens the queue (replaying what a previous run left) and starts sending.
    pub async fn start(cfg: SentryExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`SentryExporter::start`] with an injected clock (tests).
    pub async fn start_with_clock(
        cfg: SentryExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        let Some(dsn) = cfg.dsn.as_deref() else {
            return Err(StartError::Missing("exporters.sentry.dsn"));
        };
        cfg.check().map_err(|e| e.under("exporters.sentry"))?;
        let router = Router::new(dsn, cfg.routing.as_ref())?;
        let level = cfg
            .compression_params
            .level_for(cfg.compression)
            .map_err(|e| e.under("exporters.sentry"))?;
        let transport = Transport::new(
            cfg.compression,
            level,
            cfg.timeout,
            cfg.consumers(),
            &cfg.tls,
        )?;
        let metrics = Arc::new(ExporterMetrics::default());
        let sink = Arc::new(SentrySink {
            router,
            transport,
            clock: clock.clone(),
            metrics: metrics.clone(),
            discards: Discards::default(),
            dead_letter_dir: cfg.dead_letter_dir.clone(),
            default_rate_limit: cfg.default_rate_limit,
            rate_limit_max_wait: cfg.rate_limit_max_wait,
        });
        let engine = start_engine(
            &cfg,
            sink.clone(),
            cfg.retry_on_failure.clone(),
            clock,
            metrics.clone(),
        )
        .await?;
        let (report_stop, mut stop_rx) = watch::channel(false);
        let interval = cfg.client_report_interval.max(Duration::from_millis(10));
        let s2 = sink.clone();
        let report_task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => s2.send_client_reports().await,
                    _ = stop_rx.changed() => return,
                }
            }
        });
        Ok(SentryExporter {
            engine: Some(engine),
            sink,
            metrics,
            backpressure: cfg.sending_queue.overflow() == crate::Overflow::Backpressure,
            report_stop,
            report_task: Some(report_task),
        })
    }

    /// Durably queues chunks (routed by their resource attributes); `Ok` once on disk.
    /// [`ExportError::Full`] means: answer the producer UNAVAILABLE / 429.
    pub async fn export(&self, chunks: Vec<ExportChunk>) -> Result<(), ExportError> {
        match &self.engine {
            Some(p) => {
                p.export_chunks(chunks, |c| self.sink.router.key_for(&c.resource))
                    .await
            }
            None => Err(ExportError::Closed),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// True while requests should be refused before they are read: with
    /// `sending_queue.overflow: backpressure`, once the durable queue is within its headroom of
    /// full (16 MiB, or a tenth of the capacity when that is less).
    pub fn is_full(&self) -> bool {
        self.backpressure && crate::contract::within_headroom(&self.metrics)
    }

    /// Flushes open sessions into the queue, sends what it can before `deadline` (in-flight
    /// requests included), sends a last client report, and stops. Undelivered chunks stay
    /// queued for the next start.
    pub async fn shutdown(mut self, deadline: Duration) {
        let start = tokio::time::Instant::now();
        let _ = self.report_stop.send(true);
        if let Some(t) = self.report_task.take() {
            let _ = t.await;
        }
        let sink = self.sink.clone();
        if let Some(engine) = self.engine.take() {
            engine.shutdown(deadline).await;
        }
        let left = deadline.saturating_sub(start.elapsed());
        let budget = left.max(Duration::from_millis(500));
        let _ = tokio::time::timeout(budget, sink.send_client_reports()).await;
    }
}
