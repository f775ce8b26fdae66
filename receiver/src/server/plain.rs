//! What the doors that answer as Go servers do share (the pprof receiver's `POST /v1/pprof`,
//! the Pyroscope receiver): a refusal ([`Refusal`]: the reason it is counted under, a status,
//! a message), written as Go's `http.Error` writes it ([`Refusal::plain`]: `text/plain`, the
//! message and a newline) or by the door's own protocol; the answer to a pipeline refusal
//! ([`consume_error`]); and the bounded body read ([`read_body`]).

use crate::server::decompress::{self, BodyError, Encoding};
use crate::server::http::retry_after_secs;
use crate::stats::RefusalReason;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, StatusCode};
use profilink_consumer::{ConsumeError, Consumer};
use std::time::Duration;

/// A request answered with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The reason it is counted under.
    pub reason: RefusalReason,
    /// The HTTP status.
    pub status: StatusCode,
    /// What the client is told.
    pub message: String,
    /// `Retry-After`, when the client should retry later.
    pub retry_after: Option<Duration>,
}

impl Refusal {
    /// A refusal for `reason` with `status` and `message`.
    pub(crate) fn new(
        reason: RefusalReason,
        status: StatusCode,
        message: impl Into<String>,
    ) -> Self {
        Refusal {
            reason,
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The refusal as a plain-text answer (with `Retry-After` when set).
    pub(crate) fn plain(&self) -> Response {
        let mut r = text(self.status, &self.message);
        if let Some(delay) = self.retry_after {
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(delay)));
        }
        r
    }
}

/// `status` with `message` as a plain-text body.
pub(crate) fn text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        format!("{message}\n"),
    )
        .into_response()
}

/// A pipeline refusal: full is 503 with `Retry-After`, rejected for good (the amplification
/// budget) 400, a failed pipeline 503.
pub(crate) fn consume_error(error: &ConsumeError) -> Refusal {
    match error {
        ConsumeError::Full { retry_after } => Refusal {
            retry_after: Some(*retry_after),
            ..Refusal::new(
                RefusalReason::Full,
                StatusCode::SERVICE_UNAVAILABLE,
                "the pipeline is full; retry later",
            )
        },
        ConsumeError::Rejected(message) => Refusal::new(
            RefusalReason::Rejected,
            StatusCode::BAD_REQUEST,
            message.clone(),
        ),
        failure => Refusal::new(
            RefusalReason::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            failure.to_string(),
        ),
    }
}

/// Encodings these doors accept (as the Collector's `confighttp`: gzip, zlib, zstd).
pub(crate) const ENCODINGS: &[Encoding] = &[Encoding::Gzip, Encoding::Deflate, Encoding::Zstd];

/// The checks before a body is used, in order: `Content-Encoding` (400 when not taken, as the
/// Collector answers), a declared `Content-Length` over `limit` (413), the pipeline's
/// readiness (503), then the body read and decompressed in a stream, refused past `limit`
/// (413) or when corrupt (400). On error the body is left for the caller to
/// [`drain`](crate::server::decompress::drain).
pub(crate) async fn read_body<C: Consumer + ?Sized>(
    headers: &HeaderMap,
    body: &mut axum::body::Body,
    limit: usize,
    consumer: &C,
) -> Result<Vec<u8>, Refusal> {
    let encoding = Encoding::from_headers(headers, ENCODINGS).map_err(|value| {
        Refusal::new(
            RefusalReason::UnsupportedEncoding,
            StatusCode::BAD_REQUEST,
            format!("unsupported Content-Encoding: {value:?}"),
        )
    })?;
    if decompress::content_length(headers).is_some_and(|len| len > limit as u64) {
        return Err(too_large(limit));
    }
    consumer.check_ready().map_err(|e| consume_error(&e))?;
    match decompress::read_body(body, encoding, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge { limit }) => Err(too_large(limit)),
        Err(e) => Err(Refusal::new(
            RefusalReason::Invalid,
            StatusCode::BAD_REQUEST,
            e.to_string(),
        )),
    }
}

/// 413 for a body over `limit` bytes.
pub(crate) fn too_large(limit: usize) -> Refusal {
    Refusal::new(
        RefusalReason::TooLarge,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body is larger than the limit of {limit} bytes"),
    )
}
