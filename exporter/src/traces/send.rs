//! The three transports of the traces exporter and one delivery loop around them (rate-limit
//! gate, attempt, classification, backoff).

use super::config::{
    DEFAULT_GRPC_ENDPOINT, DEFAULT_HTTP_ENDPOINT, OtlpTracesConfig, SentryTracesConfig,
};
use super::metrics::TracesMetrics;
use super::queue::Item;
use crate::ExportError;
use crate::clock::SharedClock;
use crate::config::{Compression, RetryConfig};
use crate::http::{RateLimits, compress, content_encoding, parse_retry_after};
use crate::metrics::DiscardReason;
use crate::otlp::{AttemptError, classify_grpc, classify_http};
use crate::retry::Backoff;
use profilink_proto::otlp::trace::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_client::TraceServiceClient,
};
use prost::Message;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use sentry_types::Dsn;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// The OTLP/HTTP traces path.
pub const TRACES_HTTP_PATH: &str = "/v1/traces";

/// Sentry rate-limit categories that stop OTLP spans (besides all-category limits).
pub const SPAN_CATEGORIES: [&str; 2] = ["span", "transaction"];

/// Longest sleep between checks of an active rate limit (the clock may be a manual one).
const RATE_LIMIT_POLL: Duration = Duration::from_millis(50);

/// Largest part of a response body read (for partial successes and logs).
const MAX_RESPONSE_BODY: usize = 64 << 10;

/// Bodies larger than this are compressed on the blocking pool.
const INLINE_COMPRESS_LIMIT: usize = 64 << 10;

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

fn with_scheme(endpoint: &str) -> String {
    let e = endpoint.trim();
    if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// The OTLP/HTTP traces URL of an endpoint (`host:port` or a base URL): `{endpoint}/v1/traces`
/// unless it already ends with `/v1/traces`.
pub fn traces_http_url(endpoint: &str) -> String {
    let base = with_scheme(endpoint);
    if base.trim_end_matches('/').ends_with(TRACES_HTTP_PATH) {
        base
    } else {
        format!("{}{TRACES_HTTP_PATH}", base.trim_end_matches('/'))
    }
}

/// Sentry's OTLP traces URL and `x-sentry-auth` value for a DSN:
/// (`{scheme}://{host}[:port]{path}api/{project_id}/integration/otlp/v1/traces`,
/// `sentry sentry_key=<public key>`).
pub fn sentry_traces_target(dsn: &str) -> Result<(String, String), ExportError> {
    // The error text of a bad DSN may echo it; keep the key out of errors and logs.
    let parsed = Dsn::from_str(dsn.trim())
        .map_err(|e| ExportError::Config(format!("invalid sentry/traces DSN: {e}")))?;
    let envelope = parsed.envelope_api_url().to_string();
    let base = envelope
        .strip_suffix("envelope/")
        .ok_or_else(|| ExportError::Config("unexpected Sentry API URL shape".into()))?;
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

/// Reads a partial success from an OTLP/HTTP response body (protobuf or JSON).
pub fn partial_from_body(content_type: &str, body: &[u8]) -> Option<ExportTracePartialSuccess> {
    if body.is_empty() {
        return None;
    }
    if content_type.contains("json") {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let p = v
            .get("partialSuccess")
            .or_else(|| v.get("partial_success"))?;
        let rejected = p
            .get("rejectedSpans")
            .or_else(|| p.get("rejected_spans"))
            .and_then(|r| {
                r.as_i64()
                    .or_else(|| r.as_str().and_then(|s| s.parse().ok()))
            })
            .unwrap_or(0);
        let message = p
            .get("errorMessage")
            .or_else(|| p.get("error_message"))
            .and_then(|m| m.as_str())
            .unwrap_or("")
            .to_string();
        return Some(ExportTracePartialSuccess {
            rejected_spans: rejected,
            error_message: message,
        });
    }
    ExportTraceServiceResponse::decode(body)
        .ok()
        .and_then(|r| r.partial_success)
}

#[derive(Debug)]
enum Transport {
    Grpc {
        client: TraceServiceClient<Channel>,
        metadata: MetadataMap,
        timeout: Duration,
    },
    Http {
        client: reqwest::Client,
        url: String,
        headers: HeaderMap,
        compression: Compression,
    },
    Sentry {
        client: reqwest::Client,
        url: String,
        auth: String,
        compression: Compression,
        limits: Mutex<RateLimits>,
        default_rate_limit: Duration,
    },
}

struct HttpAnswer {
    status: u16,
    rate_limits: Option<String>,
    retry_after: Option<Duration>,
    content_type: String,
    body: Vec<u8>,
}

fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<HeaderMap, ExportError> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| ExportError::Config(format!("invalid header name {k:?}")))?;
        let value = HeaderValue::from_str(v.trim())
            .map_err(|_| ExportError::Config(format!("invalid value of header {k:?}")))?;
        map.insert(name, value);
    }
    Ok(map)
}

