//! The Sentry envelope endpoint, `POST /api/{project_id}/envelope/`, answering as Relay does.
//!
//! Steps, each with the status Relay gives (see the crate docs for the full table):
//!
//! 1. The project id must be a number (400). Authentication ([`crate::sentry_auth`]): 401/400.
//! 2. `Content-Encoding` `gzip`, `deflate`, `br`, `zstd`, `identity`, empty (or `utf-8`,
//!    which Relay drops); anything else 415.
//! 3. The pipeline's [`Consumer::check_ready`]: full is 429 with `Retry-After`, before the body
//!    is read.
//! 4. The body, decompressed in a stream, must fit the limit (default 100 MiB) after
//!    decompression (413) and not be empty (400).
//! 5. The envelope must parse (400: bad header line, an item `length` past the end or not
//!    followed by a newline, …); a `dsn` header must match the request (400); `event_id` must
//!    be a UUID and `sent_at` RFC 3339 (400); at most 500 items (400); at most one `profile` or
//!    `profile_chunk` item, of at most 50 MiB (413).
//! 6. `profile_chunk`/`profile_chunk_ui`, `profile` and `transaction` items are parsed. **A
//!    payload that is not valid JSON for its type is 400** with the item index and the JSON
//!    path of the problem. (Relay itself answers 200 and drops a bad chunk later with an
//!    outcome the SDK never sees; a receiver that forwards data should tell the sender.) Chunks
//!    are not validated further: semantic checks belong to the pipeline, as in Relay.
//!    Perfetto chunks (`content_type: application/x-perfetto-trace` or a `meta_length`
//!    header) and all other item types are accepted and counted in
//!    [`SentryBatch::other_items`].
//!    `span` items (span streaming: V2 span containers
//!    `application/vnd.sentry.items.span.v2+json` and legacy single spans) are parsed into
//!    [`SentryBatch::spans`] (see [`profilink_proto::sentry::span_item`]). Unlike the types
//!    above, **an unreadable span never fails the envelope**: it is skipped and counted in
//!    [`SentryBatch::invalid_spans`] and the `refused_spans` counter, as Relay accepts the
//!    envelope and drops such spans later with an outcome (a whole item that is not JSON
//!    counts its `item_count` header, or 1).
//! 7. The batch goes to the consumer when it holds chunks, profiles, transactions or spans:
//!    full is 429 with `Retry-After`, rejected 400, an internal
//!    error 503. Success is 200 `{"id":"<event_id>"}`, or `{}` when the envelope has no
//!    `event_id`.
//!
//! Error bodies are Relay's `{"detail":"…"}`. Responses carry CORS headers, and `OPTIONS`
//! answers preflights, so browser SDKs can post too.

use crate::batch::{Batch, ConsumeError, Consumer, Payload, ReceiverKind, SentryBatch, Transport};
use crate::config::SentryReceiverConfig;
use crate::decompress::{self, BodyError, Encoding};
use crate::sentry_auth::{self, AuthError, SentryAuth};
use crate::server::{self, ReceiverError, ServerHandle};
use crate::stats::Stats;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use profilink_proto::sentry::envelope::MAX_ENVELOPE_ITEMS;
use profilink_proto::sentry::{
    Envelope, EnvelopeItem, ProfileChunk, SampleProfileV1, Transaction, parse_span_item,
};
use profilink_proto::validate::MAX_CHUNK_BYTES;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The route, in axum syntax.
pub const ENVELOPE_ROUTE: &str = "/api/{project_id}/envelope/";

/// Encodings the envelope endpoint accepts (Relay: tower-http's gzip, deflate, br, zstd).
pub const ACCEPTED_ENCODINGS: &[Encoding] = &[
    Encoding::Gzip,
    Encoding::Deflate,
    Encoding::Brotli,
    Encoding::Zstd,
];

/// Largest `profile` / `profile_chunk` item (Relay's `max_profile_size`).
pub const MAX_PROFILE_ITEM_SIZE: usize = MAX_CHUNK_BYTES;

