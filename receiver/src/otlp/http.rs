//! The OTLP/HTTP receiver: `POST /v1development/profiles` and, for consumers that take traces,
//! `POST /v1/traces`, as the Collector's otlpreceiver serves them.
//!
//! * `Content-Type` `application/x-protobuf` (or `application/protobuf`) or `application/json`
//!   (OTLP/JSON); parameters such as `charset` are ignored. Others: 415.
//! * `Content-Encoding` `gzip`, `deflate` (zlib), `zstd`, `identity` or none. Others: 400, as
//!   the Collector answers.
//! * The size limit applies after decompression; decompression is streamed and stops at the
//!   limit (413).
//! * Success: 200 with an `ExportProfilesServiceResponse` / `ExportTraceServiceResponse` in
//!   the request's format (`partial_success` only when profiles / spans were rejected).
//! * Errors carry a `google.rpc.Status` in the request's format (protobuf, or JSON
//!   `{"code":3,"message":"…"}`); a full pipeline is 503 with `Retry-After` and a
//!   `google.rpc.RetryInfo` detail.
//! * Authentication (`auth`, `bearer_token`; see [`crate::auth`]) comes first: a failed check
//!   is 401 with `WWW-Authenticate`, counted as refused.
//! * Then, before the body is read: the media type, the OTLP profiles development version
//!   (`OTLP-Profiles-Development-Version`, profiles only; [`crate::profiles_version`]: 400
//!   naming the supported version), the encoding, `Content-Length` and the consumer's
//!   readiness. Each refusal is counted as a refused request with its [`RefusalReason`] (no
//!   samples: none were read). The body is decoded by the decoder of the request's version.
//! * `cors` ([`crate::server::cors`]): preflights are answered before authentication, and responses to
//!   allowed origins carry `Access-Control-Allow-Origin`.
//! * Other paths: 404; other methods on the path: 405 with `Allow: POST`.
//! * `/v1/traces` when the consumer does not take traces ([`Consumer::accepts_traces`] is
//!   false): 404 for every method, before authentication, as a Collector whose traces pipelines
//!   do not use the receiver; not counted.

use crate::auth::ListenerAuth;
use crate::config::OtlpHttpConfig;
use crate::error::ReceiverError;
use crate::otlp::ingest::{self, ExportError, IngestSignal, consume_reason};
use crate::server::decompress::{self, BodyError, Encoding};
use crate::server::http::retry_after_secs;
use crate::server::{self, ServerHandle};
use crate::stats::{RefusalReason, Stats};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::header::{ALLOW, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use profilink_consumer::{ConsumeError, Consumer, Transport};
use profilink_proto::signal::{Profiles, Signal, Traces};
use prost::Message;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

/// The OTLP/HTTP path for traces.
pub const TRACES_HTTP_PATH: &str = Traces::HTTP_PATH;

/// Encodings the OTLP/HTTP receiver accepts.
pub const ACCEPTED_ENCODINGS: &[Encoding] = &[Encoding::Gzip, Encoding::Deflate, Encoding::Zstd];

/// The request body format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Binary protobuf, with the media type the client used.
    Protobuf(&'static str),
    /// OTLP/JSON.
    Json,
}

impl Format {
    /// Reads `Content-Type`.
    pub fn from_headers(headers: &HeaderMap) -> Option<Format> {
        let value = headers.get(CONTENT_TYPE)?.to_str().ok()?;
        let media = value.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("application/x-protobuf") {
            Some(Format::Protobuf("application/x-protobuf"))
        } else if media.eq_ignore_ascii_case("application/protobuf") {
            Some(Format::Protobuf("application/protobuf"))
        } else if media.eq_ignore_ascii_case("application/json") {
            Some(Format::Json)
        } else {
            None
        }
    }

    /// The response `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf(media) => media,
            Format::Json => "application/json",
        }
    }
}

#[derive(Debug)]
struct HttpState<C> {
    consumer: Arc<C>,
    stats: Arc<Stats>,
    limit: usize,
    auth: ListenerAuth,
}

