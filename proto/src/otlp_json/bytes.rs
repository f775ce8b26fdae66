//! `bytes` fields: hex for trace/span/profile ids (OTLP's exception to proto3 JSON), base64 for
//! everything else.
//!
//! Ids are read as follows, the first rule that fits wins:
//! 1. hex (any case) that decodes to the id's standard length (16 bytes for trace and profile
//!    ids, 8 for span ids);
//! 2. base64 (standard or URL-safe alphabet, padded or not) that decodes to the standard length
//!    — this is what proto3 JSON writers that do not know OTLP's rule, such as Python's
//!    `MessageToJson`, produce;
//! 3. hex of any other even length (so non-standard ids written by [`write_hex`] read back).
//!
//! The empty string is the empty id. Anything else is an error — in particular base64 of a
//! non-standard length, so that a mistyped hex id (odd length, stray character) is reported
//! instead of being read as base64 garbage.

use super::shown;
use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

const CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_encode_padding(true)
    .with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, CONFIG);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, CONFIG);

/// Decodes base64 in the standard or URL-safe alphabet, padded or not.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    STANDARD
        .decode(s)
        .or_else(|_| URL_SAFE.decode(s))
        .map_err(|e| format!("invalid base64: {e}"))
}

/// Appends `bytes` as a padded standard base64 JSON string (quotes included).
pub fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    let n = STANDARD
        .encode_slice(bytes, &mut out[start..])
        .unwrap_or_default();
    out.truncate(start + n);
    out.push(b'"');
}

/// Appends `bytes` as a lowercase hex JSON string (quotes included).
pub fn write_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2 + 2);
    out.push(b'"');
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
    out.push(b'"');
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    hex::decode(s).ok()
}

/// Decodes an id (see the module docs for the rules); `len` is its standard length in bytes.
pub fn decode_id(s: &str, len: usize) -> Result<Vec<u8>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    let hex = match decode_hex(s) {
        Some(h) if h.len() == len => return Ok(h),
        other => other,
    };
    let b64 = decode_base64(s).ok();
    match (hex, b64) {
        (_, Some(b)) if b.len() == len => Ok(b),
        (Some(h), _) => Ok(h),
        (None, _) => Err(format!(
            "{} is neither hex nor base64 of a {len}-byte id (expected {} hex digits)",
            shown(s),
            len * 2
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        let id: Vec<u8> = (1..=16).collect();
        let hex = "0102030405060708090a0b0c0d0e0f10";
        assert_eq!(decode_id(hex, 16).unwrap(), id);
        assert_eq!(decode_id(&hex.to_uppercase(), 16).unwrap(), id);
        // Python's MessageToJson: standard padded base64.
        assert_eq!(decode_id("AQIDBAUGBwgJCgsMDQ4PEA==", 16).unwrap(), id);
        assert_eq!(decode_id("AQIDBAUGBwgJCgsMDQ4PEA", 16).unwrap(), id);
        let span: Vec<u8> = vec![0xfb, 0xff, 0xfe, 1, 2, 3, 4, 5];
        assert_eq!(decode_id("+//+AQIDBAU=", 8).unwrap(), span);
        assert_eq!(decode_id("-__-AQIDBAU", 8).unwrap(), span);
        assert_eq!(decode_id("fbfffe0102030405", 8).unwrap(), span);
        assert_eq!(decode_id("", 8).unwrap(), Vec::<u8>::new());
        // Non-standard lengths written as hex read back as hex.
        assert_eq!(decode_id("abcd", 16).unwrap(), vec![0xab, 0xcd]);
        assert!(decode_id("xyz!", 16).is_err());
        assert!(decode_id("0102030405060708090a0b0c0d0e0f1", 16).is_err());
        assert!(decode_id("é", 16).is_err());
        // Valid base64, but not of a 16-byte id: an error, not garbage.
        assert!(decode_id("AQID", 16).is_err());
        assert!(decode_id("0102030405060708090a0b0c0d0e0f1", 16).is_err());
    }

    #[test]
    fn lowercase_hex_of_any_length_reads_back() {
        for len in 0..40usize {
            for seed in 0..8u8 {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| {
                        (i as u8)
                            .wrapping_mul(37)
                            .wrapping_add(seed.wrapping_mul(91))
                    })
                    .collect();
                let mut out = Vec::new();
                write_hex(&mut out, &bytes);
                let s = std::str::from_utf8(&out[1..out.len() - 1]).unwrap();
                assert_eq!(decode_id(s, 16).unwrap(), bytes);
                assert_eq!(decode_id(s, 8).unwrap(), bytes);
            }
        }
    }

    #[test]
    fn base64_variants() {
        assert_eq!(decode_base64("+/8=").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(decode_base64("+/8").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(decode_base64("-_8").unwrap(), vec![0xfb, 0xff]);
        assert_eq!(decode_base64("-_8=").unwrap(), vec![0xfb, 0xff]);
        assert!(decode_base64("+_8=").is_err());
        assert!(decode_base64("a").is_err());
        let mut out = Vec::new();
        write_base64(&mut out, &[0xfb, 0xff]);
        assert_eq!(out, b"\"+/8=\"");
    }
}
