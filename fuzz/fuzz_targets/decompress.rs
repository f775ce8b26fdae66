//! HTTP body decompression with a size limit (`receiver::decompress::decode_bytes`): gzip,
//! deflate (zlib), zstd, br and identity. The output never exceeds the limit (bombs stop at
//! it); data compressed here comes back exactly when it fits and is refused as too large
//! when it does not. Every body is also decoded in frames, as an HTTP body arrives
//! (`decode_frames`, the loop of `read_body`), cut at places derived from the input: the
//! framing never changes whether a body is accepted, nor what it decodes to.
//!
//! Byte 0: encoding (`% 5`) and mode (`/ 5 % 2`: 0 raw compressed input, 1 the rest is plain
//! data compressed here). Bytes 1-2: the limit in KiB (1..=64 Ki), little endian.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_receiver::testing::{BodyError, Encoding, decode_bytes, decode_frames};
use std::io::Write;

const ENCODINGS: [Encoding; 5] = [
    Encoding::Identity,
    Encoding::Gzip,
    Encoding::Deflate,
    Encoding::Zstd,
    Encoding::Brotli,
];

fn compress(encoding: Encoding, plain: &[u8]) -> Option<Vec<u8>> {
    match encoding {
        Encoding::Identity => Some(plain.to_vec()),
        Encoding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).ok()?;
            e.finish().ok()
        }
        Encoding::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(plain).ok()?;
            e.finish().ok()
        }
        Encoding::Zstd => zstd::encode_all(plain, 1).ok(),
        Encoding::Brotli => None,
    }
}

/// `body` cut into frames whose sizes come from `seed` (a small LCG): at most 64 KiB each,
/// single bytes only for small bodies (each frame is a decoder call).
fn frames(body: &[u8], seed: u64) -> Vec<&[u8]> {
    const CAPS: [usize; 4] = [16, 512, 4096, 65536];
    let mut cap = CAPS[(seed % 4) as usize];
    if body.len() <= 4096 && seed % 7 == 0 {
        cap = 1;
    }
    let mut state = seed | 1;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let size = (1 + (state >> 33) as usize % cap).min(rest.len());
        let (frame, tail) = rest.split_at(size);
        out.push(frame);
        rest = tail;
    }
    out
}

/// Decodes `body` whole and in frames: both accept or both refuse, with the same output.
fn decode_both(body: &[u8], encoding: Encoding, limit: usize) -> Result<Vec<u8>, BodyError> {
    let whole = decode_bytes(body, encoding, limit);
    let seed = body
        .iter()
        .fold(body.len() as u64, |h, &b| h.rotate_left(5) ^ u64::from(b));
    let framed = decode_frames(frames(body, seed), encoding, limit);
    match (&whole, &framed) {
        (Ok(a), Ok(b)) => assert!(a == b, "{encoding:?}: frames decode to other bytes"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "{encoding:?}: whole body {:?}, in frames {:?}",
            a.as_ref().map(Vec::len),
            b.as_ref().map(Vec::len)
        ),
    }
    whole
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let encoding = ENCODINGS[usize::from(data[0]) % 5];
    let structured = (data[0] / 5) % 2 == 1;
    let limit = (usize::from(u16::from_le_bytes([data[1], data[2]])) + 1) * 1024;
    let rest = &data[3..];
    if !structured {
        if let Ok(out) = decode_both(rest, encoding, limit) {
            assert!(out.len() <= limit, "{} bytes out, limit {limit}", out.len());
        }
        return;
    }
    // Plain data: the rest, repeated (byte 0's top bits) to make bomb-like inputs cheaply.
    let repeat = 1 + usize::from(data[0] >> 4) * 4096;
    let plain = rest.repeat(repeat.min(1 << 22) / rest.len().max(1) + 1);
    let Some(body) = compress(encoding, &plain) else {
        return;
    };
    match decode_both(&body, encoding, limit) {
        Ok(out) => {
            assert!(
                plain.len() <= limit,
                "{} bytes accepted over limit {limit}",
                plain.len()
            );
            assert!(out == plain, "decompressed data differs");
        }
        Err(BodyError::TooLarge { .. }) => {
            assert!(
                plain.len() > limit || body.len() > limit,
                "{} bytes ({} compressed) refused as too large, limit {limit}",
                plain.len(),
                body.len()
            );
        }
        Err(e) => panic!("own {encoding:?} data refused: {e}"),
    }
});
