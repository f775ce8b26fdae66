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
//!   * a count pair of the sample-type table (e.g. `samples/count`, async-profiler's
//!     `itimer/count`): `v`;
//!   * a time pair (e.g. `cpu/nanoseconds`) with a period (`period > 0` with a time unit
//!     period type): `v / period` (both in nanoseconds) rounded to nearest, at least 1;
//!   * anything else (no period, non-CPU under [`super::NonCpuPolicy::Include`]): 1.
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
//! A profile is CPU/wall when its `sample_type` `(type, unit)` is in the sample-type table
//! ([`super::sample_types`], configurable in [`super::ChunkOptions::sample_types`]) or when it
//! has no sample type; anything else is non-CPU (see [`super::NonCpuPolicy`]).
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
use super::sample_types::{Observations, SampleTypes, nanos_per_unit};
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
    /// `round(v * unit_ns / period_ns)` observations, at least 1: the value's unit and the
    /// period, both in nanoseconds.
    Period {
        /// Nanoseconds per value unit.
        unit_ns: u64,
        /// The period in nanoseconds (> 0).
        period_ns: u128,
    },
    /// One observation per sample.
    One,
}

/// Classifies a profile from its resolved `sample_type`, `period_type` and `period` by the
/// sample-type table (see [`super::sample_types`]).
pub(crate) fn classify(
    sample_type: (&str, &str),
    period_type: (&str, &str),
    period: i64,
    table: &SampleTypes,
) -> SampleKind {
    let (ty, unit) = sample_type;
    if ty.is_empty() && unit.is_empty() {
        return SampleKind {
            cpu: true,
            per_value: PerValue::Count,
        };
    }
    let per_value = match table.rule(ty, unit) {
        None => {
            return SampleKind {
                cpu: false,
                per_value: PerValue::One,
            };
        }
        Some(Observations::Count) => PerValue::Count,
        Some(Observations::PerPeriod) => {
            match (nanos_per_unit(unit), nanos_per_unit(period_type.1)) {
                (Some(unit_ns), Some(period_unit_ns)) if period > 0 => PerValue::Period {
                    unit_ns,
                    period_ns: u128::from(period.unsigned_abs()) * u128::from(period_unit_ns),
                },
                _ => PerValue::One,
            }
        }
    };
    SampleKind {
        cpu: true,
        per_value,
    }
}

/// `n(v)`: observations requested by an aggregated value (see the module docs).
pub(crate) fn expansion_count(per_value: PerValue, v: i64) -> u64 {
    if v <= 0 {
        return 0;
    }
    let v = v.unsigned_abs();
    match per_value {
        PerValue::Count => v,
        PerValue::Period { unit_ns, period_ns } => {
            let x = u128::from(v) * u128::from(unit_ns);
            let n = x / period_ns + u128::from(x % period_ns >= period_ns.div_ceil(2));
            u64::try_from(n).unwrap_or(u64::MAX).max(1)
        }
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
        let t = SampleTypes::default();
        let k = classify(("samples", "count"), ("cpu", "nanoseconds"), 50_000_000, &t);
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::Count
            }
        );
        let k = classify(
            ("cpu", "nanoseconds"),
            ("cpu", "nanoseconds"),
            10_000_000,
            &t,
        );
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::Period {
                    unit_ns: 1,
                    period_ns: 10_000_000
                }
            }
        );
        let k = classify(("cpu", "nanoseconds"), ("", ""), 0, &t);
        assert_eq!(
            k,
            SampleKind {
                cpu: true,
                per_value: PerValue::One
            }
        );
        // async-profiler: the engine as the type.
        assert!(classify(("itimer", "count"), ("", ""), 0, &t).cpu);
        let k = classify(("itimer", "ns"), ("itimer", "ns"), 10_000_000, &t);
        assert_eq!(expansion_count(k.per_value, 25_000_000), 3);
        let k = classify(
            ("wall", "milliseconds"),
            ("wall", "nanoseconds"),
            10_000_000,
            &t,
        );
        assert_eq!(expansion_count(k.per_value, 100), 10);
        let k = classify(("off_cpu", "nanoseconds"), ("", ""), 0, &t);
        assert!(!k.cpu);
        assert!(classify(("events", "count"), ("", ""), 0, &t).cpu);
        assert!(!classify(("alloc_tracer", "bytes"), ("", ""), 0, &t).cpu);
        assert!(classify(("", ""), ("", ""), 0, &t).cpu);
        assert!(!classify(("samples", "count"), ("", ""), 0, &SampleTypes::empty()).cpu);
    }

    #[test]
    fn expansion() {
        assert_eq!(expansion_count(PerValue::Count, 5), 5);
        assert_eq!(expansion_count(PerValue::Count, -5), 0);
        let p = |period_ns| PerValue::Period {
            unit_ns: 1,
            period_ns,
        };
        assert_eq!(expansion_count(p(10), 25), 3);
        assert_eq!(expansion_count(p(10), 24), 2);
        assert_eq!(expansion_count(p(10), 1), 1);
        assert_eq!(expansion_count(p(u128::from(u64::MAX)), i64::MAX), 1);
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
