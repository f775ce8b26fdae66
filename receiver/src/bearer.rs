//! Bearer-token authentication for the OTLP listeners (`Authorization: Bearer <token>`, as the
//! Collector's `bearertokenauth` extension checks it).

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// True when `headers` carry `Authorization: Bearer <expected>` (scheme case-insensitive).
/// The comparison takes the same time wherever the tokens differ.
pub fn authorized(headers: &HeaderMap, expected: &str) -> bool {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return false;
    };
    let Ok(text) = value.to_str() else {
        return false;
    };
    let text = text.trim();
    let Some((scheme, token)) = text.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer")
        && constant_time_eq(token.trim().as_bytes(), expected.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_the_token() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "secret"));
        for (value, ok) in [
            ("Bearer secret", true),
            ("bearer secret", true),
            ("BEARER  secret ", true),
            ("Bearer secreT", false),
            ("Bearer secret2", false),
            ("Basic secret", false),
            ("secret", false),
            ("Bearer ", false),
        ] {
            h.insert(AUTHORIZATION, value.parse().unwrap());
            assert_eq!(authorized(&h, "secret"), ok, "{value}");
        }
    }
}
