//! Reading a response the exporters act on, once: its status, Sentry's rate-limit headers
//! (`X-Sentry-Rate-Limits`, `Retry-After`), its content type, and the start of its body.

use profilink_consumer::body::BodyBound;

/// What a server answered, as read by [`read_response`].
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// `X-Sentry-Rate-Limits`, if present.
    pub rate_limits: Option<String>,
    /// `Retry-After`, if present (unparsed).
    pub retry_after: Option<String>,
    /// `Content-Type`, if present.
    pub content_type: Option<String>,
    /// The body's first `max_body` bytes.
    pub body: Vec<u8>,
}

/// Reads `resp`: its status and headers, and its body up to `max_body` bytes, bounded while it
/// streams ([`BodyBound::keep`]: never more than `max_body` bytes held, and the read stops
/// there, so an answer that never ends costs `max_body` bytes and no time past the limit). A
/// body that breaks off is kept as far as it came: the status already tells the outcome, a
/// broken body only loses detail. The time the body may take is the client's `timeout`.
pub async fn read_response(mut resp: reqwest::Response, max_body: usize) -> Response {
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let status = resp.status().as_u16();
    let rate_limits = header("x-sentry-rate-limits");
    let retry_after = header("retry-after");
    let content_type = header("content-type");
    let mut bound = BodyBound::new(max_body as u64);
    let mut body = Vec::new();
    while !bound.is_full() {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(bound.keep(&c)),
            Ok(None) | Err(_) => break,
        }
    }
    Response {
        status,
        rate_limits,
        retry_after,
        content_type,
        body,
    }
}
