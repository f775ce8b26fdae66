//! Floats as serde_json writes them, with a fast path for the floats chunks are made of.
//!
//! Sample timestamps are Unix seconds with microsecond precision (`1732800000.123456`); a
//! merged chunk holds thousands, and each was formatted by the general shortest-round-trip
//! algorithm, twice per chunk on the way out (its exact length for the queue's accounting, then
//! its JSON). For a value in `[1, 2^33)` that is exactly the double nearest to some decimal
//! with at most 6 fraction digits, that decimal (trailing zeros dropped) *is* the shortest
//! representation, so it is written with integer arithmetic:
//!
//! * it round-trips: the double nearest to `n / 10^6` is `n as f64 / 1e6` (both exact, the
//!   division correctly rounded), which the fast path checks equals the value;
//! * nothing shorter does: a decimal with fewer fraction digits differs from it by at least
//!   `10^-6`, more than the spacing of doubles below `2^33` (`2^-20`), so it cannot round to
//!   the same double; nor can another decimal of the same length;
//! * serde_json writes numbers in that range in plain notation, with `.0` for whole numbers.
//!
//! Every other value goes through serde_json's own formatter. The tests hold both paths to
//! byte equality with it.

use serde_json::ser::{CompactFormatter, Formatter};

/// Below this, doubles are closer together than `10^-6` (see the module docs).
const FAST_LIMIT: f64 = 8_589_934_592.0; // 2^33

/// `v` as a count of microseconds when `v` is in the fast path's range and exactly the double
/// nearest to that many microseconds.
fn micros(v: f64) -> Option<u64> {
    if !(1.0..FAST_LIMIT).contains(&v) {
        return None;
    }
    // The product may be off by an ulp; the check below decides.
    let n = (v * 1e6).round() as u64;
    ((n as f64) / 1e6 == v).then_some(n)
}

/// The fraction's digits without trailing zeros, and how many there are (`0` for none).
fn fraction(frac: u64) -> (u64, usize) {
    let (mut f, mut len) = (frac, 6);
    if f == 0 {
        return (0, 0);
    }
    while f % 10 == 0 {
        f /= 10;
        len -= 1;
    }
    (f, len)
}

fn digits(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Appends `v` as serde_json writes it (`null` when not finite).
pub fn write_json_f64(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let Some(n) = micros(v) else {
        // Writing to a Vec cannot fail.
        let _ = CompactFormatter.write_f64(out, v);
        return;
    };
    let _ = CompactFormatter.write_u64(out, n / 1_000_000);
    out.push(b'.');
    let (f, len) = fraction(n % 1_000_000);
    if len == 0 {
        out.push(b'0');
        return;
    }
    let mut digits = [b'0'; 6];
    let mut rest = f;
    for d in digits[..len].iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.extend_from_slice(&digits[..len]);
}

/// The length of what [`write_json_f64`] writes for `v`.
pub fn json_f64_len(v: f64) -> usize {
    if !v.is_finite() {
        return 4;
    }
    match micros(v) {
        Some(n) => digits(n / 1_000_000) + 1 + fraction(n % 1_000_000).1.max(1),
        None => {
            let mut buf = Vec::with_capacity(32);
            let _ = CompactFormatter.write_f64(&mut buf, v);
            buf.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde(v: f64) -> String {
        serde_json::to_string(&v).unwrap()
    }

    fn ours(v: f64) -> String {
        let mut out = Vec::new();
        write_json_f64(&mut out, v);
        assert_eq!(json_f64_len(v), out.len(), "length of {v:?}");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn timestamps_and_edge_values_come_out_as_serde_writes_them() {
        for v in [
            1_732_800_000.123_456,
            1_732_800_000.0,
            1_732_800_000.5,
            1_732_800_000.000_001,
            1_732_800_000.1,
            1_732_800_000.999_999,
            1.0,
            1.5,
            0.999_999,
            0.5,
            1e-7,
            0.0,
            -0.0,
            -1_732_800_000.5,
            FAST_LIMIT - 1e-6,
            FAST_LIMIT,
            FAST_LIMIT + 0.5,
            1e16,
            1e300,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert_eq!(ours(v), serde(v), "{v:?}");
        }
    }

    #[test]
    fn the_fast_path_is_taken_for_microsecond_timestamps() {
        assert_eq!(micros(1_732_800_000.123_456), Some(1_732_800_000_123_456));
        assert_eq!(micros(1.5), Some(1_500_000));
        // Not a whole number of microseconds: the general formatter.
        assert_eq!(micros(1_732_800_000.123_456_7), None);
        assert_eq!(micros(0.5), None);
        assert_eq!(micros(FAST_LIMIT), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        #[test]
        fn microsecond_values_come_out_as_serde_writes_them(n in 1_000_000u64..8_589_934_592_000_000) {
            let v = n as f64 / 1e6;
            prop_assert_eq!(ours(v), serde(v));
        }

        #[test]
        fn recent_timestamps_come_out_as_serde_writes_them(n in 1_500_000_000_000_000u64..2_200_000_000_000_000) {
            let v = n as f64 / 1e6;
            prop_assert_eq!(ours(v), serde(v));
        }

        #[test]
        fn any_float_comes_out_as_serde_writes_it(v in any::<f64>()) {
            prop_assert_eq!(ours(v), serde(v));
        }

        #[test]
        fn floats_near_the_fast_range_come_out_as_serde_writes_them(v in 0.0f64..1e10) {
            prop_assert_eq!(ours(v), serde(v));
        }
    }
}
