//! The part of the Sentry exporter the chunk engine calls ([`Sink`]): one envelope per merged
//! chunk, compressed and posted to its route's DSN, the answer read into a [`Delivery`] (rate
//! limits applied to the route, refused envelopes written to the dead-letter directory), and
//! the client reports of what was discarded.

use super::client_report::{Discards, client_report_envelope, rfc3339};
use super::routing::Router;
use super::transport::Transport;
use crate::clock::SharedClock;
use crate::engine::{Delivery, Sink};
use crate::file::{envelope_file_name, write_atomic};
use crate::http::{compress_written, parse_retry_after};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::ReadyMeta;
use crate::{SDK_NAME, VERSION};
use profilink_proto::sentry::Envelope;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bodies larger than this are compressed on the blocking pool.
const INLINE_COMPRESS_LIMIT: usize = 64 << 10;

/// The part of the exporter the engine calls.
pub struct SentrySink {
    pub(super) router: Router,
    pub(super) transport: Transport,
    pub(super) clock: SharedClock,
    pub(super) metrics: Arc<ExporterMetrics>,
    pub(super) discards: Discards,
    pub(super) dead_letter_dir: Option<PathBuf>,
    pub(super) default_rate_limit: Duration,
    pub(super) rate_limit_max_wait: Duration,
}

impl SentrySink {
    /// `env` serialized and compressed, streamed into the compressor (the chunk's JSON is not
    /// copied into one envelope buffer first); `env` is handed back (for the dead-letter
    /// directory).
    async fn compressed(&self, env: Envelope) -> (Envelope, std::io::Result<Vec<u8>>) {
        let (c, level) = (self.transport.compression(), self.transport.level());
        let size = env.size_hint();
        if size <= INLINE_COMPRESS_LIMIT {
            let body = compress_written(c, level, size, |mut w| env.write_to(&mut w));
            return (env, body);
        }
        let res = tokio::task::spawn_blocking(move || {
            let body = compress_written(c, level, size, |mut w| env.write_to(&mut w));
            (env, body)
        })
        .await;
        match res {
            Ok(v) => v,
            Err(e) => (Envelope::default(), Err(std::io::Error::other(e))),
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
            let body = match self.compressed(env).await.1 {
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
        let (env, body) = self.compressed(env).await;
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
                self.dead_letter(&meta.chunk_id, env.to_bytes()).await;
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
