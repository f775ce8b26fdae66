//! OTLP samples to observations: sample kinds, expansion of aggregated values, thread ids.
//!
//! # Observations
//!
//! * Timestamps only: one observation per timestamp.
//! * Values and timestamps (equal lengths, else the profile is rejected): one observation per
//!   timestamp; the value is the weight (1 for `samples/count`) and is not repeated.
//! * Values only (aggregated): the values are summed (saturating) into `v` and expanded into
//!   `n(v)` observations spread evenly over the profile window: observation `i` of `n` is at
//!   `time_unix_nano + floor(i * duration_nano / n)`, i.e. within
//!   `[time_unix_nano, time_unix_nano + duration_nano)`, or all at `time_unix_nano` when the
//!   duration is 0. The window used for spreading is at most [`MAX_SPREAD_NS`] (1 hour): a
//!   longer `duration_nano` (no profiler reports one; found by fuzzing, a 61-byte request with
//!   a window of centuries made one chunk per observation, 679,240 chunks) spreads over its
//!   first hour, so one aggregated profile makes at most about 60 one-minute chunks.
//!   `n(v)` is 0 for `v <= 0`, else:
//!   * CPU sample type with unit `count` (e.g. `samples/count`): `v`;
//!   * CPU sample type with unit `nanoseconds` and a period (`period > 0` with a `nanoseconds`
//!     period type): `v / period` rounded to nearest, at least 1;
//!   * anything else (no period, other units, non-CPU under [`super::NonCpuPolicy::Include`]): 1.
//!
//!   The total over a profile is bounded by `max_expanded_samples`: when the requested total
//!   `T` exceeds the bound `M`, each sample gets `floor(n * M / T)` observations and the
//!   difference is counted in [`super::Stats::samples_dropped_expansion`]. A profile whose `T`
//!   is above [`super::MAX_PLAUSIBLE_CLAIM`] (2^32) is rejected (`limit_exceeded`), so one
//!   profile's drop count is below 2^32.
//! * Neither values nor timestamps: no observation.
//!
//! # Sample kinds
//!
//! A profile is CPU/wall when its `sample_type` type is `samples`, `cpu` or `wall` (ASCII case
//! ignored) or when it has no sample type; anything else is non-CPU (see
//! [`super::NonCpuPolicy`]).
//!
//! # Thread ids
//!
//! `thread_id` is the decimal text of the `thread.id` attribute (sample first, then resource):
//! an int, or a string holding a decimal integer (normalized). A non-numeric string gets a
//! stable synthetic id: the first 8 bytes of its SHA-256, as a u64 shifted right by one bit, in
//! decimal. Without `thread.id`, samples go to a synthetic thread whose id is the process's
//! `process.pid` (on Linux, the main thread's id), or `"0"` without a pid. `thread_metadata`
//! names come from `thread.name` (the first non-empty name seen in input order).

use super::ids::digest64;
use crate::dictionary::AttrValue;

/// How a profile's samples turn into observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleKind {
    /// CPU/wall sample type.
    pub cpu: bool,
    /// Aggregated value unit: observations per value unit.
    pub per_value: PerValue,
}

/// Expansion rule for aggregated values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PerValue {
    /// `v` observations.
    Count,
    /// `round(v / period)` observations, at least 1.
    Period(u64),
    /// One observation per sample.
    One,
}

/// Classifies a profile from its resolved `sample_type`, `period_type` and `period`.
pub(crate) fn classify(
    sample_type: (&str, &str),
    period_type: (&str, &str),
    period: i64,
) -> SampleKind {
    let (ty, unit) = sample_type;
    let ty_l = ty.to_ascii_lowercase();
    let cpu =
        (ty.is_empty() && unit.is_empty()) || matches!(ty_l.as_str(), "samples" | "cpu" | "wall");
    let unit_l = unit.to_ascii_lowercase();
    let per_value = if !cpu {
        PerValue::One
    } else if unit_l == "count" || (ty.is_empty() && unit.is_empty()) {
        PerValue::Count
    } else if matches!(unit_l.as_str(), "nanoseconds" | "ns")
        && period > 0
        && matches!(
            period_type.1.to_ascii_lowercase().as_str(),
            "nanoseconds" | "ns"
        )
    {
        PerValue::Period(period.unsigned_abs())
    } else {
        PerValue::One
    };
    SampleKind { cpu, per_value }
}

