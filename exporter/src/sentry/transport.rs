//! HTTP transport to Sentry's envelope endpoint: compression, auth headers, one pooled client.

use super::routing::Route;
use crate::config::{Compression, CompressionParams};
use flate2::{Compress, Crc, FlushCompress, Status};
use std::cell::RefCell;
use std::io;
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
///
/// Each thread keeps its gzip and zstd compressor between bodies: setting one up allocates and
/// clears hundreds of kilobytes (a zstd context took ~2% of the service's CPU when it was
/// created per envelope). The output is the same as a fresh compressor's.
pub fn compress_level(body: &[u8], compression: Compression, level: i32) -> io::Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(body.to_vec()),
        Compression::Gzip => gzip(body, level.clamp(0, 9) as u32),
        Compression::Zstd => ZSTD.with(|cell| {
            let mut slot = cell.borrow_mut();
            let (_, c) = match slot.take() {
                Some((l, c)) if l == level => slot.insert((l, c)),
                _ => slot.insert((level, zstd::bulk::Compressor::new(level)?)),
            };
            c.compress(body)
        }),
    }
}

thread_local! {
    /// This thread's zstd context and its level.
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's raw-deflate state and its level.
    static DEFLATE: RefCell<Option<(u32, Compress)>> = const { RefCell::new(None) };
}

/// gzip (RFC 1952) with this thread's deflate state: a 10-byte header (no name, mtime 0, OS
/// unknown, as `flate2::GzEncoder` writes), raw deflate, CRC-32 and length.
fn gzip(body: &[u8], level: u32) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() / 4 + 64);
    let xfl = match level {
        9 => 2,
        0 | 1 => 4,
        _ => 0,
    };
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 255]);
    DEFLATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (_, c) = match slot.take() {
            Some((l, mut c)) if l == level => {
                c.reset();
                slot.insert((l, c))
            }
            _ => slot.insert((level, Compress::new(flate2::Compression::new(level), false))),
        };
        deflate_all(c, body, &mut out)
    })?;
    let mut crc = Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE: the input length modulo 2^32.
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    Ok(out)
}

/// Deflates all of `input` into `out` and finishes the stream.
fn deflate_all(c: &mut Compress, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    let start = c.total_in();
    loop {
        let consumed = usize::try_from(c.total_in() - start).unwrap_or(usize::MAX);
        let rest = input.get(consumed..).unwrap_or_default();
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(4096));
        }
        let before = (c.total_in(), c.total_out());
        let status = c
            .compress_vec(rest, out, FlushCompress::Finish)
            .map_err(io::Error::other)?;
        if status == Status::StreamEnd {
            return Ok(());
        }
        if (c.total_in(), c.total_out()) == before {
            // Room was there and nothing moved: never spin.
            return Err(io::Error::other("deflate made no progress"));
        }
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

    #[test]
    fn reused_compressors_match_fresh_ones() {
        // Bodies of different sizes and levels, one after another on this thread (whose
        // compressors are kept), decode right and equal what fresh compressors write.
        let mut x = 7u64;
        let bodies: Vec<Vec<u8>> = [0usize, 10, 70_000, 300_000, 5]
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|i| {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        if i % 3 == 0 {
                            (x >> 59) as u8
                        } else {
                            b'a' + (i % 7) as u8
                        }
                    })
                    .collect()
            })
            .collect();
        for level in [1, 6, 6, 9, 2] {
            for body in &bodies {
                let gz = compress_level(body, Compression::Gzip, level).unwrap();
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&gz[..])
                    .read_to_end(&mut out)
                    .unwrap();
                assert_eq!(&out, body);
                // A new thread starts with new compressors.
                let fresh = std::thread::scope(|t| {
                    t.spawn(|| compress_level(body, Compression::Gzip, level).unwrap())
                        .join()
                        .unwrap()
                });
                assert_eq!(gz, fresh, "level {level}, {} bytes", body.len());
                let z = compress_level(body, Compression::Zstd, level).unwrap();
                assert_eq!(zstd::stream::decode_all(&z[..]).unwrap(), *body);
                assert_eq!(z, zstd::bulk::compress(body, level).unwrap());
            }
        }
    }
}