const DRAIN_MAX: usize = 8 * 1024 * 1024;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const PERFETTO: &str = "application/x-perfetto-trace";

#[derive(Debug)]
struct SentryState<C> {
    consumer: Arc<C>,
    stats: Arc<Stats>,
    config: SentryReceiverConfig,
}

/// The envelope route (and its CORS preflight), for serving alone ([`serve_sentry`]) or merged
/// into another router.
pub fn sentry_router<C: Consumer>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
) -> Router {
    let state = Arc::new(SentryState {
        consumer,
        stats,
        config: config.clone(),
    });
    Router::new()
        .route(ENVELOPE_ROUTE, post(handle::<C>).options(preflight))
        .with_state(state)
}

/// Binds `config.endpoint` and serves the envelope endpoint (TLS when configured) until
/// `shutdown` resolves; in-flight requests are then finished. Counts into `stats.sentry_http`.
pub async fn serve_sentry<C, F>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError>
where
    C: Consumer,
    F: Future<Output = ()> + Send + 'static,
{
    let router = sentry_router(config, consumer, stats);
    server::bind_and_serve(
        &config.endpoint,
        config.tls.as_ref(),
        router,
        shutdown,
        "Sentry envelope receiver",
    )
    .await
}

/// A refused request: status, Relay-style detail, optional `Retry-After`.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    detail: String,
    retry_after: Option<Duration>,
    /// Profiles, samples and spans known to be refused (for the counters).
    profiles: u64,
    samples: u64,
    spans: u64,
}

impl Refusal {
    fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Refusal {
            status,
            detail: detail.into(),
            retry_after: None,
            profiles: 0,
            samples: 0,
            spans: 0,
        }
    }

    fn bad_request(detail: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, detail)
    }

    fn counted(mut self, profiles: u64, samples: u64) -> Self {
        self.profiles = profiles;
        self.samples = samples;
        self
    }

    fn counted_spans(mut self, spans: u64) -> Self {
        self.spans = spans;
        self
    }

    fn into_response(self) -> Response {
        let body = serde_json::json!({ "detail": self.detail }).to_string();
        let mut response = (
            self.status,
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            body,
        )
            .into_response();
        if let Some(delay) = self.retry_after {
            response.headers_mut().insert(
                RETRY_AFTER,
                HeaderValue::from(crate::otlp_http::retry_after_secs(delay)),
            );
        }
        response
    }
}

impl From<AuthError> for Refusal {
    fn from(e: AuthError) -> Self {
        Refusal::new(e.status(), e.to_string())
    }
}

fn consume_refusal(error: &ConsumeError) -> Refusal {
    match error {
        ConsumeError::Full { retry_after } => {
            let mut r = Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                "the pipeline is full; retry later",
            );
            r.retry_after = Some(*retry_after);
            r
        }
        ConsumeError::Rejected(message) => Refusal::bad_request(message.clone()),
        ConsumeError::Internal(message) => {
            Refusal::new(StatusCode::SERVICE_UNAVAILABLE, message.clone())
        }
    }
}

async fn preflight() -> Response {
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

async fn handle<C: Consumer>(
    State(state): State<Arc<SentryState<C>>>,
    Path(project_id): Path<String>,
    request: Request,
) -> Response {
    let counters = &state.stats.sentry_http;
    let (parts, mut body) = request.into_parts();
    let result = process(&state, &project_id, &parts, &mut body).await;
    // Whatever was refused early, let an HTTP/1.1 client finish sending so it reads the answer.
    decompress::drain(&mut body, DRAIN_MAX, DRAIN_TIMEOUT).await;
    let mut response = match result {
        Ok(response) => {
            counters.request_accepted();
            response
        }
        Err(refusal) => {
            counters.request_refused();
            counters.refuse(refusal.profiles, refusal.samples);
            counters.refuse_spans(refusal.spans);
            tracing::debug!(status = refusal.status.as_u16(), detail = %refusal.detail, "envelope refused");
            refusal.into_response()
        }
    };
    let h = response.headers_mut();
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static("x-sentry-error, x-sentry-rate-limits, retry-after"),
    );
    response
}

