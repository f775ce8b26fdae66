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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A 200 whose body never ends: `max_body` bytes kept, at once, whatever the chunking.
    #[tokio::test]
    async fn an_answer_that_never_ends_costs_max_body() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", l.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let _ = c.read(&mut buf).await;
            let _ = c
                .write_all(b"HTTP/1.1 200 OK\r\nX-Sentry-Rate-Limits: 60::organization\r\n\r\n")
                .await;
            let t0 = std::time::Instant::now();
            let block: Vec<u8> = (0..70_001u32).map(|i| (i % 251) as u8).collect();
            while t0.elapsed() < std::time::Duration::from_secs(20)
                && c.write_all(&block).await.is_ok()
            {}
        });
        let resp = reqwest::get(&url).await.unwrap();
        let t0 = std::time::Instant::now();
        let r = read_response(resp, 100_000).await;
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(r.status, 200);
        assert_eq!(r.rate_limits.as_deref(), Some("60::organization"));
        assert_eq!(r.body.len(), 100_000);
        assert_eq!(r.body[70_001], 0, "the second block's start");
    }
}
