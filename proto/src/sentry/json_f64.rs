//! Floats as serde_json writes them, with a fast path for the floats chunks are made of.
//!
//! Sample timestamps are Unix seconds (`1732800000.123456`, or with a seventh fraction digit
//! when they came from nanoseconds); a merged chunk holds thousands, and each was formatted by
//! the general shortest-round-trip algorithm, twice per chunk on the way out (its exact length
//! for the queue's accounting, then its JSON). Two fast paths write them with integer
//! arithmetic instead:
//!
//! * **Microseconds**, for a value in `[1, 2^33)` that is exactly the double nearest to some
//!   decimal with at most 6 fraction digits: that decimal (trailing zeros dropped) *is* the
//!   shortest representation. It round-trips: the double nearest to `n / 10^6` is
//!   `n as f64 / 1e6` (both exact, the division correctly rounded), which is checked to equal
//!   the value. Nothing shorter does: a decimal with fewer fraction digits differs from it by
//!   at least `10^-6`, more than the spacing of doubles below `2^33` (`2^-20`), so it cannot
//!   round to the same double; nor can another decimal of the same length.
//! * **Seven fraction digits**, for any other value in `[2^30, 2^33)` (years 2004 to 2242):
//!   doubles there are `2^-22` to `2^-20` apart, so no decimal with 6 fraction digits rounds to
//!   the value (the first path would have found it) but the 7-digit decimal nearest to it
//!   always does (it is at most `0.5 * 10^-7` away, less than half the spacing). Shortest
//!   round-trip formatting picks, among the shortest candidates, the nearest: that one,
//!   computed exactly from the double's bits. An exact tie between two candidates goes to the
//!   general formatter.
//!
//! serde_json writes numbers in that range in plain notation, with `.0` for whole numbers.
//! Every other value goes through serde_json's own formatter. The tests hold both paths to
//! byte equality with it.

use serde_json::ser::{CompactFormatter, Formatter};

/// Below this, doubles are closer together than `10^-6` (see the module docs).
const FAST_LIMIT: f64 = 8_589_934_592.0; // 2^33

/// From here (up to [`FAST_LIMIT`]) the 7-digit path applies.
const SEVEN_DIGITS_FROM: f64 = 1_073_741_824.0; // 2^30

/// A value of the fast paths as `int.frac`: the integer part, then the fraction's digits
/// without trailing zeros and how many there are (`0` for a whole number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    int: u64,
    frac: u64,
    frac_len: usize,
}

impl Decimal {
    /// `n / 10^scale` with trailing zeros of the fraction dropped.
    fn new(n: u64, scale: u32) -> Self {
        let unit = 10u64.pow(scale);
        let (mut frac, mut frac_len) = (n % unit, scale as usize);
        if frac == 0 {
            frac_len = 0;
        } else {
            while frac % 10 == 0 {
                frac /= 10;
                frac_len -= 1;
            }
        }
        Decimal {
            int: n / unit,
            frac,
            frac_len,
        }
    }
}

/// `v * scale` rounded to the nearest integer, computed exactly from the bits of `v` (in
/// `[1, 2^33)`, `scale` at most `10^7`); `None` for an exact tie.
fn nearest_scaled(v: f64, scale: u64) -> Option<u64> {
    // v = m * 2^-shift exactly, with shift in 20..=52 in this range.
    let bits = v.to_bits();
    let shift = 1075 - ((bits >> 52) & 0x7ff) as u32;
    let m = (bits & ((1 << 52) - 1)) | (1 << 52);
    let scaled = u128::from(m) * u128::from(scale); // < 2^77
    let (q, r) = (scaled >> shift, scaled & ((1u128 << shift) - 1));
    let half = 1u128 << (shift - 1);
    // q < 2^33 * 10^7 < 2^57.
    (r != half).then(|| (q + u128::from(r > half)) as u64)
}

/// The shortest decimal of `v` when a fast path applies (see the module docs).
fn decimal(v: f64) -> Option<Decimal> {
    if !(1.0..FAST_LIMIT).contains(&v) {
        return None;
    }
    // The nearest 6-digit decimal: the shortest when it rounds back to `v`. (A tie between
    // two is never within half a spacing of doubles here, so nothing is lost on `None`.)
    if let Some(n) = nearest_scaled(v, 1_000_000)
        && (n as f64) / 1e6 == v
    {
        return Some(Decimal::new(n, 6));
    }
    if v < SEVEN_DIGITS_FROM {
        return None;
    }
    nearest_scaled(v, 10_000_000).map(|n| Decimal::new(n, 7))
}

/// Appends `v` as serde_json writes it (`null` when not finite).
pub fn write_json_f64(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    let Some(d) = decimal(v) else {
        // Writing to a Vec cannot fail.
        let _ = CompactFormatter.write_f64(out, v);
        return;
    };
    let _ = CompactFormatter.write_u64(out, d.int);
    out.push(b'.');
    if d.frac_len == 0 {
        out.push(b'0');
        return;
    }
    let mut digits = [b'0'; 7];
    let mut rest = d.frac;
    for c in digits[..d.frac_len].iter_mut().rev() {
        *c = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out.extend_from_slice(&digits[..d.frac_len]);
}

/// The length of what [`write_json_f64`] writes for `v`.
pub fn json_f64_len(v: f64) -> usize {
    match decimal(v) {
        // The integer part's digits (it is at least 1), the point, the fraction (`.0` when
        // whole).
        Some(d) => d.int.ilog10() as usize + 1 + 1 + d.frac_len.max(1),
        None => {
            let mut buf = Vec::with_capacity(32);
            write_json_f64(&mut buf, v);
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

    fn dec(int: u64, frac: u64, frac_len: usize) -> Option<Decimal> {
        Some(Decimal {
            int,
            frac,
            frac_len,
        })
    }

    #[test]
    fn the_fast_paths_are_taken_for_timestamps() {
        assert_eq!(
            decimal(1_732_800_000.123_456),
            dec(1_732_800_000, 123_456, 6)
        );
        assert_eq!(decimal(1_732_800_000.5), dec(1_732_800_000, 5, 1));
        assert_eq!(decimal(1_732_800_000.0), dec(1_732_800_000, 0, 0));
        assert_eq!(decimal(1.5), dec(1, 5, 1));
        // From nanoseconds: the seventh digit.
        assert_eq!(
            decimal(1_732_800_000.123_456_7),
            dec(1_732_800_000, 1_234_567, 7)
        );
        // Below 2^30 a seventh digit may not be enough: the general formatter.
        assert_eq!(decimal(1_000_000.123_456_7), None);
        assert_eq!(decimal(0.5), None);
        assert_eq!(decimal(FAST_LIMIT), None);
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
        fn nanosecond_timestamps_come_out_as_serde_writes_them(n in 1_073_741_824_000_000_000u64..8_589_934_591_999_999_999) {
            let v = crate::sentry::nanos_to_secs(n);
            prop_assert_eq!(ours(v), serde(v));
        }

        #[test]
        fn any_float_of_the_seven_digit_range_comes_out_as_serde_writes_it(bits in 0x41d0_0000_0000_0000u64..0x4200_0000_0000_0000) {
            let v = f64::from_bits(bits);
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
