//! What the Sentry receiver's endpoints share (the envelope endpoint, its item checks and the
//! proxied paths): the receiver state, Relay-style refusals and their responses, how a request
//! is answered and counted, CORS for browser SDKs, authentication and key checks, body reading
//! within the limits, and the hand-over to the upstream.

use crate::config::SentryReceiverConfig;
use crate::sample_records::{SENTRY_SAMPLE_TYPE, SampleRecords};
use crate::sentry::auth::{self, AuthError, SentryAuth};
use crate::server::decompress::{self, BodyError, Encoding};
use crate::server::http::retry_after_secs;
use crate::stats::Stats;
use crate::stats::items::{ItemCounters, LogLimiter};
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use profilink_consumer::ConsumeError;
use profilink_consumer::{ForwardError, ForwardRequest, Upstream};
use profilink_proto::validate::MAX_CHUNK_BYTES;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Largest `profile` / `profile_chunk` item (Relay's `max_profile_size`).
pub(crate) const MAX_PROFILE_ITEM_SIZE: usize = MAX_CHUNK_BYTES;

pub(crate) const PERFETTO: &str = "application/x-perfetto-trace";

pub(crate) struct SentryState<C> {
    pub(crate) consumer: Arc<C>,
    pub(crate) stats: Arc<Stats>,
    pub(crate) config: SentryReceiverConfig,
    pub(crate) upstream: Option<Arc<dyn Upstream>>,
    /// Paces the log lines about dropped and refused items.
    pub(crate) log: LogLimiter,
}

/// A refused request: status, Relay-style detail, optional `Retry-After`.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) detail: String,
    pub(crate) retry_after: Option<Duration>,
    /// `X-Sentry-Rate-Limits` (a 429 for upstream rate limits).
    pub(crate) rate_limits: Option<String>,
    /// Profiles, samples and spans known to be refused (for the counters).
    pub(crate) profiles: u64,
    pub(crate) samples: u64,
    pub(crate) spans: u64,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Refusal {
            status,
            detail: detail.into(),
            retry_after: None,
            rate_limits: None,
            profiles: 0,
            samples: 0,
            spans: 0,
        }
    }

    /// The reason it is counted under (from its status: a 503 with `Retry-After` is `full`).
    pub(crate) fn reason(&self) -> crate::stats::RefusalReason {
        crate::stats::RefusalReason::of_http_status(
            self.status.as_u16(),
            self.retry_after.is_some(),
        )
    }

    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, detail)
    }

    /// Relay's answer when upstream rate-limits what the request holds: 429 with the matched
    /// limits (`X-Sentry-Rate-Limits` value `header`) and the longest wait.
    pub(crate) fn rate_limited(header: String, retry_after: Duration) -> Self {
        let mut r = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("event submission rejected with_reason: rate limited by upstream ({header})"),
        );
        r.retry_after = Some(retry_after);
        r.rate_limits = Some(header);
        r
    }

    pub(crate) fn counted(mut self, profiles: u64, samples: u64) -> Self {
        self.profiles = profiles;
        self.samples = samples;
        self
    }

    pub(crate) fn counted_spans(mut self, spans: u64) -> Self {
        self.spans = spans;
        self
    }

    pub(crate) fn into_response(self) -> Response {
        let body = serde_json::json!({ "detail": self.detail }).to_string();
        let mut response = (
            self.status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response();
        if let Some(delay) = self.retry_after {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(delay)));
        }
        if let Some(limits) = self.rate_limits
            && let Ok(value) = HeaderValue::from_str(&limits)
        {
            response.headers_mut().insert("x-sentry-rate-limits", value);
        }
        response
    }
}

impl From<AuthError> for Refusal {
    fn from(e: AuthError) -> Self {
        Refusal::new(e.status(), e.to_string())
    }
}

/// Relay's answers: a full pipeline is 503 with `Retry-After` (a 429 would make SDKs pause
/// every category, errors included; 429 is kept for upstream limits, with the categories).
pub(crate) fn consume_refusal(error: &ConsumeError) -> Refusal {
    match error {
        ConsumeError::Full { retry_after } => {
            let mut r = Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the pipeline is full; retry later",
            );
            r.retry_after = Some(*retry_after);
            r
        }
        ConsumeError::Rejected(message) => Refusal::bad_request(message.clone()),
        failure => Refusal::new(StatusCode::SERVICE_UNAVAILABLE, failure.to_string()),
    }
}

pub(crate) fn forward_refusal(error: &ForwardError) -> Refusal {
    let mut r = Refusal::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string());
    if let ForwardError::Full { retry_after } = error {
        r.retry_after = Some(*retry_after);
    }
    r
}

pub(crate) async fn preflight() -> Response {
    let mut response = StatusCode::OK.into_response();
    let h = response.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("POST"),
    );
    h.insert(
        "access-control-allow-headers",
        HeaderValue::from_static(
            "content-type, content-encoding, x-sentry-auth, x-requested-with, origin, accept, authentication, authorization, user-agent",
        ),
    );
    h.insert("access-control-max-age", HeaderValue::from_static("3600"));
    response
}

pub(crate) fn cors(response: &mut Response) {
    let h = response.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static("x-sentry-error, x-sentry-rate-limits, retry-after"),
    );
}

pub(crate) fn json_ok(body: Value) -> Response {
    (
        StatusCode::OK,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_string(),
    )
        .into_response()
}

