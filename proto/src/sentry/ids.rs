//! Sentry id formats: 32 lowercase hex characters (UUIDs without dashes).

/// True when `s` is exactly 32 lowercase hex characters, the form Relay emits for ids.
pub fn is_sentry_id(s: &str) -> bool {
    s.len() == 32
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Formats 16 bytes as a Sentry id (32 lowercase hex characters).
pub fn sentry_id_from_bytes(bytes: &[u8; 16]) -> String {
    hex_lower(bytes)
}

/// `bytes` as lowercase hex, what `hex::encode` gives, written in one pass into one buffer
/// (`hex::encode` collects a `char` iterator: ids of every translated chunk and session, and
/// the build ids of their images, made it a visible part of translating a request).
pub fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Parses a Sentry/UUID id (32 hex characters, or hyphenated UUID, any case) into 16 bytes.
pub fn parse_sentry_id(s: &str) -> Option<[u8; 16]> {
    let compact: String = s.chars().filter(|c| *c != '-').collect();
    if compact.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    hex::decode_to_slice(compact, &mut out).ok()?;
    Some(out)
}

/// True when `s` is a Sentry instruction address: `0x` followed by 1–16 hex digits.
pub fn is_instruction_addr(s: &str) -> bool {
    parse_instruction_addr(s).is_some()
}

/// Parses a `"0x…"` address (Relay also accepts a decimal string).
pub fn parse_instruction_addr(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() || h.len() > 16 {
            return None;
        }
        // By hand: every frame of every chunk is checked (twice), and `from_str_radix` was
        // a noticeable part of validating a chunk. 16 digits at most cannot overflow.
        // `from_str_radix` took one leading `+`: so does this.
        let digits = h.strip_prefix('+').unwrap_or(h);
        if digits.is_empty() {
            return None;
        }
        let mut v = 0u64;
        for b in digits.bytes() {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return None,
            };
            v = (v << 4) | u64::from(d);
        }
        Some(v)
    } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// Formats an address the way profilink emits it: lowercase `0x` hex.
pub fn format_instruction_addr(addr: u64) -> String {
    format!("{addr:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_lower_is_hex_encode() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_lower(&all), hex::encode(&all));
        assert_eq!(hex_lower(&[]), "");
        assert_eq!(hex_lower(&[0x0f, 0xa0]), "0fa0");
    }

    #[test]
    fn ids() {
        assert!(is_sentry_id("7ffb3319b3ff432ebf7a635f28b29a80"));
        assert!(!is_sentry_id("7FFB3319B3FF432EBF7A635F28B29A80"));
        assert!(!is_sentry_id("7ffb3319-b3ff-432e-bf7a-635f28b29a80"));
        assert_eq!(
            parse_sentry_id("7ffb3319-b3ff-432e-bf7a-635f28b29a80").map(hex::encode),
            Some("7ffb3319b3ff432ebf7a635f28b29a80".to_string())
        );
        assert_eq!(parse_sentry_id("xyz"), None);
    }

    #[test]
    fn addrs() {
        assert_eq!(parse_instruction_addr("0x1a"), Some(26));
        assert_eq!(parse_instruction_addr("26"), Some(26));
        assert_eq!(parse_instruction_addr("1a"), None);
        assert_eq!(parse_instruction_addr("0x"), None);
        assert_eq!(parse_instruction_addr("0X1A"), Some(26));
        assert_eq!(parse_instruction_addr("0xffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_instruction_addr("0x1ffffffffffffffff"), None);
        assert_eq!(parse_instruction_addr("0x1g"), None);
        assert_eq!(parse_instruction_addr("0x+1a"), Some(26));
        assert_eq!(parse_instruction_addr("0x+"), None);
        assert_eq!(parse_instruction_addr("0x-1"), None);
        // The same answer as the standard parser on every short hex-like string.
        for s in ["0", "9", "a", "F", "00", "7f", "+0", "++1", "-", " 1", "1 "] {
            let expected = u64::from_str_radix(s, 16).ok();
            assert_eq!(parse_instruction_addr(&format!("0x{s}")), expected, "{s:?}");
        }
        assert_eq!(format_instruction_addr(26), "0x1a");
    }
}