/// `n(v)`: observations requested by an aggregated value (see the module docs).
pub(crate) fn expansion_count(per_value: PerValue, v: i64) -> u64 {
    if v <= 0 {
        return 0;
    }
    let v = v.unsigned_abs();
    match per_value {
        PerValue::Count => v,
        PerValue::Period(p) => (v / p + u64::from(v % p >= p.div_ceil(2))).max(1),
        PerValue::One => 1,
    }
}

/// Sum of a sample's values, saturating.
pub(crate) fn value_sum(values: &[i64]) -> i64 {
    values.iter().fold(0i64, |a, v| a.saturating_add(*v))
}

/// Longest window aggregated observations are spread over (1 hour; see the module docs).
pub(crate) const MAX_SPREAD_NS: u64 = 3_600_000_000_000;

/// Timestamp of observation `i` of `n` spread over `[start, start + duration)`.
#[inline]
pub(crate) fn spread(start: u64, duration: u64, i: u64, n: u64) -> u64 {
    if n == 0 || duration == 0 {
        return start;
    }
    let off = (u128::from(i) * u128::from(duration) / u128::from(n)) as u64;
    start.saturating_add(off)
}

/// Scaled observation count when the profile's total `total` exceeds `cap`.
pub(crate) fn scaled(n: u64, cap: u128, total: u128) -> u64 {
    if total <= cap {
        n
    } else {
        (u128::from(n) * cap / total) as u64
    }
}

/// The Sentry thread id for a `thread.id` attribute value (see the module docs).
pub(crate) fn thread_id_text(v: &AttrValue<'_>) -> Option<String> {
    match v {
        AttrValue::Int(i) => Some(i.to_string()),
        AttrValue::Str(s) => {
            let t = s.trim();
            if t.is_empty() {
                None
            } else if let Ok(u) = t.parse::<u64>() {
                Some(u.to_string())
            } else if let Ok(i) = t.parse::<i64>() {
                Some(i.to_string())
            } else {
                Some((digest64(t.as_bytes()) >> 1).to_string())
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let k = classify(("samples", "count"), ("cpu", "nanoseconds"), 50_000_000);
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::Count
            }
        );
        let k = classify(("cpu", "nanoseconds"), ("cpu", "nanoseconds"), 10_000_000);
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::Period(10_000_000)
            }
        );
        let k = classify(("cpu", "nanoseconds"), ("", ""), 0);
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::One
            }
        );
        let k = classify(("off_cpu", "nanoseconds"), ("", ""), 0);
        assert!(!k.cpu);
        assert!(!classify(("events", "count"), ("", ""), 0).cpu);
        assert!(classify(("", ""), ("", ""), 0).cpu);
    }

    #[test]
    fn expansion() {
        assert_eq!(expansion_count(PerValue::Count, 5), 5);
        assert_eq!(expansion_count(PerValue::Count, -5), 0);
        assert_eq!(expansion_count(PerValue::Period(10), 25), 3);
        assert_eq!(expansion_count(PerValue::Period(10), 24), 2);
        assert_eq!(expansion_count(PerValue::Period(10), 1), 1);
        assert_eq!(expansion_count(PerValue::Period(u64::MAX), i64::MAX), 1);
        assert_eq!(expansion_count(PerValue::One, 1_000_000), 1);
        assert_eq!(value_sum(&[i64::MAX, 1]), i64::MAX);
    }

    #[test]
    fn spreading() {
        assert_eq!(spread(100, 0, 3, 10), 100);
        let ts: Vec<u64> = (0..4).map(|i| spread(100, 40, i, 4)).collect();
        assert_eq!(ts, vec![100, 110, 120, 130]);
        assert_eq!(spread(u64::MAX - 1, u64::MAX, 1, 2), u64::MAX);
        assert_eq!(scaled(10, 100, 50), 10);
        assert_eq!(scaled(10, 100, 1000), 1);
    }

    #[test]
    fn thread_ids() {
        assert_eq!(thread_id_text(&AttrValue::Int(42)).as_deref(), Some("42"));
        assert_eq!(
            thread_id_text(&AttrValue::Str(" 0042 ")).as_deref(),
            Some("42")
        );
        assert_eq!(
            thread_id_text(&AttrValue::Str("18446744073709551615")).as_deref(),
            Some("18446744073709551615")
        );
        let synthetic = thread_id_text(&AttrValue::Str("main")).unwrap();
        assert!(synthetic.bytes().all(|b| b.is_ascii_digit()));
        assert_eq!(thread_id_text(&AttrValue::Str("main")).unwrap(), synthetic);
        assert_eq!(thread_id_text(&AttrValue::Str("")), None);
        assert_eq!(thread_id_text(&AttrValue::Bool(true)), None);
    }
}
