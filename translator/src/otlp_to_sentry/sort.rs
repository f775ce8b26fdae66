//! Sorting a window's observations by (timestamp, thread, stack), and its linked observations
//! by (timestamp, thread, stack, link).
//!
//! Observations arrive nearly in time order (profilers report in windows of a few seconds), so
//! one pass finds the time range and whether they are already sorted (then nothing else is
//! done). Otherwise one counting-sort pass scatters them into about `n / 4` buckets by the
//! top bits of `timestamp - min`; each bucket (a handful of observations when timestamps are
//! spread, as sampled timestamps are) is then sorted by the full key, by insertion when small.
//! Linear-ish time with one reused scratch buffer, which matters at a million observations per
//! request. Small inputs use the standard library's sort directly.

use super::observations::{LinkedObs, Obs};

/// What the bucket sort sorts: a time to bucket by and a full key to order by.
pub(crate) trait Timed: Copy + Default {
    /// The full sort key.
    type Key: Ord + Copy;
    /// Unix nanoseconds (the key's most significant part).
    fn ts(&self) -> u64;
    /// The full sort key.
    fn key(&self) -> Self::Key;
}

impl Timed for Obs {
    type Key = u128;
    #[inline]
    fn ts(&self) -> u64 {
        self.ts
    }
    #[inline]
    fn key(&self) -> u128 {
        Obs::key(self)
    }
}

impl Timed for LinkedObs {
    type Key = (u128, u32);
    #[inline]
    fn ts(&self) -> u64 {
        (self.key >> 64) as u64
    }
    #[inline]
    fn key(&self) -> (u128, u32) {
        (self.key, self.link)
    }
}

const SMALL: usize = 256;
/// Observations per bucket: about `2^PER_BUCKET_BITS`.
const PER_BUCKET_BITS: u32 = 2;
/// At most `2^MAX_BUCKET_BITS` buckets (4 bytes each).
const MAX_BUCKET_BITS: u32 = 22;
/// Buckets up to this size are insertion-sorted.
const INSERTION_MAX: usize = 24;

/// Sorts `v` by its key ([`Obs::key`], or `(key, link)`); `scratch` is a reusable buffer (its
/// contents are replaced). `inspect` sees every element once (in the first pass, before
/// sorting), which saves callers a pass of their own.
pub(crate) fn sort_observations<T: Timed>(
    v: &mut Vec<T>,
    scratch: &mut Vec<T>,
    inspect: impl FnMut(&T),
) {
    sort_with(v, scratch, PER_BUCKET_BITS, inspect)
}

fn insertion_sort<T: Timed>(b: &mut [T]) {
    for i in 1..b.len() {
        let x = b[i];
        let k = x.key();
        let mut j = i;
        while j > 0 && b[j - 1].key() > k {
            b[j] = b[j - 1];
            j -= 1;
        }
        b[j] = x;
    }
}

fn sort_with<T: Timed>(
    v: &mut Vec<T>,
    scratch: &mut Vec<T>,
    per_bucket_bits: u32,
    mut inspect: impl FnMut(&T),
) {
    let n = v.len();
    if n <= SMALL || u32::try_from(n).is_err() {
        v.iter().for_each(&mut inspect);
        v.sort_unstable_by_key(T::key);
        return;
    }
    let (mut min, mut max) = (u64::MAX, 0u64);
    let mut sorted = true;
    let mut prev = v[0].key();
    for o in v.iter() {
        inspect(o);
        let ts = o.ts();
        min = min.min(ts);
        max = max.max(ts);
        let k = o.key();
        sorted &= prev <= k;
        prev = k;
    }
    if sorted {
        return;
    }
    let span_bits = 64 - (max - min).leading_zeros();
    let want_bits = (usize::BITS - (n >> per_bucket_bits).leading_zeros()).min(MAX_BUCKET_BITS);
    let bucket_bits = want_bits.min(span_bits);
    let shift = span_bits - bucket_bits;
    let buckets = 1usize << bucket_bits;
    let bucket = |o: &T| ((o.ts() - min) >> shift) as usize & (buckets - 1);
    // `next[b]`: where the next observation of bucket `b` goes; after the scatter, the end of
    // bucket `b` (and the start of `b + 1`); `n` fits in u32 (checked above).
    let mut next = vec![0u32; buckets];
    for o in v.iter() {
        next[bucket(o)] += 1;
    }
    let mut sum = 0u32;
    for c in next.iter_mut() {
        let here = *c;
        *c = sum;
        sum += here;
    }
    // Every slot is overwritten below; only a longer buffer needs new (zeroed) slots.
    scratch.resize(n, T::default());
    for o in v.iter() {
        let b = bucket(o);
        scratch[next[b] as usize] = *o;
        next[b] += 1;
    }
    let mut start = 0usize;
    for &end in &next {
        let end = end as usize;
        if end - start > 1 {
            let b = &mut scratch[start..end];
            if b.len() <= INSERTION_MAX {
                insertion_sort(b);
            } else {
                b.sort_unstable_by_key(T::key);
            }
        }
        start = end;
    }
    std::mem::swap(v, scratch);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(mut v: Vec<Obs>) {
        let mut want = v.clone();
        want.sort_unstable_by_key(Obs::key);
        let mut seen = 0;
        sort_observations(&mut v, &mut Vec::new(), |_| seen += 1);
        assert_eq!(seen, want.len());
        assert_eq!(v, want);
    }

    #[test]
    fn sorts_like_the_key() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (n, span) in [
            (10, 1000),
            (10_000, 1 << 20),
            (20_000, u64::MAX),
            (30_000, 3),
            (5000, 0),
        ] {
            let v: Vec<Obs> = (0..n)
                .map(|_| Obs {
                    ts: 1_700_000_000_000_000_000u64.wrapping_add(if span == 0 {
                        0
                    } else {
                        next() % span.max(1)
                    }),
                    thread: (next() % 4) as u32,
                    stack: (next() % 7) as u32,
                })
                .collect();
            check(v);
        }
        check(Vec::new());
    }

    #[test]
    fn presorted_windows_and_a_reused_scratch() {
        let mut x = 0x0bad_cafe_dead_beefu64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut scratch = Vec::new();
        // Profiler-like order: sorted windows of shuffled samples, then fully sorted input,
        // at sizes that make the scratch buffer both shrink and grow.
        for n in [50_000usize, 9_000, 120_000] {
            let mut v: Vec<Obs> = (0..n as u64)
                .map(|k| Obs {
                    ts: 1_000_000 + k * 1000 + next() % 5000,
                    thread: (next() % 3) as u32,
                    stack: (next() % 50) as u32,
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable_by_key(Obs::key);
            let mut seen = 0usize;
            sort_observations(&mut v, &mut scratch, |_| seen += 1);
            assert_eq!(seen, n);
            assert_eq!(v, want);
            sort_observations(&mut v, &mut scratch, |_| seen += 1);
            assert_eq!(seen, 2 * n);
            assert_eq!(v, want);
        }
    }
}
