//! Where a sample's observations go in its session: a short sample (all its observations
//! within the block span) joins the block the previous sample of its session went to when
//! both fit in the span, else opens one; a long sample is cut into blocks of at most the span
//! each, by index (of a sorted copy of its timestamps when they are out of order). The state
//! of one pass over a profile's samples is a [`Walk`].

use super::{Collector, ProfileSource};
use crate::otlp_to_sentry::observations::{Block, Part};
use crate::otlp_to_sentry::samples::{PerValue, expansion_count, scaled, spread, value_sum};
use profilink_proto::otlp::Sample;

/// One pass over the samples of one profile: its expansion rule and spread window, what the
/// pass counted, and what the previous samples leave to the next one.
pub(super) struct Walk<'a> {
    /// The profile's index in [`Collector::profiles`].
    profile: u32,
    per_value: PerValue,
    cap: u128,
    total: u128,
    /// The window aggregated observations are spread over: start and duration.
    start: u64,
    dur: u64,
    /// Longest span of a block of several samples.
    pub block_span: u64,
    /// Observations implied by the input (before the expansion cap).
    pub observations: u64,
    /// Observations not produced because of the expansion cap.
    pub dropped: u64,
    /// Observations whose link was unusable.
    pub unusable: u64,
    /// The previous sample's attribute list and its (session, thread): consecutive samples
    /// often share it, and skip the lookup then.
    pub last: Option<(&'a [i32], (u32, u32))>,
    /// The block the previous sample went to: (session, index in its blocks).
    pub open: Option<(u32, usize)>,
    /// The session last recorded as touched by this profile.
    pub touched: Option<u32>,
}

impl<'a> Walk<'a> {
    /// A pass over the profile `source`, at index `profile`.
    pub(super) fn new(profile: u32, source: &ProfileSource<'_>, block_span: u64) -> Self {
        let (start, dur) = source.spread_window();
        Walk {
            profile,
            per_value: source.per_value,
            cap: source.cap,
            total: source.total,
            start,
            dur,
            block_span,
            observations: 0,
            dropped: 0,
            unusable: 0,
            last: None,
            open: None,
            touched: None,
        }
    }

    /// The observations of sample `s`: how many, and the first and last of their times;
    /// counted in the pass (those its timestamps say, or those its aggregated values claim,
    /// of which the ones over the cap are dropped).
    pub(super) fn observations(&mut self, s: &Sample) -> (u64, u64, u64) {
        let ts = &s.timestamps_unix_nano;
        if !ts.is_empty() {
            let n = ts.len() as u64;
            self.observations = self.observations.saturating_add(n);
            let (min, max) = ts
                .iter()
                .fold((u64::MAX, 0), |(lo, hi), &t| (lo.min(t), hi.max(t)));
            (n, min, max)
        } else {
            let requested = expansion_count(self.per_value, value_sum(&s.values));
            let n = scaled(requested, self.cap, self.total);
            // Aggregated values are the producer's claim, up to i64::MAX each: the sums
            // saturate rather than overflow (they are statistics, not data).
            self.observations = self.observations.saturating_add(requested);
            self.dropped = self.dropped.saturating_add(requested - n);
            let last = n.saturating_sub(1);
            (
                n,
                spread(self.start, self.dur, 0, n),
                spread(self.start, self.dur, last, n),
            )
        }
    }
}

impl Collector<'_> {
    /// Places short sample `i` (its observations' times `span`: first, last) in `session`:
    /// in the block the previous sample went to when that is the session's, ends at `i`, and
    /// still fits the block span with it; else in a block of its own, left open for the next.
    pub(super) fn place_short(
        &mut self,
        walk: &mut Walk<'_>,
        session: u32,
        i: u32,
        (min, max): (u64, u64),
    ) {
        let sess = &mut self.sessions[session as usize];
        if let Some((bs, bi)) = walk.open
            && bs == session
        {
            let b = &mut sess.blocks[bi];
            let (lo, hi) = (b.min_ts.min(min), b.max_ts.max(max));
            if b.end == i && hi - lo <= walk.block_span {
                b.end = i + 1;
                b.min_ts = lo;
                b.max_ts = hi;
                return;
            }
        }
        walk.open = Some((session, sess.blocks.len()));
        sess.blocks.push(Block {
            profile: walk.profile,
            start: i,
            end: i + 1,
            part: Part::Whole,
            min_ts: min,
            max_ts: max,
        });
    }

    /// Cuts long sample `i` (`n` observations at times `ts`, or spread over the profile's
    /// window when it has none) into blocks of `session` of at most the block span each, by
    /// index: of a sorted copy of `ts` when its times decrease somewhere.
    pub(super) fn place_long(&mut self, walk: &Walk<'_>, session: u32, i: u32, ts: &[u64], n: u64) {
        let ordered = ts.is_empty() || ts.windows(2).all(|w| w[0] <= w[1]);
        let copy = if ordered {
            None
        } else {
            let mut v = ts.to_vec();
            v.sort_unstable();
            self.sorted.push(v);
            Some(self.sorted.len() - 1)
        };
        let sess = &mut self.sessions[session as usize];
        let at = |k: u64| match copy {
            Some(c) => self.sorted[c][k as usize],
            None if ts.is_empty() => spread(walk.start, walk.dur, k, n),
            None => ts[k as usize],
        };
        let mut lo = 0u64;
        while lo < n {
            let first = at(lo);
            let limit = first.saturating_add(walk.block_span);
            // The first index past `limit` (times never decrease): binary search.
            let (mut a, mut b) = (lo + 1, n);
            while a < b {
                let mid = a + (b - a) / 2;
                if at(mid) <= limit {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            sess.blocks.push(Block {
                profile: walk.profile,
                start: i,
                end: i + 1,
                part: match copy {
                    Some(c) => Part::Sorted {
                        sorted: c as u32,
                        lo,
                        hi: a,
                    },
                    None => Part::Range(lo, a),
                },
                min_ts: first,
                max_ts: at(a - 1),
            });
            lo = a;
        }
    }
}
