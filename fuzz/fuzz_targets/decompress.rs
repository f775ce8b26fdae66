//! HTTP body decompression with a size limit (`receiver::decompress::decode_bytes`): gzip,
//! deflate (zlib), zstd, br and identity. The output never exceeds the limit (bombs stop at
//! it); data compressed here comes back exactly when it fits and is refused as too large
//! when it does not.
//!
//! Byte 0: encoding (`% 5`) and mode (`/ 5 % 2`: 0 raw compressed input, 1 the rest is plain
//! data compressed here). Bytes 1-2: the limit in KiB (1..=64 Ki), little endian.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_receiver::testing::{BodyError, Encoding, decode_bytes};
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

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let encoding = ENCODINGS[usize::from(data[0]) % 5];
    let structured = (data[0] / 5) % 2 == 1;
    let limit = (usize::from(u16::from_le_bytes([data[1], data[2]])) + 1) * 1024;
    let rest = &data[3..];
    if !structured {
        if let Ok(out) = decode_bytes(rest, encoding, limit) {
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
    match decode_bytes(&body, encoding, limit) {
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
