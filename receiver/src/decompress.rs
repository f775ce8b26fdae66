//! Request bodies: `Content-Encoding` parsing and streamed, capped decompression.
//!
//! The body is read frame by frame and each frame is decompressed as it arrives into a buffer
//! that refuses to grow past the limit, so a compression bomb is cut off after at most `limit`
//! bytes of output (plus one decoder buffer) and the compressed input read so far. The
//! compressed body is capped at the same limit. Truncated streams (a gzip member without its
//! trailer, an unfinished zlib, zstd or brotli stream) are errors, not silently short bodies.

use axum::body::Body;
use http::HeaderMap;
use http::header::CONTENT_ENCODING;
use http_body_util::BodyExt;
use std::io::{self, Write};
use std::time::Duration;
use thiserror::Error;

/// A request body encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// No compression (`identity`, an empty or absent header).
    Identity,
    /// `gzip` (one or more members).
    Gzip,
    /// `deflate`: the zlib format (RFC 1950), as HTTP defines it.
    Deflate,
    /// `br`.
    Brotli,
    /// `zstd`.
    Zstd,
}

impl Encoding {
    /// The `Content-Encoding` token.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    /// Reads `Content-Encoding` from `headers`: one token, case-insensitive, surrounding spaces
    /// ignored. Absent, empty and `identity` are [`Encoding::Identity`]; `utf-8` is dropped as
    /// Relay does (some SDKs send it). Anything not in `allowed`, or several encodings, is an
    /// error carrying the header value.
    pub fn from_headers(headers: &HeaderMap, allowed: &[Encoding]) -> Result<Self, String> {
        let Some(value) = headers.get(CONTENT_ENCODING) else {
            return Ok(Encoding::Identity);
        };
        let text = value.to_str().map_err(|_| "<non-ASCII>".to_string())?;
        let token = text.trim().to_ascii_lowercase();
        let encoding = match token.as_str() {
            "" | "identity" | "utf-8" => return Ok(Encoding::Identity),
            "gzip" | "x-gzip" => Encoding::Gzip,
            "deflate" => Encoding::Deflate,
            "br" => Encoding::Brotli,
            "zstd" => Encoding::Zstd,
            _ => return Err(text.to_string()),
        };
        if allowed.contains(&encoding) {
            Ok(encoding)
        } else {
            Err(text.to_string())
        }
    }
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BodyError {
    /// The body (compressed, or after decompression) is larger than the limit.
    #[error("request body is larger than {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The compressed data is corrupt or truncated.
    #[error("invalid {encoding} body: {message}")]
    Decode {
        /// The encoding.
        encoding: &'static str,
        /// What the decoder said.
        message: String,
    },
    /// The body could not be read from the connection.
    #[error("could not read the request body: {0}")]
    Read(String),
}

/// Reads `body` decoded with `encoding`, refusing more than `limit` bytes of compressed input or
/// of output.
///
/// On error the rest of `body` is left unread; [`drain`] it before answering.
pub async fn read_body(
    body: &mut Body,
    encoding: Encoding,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut sink = Sink::new(encoding, limit);
    if encoding == Encoding::Identity
        && let Some(size) = axum::body::HttpBody::size_hint(body).exact()
    {
        sink.out.expect(size);
    }
    let mut raw = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        raw = raw.saturating_add(data.len());
        if raw > limit {
            return Err(BodyError::TooLarge { limit });
        }
        sink.write(&data)?;
    }
    sink.finish()
}