async fn process<C: Consumer>(
    state: &SentryState<C>,
    project_id: &str,
    parts: &Parts,
    body: &mut Body,
) -> Result<Response, Refusal> {
    let project_id: u64 = project_id
        .parse()
        .map_err(|_| Refusal::bad_request("bad project path parameter"))?;
    let request_auth = sentry_auth::auth_from_request(&parts.headers, parts.uri.query())?;
    if let Some(auth) = &request_auth {
        check_key(state, project_id, auth)?;
    }
    let encoding = Encoding::from_headers(&parts.headers, ACCEPTED_ENCODINGS).map_err(|value| {
        Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported Content-Encoding: {value:?}"),
        )
    })?;
    let limit = state.config.max_envelope_size();
    if content_length(&parts.headers).is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    if let Err(e) = state.consumer.check_ready() {
        return Err(consume_refusal(&e));
    }
    let bytes = read(body, encoding, limit).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Refusal::bad_request("empty request body"));
    }
    let auth = match request_auth {
        Some(auth) => auth,
        None => auth_from_envelope_header(state, project_id, &bytes)?,
    };
    let public_key = sentry_auth::project_key(&auth.public_key)?.to_string();

    let envelope = Envelope::parse(&bytes)
        .map_err(|e| Refusal::bad_request(format!("invalid envelope: {e}")))?;
    drop(bytes);
    let event_id = check_envelope_headers(&envelope, project_id, &public_key)?;
    check_items(&envelope)?;
    let batch = parse_items(envelope, project_id, public_key)?;
    let profiles = (batch.chunks.len() + batch.v1_profiles.len()) as u64;
    let samples = batch
        .chunks
        .iter()
        .map(|c| c.profile.samples.len() as u64)
        .chain(
            batch
                .v1_profiles
                .iter()
                .map(|(p, _)| p.profile.samples.len() as u64),
        )
        .sum::<u64>();
    let counters = &state.stats.sentry_http;
    let spans = batch.spans.len() as u64;
    let invalid_spans = batch.invalid_spans;
    if profiles > 0 || !batch.transactions.is_empty() || spans > 0 {
        let batch = Batch {
            receiver: ReceiverKind::Sentry,
            transport: Transport::Http,
            payload: Payload::Sentry(batch),
            samples,
            profiles,
        };
        if let Err(e) = state.consumer.consume(batch).await {
            return Err(consume_refusal(&e)
                .counted(profiles, samples)
                .counted_spans(spans + invalid_spans));
        }
    }
    counters.accept(profiles, samples);
    counters.accept_spans(spans);
    counters.refuse_spans(invalid_spans);
    let body = match event_id {
        Some(id) => serde_json::json!({ "id": id }),
        None => serde_json::json!({}),
    };
    Ok((
        StatusCode::OK,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_string(),
    )
        .into_response())
}

fn check_key<C>(state: &SentryState<C>, project_id: u64, auth: &SentryAuth) -> Result<(), Refusal> {
    let key = sentry_auth::project_key(&auth.public_key)?;
    if auth.version > sentry_auth::PROTOCOL_VERSION {
        return Err(AuthError::UnsupportedVersion(auth.version).into());
    }
    if !state.config.key_allowed(project_id, key) {
        return Err(AuthError::NotAllowed.into());
    }
    Ok(())
}

/// Relay's fallback: a request without auth authenticates with the envelope header `dsn`.
fn auth_from_envelope_header<C>(
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
    let dsn = sentry_auth::parse_dsn(dsn).map_err(|e| AuthError::BadEnvelopeDsn(e.into()))?;
    // Relay parses the key inside the DSN: a malformed one is a bad DSN (401).
    sentry_auth::project_key(&dsn.public_key)
        .map_err(|_| AuthError::BadEnvelopeDsn("invalid public key".into()))?;
    if dsn.project_id != project_id {
        return Err(AuthError::HeaderMismatch("project id").into());
    }
    let auth = SentryAuth {
        public_key: dsn.public_key,
        version: sentry_auth::PROTOCOL_VERSION,
        client: None,
    };
    check_key(state, project_id, &auth)?;
    Ok(auth)
}

