//! A session's observations, made one window at a time from its [`Block`]s.
//!
//! Chunks are cut greedily in time order (see [`super::split`]): a chunk starting at time `t`
//! takes observations up to `t + max_chunk_duration_ns`. So before a chunk is cut, the window
//! must hold every observation of the session up to that time, sorted, and nothing more is
//! needed. The blocks are read in order of their earliest observation: once the blocks starting
//! at or before `target` are read, every observation up to `target` is known. Observations of
//! those blocks that lie beyond `target` wait (`pending`) for a later window; a block spans at
//! most the block span (a quarter of the chunk duration), so the window holds at most the
//! chunk duration plus the block span of observations. `pending` is scanned once per chunk cut
//! (at most one block span of observations; a scan is far cheaper than the chunk, even one cut
//! by size at 8 MiB of JSON).
//!
//! [`Held`] reports the most the window held at once, which the tests check against those
//! bounds.

use super::collect::ProfileSource;
use super::observations::{Block, LinkedObs, Obs, Part, SampleRef, Session};
use super::samples::spread;
use super::sort::sort_observations;

/// What a translation held at most at once while cutting chunks (see
/// [`ChunkTranslation::held`](super::ChunkTranslation::held)).
///
/// Sessions are cut one after the other, and each session's observations are made one window
/// at a time from the request (which the caller holds anyway), so these are bounded by one
/// window of one session, not by the request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Most observations held at once (the open window, including the chunk being cut, and
    /// the observations read ahead of it).
    pub peak_observations: u64,
    /// Widest time span (latest minus earliest, in nanoseconds) of the observations held at
    /// once: at most the chunk duration plus a quarter of it.
    pub peak_span_ns: u64,
    /// Most sessions with observations held at once: 1 (0 without observations).
    pub peak_sessions: u64,
}

/// The request's translated samples, as the collector resolved them.
pub(crate) struct Sources<'r, 'a> {
    /// Translated profiles.
    pub profiles: &'r [ProfileSource<'a>],
    /// Their samples' refs.
    pub refs: &'r [SampleRef],
    /// Sorted copies of the timestamps of long samples whose timestamps are out of order.
    pub sorted: &'r [Vec<u64>],
}

/// The open window of the session being cut, and reused buffers.
#[derive(Default)]
pub(crate) struct Window {
    /// Observations up to `bound`, sorted; those before `cursor` are in chunks already.
    pub ready: Vec<Obs>,
    /// First observation of `ready` not cut yet.
    pub cursor: usize,
    /// The linked observations of `ready`, sorted.
    pub ready_linked: Vec<LinkedObs>,
    /// First linked observation not matched yet.
    pub link_cursor: usize,
    /// Observations read beyond `bound`.
    pending: Vec<Obs>,
    pending_linked: Vec<LinkedObs>,
    /// Observations being added to `ready`.
    batch: Vec<Obs>,
    batch_linked: Vec<LinkedObs>,
    scratch: Vec<Obs>,
    scratch_linked: Vec<LinkedObs>,
    /// The session's blocks in order of their earliest observation, and the next to read.
    order: Vec<u32>,
    next: usize,
    /// Every observation of the session up to this time is in `ready`.
    bound: Option<u64>,
    /// The most held so far.
    pub held: Held,
    /// Read each session whole at its first window (the tests' oracle).
    whole: bool,
}

impl Window {
    /// A window; `whole`: each session is read whole at once (as before windows existed).
    pub(crate) fn new(whole: bool) -> Self {
        Window {
            whole,
            ..Window::default()
        }
    }

    /// Opens the window on a session: nothing read yet.
    pub(crate) fn start(&mut self, s: &Session) {
        self.finish();
        self.next = 0;
        self.bound = None;
        self.order.clear();
        self.order.extend(0..s.blocks.len() as u32);
        // Stable: blocks starting together are read in input order.
        self.order.sort_by_key(|&b| s.blocks[b as usize].min_ts);
        if s.observations > 0 {
            self.held.peak_sessions = self.held.peak_sessions.max(1);
        }
    }

    /// Closes the window (its buffers keep their capacity for the next session).
    pub(crate) fn finish(&mut self) {
        self.ready.clear();
        self.ready_linked.clear();
        self.pending.clear();
        self.pending_linked.clear();
        self.cursor = 0;
        self.link_cursor = 0;
    }

