//! HTTP transport to Sentry's envelope endpoint: auth headers, one pooled client.

use super::routing::Route;
use crate::config::Compression;
use crate::http::{content_encoding, read_response};
use profilink_tls::ClientTlsConfig;
use std::time::Duration;

/// Longest part of an error response body kept for logs.
pub const MAX_ERROR_BODY: usize = 1024;

/// What came back from one POST.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// `X-Sentry-Rate-Limits`, if present.
    pub rate_limits: Option<String>,
    /// `Retry-After`, if present.
    pub retry_after: Option<String>,
    /// The start of the body (for logs).
    pub body: String,
}

/// A pooled HTTP client for envelopes.
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    compression: Compression,
    level: i32,
}

impl Transport {
    /// A client with `timeout` per request, up to `pool` idle connections per host and the
    /// exporter's `tls` settings, compressing at `level` (see
    /// [`crate::http::compress_level`]).
    pub fn new(
        compression: Compression,
        level: i32,
        timeout: Duration,
        pool: usize,
        tls: &ClientTlsConfig,
    ) -> Result<Self, profilink_consumer::ExportError> {
        let client = crate::http::client(timeout, pool, tls)?;
        Ok(Transport {
            client,
            compression,
            level,
        })
    }

    /// The configured compression.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The configured compression level.
    pub fn level(&self) -> i32 {
        self.level
    }

    /// POSTs an already compressed envelope body to `route`.
    pub async fn post(&self, route: &Route, body: Vec<u8>) -> Result<HttpResponse, reqwest::Error> {
        let mut req = self
            .client
            .post(&route.url)
            .header("X-Sentry-Auth", &route.auth)
            .header("Content-Type", "application/x-sentry-envelope")
            .body(body);
        if let Some(enc) = content_encoding(self.compression) {
            req = req.header("Content-Encoding", enc);
        }
        let answer = read_response(req.send().await?, MAX_ERROR_BODY).await;
        Ok(HttpResponse {
            status: answer.status,
            rate_limits: answer.rate_limits,
            retry_after: answer.retry_after,
            body: String::from_utf8_lossy(&answer.body).into_owned(),
        })
    }
}
