//! Reading a response the exporters act on, once: its status, Sentry's rate-limit headers
//! (`X-Sentry-Rate-Limits`, `Retry-After`), its content type, and the start of its body.

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

/// Reads `resp`: its status and headers, and its body up to `max_body` bytes. A body that
/// breaks off is kept as far as it came: the status already tells the outcome, a broken body
/// only loses detail.
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
    let mut body = Vec::new();
    while body.len() < max_body {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            Ok(None) | Err(_) => break,
        }
    }
    body.truncate(max_body);
    Response {
        status,
        rate_limits,
        retry_after,
        content_type,
        body,
    }
}
