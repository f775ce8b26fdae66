//! Request body compression shared by every HTTP exporter: gzip and zstd with per-thread
//! compressors, and the matching `Content-Encoding`.

use crate::config::{Compression, CompressionParams};
use flate2::{Compress, CrcWriter, FlushCompress, Status};
use std::cell::RefCell;
use std::io;

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
        Compression::Gzip => gzip(level, body.len(), |w| w.write_all(body)),
        Compression::Zstd => zstd(body, level),
    }
}

/// Compresses what `write` writes, at `level`, as [`compress_level`] compresses one body,
/// with `size_hint` the uncompressed length expected. gzip deflates each write as it comes,
/// so a body made of pieces (an envelope's header lines around a chunk's JSON) is never
/// copied into one buffer first; zstd and `None` collect the pieces, then compress.
pub fn compress_written(
    compression: Compression,
    level: i32,
    size_hint: usize,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    match compression {
        Compression::None => collected(size_hint, write),
        Compression::Gzip => gzip(level, size_hint, write),
        Compression::Zstd => zstd(&collected(size_hint, write)?, level),
    }
}

/// What `write` writes, in one buffer.
fn collected(
    size_hint: usize,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(size_hint);
    write(&mut body)?;
    Ok(body)
}

/// zstd with this thread's context.
fn zstd(body: &[u8], level: i32) -> io::Result<Vec<u8>> {
    ZSTD.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (_, c) = match slot.take() {
            Some((l, c)) if l == level => slot.insert((l, c)),
            _ => slot.insert((level, zstd::bulk::Compressor::new(level)?)),
        };
        c.compress(body)
    })
}

thread_local! {
    /// This thread's zstd context and its level.
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's raw-deflate state and its level.
    static DEFLATE: RefCell<Option<(u32, Compress)>> = const { RefCell::new(None) };
}

/// gzip (RFC 1952) with this thread's deflate state: a 10-byte header (no name, mtime 0, OS
/// unknown, as `flate2::GzEncoder` writes), raw deflate of everything `write` writes, CRC-32
/// and length.
fn gzip(
    level: i32,
    size_hint: usize,
    write: impl FnOnce(&mut dyn io::Write) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let level = level.clamp(0, 9) as u32;
    let mut out = Vec::with_capacity(size_hint / 4 + 64);
    let xfl = match level {
        9 => 2,
        0 | 1 => 4,
        _ => 0,
    };
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 255]);
    let (crc, len) = DEFLATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let (_, c) = match slot.take() {
            Some((l, mut c)) if l == level => {
                c.reset();
                slot.insert((l, c))
            }
            _ => slot.insert((level, Compress::new(flate2::Compression::new(level), false))),
        };
        let mut sink = CrcWriter::new(Deflating { c, out: &mut out });
        write(&mut sink)?;
        sink.get_mut().deflate(&[], FlushCompress::Finish)?;
        let crc = sink.crc();
        Ok::<_, io::Error>((crc.sum(), crc.amount()))
    })?;
    out.extend_from_slice(&crc.to_le_bytes());
    // ISIZE: the input length modulo 2^32 (`Crc::amount` keeps it so).
    out.extend_from_slice(&len.to_le_bytes());
    Ok(out)
}

/// A [`io::Write`] that deflates what is written to it into `out`.
struct Deflating<'a> {
    c: &'a mut Compress,
    out: &'a mut Vec<u8>,
}

impl Deflating<'_> {
    /// Deflates all of `input` into `out` with `flush`; with [`FlushCompress::Finish`], until
    /// the stream has ended.
    fn deflate(&mut self, input: &[u8], flush: FlushCompress) -> io::Result<()> {
        let start = self.c.total_in();
        loop {
            let consumed = usize::try_from(self.c.total_in() - start).unwrap_or(usize::MAX);
            let rest = input.get(consumed..).unwrap_or_default();
            if flush == FlushCompress::None && rest.is_empty() {
                return Ok(());
            }
            if self.out.capacity() - self.out.len() < 1024 {
                self.out.reserve(self.out.capacity().max(4096));
            }
            let before = (self.c.total_in(), self.c.total_out());
            let status = self
                .c
                .compress_vec(rest, self.out, flush)
                .map_err(io::Error::other)?;
            if status == Status::StreamEnd {
                return Ok(());
            }
            if (self.c.total_in(), self.c.total_out()) == before {
                // Room was there and nothing moved: never spin.
                return Err(io::Error::other("deflate made no progress"));
            }
        }
    }
}

impl io::Write for Deflating<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.deflate(buf, FlushCompress::None)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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

    #[test]
    fn a_body_written_in_pieces_decodes_to_the_pieces_joined() {
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let pieces: Vec<&[u8]> = vec![b"{\"dsn\":\"x\"}\n", b"", &big, b"\n", &big[..1000], b"z"];
        let joined = pieces.concat();
        for c in [Compression::Gzip, Compression::Zstd, Compression::None] {
            for level in [1, 6] {
                let out = compress_written(c, level, 0, |w| {
                    pieces.iter().try_for_each(|p| w.write_all(p))
                })
                .unwrap();
                let decoded = match c {
                    Compression::Gzip => {
                        let mut d = Vec::new();
                        // The decoder checks the trailer's CRC-32 and length.
                        flate2::read::GzDecoder::new(&out[..])
                            .read_to_end(&mut d)
                            .unwrap();
                        d
                    }
                    Compression::Zstd => zstd::stream::decode_all(&out[..]).unwrap(),
                    Compression::None => out,
                };
                assert_eq!(decoded, joined, "{c:?} level {level}");
            }
        }
    }

    #[test]
    fn a_failing_writer_fails_the_compression() {
        for c in [Compression::Gzip, Compression::Zstd, Compression::None] {
            let res = compress_written(c, 1, 0, |w| {
                w.write_all(b"part")?;
                Err(io::Error::other("gone"))
            });
            assert_eq!(res.unwrap_err().to_string(), "gone", "{c:?}");
        }
    }
}
