//! Sentry timestamps: RFC 3339 strings or float Unix seconds, both seen from real SDKs.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A point in time as float Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Timestamp(pub f64);

impl Timestamp {
    /// Unix seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0
    }

    /// Unix nanoseconds rounded to 100 ns (see [`secs_to_nanos`]); `None` when the value is not
    /// finite, before 1970 or after 2540.
    pub fn as_unix_nanos(self) -> Option<u64> {
        secs_to_nanos(self.0)
    }

    /// Parses an RFC 3339 string (`2026-11-22T03:11:03.000371Z`).
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = DateTime::parse_from_rfc3339(s.trim()).ok()?;
        let secs = dt.timestamp() as f64 + f64::from(dt.timestamp_subsec_nanos()) / 1e9;
        Some(Timestamp(secs))
    }

    /// Formats as RFC 3339 UTC with microseconds.
    pub fn to_rfc3339(self) -> String {
        let nanos = secs_to_nanos(self.0).unwrap_or(0);
        let dt = DateTime::<Utc>::from_timestamp(
            (nanos / 1_000_000_000) as i64,
            (nanos % 1_000_000_000) as u32,
        )
        .unwrap_or_default();
        dt.to_rfc3339_opts(SecondsFormat::Micros, true)
    }
}

/// Float seconds to integer nanoseconds: the digits of the shortest decimal that reads back as
/// this f64, i.e. what the SDK wrote; `None` if not finite, negative or past 2540.
///
/// An f64 holding today's Unix time resolves about 240 ns, so nearest-nanosecond arithmetic
/// turns `1795317063.000371` into `…000370979` ns. Reading the decimal gives `…000371000`, and
/// [`nanos_to_secs`] gives back the same f64.
pub fn secs_to_nanos(secs: f64) -> Option<u64> {
    if !(0.0..1.8e10).contains(&secs) {
        return None;
    }
    let mut buf = ryu::Buffer::new();
    let text = buf.format_finite(secs);
    decimal_to_nanos(text).or_else(|| {
        let whole = secs.trunc();
        Some(whole as u64 * 1_000_000_000 + ((secs - whole) * 1e9).round() as u64)
    })
}

/// Parses `123.456` (no exponent) into nanoseconds, rounding past the 9th decimal.
fn decimal_to_nanos(text: &str) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut nanos = 0u64;
    let digits = frac.as_bytes();
    for i in 0..9 {
        nanos = nanos * 10 + u64::from(digits.get(i).map_or(0, |d| d - b'0'));
    }
    if digits.get(9).is_some_and(|d| *d >= b'5') {
        nanos += 1;
    }
    whole.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Integer nanoseconds to float seconds.
pub fn nanos_to_secs(nanos: u64) -> f64 {
    // Split to keep the microsecond digits exact in the f64 result.
    (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9
}

struct TsVisitor;

impl Visitor<'_> for TsVisitor {
    type Value = Timestamp;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an RFC 3339 timestamp string or Unix seconds")
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Timestamp, E> {
        Ok(Timestamp(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
        Ok(Timestamp(v as f64))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Timestamp, E> {
        Ok(Timestamp(v as f64))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
        if let Some(t) = Timestamp::parse_rfc3339(v) {
            return Ok(t);
        }
        v.trim()
            .parse::<f64>()
            .map(Timestamp)
            .map_err(|_| E::custom(format!("not a timestamp: {v:?}")))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TsVisitor)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        let a: Timestamp = serde_json::from_str("\"2026-11-22T03:11:03.000371Z\"").unwrap();
        let b: Timestamp = serde_json::from_str("1795317063.000371").unwrap();
        assert_eq!(a.as_unix_nanos(), b.as_unix_nanos());
        assert_eq!(a.as_unix_nanos(), Some(1_795_317_063_000_371_000));
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
        assert_eq!(a.to_rfc3339(), "2026-11-22T03:11:03.000371Z");
    }

    #[test]
    fn nanos_round_trip_to_the_microsecond() {
        for n in [
            1_795_317_063_001_149_000u64,
            1_795_317_063_000_000_001,
            1,
            0,
        ] {
            let back = secs_to_nanos(nanos_to_secs(n)).unwrap();
            assert!(back.abs_diff(n) < 250, "{n} came back as {back}");
        }
        assert_eq!(
            secs_to_nanos(nanos_to_secs(1_795_317_063_001_149_000)),
            Some(1_795_317_063_001_149_000)
        );
        assert_eq!(secs_to_nanos(5e-7), Some(500));
        for x in [1795317063.0011497, 1724777211.50378, 0.5, 1.0] {
            assert_eq!(nanos_to_secs(secs_to_nanos(x).unwrap()), x);
        }
        assert_eq!(secs_to_nanos(f64::NAN), None);
        assert_eq!(secs_to_nanos(-1.0), None);
    }
}