/// Finishes a request of any Sentry endpoint: drains what is left of its body (so that an
/// HTTP/1.1 client still sending reads the answer), counts the request accepted or refused
/// (with the profiles, samples and spans the refusal knows it refused), and adds the CORS
/// headers.
pub(crate) async fn answer<C>(
    state: &SentryState<C>,
    result: Result<Response, Refusal>,
    body: &mut Body,
) -> Response {
    decompress::drain(body).await;
    let counters = &state.stats.sentry_http;
    let mut response = match result {
        Ok(response) => {
            counters.request_accepted();
            response
        }
        Err(refusal) => {
            counters.request_refused_for(refusal.reason());
            counters.refuse(refusal.profiles, refusal.samples);
            counters.refuse_records(&SampleRecords::single(SENTRY_SAMPLE_TYPE, refusal.samples));
            counters.refuse_spans(refusal.spans);
            tracing::debug!(status = refusal.status.as_u16(), detail = %refusal.detail, "Sentry request refused");
            refusal.into_response()
        }
    };
    cors(&mut response);
    response
}

/// The project id of the request's path and its own credentials (headers or query), checked
/// against the project's allowed keys; `None` when it carries none (the envelope endpoint then
/// reads the envelope header `dsn`).
pub(crate) fn authenticate<C>(
    state: &SentryState<C>,
    project_id: &str,
    parts: &Parts,
) -> Result<(u64, Option<SentryAuth>), Refusal> {
    let project_id: u64 = project_id
        .parse()
        .map_err(|_| Refusal::bad_request("bad project path parameter"))?;
    let request_auth = auth::auth_from_request(&parts.headers, parts.uri.query())?;
    if let Some(auth) = &request_auth {
        check_key(state, project_id, auth)?;
    }
    Ok((project_id, request_auth))
}

pub(crate) fn check_key<C>(
    state: &SentryState<C>,
    project_id: u64,
    auth: &SentryAuth,
) -> Result<(), Refusal> {
    let key = auth::project_key(&auth.public_key)?;
    if auth.version > auth::PROTOCOL_VERSION {
        return Err(AuthError::UnsupportedVersion(auth.version).into());
    }
    if !state.config.key_allowed(project_id, key) {
        return Err(AuthError::NotAllowed.into());
    }
    Ok(())
}

/// Relay's fallback: a request without auth authenticates with the envelope header `dsn`.
pub(crate) fn auth_from_envelope_header<C>(
    state: &SentryState<C>,
    project_id: u64,
    bytes: &[u8],
) -> Result<SentryAuth, Refusal> {
    let line = bytes.split(|&b| b == b'\n').next().unwrap_or(b"");
    let header: Value = serde_json::from_slice(line.trim_ascii())
        .map_err(|e| AuthError::BadEnvelopeDsn(e.to_string()))?;
    let dsn = match header.get("dsn") {
        None | Some(Value::Null) => return Err(AuthError::Missing.into()),
        Some(Value::String(s)) => s,
        Some(_) => return Err(AuthError::BadEnvelopeDsn("`dsn` is not a string".into()).into()),
    };
    let dsn = auth::parse_dsn(dsn).map_err(|e| AuthError::BadEnvelopeDsn(e.into()))?;
    // Relay parses the key inside the DSN: a malformed one is a bad DSN (401).
    auth::project_key(&dsn.public_key)
        .map_err(|_| AuthError::BadEnvelopeDsn("invalid public key".into()))?;
    if dsn.project_id != project_id {
        return Err(AuthError::HeaderMismatch("project id").into());
    }
    let auth = SentryAuth {
        public_key: dsn.public_key,
        version: auth::PROTOCOL_VERSION,
        client: None,
    };
    check_key(state, project_id, &auth)?;
    Ok(auth)
}

pub(crate) fn decode(raw: &[u8], encoding: Encoding, limit: usize) -> Result<Vec<u8>, Refusal> {
    match decompress::decode_bytes(raw, encoding, limit) {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge { limit }) => Err(too_large(limit)),
        Err(e) => Err(Refusal::bad_request(e.to_string())),
    }
}

pub(crate) async fn read(
    body: &mut Body,
    encoding: Encoding,
    limit: usize,
) -> Result<Vec<u8>, Refusal> {
    match decompress::read_body(body, encoding, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge { limit }) => Err(too_large(limit)),
        Err(e) => Err(Refusal::bad_request(e.to_string())),
    }
}

pub(crate) fn too_large(limit: usize) -> Refusal {
    Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("envelope is larger than the limit of {limit} bytes"),
    )
}

/// Refuses a request whose `Content-Length` is over `limit` before its body is read.
pub(crate) fn check_declared_size(headers: &HeaderMap, limit: usize) -> Result<(), Refusal> {
    match decompress::content_length(headers) {
        Some(len) if len > limit as u64 => Err(too_large(limit)),
        _ => Ok(()),
    }
}

/// Hands `request` to `upstream` and counts it in `items`; an upstream that cannot take it
/// (its queue full or stopped) is the SDK's 503.
pub(crate) async fn send_upstream(
    upstream: &dyn Upstream,
    items: &ItemCounters,
    request: ForwardRequest,
) -> Result<(), Refusal> {
    upstream
        .forward(request)
        .await
        .map_err(|e| forward_refusal(&e))?;
    items.forwarded_request();
    Ok(())
}
