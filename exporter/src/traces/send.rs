//! The three transports of the traces exporter, and one attempt with them as the request
//! exporter ([`crate::request`]) asks for it: the rate-limit gate before it, the attempt, and
//! its classification (the queue, retries and counting are the request exporter's).

use super::config::{
    DEFAULT_GRPC_ENDPOINT, DEFAULT_HTTP_ENDPOINT, OtlpTracesConfig, SentryTracesConfig,
};
use super::metrics::TracesMetrics;
use crate::clock::SharedClock;
use crate::config::{Compression, OtlpProtocol};
use crate::http::RateLimits;
use crate::metrics::DiscardReason;
use crate::otlp_client::{OtlpClient, note_partial, partial_from_body, post};
use crate::queue_config::SettingError;
use crate::request::AttemptError;
use crate::request::{RequestSender, SendOutcome};
use crate::start_error::StartError;
use profilink_consumer::DEFAULT_RETRY_AFTER;
use profilink_proto::otlp::{ExportTracePartialSuccess, ExportTraceServiceRequest};
use profilink_proto::signal::Traces;
use reqwest::header::{HeaderMap, HeaderValue};
use sentry_types::Dsn;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Sentry rate-limit categories that stop OTLP spans (besides all-category limits).
pub const SPAN_CATEGORIES: [&str; 2] = ["span", "transaction"];

/// Longest sleep between checks of an active rate limit (the clock may be a manual one).
const RATE_LIMIT_POLL: Duration = Duration::from_millis(50);

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Delivered; the server's partial success, if it reported one.
    Delivered(Option<ExportTracePartialSuccess>),
    /// A rate limit covering spans is active now: wait for it, then send again.
    RateLimited,
    /// Failed (retryable or permanent).
    Failed(AttemptError),
}

/// The OTLP/HTTP traces URL of an endpoint (`host:port` or a base URL): `{endpoint}/v1/traces`
/// unless it already ends with `/v1/traces`.
#[cfg(test)]
pub fn traces_http_url(endpoint: &str) -> String {
    crate::otlp_client::http_url::<Traces>(endpoint)
}

/// Sentry's OTLP traces URL and `x-sentry-auth` value for a DSN:
/// (`{scheme}://{host}[:port]{path}api/{project_id}/integration/otlp/v1/traces`,
/// `sentry sentry_key=<public key>`).
pub fn sentry_traces_target(dsn: &str) -> Result<(String, String), StartError> {
    // The error text of a bad DSN may echo it; keep the key out of errors and logs.
    let parsed =
        Dsn::from_str(dsn.trim()).map_err(|e| StartError::invalid("sentry/traces DSN", e))?;
    let envelope = parsed.envelope_api_url().to_string();
    let base = envelope
        .strip_suffix("envelope/")
        .ok_or_else(|| SettingError::new("sentry/traces dsn", "unexpected Sentry API URL shape"))?;
    Ok((
        format!("{base}integration/otlp/v1/traces"),
        format!("sentry sentry_key={}", parsed.public_key()),
    ))
}

/// Until when a rate limit covering spans (`span`, `transaction` or all categories) is active.
pub fn spans_blocked_until(limits: &RateLimits, now: Instant) -> Option<Instant> {
    SPAN_CATEGORIES
        .iter()
        .filter_map(|c| limits.blocked_until(c, now))
        .max()
}

/// What Sentry's answer means, after recording its rate limits in `limits`.
/// Returns the attempt outcome and whether the response imposed a rate limit.
pub fn classify_sentry(
    status: u16,
    rate_limits: Option<&str>,
    retry_after: Option<Duration>,
    body: &str,
    limits: &mut RateLimits,
    now: Instant,
    default_rate_limit: Duration,
) -> (Attempt, bool) {
    let mut limited = false;
    if let Some(h) = rate_limits {
        limits.apply_header(h, now);
        limited = true;
    }
    let outcome = match status {
        200..=299 => Attempt::Delivered(None),
        429 => {
            if rate_limits.is_none() {
                limits.apply(&[], retry_after.unwrap_or(default_rate_limit), now);
                limited = true;
            }
            if spans_blocked_until(limits, now).is_some() {
                Attempt::RateLimited
            } else {
                Attempt::Failed(AttemptError::Retryable {
                    after: retry_after,
                    message: "HTTP 429 without a limit for spans".into(),
                    network: false,
                })
            }
        }
        408 | 500..=599 => Attempt::Failed(AttemptError::Retryable {
            after: retry_after,
            message: format!("HTTP {status}: {body}"),
            network: false,
        }),
        _ => Attempt::Failed(AttemptError::Permanent(format!("HTTP {status}: {body}"))),
    };
    (outcome, limited)
}

#[derive(Debug)]
enum Transport {
    Otlp(OtlpClient<Traces>),
    Sentry {
        client: reqwest::Client,
        url: String,
        auth: String,
        compression: Compression,
        limits: Mutex<RateLimits>,
        default_rate_limit: Duration,
    },
}