fn metadata_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<MetadataMap, ExportError> {
    let mut map = MetadataMap::new();
    for (k, v) in headers {
        let key = AsciiMetadataKey::from_str(&k.trim().to_ascii_lowercase())
            .map_err(|_| ExportError::Config(format!("invalid gRPC metadata key {k:?}")))?;
        let value = AsciiMetadataValue::from_str(v.trim())
            .map_err(|_| ExportError::Config(format!("invalid value of metadata {k:?}")))?;
        map.insert(key, value);
    }
    Ok(map)
}

async fn compressed(raw: Vec<u8>, c: Compression) -> Result<Vec<u8>, String> {
    if raw.len() <= INLINE_COMPRESS_LIMIT {
        return compress(&raw, c).map_err(|e| e.to_string());
    }
    tokio::task::spawn_blocking(move || compress(&raw, c))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    compression: Compression,
    req: &ExportTraceServiceRequest,
) -> Result<HttpAnswer, AttemptError> {
    let body = compressed(req.encode_to_vec(), compression)
        .await
        .map_err(|e| AttemptError::Permanent(format!("compression failed: {e}")))?;
    let mut rb = client
        .post(url)
        .headers(headers.clone())
        .header("Content-Type", "application/x-protobuf")
        .body(body);
    if let Some(enc) = content_encoding(compression) {
        rb = rb.header("Content-Encoding", enc);
    }
    let mut resp = rb.send().await.map_err(|e| AttemptError::Retryable {
        after: None,
        // reqwest's error names the URL, which carries no secret (auth is in a header).
        message: format!("request failed: {}", crate::http::request_error(&e)),
        network: true,
    })?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let status = resp.status().as_u16();
    let rate_limits = header("x-sentry-rate-limits");
    let retry_after = header("retry-after")
        .as_deref()
        .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
    let content_type = header("content-type").unwrap_or_default();
    let mut body = Vec::new();
    while body.len() < MAX_RESPONSE_BODY {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            Ok(None) => break,
            // The status already tells the outcome; a broken body only loses detail.
            Err(_) => break,
        }
    }
    body.truncate(MAX_RESPONSE_BODY);
    Ok(HttpAnswer {
        status,
        rate_limits,
        retry_after,
        content_type,
        body,
    })
}

fn body_text(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
}

