//! Request bodies: `Content-Encoding` parsing and streamed, capped decompression.
//!
//! The body is read frame by frame and each frame is decompressed as it arrives into a buffer
//! that refuses to grow past the limit, so a compression bomb is cut off after at most `limit`
//! bytes of output (plus one decoder buffer) and the compressed input read so far. The
//! compressed body is capped at the same limit. Truncated streams (a gzip member without its
//! trailer, an unfinished zlib, zstd or brotli stream) are errors, not silently short bodies.

use axum::body::Body;
use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH};
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

/// Why a body could not be read (Clone: a failed decoder answers every later write with its
/// error).
#[derive(Debug, Clone, Error)]
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
    Read(#[source] std::sync::Arc<axum::Error>),
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
    let mut decoder = FrameDecoder::new(encoding, limit);
    if encoding == Encoding::Identity
        && let Some(size) = axum::body::HttpBody::size_hint(body).exact()
    {
        decoder.sink.out.expect(size);
    }
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        decoder.push(&data)?;
    }
    decoder.finish()
}

/// At most how much of a request's body [`drain`] reads, and for how long.
const DRAIN_MAX: usize = 8 * 1024 * 1024;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads and discards what is left of `body`, at most 8 MiB and for at most 2 s, so that an
/// early answer (413, 503…) reaches an HTTP/1.1 client that is still sending instead of a
/// connection reset. Gives up silently.
pub async fn drain(body: &mut Body) {
    let work = async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                seen = seen.saturating_add(data.len());
                if seen > DRAIN_MAX {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, work).await;
}

/// The body size a request declares in `Content-Length`, when it is a number: a body declared
/// over the limit is refused before it is read.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Decompresses a whole in-memory buffer with the same caps as `read_body`.
pub fn decode_bytes(data: &[u8], encoding: Encoding, limit: usize) -> Result<Vec<u8>, BodyError> {
    decode_frames([data], encoding, limit)
}

/// Decompresses a body that arrives in `frames`, frame by frame as `read_body` reads an
/// HTTP body (the fuzz target `decompress` splits bodies anywhere and checks that the frames
/// never change the outcome).
pub fn decode_frames<'a>(
    frames: impl IntoIterator<Item = &'a [u8]>,
    encoding: Encoding,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let mut decoder = FrameDecoder::new(encoding, limit);
    for frame in frames {
        decoder.push(frame)?;
    }
    decoder.finish()
}

/// A body's decoder fed frame by frame: at most `limit` bytes of input and of output.
struct FrameDecoder {
    sink: Sink,
    raw: usize,
    limit: usize,
}

impl FrameDecoder {
    fn new(encoding: Encoding, limit: usize) -> Self {
        FrameDecoder {
            sink: Sink::new(encoding, limit),
            raw: 0,
            limit,
        }
    }

    fn push(&mut self, data: &[u8]) -> Result<(), BodyError> {
        self.raw = self.raw.saturating_add(data.len());
        if self.raw > self.limit {
            return Err(BodyError::TooLarge { limit: self.limit });
        }
        self.sink.write(data)
    }

    fn finish(self) -> Result<Vec<u8>, BodyError> {
        self.sink.finish()
    }
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
mod tests;
