//! The Sentry envelope endpoint, `POST /api/{project_id}/envelope/`, answering as Relay does.
//!
//! Steps, each with the status Relay gives (see the crate docs for the full table):
//!
//! 1. The project id must be a number (400). Authentication ([`crate::sentry::auth`]): 401/400.
//! 2. `Content-Encoding` `gzip`, `deflate`, `br`, `zstd`, `identity`, empty (or `utf-8`,
//!    which Relay drops); anything else 415.
//! 3. The pipeline's [`Consumer::check_ready`] (and the upstream's, when there is one): full is
//!    503 with `Retry-After`, before the body is read.
//! 4. The body, decompressed in a stream, must fit the limit (default 100 MiB) after
//!    decompression (413) and not be empty (400).
//! 5. The envelope must parse (400: bad header line, an item `length` past the end or not
//!    followed by a newline, …); a `dsn` header must match the request (400); `event_id` must
//!    be a UUID and `sent_at` RFC 3339 (400); at most 500 items (400); at most one `profile` or
//!    `profile_chunk` item, of at most 50 MiB (413).
//! 6. `profile_chunk`/`profile_chunk_ui`, `profile` and `transaction` items are parsed. **A
//!    payload that is not valid JSON for its type is 400** with the item index and the JSON
//!    path of the problem. (Relay itself answers 200 and drops a bad chunk later with an
//!    outcome the SDK never sees; a receiver that forwards data should tell the sender.) Each
//!    chunk is then checked at the door ([`crate::sentry::chunk_door`]): one that fails is refused
//!    (400 naming the rule) and counted with the rule as reason.
//!    Perfetto chunks (`content_type: application/x-perfetto-trace` or a `meta_length`
//!    header) and all other item types are accepted and counted in
//!    [`SentryBatch::other_items`](profilink_consumer::SentryBatch::other_items).
//!    `span` items (span streaming: V2 span containers
//!    `application/vnd.sentry.items.span.v2+json` and legacy single spans) are parsed into
//!    [`SentryBatch::spans`](profilink_consumer::SentryBatch::spans) (see [`SpanItem`](profilink_proto::sentry::SpanItem)). Unlike the types
//!    above, **an unreadable span never fails the envelope**: it is skipped and counted in
//!    [`SentryBatch::invalid_spans`](profilink_consumer::SentryBatch::invalid_spans) and the `refused_spans` counter, as Relay accepts the
//!    envelope and drops such spans later with an outcome (a whole item that is not JSON
//!    counts its `item_count` header, or 1).
//! 7. The batch goes to the consumer when it holds chunks, profiles, transactions or spans:
//!    full is 503 with `Retry-After`, rejected 400, an internal
//!    error 503. Success is 200 `{"id":"<event_id>"}`, or `{}` when the envelope has no
//!    `event_id`.
//!
//! 8. With an [`Upstream`]: the request is forwarded as received (minus the items whose
//!    category upstream rate-limits, and profiles with `forward_profiles: false`); an envelope
//!    that does not parse, and items that are not JSON or fail the door check, are still
//!    forwarded and counted (Relay decides). A matched rate limit makes the answer a 429 with
//!    `X-Sentry-Rate-Limits`. Without one, items no pipeline consumes are counted as dropped
//!    ([`crate::stats::items`]) and logged.
//!
//! Error bodies are Relay's `{"detail":"…"}`. Responses carry CORS headers, and `OPTIONS`
//! answers preflights, so browser SDKs can post too.

use crate::config::SentryReceiverConfig;
use crate::error::ReceiverError;
use crate::sample_records::{SENTRY_SAMPLE_TYPE, SampleRecords};
use crate::sentry::auth;
use crate::sentry::common::{
    Refusal, SentryState, answer, auth_from_envelope_header, authenticate, check_declared_size,
    consume_refusal, decode, forward_refusal, json_ok, preflight, read, send_upstream,
};
use crate::sentry::forward::{self, ForwardPlan};
use crate::sentry::items::{check_envelope_headers, check_items, parse_items};
use crate::server::decompress::Encoding;
use crate::server::{self, ServerHandle};
use crate::stats::Stats;
use crate::stats::items::LogLimiter;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use profilink_consumer::Upstream;
use profilink_consumer::{Batch, Consumer, Payload, ReceiverKind, Transport};
use profilink_proto::sentry::Envelope;
use std::future::Future;
use std::sync::Arc;

