//! Translation options and the sampling-period rule.

/// The period used when it is neither configured nor inferable: 10,101,010 ns, i.e. 99 Hz,
/// the rate of Sentry's SDK profilers.
pub const DEFAULT_PERIOD_NS: u64 = 10_101_010;

/// Options for [`super::to_otlp`] / [`super::try_to_otlp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpOptions {
    /// The sampling interval in ns, when known. When `None`, each profile's period is inferred:
    /// the median of the positive gaps between consecutive (time-ordered) samples of the same
    /// thread, over all threads of that chunk (ties, i.e. equal timestamps, are skipped); when
    /// the chunk has no such gap, [`OtlpOptions::fallback_period_ns`].
    pub period_ns: Option<u64>,
    /// The period when `period_ns` is `None` and nothing can be inferred
    /// (default [`DEFAULT_PERIOD_NS`], 99 Hz).
    pub fallback_period_ns: u64,
}

impl Default for OtlpOptions {
    fn default() -> Self {
        OtlpOptions {
            period_ns: None,
            fallback_period_ns: DEFAULT_PERIOD_NS,
        }
    }
}

impl OtlpOptions {
    /// The period for a profile whose per-thread timestamps are `threads` (each in any order;
    /// sorted in place).
    pub fn period_for(&self, threads: &mut [Vec<u64>]) -> u64 {
        if let Some(p) = self.period_ns {
            return p;
        }
        infer_period(threads).unwrap_or(self.fallback_period_ns)
    }
}

/// The median positive gap between consecutive samples of a thread, over all threads; `None`
/// without any gap. For an even count the lower median is taken (an observed gap, not a mean).
pub fn infer_period(threads: &mut [Vec<u64>]) -> Option<u64> {
    let mut gaps = Vec::new();
    for ts in threads.iter_mut() {
        if !ts.is_sorted() {
            ts.sort_unstable();
        }
        gaps.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|g| *g > 0));
    }
    if gaps.is_empty() {
        return None;
    }
    let mid = (gaps.len() - 1) / 2;
    let (_, m, _) = gaps.select_nth_unstable(mid);
    Some(*m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_gap_per_thread() {
        let mut t = vec![vec![0, 10, 20, 40], vec![5, 5, 15]];
        // gaps: 10, 10, 20, 10 -> median 10
        assert_eq!(infer_period(&mut t), Some(10));
        assert_eq!(infer_period(&mut [vec![7]]), None);
        let o = OtlpOptions::default();
        assert_eq!(o.period_for(&mut [vec![7, 7]]), DEFAULT_PERIOD_NS);
        let o = OtlpOptions {
            period_ns: Some(3),
            ..Default::default()
        };
        assert_eq!(o.period_for(&mut t), 3);
    }
}