/// Checks `dsn`, `event_id` and `sent_at`; returns the event id to answer with.
fn check_envelope_headers(
    envelope: &Envelope,
    project_id: u64,
    public_key: &str,
) -> Result<Option<String>, Refusal> {
    let headers = &envelope.headers;
    match headers.get("dsn") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            let dsn = sentry_auth::parse_dsn(s)
                .map_err(|e| Refusal::bad_request(format!("invalid envelope header `dsn`: {e}")))?;
            if dsn.project_id != project_id {
                return Err(AuthError::HeaderMismatch("project id").into());
            }
            if sentry_auth::project_key(&dsn.public_key).ok() != Some(public_key) {
                return Err(AuthError::HeaderMismatch("public key").into());
            }
        }
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `dsn`: not a string",
            ));
        }
    }
    let event_id = match headers.get("event_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(normalize_event_id(s).ok_or_else(|| {
            Refusal::bad_request("invalid envelope header `event_id`: not a UUID")
        })?),
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `event_id`: not a string",
            ));
        }
    };
    match headers.get("sent_at") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => {}
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `sent_at`: not an RFC 3339 timestamp",
            ));
        }
    }
    Ok(event_id)
}

/// A UUID (32 hex digits, optionally hyphenated 8-4-4-4-12) as 32 lowercase hex digits.
fn normalize_event_id(s: &str) -> Option<String> {
    let s = s.trim();
    let hex: String = match s.len() {
        32 => s.to_string(),
        36 => {
            let b = s.as_bytes();
            if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                return None;
            }
            s.chars().filter(|&c| c != '-').collect()
        }
        _ => return None,
    };
    if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some(hex.to_ascii_lowercase())
    } else {
        None
    }
}

fn is_profile_item(item: &EnvelopeItem) -> bool {
    matches!(
        item.item_type(),
        Some("profile" | "profile_chunk" | "profile_chunk_ui")
    )
}

/// Relay's envelope limits: item count, one profile item, profile item size, item types.
fn check_items(envelope: &Envelope) -> Result<(), Refusal> {
    if envelope.items.len() > MAX_ENVELOPE_ITEMS {
        return Err(Refusal::bad_request(format!(
            "too many envelope items: {} (at most {MAX_ENVELOPE_ITEMS})",
            envelope.items.len()
        )));
    }
    if let Some(index) = envelope.items.iter().position(|i| i.item_type().is_none()) {
        return Err(Refusal::bad_request(format!(
            "invalid envelope: item {index} has no `type`"
        )));
    }
    let profile_items = envelope.items.iter().filter(|i| is_profile_item(i)).count();
    if profile_items > 1 {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("envelope has {profile_items} profile items; at most one `profile` or `profile_chunk` is allowed"),
        )
        .counted(profile_items as u64, 0));
    }
    if let Some((index, item)) = envelope
        .items
        .iter()
        .enumerate()
        .find(|(_, i)| is_profile_item(i) && i.payload.len() > MAX_PROFILE_ITEM_SIZE)
    {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "item {index}: profile payload of {} bytes is over the limit of {MAX_PROFILE_ITEM_SIZE}",
                item.payload.len()
            ),
        )
        .counted(1, 0));
    }
    Ok(())
}