/// Reads and discards what is left of `body`, at most `max` bytes and for at most `timeout`,
/// so that an early answer (413, 503…) reaches an HTTP/1.1 client that is still sending instead
/// of a connection reset. Gives up silently.
pub async fn drain(body: &mut Body, max: usize, timeout: Duration) {
    let work = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                seen = seen.saturating_add(data.len());
                if seen > max {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(timeout, work).await;
}

/// Decompresses a whole in-memory buffer with the same caps as [`read_body`].
pub fn decode_bytes(data: &[u8], encoding: Encoding, limit: usize) -> Result<Vec<u8>, BodyError> {
    if data.len() > limit {
        return Err(BodyError::TooLarge { limit });
    }
    let mut sink = Sink::new(encoding, limit);
    sink.write(data)?;
    sink.finish()
}

/// A `Vec` that refuses to grow past `limit`.
#[derive(Debug)]
struct CappedVec {
    buf: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl CappedVec {
    fn new(limit: usize) -> Self {
        CappedVec {
            buf: Vec::new(),
            limit,
            overflowed: false,
        }
    }

    fn push(&mut self, data: &[u8]) -> Result<(), BodyError> {
        let needed = self.buf.len().saturating_add(data.len());
        if needed > self.limit {
            self.overflowed = true;
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        if needed > self.buf.capacity() {
            // Grow by doubling, but never past the limit (plain `Vec` growth could reserve
            // almost twice the limit).
            let target = needed
                .max(self.buf.capacity().saturating_mul(2))
                .max(SCRATCH)
                .min(self.limit);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Reserves room for an announced size (never past the limit).
    fn expect(&mut self, size: u64) {
        let size = usize::try_from(size).unwrap_or(usize::MAX).min(self.limit);
        self.buf.reserve_exact(size.saturating_sub(self.buf.len()));
    }
}

impl Write for CappedVec {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self.push(data) {
            Ok(()) => Ok(data.len()),
            Err(_) => Err(io::Error::other("decompressed body over the size limit")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const SCRATCH: usize = 64 * 1024;

/// Largest zstd window accepted (16 MiB): bounds the decoder's own memory per request.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

enum Codec {
    Identity,
    Gzip(Box<flate2::write::MultiGzDecoder<CappedVec>>),
    Deflate {
        inflate: Box<flate2::Decompress>,
        ended: bool,
    },
    Zstd {
        decoder: Box<zstd::stream::raw::Decoder<'static>>,
        frame_done: bool,
    },
    Brotli(Box<brotli_decompressor::DecompressorWriter<CappedVec>>),
    Failed(BodyError),
}

struct Sink {
    encoding: Encoding,
    codec: Codec,
    /// Output for `Identity`, `Deflate` and `Zstd` (the writers own theirs).
    out: CappedVec,
    scratch: Vec<u8>,
    seen_input: bool,
}

impl Sink {
    fn new(encoding: Encoding, limit: usize) -> Self {
        let codec = match encoding {
            Encoding::Identity => Codec::Identity,
            Encoding::Gzip => Codec::Gzip(Box::new(flate2::write::MultiGzDecoder::new(
                CappedVec::new(limit),
            ))),
            Encoding::Deflate => Codec::Deflate {
                inflate: Box::new(flate2::Decompress::new(true)),
                ended: false,
            },
            Encoding::Zstd => match zstd::stream::raw::Decoder::new().and_then(|mut d| {
                d.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(
                    ZSTD_WINDOW_LOG_MAX,
                ))?;
                Ok(d)
            }) {
                Ok(decoder) => Codec::Zstd {
                    decoder: Box::new(decoder),
                    frame_done: true,
                },
                Err(e) => Codec::Failed(BodyError::Decode {
                    encoding: "zstd",
                    message: e.to_string(),
                }),
            },
            Encoding::Brotli => Codec::Brotli(Box::new(
                brotli_decompressor::DecompressorWriter::new(CappedVec::new(limit), SCRATCH),
            )),
        };
        let scratch = match encoding {
            Encoding::Deflate | Encoding::Zstd => vec![0; SCRATCH],
            _ => Vec::new(),
        };
        Sink {
            encoding,
            codec,
            out: CappedVec::new(limit),
            scratch,
            seen_input: false,
        }
    }

    fn write(&mut self, data: &[u8]) -> Result<(), BodyError> {
        if data.is_empty() {
            return Ok(());
        }
        self.seen_input = true;
        let encoding = self.encoding.name();
        let decode_error = |message: String| BodyError::Decode { encoding, message };
        match &mut self.codec {
            Codec::Failed(e) => Err(e.clone()),
            Codec::Identity => self.out.push(data),
            Codec::Gzip(w) => match w.write_all(data) {
                Ok(()) => Ok(()),
                Err(_) if w.get_ref().overflowed => Err(BodyError::TooLarge {
                    limit: w.get_ref().limit,
                }),
                Err(e) => Err(decode_error(e.to_string())),
            },
            Codec::Brotli(w) => match w.write_all(data) {
                Ok(()) => Ok(()),
                Err(_) if w.get_ref().overflowed => Err(BodyError::TooLarge {
                    limit: w.get_ref().limit,
                }),
                Err(e) => Err(decode_error(e.to_string())),
            },
            Codec::Deflate { inflate, ended } => {
                inflate_into(inflate, ended, data, &mut self.scratch, &mut self.out)
                    .map_err(|e| e.unwrap_or_else(|| decode_error("invalid zlib data".into())))
            }
            Codec::Zstd {
                decoder,
                frame_done,
            } => zstd_into(decoder, frame_done, data, &mut self.scratch, &mut self.out)
                .map_err(|e| e.unwrap_or_else(|| decode_error("invalid zstd data".into()))),
        }
    }

    fn finish(self) -> Result<Vec<u8>, BodyError> {
        let seen_input = self.seen_input;
        let error = |message: &str| BodyError::Decode {
            encoding: self.encoding.name(),
            message: message.to_string(),
        };
        match self.codec {
            Codec::Failed(e) => Err(e),
            Codec::Identity => Ok(self.out.buf),
            // An empty body with a Content-Encoding header is an empty body.
            _ if !seen_input => Ok(Vec::new()),
            // The decoder keeps output back until the end: a body that passes the limit
            // only then is still too large, not corrupt.
            Codec::Gzip(mut w) => match w.try_finish() {
                Err(_) if w.get_ref().overflowed => Err(BodyError::TooLarge {
                    limit: w.get_ref().limit,
                }),
                Err(e) => Err(error(&format!("truncated or corrupt stream: {e}"))),
                Ok(()) => match w.finish() {
                    Ok(out) => Ok(out.buf),
                    Err(e) => Err(error(&format!("truncated or corrupt stream: {e}"))),
                },
            },
            Codec::Brotli(mut w) => match w.close() {
                Ok(()) if w.get_ref().overflowed => Err(BodyError::TooLarge {
                    limit: w.get_ref().limit,
                }),
                Ok(()) => match w.into_inner() {
                    Ok(out) => Ok(out.buf),
                    Err(_) => Err(error("truncated or corrupt stream")),
                },
                Err(_) if w.get_ref().overflowed => Err(BodyError::TooLarge {
                    limit: w.get_ref().limit,
                }),
                Err(_) => Err(error("truncated or corrupt stream")),
            },
            Codec::Deflate { ended, .. } => {
                if ended {
                    Ok(self.out.buf)
                } else {
                    Err(error("truncated stream"))
                }
            }
            Codec::Zstd { frame_done, .. } => {
                if frame_done {
                    Ok(self.out.buf)
                } else {
                    Err(error("truncated stream"))
                }
            }
        }
    }
}

/// Feeds `input` to a zlib inflater. `Err(None)` is corrupt data, `Err(Some(_))` a size error.
fn inflate_into(
    inflate: &mut flate2::Decompress,
    ended: &mut bool,
    mut input: &[u8],
    scratch: &mut [u8],
    out: &mut CappedVec,
) -> Result<(), Option<BodyError>> {
    loop {
        if *ended {
            return if input.is_empty() { Ok(()) } else { Err(None) };
        }
        let before_in = inflate.total_in();
        let before_out = inflate.total_out();
        let status = inflate
            .decompress(input, scratch, flate2::FlushDecompress::None)
            .map_err(|_| None)?;
        let consumed = usize::try_from(inflate.total_in() - before_in).unwrap_or(usize::MAX);
        let produced = usize::try_from(inflate.total_out() - before_out).unwrap_or(usize::MAX);
        let consumed = consumed.min(input.len());
        let produced = produced.min(scratch.len());
        input = &input[consumed..];
        out.push(&scratch[..produced]).map_err(Some)?;
        match status {
            flate2::Status::StreamEnd => *ended = true,
            flate2::Status::Ok | flate2::Status::BufError => {
                if consumed == 0 && produced == 0 {
                    // Needs more input than we have (or cannot progress).
                    return Ok(());
                }
                if input.is_empty() && produced < scratch.len() {
                    return Ok(());
                }
            }
        }
    }
}

/// Feeds `input` to a zstd decoder. `Err(None)` is corrupt data, `Err(Some(_))` a size error.
fn zstd_into(
    decoder: &mut zstd::stream::raw::Decoder<'static>,
    frame_done: &mut bool,
    input: &[u8],
    scratch: &mut [u8],
    out: &mut CappedVec,
) -> Result<(), Option<BodyError>> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut inb = InBuffer::around(input);
    loop {
        let mut outb = OutBuffer::around(&mut *scratch);
        let hint = decoder.run(&mut inb, &mut outb).map_err(|_| None)?;
        let produced = outb.pos();
        let full = produced == outb.capacity();
        out.push(&scratch[..produced]).map_err(Some)?;
        *frame_done = hint == 0;
        if inb.pos() >= input.len() && !full {
            return Ok(());
        }
        if inb.pos() >= input.len() && produced == 0 {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn payload() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn round_trips_every_encoding() {
        let data = payload();
        assert_eq!(
            decode_bytes(&data, Encoding::Identity, usize::MAX).unwrap(),
            data
        );
        assert_eq!(
            decode_bytes(&gzip(&data), Encoding::Gzip, usize::MAX).unwrap(),
            data
        );
        assert_eq!(
            decode_bytes(&zlib(&data), Encoding::Deflate, usize::MAX).unwrap(),
            data
        );
        let z = zstd::encode_all(&data[..], 1).unwrap();
        assert_eq!(decode_bytes(&z, Encoding::Zstd, usize::MAX).unwrap(), data);
        // Two gzip members are one body.
        let mut two = gzip(b"hello ");
        two.extend(gzip(b"world"));
        assert_eq!(
            decode_bytes(&two, Encoding::Gzip, usize::MAX).unwrap(),
            b"hello world"
        );
    }

    #[test]
    fn brotli_decodes() {
        // `printf 'hello brotli\n' | brotli -c` (quality 11).
        let br: &[u8] = &[
            0x0f, 0x06, 0x80, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x62, 0x72, 0x6f, 0x74, 0x6c,
            0x69, 0x0a, 0x03,
        ];
        assert_eq!(
            decode_bytes(br, Encoding::Brotli, 1000).unwrap(),
            b"hello brotli\n"
        );
        assert!(matches!(
            decode_bytes(&br[..br.len() - 1], Encoding::Brotli, 1000),
            Err(BodyError::Decode { .. })
        ));
        assert!(matches!(
            decode_bytes(br, Encoding::Brotli, 5),
            Err(BodyError::TooLarge { limit: 5 })
        ));
    }

    #[test]
    fn caps_output() {
        let zeros = vec![0u8; 4 << 20];
        for (enc, data) in [
            (Encoding::Gzip, gzip(&zeros)),
            (Encoding::Deflate, zlib(&zeros)),
            (Encoding::Zstd, zstd::encode_all(&zeros[..], 1).unwrap()),
            (Encoding::Identity, zeros.clone()),
        ] {
            assert_eq!(
                decode_bytes(&data, enc, 1 << 20),
                Err(BodyError::TooLarge { limit: 1 << 20 }),
                "{enc:?}"
            );
        }
    }

    /// Found by the `decompress` fuzz target: a small gzip body whose output passes the limit
    /// only when the decoder is finished was refused as corrupt instead of too large.
    #[test]
    fn gzip_over_the_limit_at_the_end_is_too_large() {
        let mut plain = vec![b'a'; 42];
        plain.push(b'_');
        plain.extend(vec![b'a'; 4000]);
        assert_eq!(
            decode_bytes(&gzip(&plain), Encoding::Gzip, 1024),
            Err(BodyError::TooLarge { limit: 1024 })
        );
        assert_eq!(
            decode_bytes(&gzip(&plain), Encoding::Gzip, plain.len()).unwrap(),
            plain
        );
    }

    #[test]
    fn detects_truncation_and_garbage() {
        let data = payload();
        let g = gzip(&data);
        let z = zlib(&data);
        let s = zstd::encode_all(&data[..], 1).unwrap();
        for (enc, bytes) in [
            (Encoding::Gzip, &g),
            (Encoding::Deflate, &z),
            (Encoding::Zstd, &s),
        ] {
            let cut = &bytes[..bytes.len() - 5];
            assert!(
                matches!(
                    decode_bytes(cut, enc, usize::MAX),
                    Err(BodyError::Decode { .. })
                ),
                "{enc:?}"
            );
            assert!(
                matches!(
                    decode_bytes(b"this is not compressed at all", enc, usize::MAX),
                    Err(BodyError::Decode { .. })
                ),
                "{enc:?}"
            );
        }
    }

    #[test]
    fn parses_content_encoding() {
        let all = [
            Encoding::Gzip,
            Encoding::Deflate,
            Encoding::Brotli,
            Encoding::Zstd,
        ];
        let mut h = HeaderMap::new();
        assert_eq!(Encoding::from_headers(&h, &all), Ok(Encoding::Identity));
        for (v, e) in [
            ("", Encoding::Identity),
            ("identity", Encoding::Identity),
            ("GZIP", Encoding::Gzip),
            (" br ", Encoding::Brotli),
            ("zstd", Encoding::Zstd),
            ("deflate", Encoding::Deflate),
        ] {
            h.insert(CONTENT_ENCODING, v.parse().unwrap());
            assert_eq!(Encoding::from_headers(&h, &all), Ok(e), "{v}");
        }
        for v in ["lz4", "gzip, br", "compress"] {
            h.insert(CONTENT_ENCODING, v.parse().unwrap());
            assert!(Encoding::from_headers(&h, &all).is_err(), "{v}");
        }
        h.insert(CONTENT_ENCODING, "br".parse().unwrap());
        assert!(Encoding::from_headers(&h, &[Encoding::Gzip]).is_err());
    }

    #[tokio::test]
    async fn reads_a_streamed_body() {
        let data = payload();
        let mut body = Body::from(gzip(&data));
        assert_eq!(
            read_body(&mut body, Encoding::Gzip, 1 << 30).await.unwrap(),
            data
        );
        let mut body = Body::from(vec![1u8; 100]);
        assert_eq!(
            read_body(&mut body, Encoding::Identity, 99).await,
            Err(BodyError::TooLarge { limit: 99 })
        );
    }
}