/// Sends requests with one transport; shared by the sender tasks.
#[derive(Debug)]
pub struct Sender {
    transport: Transport,
    clock: SharedClock,
    metrics: Arc<TracesMetrics>,
    destination: String,
}

/// Decrements the waiting gauge when a rate-limit wait ends (or its task is aborted).
struct WaitingGuard<'a>(&'a TracesMetrics);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        TracesMetrics::sub(&self.0.rate_limit_waiting, 1);
    }
}

impl Sender {
    /// An OTLP sender over `protocol` (a gRPC connection is made lazily).
    pub fn otlp(
        protocol: OtlpProtocol,
        cfg: &OtlpTracesConfig,
        clock: SharedClock,
        metrics: Arc<TracesMetrics>,
    ) -> Result<Self, StartError> {
        let default_endpoint = match protocol {
            OtlpProtocol::Grpc => DEFAULT_GRPC_ENDPOINT,
            OtlpProtocol::Http => DEFAULT_HTTP_ENDPOINT,
        };
        let client = OtlpClient::new(
            protocol,
            cfg.endpoint.as_deref().unwrap_or(default_endpoint),
            cfg.compression,
            cfg.timeout,
            &cfg.headers,
            cfg.num_consumers,
            &cfg.tls,
        )?
        .with_auth(cfg.auth.clone());
        Ok(Sender {
            destination: client.destination().to_string(),
            transport: Transport::Otlp(client),
            clock,
            metrics,
        })
    }

    /// A sender to Sentry's OTLP traces endpoint.
    pub fn sentry(
        cfg: &SentryTracesConfig,
        clock: SharedClock,
        metrics: Arc<TracesMetrics>,
    ) -> Result<Self, StartError> {
        let dsn = cfg
            .dsn
            .as_deref()
            .ok_or(StartError::Missing("sentry/traces: dsn"))?;
        let (url, auth) = sentry_traces_target(dsn)?;
        Ok(Sender {
            transport: Transport::Sentry {
                client: crate::http::client(cfg.timeout, cfg.num_consumers, &cfg.tls)?,
                url: url.clone(),
                auth,
                compression: cfg.compression,
                limits: Mutex::new(RateLimits::default()),
                default_rate_limit: cfg.default_rate_limit,
            },
            clock,
            metrics,
            destination: url,
        })
    }

    /// Where requests go (URL; no credentials).
    pub fn destination(&self) -> &str {
        &self.destination
    }

    fn limits(m: &Mutex<RateLimits>) -> MutexGuard<'_, RateLimits> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Until when spans are rate limited (Sentry only).
    pub fn blocked_until(&self, now: Instant) -> Option<Instant> {
        match &self.transport {
            Transport::Sentry { limits, .. } => spans_blocked_until(&Self::limits(limits), now),
            _ => None,
        }
    }

    async fn wait_rate_limit(&self) {
        let mut guard = None;
        loop {
            let now = self.clock.now();
            let Some(until) = self.blocked_until(now) else {
                break;
            };
            if guard.is_none() {
                TracesMetrics::add(&self.metrics.rate_limit_waiting, 1);
                guard = Some(WaitingGuard(&self.metrics));
                tracing::debug!(wait = ?until.saturating_duration_since(now), "spans are rate limited; waiting");
            }
            tokio::time::sleep(until.saturating_duration_since(now).min(RATE_LIMIT_POLL)).await;
        }
        drop(guard);
    }

    async fn send_once(&self, req: &ExportTraceServiceRequest) -> Attempt {
        match &self.transport {
            Transport::Otlp(client) => match client.attempt(req).await {
                Ok(partial) => Attempt::Delivered(partial),
                Err(e) => Attempt::Failed(e),
            },
            Transport::Sentry {
                client,
                url,
                auth,
                compression,
                limits,
                default_rate_limit,
            } => {
                let mut headers = HeaderMap::new();
                match HeaderValue::from_str(auth) {
                    Ok(v) => {
                        headers.insert("x-sentry-auth", v);
                    }
                    Err(_) => {
                        return Attempt::Failed(AttemptError::Permanent(
                            "the DSN's public key is not a valid header value".into(),
                        ));
                    }
                }
                let a = match post(client, url, &headers, *compression, req).await {
                    Ok(a) => a,
                    Err(e) => return Attempt::Failed(e),
                };
                let (outcome, limited) = classify_sentry(
                    a.status,
                    a.rate_limits.as_deref(),
                    a.retry_after,
                    &a.body_text(),
                    &mut Self::limits(limits),
                    self.clock.now(),
                    *default_rate_limit,
                );
                if limited {
                    TracesMetrics::add(&self.metrics.rate_limited, 1);
                }
                match outcome {
                    Attempt::Delivered(_) => {
                        Attempt::Delivered(partial_from_body::<Traces>(&a.content_type, &a.body))
                    }
                    o => o,
                }
            }
        }
    }
}

impl RequestSender for Sender {
    type Request = ExportTraceServiceRequest;
    type Metrics = TracesMetrics;
    const NAME: &'static str = "traces";

    fn destination(&self) -> &str {
        &self.destination
    }

