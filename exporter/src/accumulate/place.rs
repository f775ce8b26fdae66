//! Where the samples of one pushed part go: each of its time-sorted samples to the window of
//! its timestamp, split where a window would pass `max_chunk_bytes`, or to a chunk of its own
//! when the window is past the lateness bound ([`plan`]); and its measurement values to the
//! destination their timestamp falls in ([`measurements`]).
//!
//! A plan depends only on the part and on the session's state (its newest sample, which of its
//! windows are open and how full), never on which other parts arrived before: so parts of one
//! window merge into the same chunk whatever order they come in, as long as they arrive within
//! the lateness bound and under the size limits.

use super::window::{Grid, Session};
use profilink_proto::sentry::{MeasurementValue, ProfileChunk};

/// What to do with a group of a part's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Add to open window `k` (opened if it is not).
    Join,
    /// Emit open window `k` (full: `max_chunk_bytes`), then open it again with these.
    Reopen,
    /// Window `k` is past the lateness bound: emit these as a chunk of their own.
    Late,
}

/// A group of a part's samples (indices into its samples, time-sorted) and where it goes.
#[derive(Debug)]
pub(super) struct Dest {
    /// The window.
    pub(super) k: i64,
    /// The earliest timestamp the group stands for (its window's start for the window's first
    /// group, else its first sample's), for the measurement values.
    pub(super) start: f64,
    pub(super) indices: Vec<usize>,
    pub(super) action: Action,
}

/// Measurement values of one destination: (key, unit, values).
pub(super) type Measurements = Vec<(String, String, Vec<MeasurementValue>)>;

/// The destinations of `sorted` (valid sample indices of `chunk`, time-sorted), each sample
/// estimated at `per_sample` bytes, with windows of `max` bytes, for `session` (`None`: a new
/// one). Samples of equal timestamps stay in one group (so the groups of a part cover disjoint
/// timestamp ranges, as [`crate::queue::consumed`] needs; a group may pass `max` by them).
pub(super) fn plan(
    grid: &Grid,
    session: Option<&Session>,
    chunk: &ProfileChunk,
    sorted: &[usize],
    per_sample: f64,
    max: f64,
) -> Vec<Dest> {
    let samples = &chunk.profile.samples;
    let mut out = Vec::new();
    let mut run_start = 0;
    while run_start < sorted.len() {
        let k = grid.index(samples[sorted[run_start]].timestamp);
        let run_end = run_start
            + sorted[run_start..]
                .iter()
                .position(|&i| grid.index(samples[i].timestamp) != k)
                .unwrap_or(sorted.len() - run_start);
        let late = session.is_some_and(|s| grid.expired(k, s.newest));
        let open = match session.and_then(|s| s.windows.get(&k)) {
            Some(w) if !late => Some(w.est_bytes() as f64),
            _ => None,
        };
        split_run(
            grid,
            k,
            &sorted[run_start..run_end],
            chunk,
            (late, open),
            per_sample,
            max,
            &mut out,
        );
        run_start = run_end;
    }
    out
}

/// Splits the samples of one window (`run`) into destinations by size. `state` is (late, the
/// size of the open window when there is one and it is not late).
#[allow(clippy::too_many_arguments)]
fn split_run(
    grid: &Grid,
    k: i64,
    run: &[usize],
    chunk: &ProfileChunk,
    state: (bool, Option<f64>),
    per_sample: f64,
    max: f64,
    out: &mut Vec<Dest>,
) {
    let (late, open) = state;
    let samples = &chunk.profile.samples;
    // A part is kept whole where it can be: when it does not fit in what the open window has
    // left, the window is cut before it, not in its middle.
    let run_bytes = run.len() as f64 * per_sample;
    let (mut action, mut base) = match open {
        Some(b) if b > 0.0 && b + run_bytes > max => (Action::Reopen, 0.0),
        Some(b) => (Action::Join, b),
        None if late => (Action::Late, 0.0),
        None => (Action::Join, 0.0),
    };
    let mut occupied = base > 0.0;
    let mut start = grid.start(k);
    let mut cur: Vec<usize> = Vec::with_capacity(run.len());
    let mut prev = f64::NAN;
    for &i in run {
        let ts = samples[i].timestamp;
        let size = base + (cur.len() as f64 + 1.0) * per_sample;
        let same_ts = !cur.is_empty() && ts == prev;
        if (occupied || !cur.is_empty()) && size > max && !same_ts {
            if !cur.is_empty() {
                out.push(Dest {
                    k,
                    start,
                    indices: std::mem::take(&mut cur),
                    action,
                });
                start = ts;
            }
            action = if late { Action::Late } else { Action::Reopen };
            base = 0.0;
            occupied = false;
        }
        cur.push(i);
        prev = ts;
    }
    if !cur.is_empty() {
        out.push(Dest {
            k,
            start,
            indices: cur,
            action,
        });
    }
}

/// The measurement values of `chunk` per destination of `dests` (in time order): each value
/// goes to the last destination starting at or before it, or to the first.
pub(super) fn measurements(chunk: &ProfileChunk, dests: &[Dest]) -> Vec<Measurements> {
    let mut out: Vec<Measurements> = vec![Vec::new(); dests.len()];
    if dests.is_empty() {
        return out;
    }
    for (name, m) in &chunk.measurements {
        let mut per_dest: Vec<Vec<MeasurementValue>> = vec![Vec::new(); dests.len()];
        for v in &m.values {
            let after = dests.partition_point(|d| d.start <= v.timestamp);
            per_dest[after.saturating_sub(1)].push(v.clone());
        }
        for (slot, values) in out.iter_mut().zip(per_dest) {
            if !values.is_empty() {
                slot.push((name.clone(), m.unit.clone(), values));
            }
        }
    }
    out
}

/// The timestamp of a sample of the destination [`measurements`] gives a value at `at`, for a
/// part whose valid sample timestamps are `sorted` (ascending, non-empty): the part's last
/// sample at or before `at`, unless the part has samples in `at`'s window and none of them is
/// at or before `at` (then its first sample in that window); the part's first sample when it
/// has none at or before `at`. A value's destination was persisted exactly when this sample
/// was.
pub(super) fn measurement_anchor(grid: &Grid, sorted: &[f64], at: f64) -> Option<f64> {
    let k = grid.index(at);
    let before = sorted.partition_point(|&t| t <= at);
    let last_le = before.checked_sub(1).map(|i| sorted[i]);
    let first_in_k = sorted.get(before).copied().filter(|&t| grid.index(t) == k);
    match (last_le, first_in_k) {
        (Some(t), _) if grid.index(t) == k => Some(t),
        (_, Some(t)) => Some(t),
        (Some(t), None) => Some(t),
        (None, None) => sorted.first().copied(),
    }
}