fn parse_items(
    envelope: Envelope,
    project_id: u64,
    public_key: String,
) -> Result<SentryBatch, Refusal> {
    let mut batch = SentryBatch {
        project_id,
        public_key,
        ..SentryBatch::default()
    };
    let mut v1 = Vec::new();
    let mut transactions = Vec::new();
    for (index, item) in envelope.items.iter().enumerate() {
        let item_type = item.item_type().unwrap_or("");
        let invalid = |e: profilink_proto::sentry::JsonError| {
            Refusal::bad_request(format!(
                "invalid envelope item {index} ({item_type}): invalid JSON at {}: {}",
                e.path, e.message
            ))
            .counted(u64::from(is_profile_item(item)), 0)
        };
        match item_type {
            "profile_chunk" | "profile_chunk_ui" => {
                let perfetto = item.headers.contains_key("meta_length")
                    || item.headers.get("content_type").and_then(Value::as_str) == Some(PERFETTO);
                if perfetto {
                    batch.other_items += 1;
                } else {
                    batch
                        .chunks
                        .push(ProfileChunk::from_json(&item.payload).map_err(invalid)?);
                }
            }
            "profile" => v1.push(SampleProfileV1::from_json(&item.payload).map_err(invalid)?),
            "transaction" => {
                transactions.push(Transaction::from_json(&item.payload).map_err(invalid)?)
            }
            "span" => read_spans(index, item, &mut batch),
            _ => batch.other_items += 1,
        }
    }
    let mut transactions: Vec<Option<Transaction>> = transactions.into_iter().map(Some).collect();
    for profile in v1 {
        let ids: Vec<String> = profile
            .all_transactions()
            .iter()
            .filter_map(|t| normalize_event_id(&t.id))
            .collect();
        let by_id = transactions.iter().position(|t| {
            t.as_ref()
                .and_then(|t| t.event_id.as_deref())
                .and_then(normalize_event_id)
                .is_some_and(|id| ids.contains(&id))
        });
        let index = by_id.or_else(|| (transactions.len() == 1).then_some(0));
        let transaction = index
            .and_then(|i| transactions.get_mut(i))
            .and_then(Option::take);
        batch.v1_profiles.push((profile, transaction));
    }
    batch.transactions = transactions.into_iter().flatten().collect();
    Ok(batch)
}

/// Reads a `span` item into `batch.spans`; what cannot be read is counted in
/// `batch.invalid_spans` and skipped (never an error: see the module docs).
fn read_spans(index: usize, item: &EnvelopeItem, batch: &mut SentryBatch) {
    let content_type = item.headers.get("content_type").and_then(Value::as_str);
    match parse_span_item(&item.payload, content_type) {
        Ok(spans) => {
            for span in spans {
                match span {
                    Ok(span) => batch.spans.push(span),
                    Err(e) => {
                        batch.invalid_spans += 1;
                        tracing::debug!(item = index, path = %e.path, message = %e.message, "invalid span skipped");
                    }
                }
            }
        }
        Err(e) => {
            let count = item
                .headers
                .get("item_count")
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .unwrap_or(1);
            batch.invalid_spans = batch.invalid_spans.saturating_add(count);
            tracing::debug!(item = index, spans = count, path = %e.path, message = %e.message, "unreadable span item skipped");
        }
    }
}

async fn read(body: &mut Body, encoding: Encoding, limit: usize) -> Result<Vec<u8>, Refusal> {
    match decompress::read_body(body, encoding, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge { limit }) => Err(too_large(limit)),
        Err(e) => Err(Refusal::bad_request(e.to_string())),
    }
}

fn too_large(limit: usize) -> Refusal {
    Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("envelope is larger than the limit of {limit} bytes"),
    )
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids() {
        assert_eq!(
            normalize_event_id("FC7A68B87D6A4C06990E6BFB3408BFA5").as_deref(),
            Some("fc7a68b87d6a4c06990e6bfb3408bfa5")
        );
        assert_eq!(
            normalize_event_id("fc7a68b8-7d6a-4c06-990e-6bfb3408bfa5").as_deref(),
            Some("fc7a68b87d6a4c06990e6bfb3408bfa5")
        );
        assert_eq!(
            normalize_event_id("fc7a68b8-7d6a-4c06-990e6bfb3408bfa5x"),
            None
        );
        assert_eq!(normalize_event_id("nope"), None);
        assert_eq!(normalize_event_id("zc7a68b87d6a4c06990e6bfb3408bfa5"), None);
    }
}