/// Sends items with one transport; shared by the sender tasks.
#[derive(Debug)]
pub struct Sender {
    transport: Transport,
    retry: RetryConfig,
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
    /// An OTLP gRPC sender (the connection is made lazily).
    pub fn grpc(
        cfg: &OtlpTracesConfig,
        clock: SharedClock,
        metrics: Arc<TracesMetrics>,
    ) -> Result<Self, ExportError> {
        let endpoint_text = cfg.endpoint.as_deref().unwrap_or(DEFAULT_GRPC_ENDPOINT);
        let url = crate::http::grpc_url(endpoint_text, &cfg.tls);
        let channel = crate::http::grpc_channel(endpoint_text, cfg.timeout, &cfg.tls)?;
        let mut client = TraceServiceClient::new(channel).max_decoding_message_size(4 << 20);
        match cfg.compression {
            Compression::Gzip => {
                client = client
                    .send_compressed(CompressionEncoding::Gzip)
                    .accept_compressed(CompressionEncoding::Gzip);
            }
            Compression::Zstd => {
                client = client
                    .send_compressed(CompressionEncoding::Zstd)
                    .accept_compressed(CompressionEncoding::Zstd);
            }
            Compression::None => {}
        }
        Ok(Sender {
            transport: Transport::Grpc {
                client,
                metadata: metadata_map(&cfg.headers)?,
                timeout: cfg.timeout,
            },
            retry: cfg.retry_on_failure.clone(),
            clock,
            metrics,
            destination: url,
        })
    }

    /// An OTLP/HTTP sender.
    pub fn http(
        cfg: &OtlpTracesConfig,
        clock: SharedClock,
        metrics: Arc<TracesMetrics>,
    ) -> Result<Self, ExportError> {
        let url = traces_http_url(cfg.endpoint.as_deref().unwrap_or(DEFAULT_HTTP_ENDPOINT));
        reqwest::Url::parse(&url)
            .map_err(|e| ExportError::Config(format!("invalid OTLP endpoint {url:?}: {e}")))?;
        Ok(Sender {
            transport: Transport::Http {
                client: crate::http::client(cfg.timeout, cfg.num_consumers, &cfg.tls)?,
                url: url.clone(),
                headers: header_map(&cfg.headers)?,
                compression: cfg.compression,
            },
            retry: cfg.retry_on_failure.clone(),
            clock,
            metrics,
            destination: url,
        })
    }