    /// The time of the session's earliest observation not cut yet, if any is left.
    pub(crate) fn next_time(&self, s: &Session) -> Option<u64> {
        if let Some(o) = self.ready.get(self.cursor) {
            return Some(o.ts);
        }
        let pending = self.pending.iter().map(|o| o.ts).min();
        let block = self
            .order
            .get(self.next)
            .map(|&b| s.blocks[b as usize].min_ts);
        match (pending, block) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Makes `ready` hold every observation of the session up to `target` (sorted, after
    /// those already there).
    pub(crate) fn fill_to(&mut self, target: u64, s: &Session, src: &Sources<'_, '_>) {
        let target = if self.whole { u64::MAX } else { target };
        if self.bound.is_some_and(|b| b >= target) {
            return;
        }
        // What was cut leaves the window.
        self.ready.drain(..self.cursor);
        self.cursor = 0;
        self.ready_linked.drain(..self.link_cursor);
        self.link_cursor = 0;
        self.batch.clear();
        self.batch_linked.clear();
        // Observations read before, now within the window.
        let (mut i, mut j) = (0, 0);
        while i < self.pending.len() {
            let o = self.pending[i];
            if o.ts <= target {
                self.batch.push(o);
                self.pending.swap_remove(i);
            } else {
                i += 1;
            }
        }
        while j < self.pending_linked.len() {
            let l = self.pending_linked[j];
            if (l.key >> 64) as u64 <= target {
                self.batch_linked.push(l);
                self.pending_linked.swap_remove(j);
            } else {
                j += 1;
            }
        }
        // Blocks starting within the window.
        while let Some(&b) = self.order.get(self.next) {
            let block = &s.blocks[b as usize];
            if block.min_ts > target {
                break;
            }
            self.next += 1;
            self.read(block, target, src);
        }
        sort_observations(&mut self.batch, &mut self.scratch, |_| {});
        sort_observations(&mut self.batch_linked, &mut self.scratch_linked, |_| {});
        // Usually the last chunk took all that was ready: then the batch becomes the window.
        if self.ready.is_empty() {
            std::mem::swap(&mut self.ready, &mut self.batch);
        } else {
            self.ready.extend_from_slice(&self.batch);
        }
        if self.ready_linked.is_empty() {
            std::mem::swap(&mut self.ready_linked, &mut self.batch_linked);
        } else {
            self.ready_linked.extend_from_slice(&self.batch_linked);
        }
        self.bound = Some(target);
        self.note_held();
    }

    /// Reads a block's observations: those up to `target` into the batch, the others into
    /// `pending`.
    fn read(&mut self, block: &Block, target: u64, src: &Sources<'_, '_>) {
        let p = &src.profiles[block.profile as usize];
        let samples = &p.profile.samples[block.start as usize..block.end as usize];
        let refs = &src.refs[p.refs + block.start as usize..p.refs + block.end as usize];
        if block.max_ts <= target && block.part == Part::Whole {
            // All within the window (the common case): no branch per observation.
            for (s, r) in samples.iter().zip(refs) {
                let obs = |ts: u64| Obs {
                    ts,
                    thread: r.thread,
                    stack: r.stack,
                };
                let before = self.batch.len();
                if !s.timestamps_unix_nano.is_empty() {
                    self.batch
                        .extend(s.timestamps_unix_nano.iter().map(|&t| obs(t)));
                } else {
                    let n = p.expansions(s);
                    let (start, dur) = p.spread_window();
                    self.batch
                        .extend((0..n).map(|i| obs(spread(start, dur, i, n))));
                }
                if r.link != 0 {
                    let link = r.link;
                    self.batch_linked.extend(
                        self.batch[before..]
                            .iter()
                            .map(|o| LinkedObs { key: o.key(), link }),
                    );
                }
            }
            return;
        }
        for (s, &r) in samples.iter().zip(refs) {
            let mut add = |ts: u64| {
                let o = Obs {
                    ts,
                    thread: r.thread,
                    stack: r.stack,
                };
                let within = ts <= target;
                if within {
                    self.batch.push(o);
                } else {
                    self.pending.push(o);
                }
                if r.link != 0 {
                    let l = LinkedObs {
                        key: o.key(),
                        link: r.link,
                    };
                    if within {
                        self.batch_linked.push(l);
                    } else {
                        self.pending_linked.push(l);
                    }
                }
            };
            if !s.timestamps_unix_nano.is_empty() {
                let ts = match block.part {
                    Part::Whole => &s.timestamps_unix_nano[..],
                    Part::Range(lo, hi) => &s.timestamps_unix_nano[lo as usize..hi as usize],
                    Part::Sorted { sorted, lo, hi } => {
                        &src.sorted[sorted as usize][lo as usize..hi as usize]
                    }
                };
                ts.iter().for_each(|&t| add(t));
            } else {
                let n = p.expansions(s);
                let (start, dur) = p.spread_window();
                let (lo, hi) = match block.part {
                    Part::Range(lo, hi) | Part::Sorted { lo, hi, .. } => (lo, hi),
                    Part::Whole => (0, n),
                };
                (lo..hi).for_each(|i| add(spread(start, dur, i, n)));
            }
        }
    }

    /// Records what the window holds now.
    fn note_held(&mut self) {
        let held = &mut self.held;
        let n = (self.ready.len() - self.cursor + self.pending.len()) as u64;
        held.peak_observations = held.peak_observations.max(n);
        let (mut min, mut max) = (u64::MAX, 0);
        if let (Some(a), Some(b)) = (self.ready.get(self.cursor), self.ready.last()) {
            (min, max) = (a.ts, b.ts);
        }
        for o in &self.pending {
            min = min.min(o.ts);
            max = max.max(o.ts);
        }
        if n > 0 {
            held.peak_span_ns = held.peak_span_ns.max(max - min);
        }
    }
}