/// The route, in axum syntax.
pub const ENVELOPE_ROUTE: &str = "/api/{project_id}/envelope/";

/// Encodings the envelope endpoint accepts (Relay: tower-http's gzip, deflate, br, zstd).
pub const ACCEPTED_ENCODINGS: &[Encoding] = &[
    Encoding::Gzip,
    Encoding::Deflate,
    Encoding::Brotli,
    Encoding::Zstd,
];

/// The envelope route (and its CORS preflight), for serving alone ([`serve_sentry`]) or merged
/// into another router.
pub fn sentry_router<C: Consumer>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
) -> Router {
    sentry_router_with(config, consumer, stats, None)
}

/// [`sentry_router`] with an [`Upstream`]: every request is also forwarded there, the other
/// ingest paths SDKs use are proxied (store, security, minidump, OTLP integration), and upstream rate limits come
/// back to the SDK. Without one, items no pipeline consumes are dropped and counted.
pub fn sentry_router_with<C: Consumer>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    upstream: Option<Arc<dyn Upstream>>,
) -> Router {
    let state = Arc::new(SentryState {
        consumer,
        stats,
        config: config.clone(),
        upstream,
        log: LogLimiter::default(),
    });
    crate::sentry::proxy::routes(
        Router::new().route(ENVELOPE_ROUTE, post(handle::<C>).options(preflight)),
    )
    .with_state(state)
}

/// Binds `config.endpoint` and serves the envelope endpoint (TLS when configured) until
/// `shutdown` resolves; in-flight requests are then finished. Counts into `stats.sentry_http`.
pub async fn serve_sentry<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    serve_sentry_with(config, consumer, stats, None, shutdown).await
}

/// [`serve_sentry`] with an [`Upstream`] (see [`sentry_router_with`]).
pub async fn serve_sentry_with<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &SentryReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    upstream: Option<Arc<dyn Upstream>>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    let router = sentry_router_with(config, consumer, stats, upstream);
    server::bind_and_serve(
        &config.endpoint,
        config.tls.as_ref(),
        config.server_settings(),
        router,
        shutdown,
        "Sentry envelope receiver",
    )
    .await
}

async fn handle<C: Consumer>(
    State(state): State<Arc<SentryState<C>>>,
    Path(project_id): Path<String>,
    request: Request,
) -> Response {
    let (parts, mut body) = request.into_parts();
    let result = process(&state, &project_id, &parts, &mut body).await;
    answer(&state, result, &mut body).await
}