/// The OTLP/HTTP routes (`POST /v1development/profiles`, `POST /v1/traces`, 404 elsewhere), with
/// the `cors` layer when configured, for serving alone ([`serve_otlp_http`]) or merged into
/// another router. A config whose `auth` was not resolved refuses every request.
pub fn otlp_http_router<C: Consumer>(
    config: &OtlpHttpConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
) -> Router {
    let state = Arc::new(HttpState {
        consumer,
        stats,
        limit: config.max_request_body_size(),
        auth: listener_auth(config),
    });
    let router = Router::new()
        .route(
            Profiles::HTTP_PATH,
            post(handle::<Profiles, C>).fallback(other_method::<Profiles, C>),
        )
        .route(
            Traces::HTTP_PATH,
            post(handle::<Traces, C>).fallback(other_method::<Traces, C>),
        )
        .with_state(state);
    match config.cors.as_ref().and_then(|c| c.layer()) {
        Some(cors) => router.layer(cors),
        None => router,
    }
}

fn listener_auth(config: &OtlpHttpConfig) -> ListenerAuth {
    ListenerAuth::new(
        config.auth.as_ref(),
        config.authenticator.as_ref(),
        config.bearer_token.as_deref(),
    )
}

/// Binds `config.endpoint` and serves OTLP/HTTP (TLS when configured) until `shutdown`
/// resolves; in-flight requests are then finished. Counts into `stats.otlp_http`.
pub async fn serve_otlp_http<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &OtlpHttpConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    if let Some(e) = listener_auth(config).start_error() {
        return Err(ReceiverError::Config(e));
    }
    let router = otlp_http_router(config, consumer, stats);
    server::bind_and_serve(
        &config.endpoint,
        config.tls.as_ref(),
        config.server_settings(),
        router,
        shutdown,
        "OTLP/HTTP receiver",
    )
    .await
}

/// `POST` on `S`'s path; 404 (not counted) when the consumer does not take `S`.
async fn handle<S: IngestSignal, C: Consumer>(
    State(state): State<Arc<HttpState<C>>>,
    request: Request,
) -> Response {
    if !S::accepted_by(&*state.consumer) {
        let mut body = request.into_body();
        decompress::drain(&mut body).await;
        return StatusCode::NOT_FOUND.into_response();
    }
    let counters = &state.stats.otlp_http;
    let (parts, mut body) = request.into_parts();
    let outcome = match read_request::<S, C>(&state, &parts, &mut body).await {
        Ok(read) => export::<S, C>(&state, read).await,
        Err(refused) => Err(refused),
    };
    // Whatever was refused early, let an HTTP/1.1 client finish sending so it reads the answer.
    decompress::drain(&mut body).await;
    match outcome {
        Ok(response) => {
            counters.request_accepted();
            response
        }
        Err((reason, response)) => {
            counters.request_refused_for(reason);
            response
        }
    }
}

/// An error answer, and the reason it is counted under.
type Refusal = (RefusalReason, Response);

/// A request past every check on its headers, with its body read and decompressed.
struct ReadRequest<V> {
    format: Format,
    version: V,
    bytes: Vec<u8>,
}

/// Other methods on `S`'s path: 405 when `S` is taken, else 404 (no route).
async fn other_method<S: IngestSignal, C: Consumer>(
    State(state): State<Arc<HttpState<C>>>,
) -> Response {
    if S::accepted_by(&*state.consumer) {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(ALLOW, HeaderValue::from_static("POST"))],
        )
            .into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

