//! Sorting a session's observations by (timestamp, thread, stack).
//!
//! One counting-sort pass scatters the observations into about `n / 16` buckets by the top
//! bits of `timestamp - min` (at most 2^16 buckets), then each bucket, small enough to stay in
//! cache, is sorted by timestamp, and runs of equal timestamps (rare) by the full key. Linear-ish time with one scratch buffer, which matters at a
//! million observations per request. Small inputs use the standard library's sort directly.

use super::split::Obs;

const SMALL: usize = 4096;
const MAX_BUCKET_BITS: u32 = 16;

/// Sorts `v` by [`Obs::key`].
pub(crate) fn sort_observations(v: &mut Vec<Obs>) {
    sort_with(v, 4)
}

fn sort_with(v: &mut Vec<Obs>, per_bucket_bits: u32) {
    let n = v.len();
    if n <= SMALL {
        v.sort_unstable_by_key(Obs::key);
        return;
    }
    let (mut min, mut max) = (u64::MAX, 0u64);
    for o in v.iter() {
        min = min.min(o.ts);
        max = max.max(o.ts);
    }
    let span_bits = 64 - (max - min).leading_zeros();
    // About 64 observations per bucket.
    let want_bits = (usize::BITS - (n >> per_bucket_bits).leading_zeros()).min(MAX_BUCKET_BITS);
    let bucket_bits = want_bits.min(span_bits);
    let shift = span_bits - bucket_bits;
    let buckets = 1usize << bucket_bits;
    let bucket = |o: &Obs| ((o.ts - min) >> shift) as usize & (buckets - 1);
    let mut starts = vec![0usize; buckets + 1];
    for o in v.iter() {
        starts[bucket(o) + 1] += 1;
    }
    for i in 1..=buckets {
        starts[i] += starts[i - 1];
    }
    let mut next = starts.clone();
    let mut out = v.clone();
    for o in v.iter() {
        let b = bucket(o);
        out[next[b]] = *o;
        next[b] += 1;
    }
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            let b = &mut out[w[0]..w[1]];
            b.sort_unstable_by_key(|o| o.ts);
            // Ties on the timestamp (rare): order by the full key.
            let mut i = 0;
            while i < b.len() {
                let mut j = i + 1;
                while j < b.len() && b[j].ts == b[i].ts {
                    j += 1;
                }
                if j - i > 1 {
                    b[i..j].sort_unstable_by_key(Obs::key);
                }
                i = j;
            }
        }
    }
    *v = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(mut v: Vec<Obs>) {
        let mut want = v.clone();
        want.sort_unstable_by_key(Obs::key);
        sort_observations(&mut v);
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
}