async fn process<C: Consumer>(
    state: &SentryState<C>,
    project_id: &str,
    parts: &Parts,
    body: &mut Body,
) -> Result<Response, Refusal> {
    let (project_id, request_auth) = authenticate(state, project_id, parts)?;
    let encoding = Encoding::from_headers(&parts.headers, ACCEPTED_ENCODINGS).map_err(|value| {
        Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported Content-Encoding: {value:?}"),
        )
    })?;
    let limit = state.config.max_envelope_size();
    check_declared_size(&parts.headers, limit)?;
    if let Err(e) = state.consumer.check_ready() {
        return Err(consume_refusal(&e));
    }
    let upstream = state.upstream.as_deref();
    if let Some(Err(e)) = upstream.map(Upstream::check_ready) {
        return Err(forward_refusal(&e));
    }
    // With an upstream the body is kept as received (still compressed) to forward it as is.
    let (raw, bytes) = match upstream {
        Some(_) => {
            let raw = Bytes::from(read(body, Encoding::Identity, limit).await?);
            let bytes = match encoding {
                Encoding::Identity => raw.clone(),
                e => Bytes::from(decode(&raw, e, limit)?),
            };
            (raw, bytes)
        }
        None => (
            Bytes::new(),
            Bytes::from(read(body, encoding, limit).await?),
        ),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Refusal::bad_request("empty request body"));
    }
    let auth = match request_auth {
        Some(auth) => auth,
        None => auth_from_envelope_header(state, project_id, &bytes)?,
    };
    let public_key = auth::project_key(&auth.public_key)?.to_string();
    let items = &state.stats.sentry_items;

    let envelope = match (Envelope::parse(&bytes), upstream) {
        (Ok(envelope), _) => envelope,
        (Err(e), None) => return Err(Refusal::bad_request(format!("invalid envelope: {e}"))),
        (Err(e), Some(upstream)) => {
            // Relay decides: forwarded as received, counted here.
            items.refuse_items("envelope", "unparsable", 1);
            if let Some(suppressed) = state.log.allow() {
                tracing::warn!(project_id, error = %e, suppressed_lines = suppressed, "envelope profilink cannot parse; forwarded upstream as received");
            }
            let headers = forward::forward_headers(&parts.headers);
            let request = forward::request(project_id, &public_key, parts, raw, headers);
            send_upstream(upstream, items, request).await?;
            return Ok(json_ok(serde_json::json!({})));
        }
    };
    drop(bytes);
    let event_id = check_envelope_headers(&envelope, project_id, &public_key)?;
    check_items(&envelope)?;
    let (batch, refused) = parse_items(
        &envelope,
        project_id,
        public_key.clone(),
        upstream.is_some(),
    )?;
    for r in &refused {
        items.refuse_items(r.item_type, r.reason, 1);
    }
    if let Some(r) = refused.first() {
        if upstream.is_none() {
            // Without an upstream the refused chunk is the envelope's only profile item and
            // nothing else would use it: the SDK hears why.
            return Err(Refusal::bad_request(format!(
                "envelope item {} ({}) refused: {}: {}",
                r.index, r.item_type, r.reason, r.message
            ))
            .counted(refused.len() as u64, 0));
        }
        if let Some(suppressed) = state.log.allow() {
            tracing::warn!(project_id, item = r.index, item_type = r.item_type, reason = r.reason, detail = %r.message, refused = refused.len(), suppressed_lines = suppressed, "envelope items refused at the door (still forwarded upstream, which reports its own outcome)");
        }
        state
            .stats
            .sentry_http
            .refuse(refused.iter().filter(|r| r.profile).count() as u64, 0);
    }
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
    // A Sentry sample (one entry of `samples`) is one observation and one sample record.
    counters.accept_records(&SampleRecords::single(SENTRY_SAMPLE_TYPE, samples));
    counters.accept_spans(spans);
    counters.refuse_spans(invalid_spans);

    let mut limited = None;
    match upstream {
        None => forward::account_unconsumed(&envelope, project_id, items, &state.log),
        Some(upstream) => {
            let limits = upstream.rate_limits(project_id, &public_key);
            let plan = ForwardPlan::new(&envelope, &limits, upstream.forward_profiles());
            for (t, n) in &plan.limited {
                items.refuse_items(t, "rate_limited", *n);
            }
            if !plan.nothing_left() {
                let headers = forward::forward_headers(&parts.headers);
                let (body, headers) = plan.body(&envelope, raw, headers);
                let request = forward::request(project_id, &public_key, parts, body, headers);
                send_upstream(upstream, items, request).await?;
            }
            limited = plan.rate_limit_header();
        }
    }
    if let Some((header, retry_after)) = limited {
        // Relay's answer when an active limit matched the envelope: 429 with the categories;
        // the items not limited were still forwarded.
        return Ok(Refusal::rate_limited(header, retry_after).into_response());
    }
    let body = match event_id {
        Some(id) => serde_json::json!({ "id": id }),
        None => serde_json::json!({}),
    };
    Ok(json_ok(body))
}
