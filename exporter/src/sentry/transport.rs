//! HTTP transport to Sentry's envelope endpoint: compression, auth headers, one pooled client.

use super::routing::Route;
use crate::config::{Compression, CompressionParams};
use flate2::write::GzEncoder;
use std::io::{self, Write};
use std::time::Duration;

/// Longest part of an error response body kept for logs.
pub const MAX_ERROR_BODY: usize = 1024;

/// Compresses a request body at the default level of
/// [`crate::config::CompressionParams`].
pub fn compress(body: &[u8], compression: Compression) -> io::Result<Vec<u8>> {
    // Without a configured level there is nothing out of range.
    let level = CompressionParams::default()
        .level_for(compression)
        .unwrap_or_default();
    compress_level(body, compression, level)
}

/// Compresses a request body at `level` (gzip 0-9, zstd 1-22; ignored for `None`).
pub fn compress_level(body: &[u8], compression: Compression, level: i32) -> io::Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(body.to_vec()),
        Compression::Gzip => {
            let mut enc = GzEncoder::new(
                Vec::with_capacity(body.len() / 4 + 64),
                flate2::Compression::new(level.clamp(0, 9) as u32),
            );
            enc.write_all(body)?;
            enc.finish()
        }
        Compression::Zstd => zstd::bulk::compress(body, level),
    }
}

/// The `Content-Encoding` value, if any.
pub fn content_encoding(compression: Compression) -> Option<&'static str> {
    match compression {
        Compression::None => None,
        Compression::Gzip => Some("gzip"),
        Compression::Zstd => Some("zstd"),
    }
}

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
    /// A client with `timeout` per request and up to `pool` idle connections per host,
    /// compressing at `level` (see [`compress_level`]).
    pub fn new(
        compression: Compression,
        level: i32,
        timeout: Duration,
        pool: usize,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_max_idle_per_host(pool.max(1))
            .user_agent(format!("{}/{}", crate::SDK_NAME, crate::VERSION))
            .build()
            .map_err(|e| e.to_string())?;
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
        let mut resp = req.send().await?;
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let status = resp.status().as_u16();
        let rate_limits = header("x-sentry-rate-limits");
        let retry_after = header("retry-after");
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match resp.chunk().await {
                Ok(Some(c)) => body.extend_from_slice(&c),
                Ok(None) => break,
                // The status already tells the outcome; a broken body only loses log detail.
                Err(_) => break,
            }
        }
        body.truncate(MAX_ERROR_BODY);
        Ok(HttpResponse {
            status,
            rate_limits,
            retry_after,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn gzip_and_zstd_round_trip() {
        let body = b"{}\n{\"type\":\"profile_chunk\"}\nxyz\n".repeat(50);
        let gz = compress(&body, Compression::Gzip).unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, body);
        let z = compress(&body, Compression::Zstd).unwrap();
        assert_eq!(zstd::stream::decode_all(&z[..]).unwrap(), body);
        assert_eq!(compress(&body, Compression::None).unwrap(), body);
        for level in [1, 9] {
            let gz = compress_level(&body, Compression::Gzip, level).unwrap();
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, body);
        }
        let z = compress_level(&body, Compression::Zstd, 19).unwrap();
        assert_eq!(zstd::stream::decode_all(&z[..]).unwrap(), body);
    }
}
