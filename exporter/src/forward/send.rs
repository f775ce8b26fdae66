//! One attempt to pass a queued request on, and what its answer means.

use super::limits::UpstreamLimits;
use profilink_consumer::ForwardRequest;
use std::time::{Duration, Instant, SystemTime};

/// Bytes of an upstream's answer read at most (a 4xx body's start is logged).
const MAX_REJECTION_BODY: usize = 2048;

/// What to do with a request after one attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Delivered.
    Sent,
    /// Given up, for a reason of [`super::metrics::DROP_REASONS`], with a detail to log.
    Drop(&'static str, String),
    /// Try again (after the server's hint, if it gave one).
    Retry(Option<Duration>, String),
}

/// The upstream URL of `request`: the base endpoint, the path as received, the query.
pub fn url(endpoint: &str, request: &ForwardRequest) -> String {
    let mut url = endpoint.trim_end_matches('/').to_string();
    url.push_str(&request.path);
    if let Some(q) = &request.query {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Sends `request` once and classifies the answer; rate limits of any answer are recorded.
pub async fn send(
    client: &reqwest::Client,
    endpoint: &str,
    request: ForwardRequest,
    limits: &UpstreamLimits,
) -> (Outcome, bool) {
    let mut builder = client.post(url(endpoint, &request));
    for (k, v) in &request.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let response = match builder.body(request.body.clone()).send().await {
        Ok(r) => r,
        Err(e) => {
            let what = if e.is_timeout() {
                "timeout"
            } else {
                "network error"
            };
            return (Outcome::Retry(None, format!("{what}: {e}")), false);
        }
    };
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let rate_limits = header("x-sentry-rate-limits");
    let retry_after = header("retry-after");
    let limited = limits.record(
        status,
        rate_limits.as_deref(),
        retry_after.as_deref(),
        request.project_id,
        &request.public_key,
        Instant::now(),
    ) > 0;
    let outcome = match status {
        200..=399 => Outcome::Sent,
        429 => Outcome::Drop(
            "rate_limited",
            format!(
                "upstream answered 429 ({})",
                rate_limits.as_deref().unwrap_or("no X-Sentry-Rate-Limits")
            ),
        ),
        400..=499 => {
            // Only a 4xx body is used (its start, in the log line): bounded while it streams.
            let answer = crate::http::read_response(response, MAX_REJECTION_BODY).await;
            let body = String::from_utf8_lossy(&answer.body);
            let body: String = body.chars().take(512).collect();
            Outcome::Drop("rejected", format!("upstream answered {status}: {body}"))
        }
        _ => {
            let hint = retry_after
                .as_deref()
                .and_then(|v| crate::http::rate_limits::parse_retry_after(v, SystemTime::now()));
            Outcome::Retry(hint, format!("upstream answered {status}"))
        }
    };
    (outcome, limited)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream on loopback that answers `head` and then a body that never ends (64 KiB
    /// blocks, for at most 20 s); the bytes it managed to send.
    async fn endless_upstream(head: &'static str) -> (String, tokio::task::JoinHandle<u64>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", l.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let (mut c, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 64 << 10];
            let mut head_in = Vec::new();
            while !head_in.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).await.unwrap();
                assert!(n > 0);
                head_in.extend_from_slice(&buf[..n]);
            }
            c.write_all(head.as_bytes()).await.unwrap();
            buf.fill(b'x');
            let t0 = Instant::now();
            let mut sent = 0u64;
            while t0.elapsed() < Duration::from_secs(20) && c.write_all(&buf).await.is_ok() {
                sent += buf.len() as u64;
            }
            sent
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_rejection_that_never_ends_is_read_bounded() {
        let (addr, upstream) =
            endless_upstream("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n").await;
        let r = ForwardRequest {
            project_id: 42,
            public_key: "k".into(),
            path: "/api/42/envelope/".into(),
            query: None,
            headers: vec![],
            body: Bytes::from_static(b"{}"),
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let t0 = Instant::now();
        let (outcome, _) = send(&client, &addr, r, &UpstreamLimits::default()).await;
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        match outcome {
            Outcome::Drop("rejected", detail) => {
                assert!(detail.starts_with("upstream answered 400: xxx"), "{detail}");
                assert!(detail.len() < 600, "{}", detail.len());
            }
            o => panic!("{o:?}"),
        }
        // The read stopped: the upstream's writes fail once the answer is dropped.
        let sent = upstream.await.unwrap();
        assert!(sent < 64 << 20, "{sent} bytes sent");
    }

    #[test]
    fn urls_keep_path_and_query() {
        let r = ForwardRequest {
            project_id: 42,
            public_key: "k".into(),
            path: "/api/42/envelope/".into(),
            query: Some("sentry_key=k&sentry_version=7".into()),
            headers: vec![],
            body: Bytes::new(),
        };
        assert_eq!(
            url("https://o0.ingest.sentry.io/", &r),
            "https://o0.ingest.sentry.io/api/42/envelope/?sentry_key=k&sentry_version=7"
        );
    }
}