/// Everything before decoding, common to both signals: auth, media type, `S`'s version,
/// encoding, size, readiness, the decompressed body.
async fn read_request<S: IngestSignal, C: Consumer>(
    state: &HttpState<C>,
    parts: &Parts,
    body: &mut Body,
) -> Result<ReadRequest<S::Version>, Refusal> {
    if let Err(failure) = state.auth.check(&parts.headers) {
        let challenge = HeaderValue::from_str(state.auth.scheme())
            .unwrap_or(HeaderValue::from_static("Bearer"));
        return Err((
            RefusalReason::Unauthenticated,
            (
                StatusCode::UNAUTHORIZED,
                [(WWW_AUTHENTICATE, challenge)],
                failure.to_string(),
            )
                .into_response(),
        ));
    }
    let Some(format) = Format::from_headers(&parts.headers) else {
        return Err((
            RefusalReason::UnsupportedMediaType,
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported media type, supported: [application/json, application/x-protobuf]",
            )
                .into_response(),
        ));
    };
    let version = S::request_version(&parts.headers).map_err(|e| {
        (
            RefusalReason::UnsupportedVersion,
            invalid_body(format, &e.to_string()),
        )
    })?;
    let encoding = Encoding::from_headers(&parts.headers, ACCEPTED_ENCODINGS).map_err(|value| {
        (
            RefusalReason::UnsupportedEncoding,
            status_response(
                format,
                StatusCode::BAD_REQUEST,
                Code::InvalidArgument,
                &format!("unsupported Content-Encoding: {value:?}"),
                None,
            ),
        )
    })?;
    if decompress::content_length(&parts.headers).is_some_and(|len| len > state.limit as u64) {
        return Err((RefusalReason::TooLarge, too_large(format, state.limit)));
    }
    if let Err(e) = state.consumer.check_ready() {
        return Err((consume_reason(&e), consume_error_response(format, &e)));
    }
    match decompress::read_body(body, encoding, state.limit).await {
        Ok(bytes) => Ok(ReadRequest {
            format,
            version,
            bytes,
        }),
        Err(BodyError::TooLarge { limit }) => {
            Err((RefusalReason::TooLarge, too_large(format, limit)))
        }
        Err(e) => Err((
            RefusalReason::Invalid,
            status_response(
                format,
                StatusCode::BAD_REQUEST,
                Code::InvalidArgument,
                &e.to_string(),
                None,
            ),
        )),
    }
}

fn invalid_body(format: Format, message: &str) -> Response {
    tracing::debug!(%message, "OTLP/HTTP request refused");
    status_response(
        format,
        StatusCode::BAD_REQUEST,
        Code::InvalidArgument,
        message,
        None,
    )
}

fn ok_response(format: Format, body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        body,
    )
        .into_response()
}

/// Decodes a request of signal `S` in its format with the decoder of its version, exports it,
/// and answers in that format.
async fn export<S: IngestSignal, C: Consumer>(
    state: &HttpState<C>,
    read: ReadRequest<S::Version>,
) -> Result<Response, Refusal> {
    let ReadRequest {
        format,
        version,
        bytes,
    } = read;
    let request = match format {
        Format::Protobuf(_) => S::decode_protobuf(version, bytes.as_slice())
            .map_err(|e| format!("cannot decode {}: {e}", S::REQUEST_NAME)),
        Format::Json => S::decode_json(version, &bytes)
            .map_err(|e| format!("cannot decode OTLP/JSON {}: {e}", S::REQUEST_NAME)),
    };
    drop(bytes);
    let request = match request {
        Ok(r) => r,
        Err(message) => return Err((RefusalReason::Invalid, invalid_body(format, &message))),
    };
    let counters = &state.stats.otlp_http;
    match ingest::export::<S, C>(&*state.consumer, counters, Transport::Http, request).await {
        Ok(response) => Ok(ok_response(
            format,
            match format {
                Format::Protobuf(_) => response.encode_to_vec(),
                Format::Json => S::encode_json_response(&response),
            },
        )),
        Err(ExportError::Invalid(message)) => Err((
            RefusalReason::Invalid,
            status_response(
                format,
                StatusCode::BAD_REQUEST,
                Code::InvalidArgument,
                &message,
                None,
            ),
        )),
        Err(ExportError::Consumer(e)) => {
            Err((consume_reason(&e), consume_error_response(format, &e)))
        }
    }
}