    fn ready(&self) -> impl Future<Output = ()> + Send {
        self.wait_rate_limit()
    }

    async fn attempt(&self, request: &ExportTraceServiceRequest) -> SendOutcome {
        match self.send_once(request).await {
            Attempt::Delivered(partial) => {
                SendOutcome::Delivered(note_partial::<Traces>(partial.as_ref(), &self.destination))
            }
            Attempt::RateLimited => SendOutcome::RateLimited,
            Attempt::Failed(error) => SendOutcome::Failed(error),
        }
    }

    /// The rest of an active rate limit (at least [`DEFAULT_RETRY_AFTER`], at most 60 s), else
    /// [`DEFAULT_RETRY_AFTER`] (1 s).
    fn full_retry_after(&self) -> Duration {
        let now = self.clock.now();
        self.blocked_until(now)
            .map(|until| {
                until
                    .saturating_duration_since(now)
                    .clamp(DEFAULT_RETRY_AFTER, Duration::from_secs(60))
            })
            .unwrap_or(DEFAULT_RETRY_AFTER)
    }

    /// `ratelimit_backoff` while a rate limit is active, else `network_error`.
    fn shutdown_reason(&self) -> DiscardReason {
        if self.blocked_until(self.clock.now()).is_some() {
            DiscardReason::RatelimitBackoff
        } else {
            DiscardReason::NetworkError
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn urls() {
        assert_eq!(
            traces_http_url("127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_http_url("https://x/otlp/"),
            "https://x/otlp/v1/traces"
        );
        assert_eq!(traces_http_url("http://x/v1/traces"), "http://x/v1/traces");
        let (url, auth) =
            sentry_traces_target(&format!("https://{KEY}@o1.ingest.sentry.io/7")).unwrap();
        assert_eq!(
            url,
            "https://o1.ingest.sentry.io/api/7/integration/otlp/v1/traces"
        );
        assert_eq!(auth, format!("sentry sentry_key={KEY}"));
        let (url, _) =
            sentry_traces_target(&format!("http://{KEY}@127.0.0.1:9000/sub/42")).unwrap();
        assert_eq!(
            url,
            "http://127.0.0.1:9000/sub/api/42/integration/otlp/v1/traces"
        );
        let err = sentry_traces_target(&format!("{KEY}-not-a-dsn")).unwrap_err();
        assert!(!err.to_string().contains(KEY), "{err}");
    }

    #[test]
    fn sentry_statuses_and_limits() {
        let now = Instant::now();
        let d60 = Duration::from_secs(60);
        let mut l = RateLimits::default();
        let (a, limited) = classify_sentry(200, None, None, "", &mut l, now, d60);
        assert_eq!((a, limited), (Attempt::Delivered(None), false));
        // A limit on spans blocks; one on errors does not.
        let (a, limited) = classify_sentry(429, Some("10:error:key"), None, "", &mut l, now, d60);
        assert!(limited);
        assert!(matches!(a, Attempt::Failed(AttemptError::Retryable { .. })));
        let (a, _) = classify_sentry(429, Some("10:span:key"), None, "", &mut l, now, d60);
        assert_eq!(a, Attempt::RateLimited);
        assert_eq!(
            spans_blocked_until(&l, now),
            Some(now + Duration::from_secs(10))
        );
        // transaction and all-category limits count too.
        let mut l = RateLimits::default();
        classify_sentry(200, Some("20:transaction:org"), None, "", &mut l, now, d60);
        assert_eq!(
            spans_blocked_until(&l, now),
            Some(now + Duration::from_secs(20))
        );
        let mut l = RateLimits::default();
        classify_sentry(200, Some("30::org"), None, "", &mut l, now, d60);
        assert_eq!(
            spans_blocked_until(&l, now),
            Some(now + Duration::from_secs(30))
        );
        // Bare 429: Retry-After, else the default.
        let mut l = RateLimits::default();
        let (a, limited) = classify_sentry(
            429,
            None,
            Some(Duration::from_secs(7)),
            "",
            &mut l,
            now,
            d60,
        );
        assert_eq!((a, limited), (Attempt::RateLimited, true));
        assert_eq!(
            spans_blocked_until(&l, now),
            Some(now + Duration::from_secs(7))
        );
        let mut l = RateLimits::default();
        classify_sentry(429, None, None, "", &mut l, now, d60);
        assert_eq!(spans_blocked_until(&l, now), Some(now + d60));
        // Permanent and retryable statuses.
        let mut l = RateLimits::default();
        for s in [400, 401, 403, 404, 413] {
            let (a, _) = classify_sentry(s, None, None, "no", &mut l, now, d60);
            assert!(
                matches!(a, Attempt::Failed(AttemptError::Permanent(_))),
                "{s}"
            );
        }
        for s in [408, 500, 502, 503, 504] {
            let (a, _) = classify_sentry(s, None, None, "", &mut l, now, d60);
            assert!(
                matches!(a, Attempt::Failed(AttemptError::Retryable { .. })),
                "{s}"
            );
        }
        assert!(spans_blocked_until(&l, now).is_none());
    }
}