    /// A sender to Sentry's OTLP traces endpoint.
    pub fn sentry(
        cfg: &SentryTracesConfig,
        clock: SharedClock,
        metrics: Arc<TracesMetrics>,
    ) -> Result<Self, ExportError> {
        let dsn = cfg
            .dsn
            .as_deref()
            .ok_or_else(|| ExportError::Config("sentry/traces: dsn is required".into()))?;
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
            retry: cfg.retry_on_failure.clone(),
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

    async fn attempt(&self, req: &ExportTraceServiceRequest) -> Attempt {
        match &self.transport {
            Transport::Grpc {
                client,
                metadata,
                timeout,
            } => {
                let mut client = client.clone();
                let mut request = tonic::Request::new(req.clone());
                request.set_timeout(*timeout);
                *request.metadata_mut() = metadata.clone();
                let fut = client.export(request);
                match tokio::time::timeout(*timeout + Duration::from_secs(1), fut).await {
                    Err(_) => Attempt::Failed(AttemptError::Retryable {
                        after: None,
                        message: "gRPC request timed out".into(),
                        network: true,
                    }),
                    Ok(Ok(resp)) => Attempt::Delivered(resp.into_inner().partial_success),
                    Ok(Err(status)) => {
                        let retry_info = status.get_details_retry_info().map(|r| r.retry_delay);
                        Attempt::Failed(
                            match classify_grpc(status.code(), retry_info, status.message()) {
                                AttemptError::Retryable { after, message, .. } => {
                                    AttemptError::Retryable {
                                        after,
                                        network: status.code() == Code::Unavailable,
                                        message,
                                    }
                                }
                                p => p,
                            },
                        )
                    }
                }
            }
            Transport::Http {
                client,
                url,
                headers,
                compression,
            } => {
                let a = match post(client, url, headers, *compression, req).await {
                    Ok(a) => a,
                    Err(e) => return Attempt::Failed(e),
                };
                match classify_http(a.status, a.retry_after, &body_text(&a.body)) {
                    Ok(()) => Attempt::Delivered(partial_from_body(&a.content_type, &a.body)),
                    Err(e) => Attempt::Failed(e),
                }
            }
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
                    &body_text(&a.body),
                    &mut Self::limits(limits),
                    self.clock.now(),
                    *default_rate_limit,
                );
                if limited {
                    TracesMetrics::add(&self.metrics.rate_limited, 1);
                }
                match outcome {
                    Attempt::Delivered(_) => {
                        Attempt::Delivered(partial_from_body(&a.content_type, &a.body))
                    }
                    o => o,
                }
            }
        }
    }

    fn record_partial(&self, partial: Option<ExportTracePartialSuccess>) {
        let Some(p) = partial else { return };
        if p.rejected_spans == 0 && p.error_message.is_empty() {
            return;
        }
        TracesMetrics::add(&self.metrics.partial_successes, 1);
        TracesMetrics::add(
            &self.metrics.rejected_spans,
            u64::try_from(p.rejected_spans).unwrap_or(0),
        );
        tracing::warn!(
            destination = %self.destination,
            rejected_spans = p.rejected_spans,
            message = %p.error_message,
            "OTLP traces partial success"
        );
    }

    /// Sends one item until it is delivered, refused for good, or its retries run out. Every
    /// outcome is counted before this returns (and after its last await).
    pub async fn deliver(&self, item: Item) {
        let mut backoff = Backoff::new(&self.retry);
        loop {
            self.wait_rate_limit().await;
            match self.attempt(&item.req).await {
                Attempt::Delivered(partial) => {
                    TracesMetrics::add(&self.metrics.sent_requests, 1);
                    TracesMetrics::add(&self.metrics.sent_spans, item.spans);
                    self.record_partial(partial);
                    return;
                }
                Attempt::RateLimited => {
                    TracesMetrics::add(&self.metrics.failed_attempts, 1);
                    tracing::debug!(destination = %self.destination, "request rate limited; it waits for the limit");
                }
                Attempt::Failed(AttemptError::Permanent(message)) => {
                    TracesMetrics::add(&self.metrics.failed_attempts, 1);
                    self.metrics
                        .add_dropped(DiscardReason::SendError, item.spans);
                    tracing::warn!(
                        destination = %self.destination,
                        spans = item.spans,
                        %message,
                        "traces export refused; not retrying"
                    );
                    return;
                }
                Attempt::Failed(AttemptError::Retryable {
                    after,
                    message,
                    network,
                }) => {
                    TracesMetrics::add(&self.metrics.failed_attempts, 1);
                    match backoff.next(&self.retry, self.clock.now(), after) {
                        Some(wait) => {
                            TracesMetrics::add(&self.metrics.retries, 1);
                            tracing::debug!(destination = %self.destination, %message, ?wait, "traces export failed; retrying");
                            tokio::time::sleep(wait).await;
                        }
                        None => {
                            let reason = if network {
                                DiscardReason::NetworkError
                            } else {
                                DiscardReason::SendError
                            };
                            self.metrics.add_dropped(reason, item.spans);
                            tracing::warn!(
                                destination = %self.destination,
                                spans = item.spans,
                                %message,
                                "traces export failed and retries are exhausted; request dropped"
                            );
                            return;
                        }
                    }
                }
            }
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

    #[test]
    fn partial_success_bodies() {
        let pb = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: 3,
                error_message: "bad".into(),
            }),
        }
        .encode_to_vec();
        assert_eq!(
            partial_from_body("application/x-protobuf", &pb).map(|p| p.rejected_spans),
            Some(3)
        );
        let json = br#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"x"}}"#;
        let p = partial_from_body("application/json", json).unwrap();
        assert_eq!((p.rejected_spans, p.error_message.as_str()), (2, "x"));
        assert_eq!(partial_from_body("application/json", b"{}"), None);
        assert_eq!(partial_from_body("", b""), None);
    }
}