fn too_large(format: Format, limit: usize) -> Response {
    status_response(
        format,
        StatusCode::PAYLOAD_TOO_LARGE,
        Code::ResourceExhausted,
        &format!("request body is larger than the limit of {limit} bytes"),
        None,
    )
}

fn consume_error_response(format: Format, error: &ConsumeError) -> Response {
    match error {
        ConsumeError::Full { retry_after } => status_response(
            format,
            StatusCode::SERVICE_UNAVAILABLE,
            Code::Unavailable,
            "the pipeline is full; retry later",
            Some(*retry_after),
        ),
        ConsumeError::Rejected(message) => status_response(
            format,
            StatusCode::BAD_REQUEST,
            Code::InvalidArgument,
            message,
            None,
        ),
        failure => status_response(
            format,
            StatusCode::SERVICE_UNAVAILABLE,
            Code::Unavailable,
            &failure.to_string(),
            None,
        ),
    }
}

/// An error response carrying a `google.rpc.Status` in `format`.
fn status_response(
    format: Format,
    status: StatusCode,
    code: Code,
    message: &str,
    retry_after: Option<Duration>,
) -> Response {
    let details = match retry_after {
        Some(delay) => ErrorDetails::with_retry_info(Some(delay)),
        None => ErrorDetails::new(),
    };
    let body = match format {
        Format::Protobuf(_) => {
            // `with_error_details` encodes a google.rpc.Status (code, message, details).
            tonic::Status::with_error_details(code, message, details)
                .details()
                .to_vec()
        }
        Format::Json => {
            let mut object = serde_json::json!({ "code": code as i32, "message": message });
            if let Some(delay) = retry_after {
                object["details"] = serde_json::json!([{
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": json_duration(delay),
                }]);
            }
            object.to_string().into_bytes()
        }
    };
    let mut response = (
        status,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        Body::from(body),
    )
        .into_response();
    if let Some(delay) = retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(delay)));
    }
    response
}

/// A `google.protobuf.Duration` in proto3 JSON (`"1.500s"`).
fn json_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        let frac = format!("{:09}", d.subsec_nanos());
        format!("{}.{}s", d.as_secs(), frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let mut h = HeaderMap::new();
        assert_eq!(Format::from_headers(&h), None);
        for (v, f) in [
            (
                "application/x-protobuf",
                Some(Format::Protobuf("application/x-protobuf")),
            ),
            (
                "application/protobuf",
                Some(Format::Protobuf("application/protobuf")),
            ),
            ("Application/JSON; charset=utf-8", Some(Format::Json)),
            ("text/plain", None),
            ("application/jsonx", None),
        ] {
            h.insert(CONTENT_TYPE, v.parse().unwrap());
            assert_eq!(Format::from_headers(&h), f, "{v}");
        }
    }

    #[test]
    fn durations_and_retry_after() {
        assert_eq!(json_duration(Duration::from_secs(1)), "1s");
        assert_eq!(json_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }

    #[test]
    fn protobuf_status_body_decodes() {
        let r = status_response(
            Format::Protobuf("application/x-protobuf"),
            StatusCode::SERVICE_UNAVAILABLE,
            Code::Unavailable,
            "full",
            Some(Duration::from_secs(2)),
        );
        assert_eq!(r.headers()[RETRY_AFTER], "2");
        let tonic_status = tonic::Status::with_error_details(
            Code::Unavailable,
            "full",
            ErrorDetails::with_retry_info(Some(Duration::from_secs(2))),
        );
        let decoded = tonic_types::pb::Status::decode(tonic_status.details()).unwrap();
        assert_eq!(decoded.code, Code::Unavailable as i32);
        assert_eq!(decoded.message, "full");
        assert_eq!(decoded.details.len(), 1);
        let plain =
            tonic::Status::with_error_details(Code::InvalidArgument, "bad", ErrorDetails::new());
        let decoded = tonic_types::pb::Status::decode(plain.details()).unwrap();
        assert_eq!((decoded.code, decoded.message.as_str()), (3, "bad"));
    }
}
