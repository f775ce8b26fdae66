//! Chunk accumulation: the short chunks of one profiler session become chunks of the session's
//! samples per time-aligned window of `chunk_duration` (default 60 s).
//!
//! Producers such as the eBPF profiler report every 5 s, which translates into 5 s chunks;
//! Sentry expects a chunk per minute per profiler session. [`ChunkAccumulator`] keeps, per
//! session (key: route, profiler id, platform), **open windows aligned to time**: window `k`
//! holds the samples with timestamps in `[k * chunk_duration, (k + 1) * chunk_duration)` on the
//! Unix epoch. Where a sample goes depends on its timestamp, not on when it arrived, so a
//! session's chunk for a window is the same whatever order its parts arrive in (and whichever
//! replica or restart merges them), and its id, derived from its content
//! ([`crate::merge::merged_chunk_id`]), too.
//!
//! A session keeps **several open windows within a lateness bound**: its *newest* sample time
//! (the largest timestamp it has seen) is its watermark, and a window stays open for samples
//! read out of order until the watermark is `chunk_lateness` (default 10 min) past the
//! window's end, so a backlog read minutes out of order (a Kafka topic spread over partitions,
//! replicas, retries) still merges. A window is emitted
//! * when the session's newest sample passes its end by `chunk_lateness` (reason
//!   [`EmitReason::Duration`]),
//! * when the newest sample has passed its end and no sample joined it for half of
//!   `chunk_idle_timeout` ([`EmitReason::Settled`], [`ChunkAccumulator::poll`]): a live
//!   producer has moved on, so its finished windows go out within seconds instead of waiting
//!   out the lateness bound,
//! * when adding would push its estimated serialized size past `max_chunk_bytes` (it is cut,
//!   and a new chunk of the same window starts: [`EmitReason::Size`]),
//! * when all open windows together would hold more than `max_open_bytes`: the windows samples
//!   joined least recently (over every session) are cut early ([`EmitReason::Memory`]; counted as
//!   `profilink_exporter_chunks_cut_early_total{reason="memory"}` and logged, at most once a
//!   minute),
//! * when the session saw no new samples for `chunk_idle_timeout`: all its windows
//!   ([`EmitReason::Idle`], [`ChunkAccumulator::poll`]),
//! * on [`ChunkAccumulator::flush_all`] (shutdown).
//!
//! Samples for a window already past the lateness bound when they arrive (older than any
//! window the session may still hold open) are emitted at once, as chunks of their own per
//! window ([`EmitReason::Late`]). Samples for a window that was emitted for another reason
//! (settled, size, memory, idle) start it again: a second chunk of that window.
//!
//! **Sparse threads.** Only a finished chunk's thread counts are final, so this is where threads
//! Relay would drop (fewer than 2 samples with a stack) are handled, as `sparse_threads` says:
//! grouped ([`ThreadGroups`](profilink_proto::sentry::ThreadGroups), the default) and then, if still sparse,
//! dropped and counted. Each input comes with the thread ids that spans may reference (its
//! linked threads); a window keeps the union of its inputs' sets, and those threads are never
//! grouped, so the thread id a span stamping wrote for a linked sample is the one it is sent
//! under.
//!
//! Every input is identified by its queue id. An input may end up in several emitted chunks
//! (its samples span windows); [`ChunkAccumulator::release`] tells which inputs are fully
//! covered by persisted output and may be acknowledged, and each emitted chunk lists the
//! timestamp range it took from each input part ([`Emitted::consumed`], see
//! [`crate::queue::consumed`]). A part's time-sorted samples are only ever cut between distinct
//! timestamps (windows are disjoint time ranges, and a window's size cuts fall between distinct
//! timestamps), so these ranges are disjoint. Replaying the unacknowledged inputs after a
//! restart, less what persisted chunks hold, puts every sample back into the window of its
//! timestamp: the open windows are rebuilt as they were. Time is passed in (`now`), so tests
//! need no sleeps.
//!
//! Files: this one holds the [`ChunkAccumulator`] and its closing rules; `window` the time grid,
//! the windows and the sessions; `place` where a part's samples go; `session` the session keys
//! and the [`Emitted`] chunks.

mod pair;
mod place;
mod session;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_order;
#[cfg(test)]
mod tests_pair;
mod window;

pub use crate::emit_reason::EmitReason;
pub use session::{Emitted, PushOutcome, SessionKey};

use crate::config::AccumulateConfig;
use crate::merge::ChunkBuilder;
use crate::queue::consumed::Consumed;
use place::Action;
use profilink_proto::sentry::{CompactString, ProfileChunk};
use session::SessionRef;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::time::{Duration, Instant};
use window::{Grid, Session, Window};

type SessionMap = hashbrown::HashMap<SessionKey, Session>;

/// How often, at most, the memory bound's cuts are logged.
const CUT_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Stale entries the memory bound's index may hold beyond twice the open windows it was built
/// from, before it is built again.
const LRU_SLACK: usize = 1 << 10;

/// Open windows by when samples last joined them (`last_added`, window, session), the least
/// recent on top, for the memory bound. Entries are added as samples join, never removed: an
/// entry whose window is gone or has joined samples since is stale and skipped.
type Lru = BinaryHeap<Reverse<(Instant, i64, SessionKey)>>;

/// Merges chunks per profiler session into time-aligned windows. See the module docs.
#[derive(Debug)]
pub struct ChunkAccumulator {
    cfg: AccumulateConfig,
    grid: Grid,
    sessions: SessionMap,
    pending: HashMap<u64, u32>,
    /// The size estimate of every open window together.
    open_bytes: u64,
    /// When the memory bound's cuts were last logged, and the cuts since.
    cut_log: (Option<Instant>, u64),
    /// `Some(t)`: [`ChunkAccumulator::poll`] emits nothing before `t` (a lower bound of every
    /// session's deadline); `None`: unknown, the next poll looks.
    poll_due: Option<Instant>,
    /// The memory bound's index, kept only while the bound is being reached (see [`Lru`]),
    /// with the number of windows it was built from.
    lru: Option<(Lru, usize)>,
}

impl ChunkAccumulator {
    /// An empty accumulator.
    pub fn new(cfg: AccumulateConfig) -> Self {
        ChunkAccumulator {
            grid: Grid::new(&cfg),
            cfg,
            sessions: SessionMap::default(),
            pending: HashMap::new(),
            open_bytes: 0,
            cut_log: (None, 0),
            poll_due: None,
            lru: None,
        }
    }

    /// Open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Open windows, over every session.
    pub fn window_count(&self) -> usize {
        self.sessions.values().map(|s| s.windows.len()).sum()
    }

    /// The size estimate of every open window together (what `max_open_bytes` bounds).
    pub fn open_bytes(&self) -> u64 {
        self.open_bytes
    }

    /// Samples held in open windows.
    pub fn pending_samples(&self) -> usize {
        self.sessions
            .values()
            .flat_map(|s| s.windows.values())
            .map(|w| w.builder.sample_count())
            .sum()
    }

    /// How many open or unpersisted chunks hold samples of input `id`.
    pub fn pending_count(&self, id: u64) -> u32 {
        self.pending.get(&id).copied().unwrap_or(0)
    }

    /// How long a passed window waits for more samples: half of `chunk_idle_timeout`.
    fn settle(&self) -> Duration {
        self.cfg.chunk_idle_timeout / 2
    }

    /// The earliest instant at which [`ChunkAccumulator::poll`] will emit something.
    pub fn next_deadline(&self) -> Option<Instant> {
        let (idle, settle) = (self.cfg.chunk_idle_timeout, self.settle());
        self.sessions
            .values()
            .map(|s| s.deadline(&self.grid, idle, settle))
            .min()
    }

    /// Adds input `id` (a chunk routed by `route`, of about `approx_bytes` serialized).
    pub fn push(
        &mut self,
        id: u64,
        route: &str,
        chunk: &ProfileChunk,
        approx_bytes: u64,
        now: Instant,
    ) -> PushOutcome {
        let mut out = PushOutcome::default();
        self.push_part(
            id,
            0,
            route,
            chunk,
            &[],
            None,
            approx_bytes,
            now,
            &mut out.emitted,
        );
        if self.finish_input(id) {
            out.ack_now.push(id);
        }
        out
    }

    /// True when input `id` is held by no open or unpersisted chunk (it contributed no valid
    /// samples): acknowledge it now. Call once every chunk of the input is pushed.
    pub fn finish_input(&self, id: u64) -> bool {
        !self.pending.contains_key(&id)
    }

    /// Adds one chunk (number `part` of the record) of input `id`, appending completed chunks
    /// to `emitted`. An input may hold
    /// several chunks (a queue record holds a whole `export` batch): push each, then call
    /// [`ChunkAccumulator::finish_input`]. Each open or emitted chunk counts an input once,
    /// however many of its chunks went into it.
    ///
    /// `linked` lists the chunk's thread ids that spans may reference (never grouped, see the
    /// module docs). `frame_hashes`, when given, holds the [`crate::merge::frame_hash`] of each
    /// of the chunk's frames (the queue encoding computes them once per distinct frame of a
    /// batch).
    #[allow(clippy::too_many_arguments)]
    pub fn push_part(
        &mut self,
        id: u64,
        part: u32,
        route: &str,
        chunk: &ProfileChunk,
        linked: &[CompactString],
        frame_hashes: Option<&[u64]>,
        approx_bytes: u64,
        now: Instant,
        emitted: &mut Vec<Emitted>,
    ) {
        let key = SessionRef {
            route,
            profiler_id: &chunk.profiler_id,
            platform: &chunk.platform,
        };
        let samples = &chunk.profile.samples;
        let mut sorted: Vec<usize> = Vec::with_capacity(samples.len());
        sorted.extend((0..samples.len()).filter(|&i| samples[i].timestamp.is_finite()));
        sorted.sort_by(|&a, &b| samples[a].timestamp.total_cmp(&samples[b].timestamp));
        let Some(&last) = sorted.last() else {
            return;
        };
        let newest = samples[last].timestamp;
        let per_sample = approx_bytes as f64 / sorted.len() as f64;
        let max = self.cfg.max_chunk_bytes.max(1) as f64;
        let dests = place::plan(
            &self.grid,
            self.sessions.get(&key),
            chunk,
            &sorted,
            per_sample,
            max,
        );
        let measurements = place::measurements(chunk, &dests);
        if !self.sessions.contains_key(&key) {
            self.sessions.insert(key.owned(), Session::new(now));
        }
        let policy = self.cfg.sparse_threads;
        let mut owned: Option<SessionKey> = None;
        let mut touched: Vec<i64> = Vec::new();
        for (dest, meas) in dests.into_iter().zip(measurements) {
            let bytes = (dest.indices.len() as f64 * per_sample) as u64;
            let consumed = range_of(id, part, chunk, &dest.indices);
            if dest.action == Action::Late {
                let mut builder = ChunkBuilder::new(chunk);
                builder.add_hashed(chunk, frame_hashes, &dest.indices, &meas, bytes);
                *self.pending.entry(id).or_insert(0) += 1;
                let linked: BTreeSet<CompactString> = linked.iter().cloned().collect();
                emitted.push(Emitted::finished(
                    key.owned(),
                    builder,
                    &linked,
                    policy,
                    vec![id],
                    vec![consumed],
                    EmitReason::Late,
                ));
                continue;
            }
            if dest.action == Action::Reopen {
                let k = owned.get_or_insert_with(|| key.owned()).clone();
                self.emit(&k, dest.k, EmitReason::Size, emitted);
            }
            let Some(session) = self.sessions.get_mut(&key) else {
                return;
            };
            let w = session
                .windows
                .entry(dest.k)
                .or_insert_with(|| Window::new(chunk, now));
            w.builder
                .add_hashed(chunk, frame_hashes, &dest.indices, &meas, bytes);
            let ts = |i: Option<&usize>| i.map(|&i| chunk.profile.samples[i].timestamp);
            if let (Some(first), Some(last)) = (ts(dest.indices.first()), ts(dest.indices.last())) {
                w.first = w.first.min(first);
                w.last = w.last.max(last);
            }
            self.open_bytes = self.open_bytes.saturating_add(bytes);
            w.consumed.push(consumed);
            if w.inputs.insert(id) {
                *self.pending.entry(id).or_insert(0) += 1;
            }
            w.linked.extend(linked.iter().cloned());
            w.last_added = now;
            if let Some((lru, _)) = &mut self.lru {
                lru.push(Reverse((now, dest.k, key.owned())));
            }
            if touched.last() != Some(&dest.k) {
                touched.push(dest.k);
            }
        }
        let Some(session) = self.sessions.get_mut(&key) else {
            return;
        };
        session.newest = session.newest.max(newest);
        session.last_activity = now;
        // Windows the newest sample passed by the lateness bound, and held windows next to
        // the ones samples joined.
        let expired: Vec<i64> = session
            .windows
            .keys()
            .copied()
            .take_while(|&k| self.grid.expired(k, session.newest))
            .collect();
        let any_held = session.windows.values().any(|w| w.held.is_some());
        if !expired.is_empty() || any_held {
            let key = owned.unwrap_or_else(|| key.owned());
            if any_held {
                for k in touched {
                    self.recheck(&key, k, emitted);
                }
            }
            for k in expired {
                self.close(&key, k, EmitReason::Duration, emitted);
            }
        }
        // Only this session's deadline may have come closer (its newest sample passed windows).
        if let (Some(due), Some(s)) = (self.poll_due, self.sessions.get(&key)) {
            let d = s.deadline(&self.grid, self.cfg.chunk_idle_timeout, self.settle());
            self.poll_due = Some(due.min(d));
        }
        self.bound_memory(now, emitted);
    }

    /// Cuts open windows while all of them together hold more than `max_open_bytes`, the one
    /// samples joined least recently first (then the oldest window, then by session): the one
    /// least likely to get more. (Not the oldest by sample time: sessions read from a backlog
    /// are at different times, and the oldest window may be one still filling.) Logs it at
    /// most once per [`CUT_LOG_INTERVAL`].
    fn bound_memory(&mut self, now: Instant, emitted: &mut Vec<Emitted>) {
        let max = self.cfg.max_open_bytes;
        if self.open_bytes <= max {
            if self
                .lru
                .as_ref()
                .is_some_and(|(l, built)| l.len() > built + LRU_SLACK)
            {
                self.lru = None;
            }
            return;
        }
        let (mut lru, built) = match self.lru.take() {
            Some((l, built)) if l.len() <= 2 * built + LRU_SLACK => (l, built),
            _ => {
                let l = self.lru_of_open_windows();
                let n = l.len();
                (l, n)
            }
        };
        let mut cut = 0u64;
        while self.open_bytes > max {
            let Some(Reverse((at, k, key))) = lru.pop() else {
                break;
            };
            let live = self
                .sessions
                .get(&key)
                .and_then(|s| s.windows.get(&k))
                .is_some_and(|w| w.last_added == at);
            if !live {
                continue;
            }
            let before = self.open_bytes;
            self.emit(&key, k, EmitReason::Memory, emitted);
            if self.open_bytes == before {
                break;
            }
            cut += 1;
        }
        self.lru = Some((lru, built));
        if cut == 0 {
            return;
        }
        self.cut_log.1 += cut;
        let (last, pending_cuts) = self.cut_log;
        if last.is_none_or(|t| now.saturating_duration_since(t) >= CUT_LOG_INTERVAL) {
            tracing::warn!(
                windows_cut = pending_cuts,
                max_open_bytes = max,
                windows_open = self.window_count(),
                "chunk accumulation: open windows hold more than max_open_bytes; the oldest were cut early (more, shorter chunks)"
            );
            self.cut_log = (Some(now), 0);
        }
    }

    /// Every open window in the memory bound's index.
    fn lru_of_open_windows(&self) -> Lru {
        self.sessions
            .iter()
            .flat_map(|(key, s)| {
                s.windows
                    .iter()
                    .map(move |(k, w)| Reverse((w.last_added, *k, key.clone())))
            })
            .collect()
    }

    /// Emits, at `now`, every window of sessions idle for `chunk_idle_timeout`, and the
    /// windows the newest sample has passed that no sample joined for half of it.
    pub fn poll(&mut self, now: Instant) -> Vec<Emitted> {
        if self.poll_due.is_some_and(|due| now < due) {
            return Vec::new();
        }
        let out = self.poll_all(now);
        self.poll_due = self.next_deadline();
        out
    }

    /// [`ChunkAccumulator::poll`], looking at every session.
    fn poll_all(&mut self, now: Instant) -> Vec<Emitted> {
        let idle = self.cfg.chunk_idle_timeout;
        let settle = self.settle();
        let mut due: Vec<(SessionKey, Option<Vec<i64>>)> = self
            .sessions
            .iter()
            .filter_map(|(key, s)| {
                if s.idle(now, idle) {
                    return Some((key.clone(), None));
                }
                let settled = s.settled(&self.grid, now, settle);
                (!settled.is_empty()).then(|| (key.clone(), Some(settled)))
            })
            .collect();
        due.sort();
        let mut out = Vec::new();
        for (key, windows) in due {
            match windows {
                None => self.take(key, EmitReason::Idle, &mut out),
                Some(ks) => {
                    for k in ks {
                        self.close(&key, k, EmitReason::Settled, &mut out);
                    }
                }
            }
        }
        out
    }

    /// Emits every open window (shutdown).
    pub fn flush_all(&mut self) -> Vec<Emitted> {
        let mut keys: Vec<SessionKey> = self.sessions.keys().cloned().collect();
        keys.sort();
        let mut out = Vec::new();
        for k in keys {
            self.take(k, EmitReason::Flush, &mut out);
        }
        out
    }

    /// Ends session `key`, emitting its windows oldest first.
    fn take(&mut self, key: SessionKey, reason: EmitReason, out: &mut Vec<Emitted>) {
        if let Some(s) = self.sessions.remove(&key) {
            self.end_session(key, s, reason, out);
        }
    }

    /// Removes from a replayed part what persisted chunks already hold (`consumed` says which
    /// of its sample timestamps): those samples, and the measurement values that went with
    /// them (see `place::measurements`), so neither is sent twice. Returns how many samples
    /// were removed.
    pub fn filter_replayed(
        &self,
        chunk: &mut ProfileChunk,
        consumed: impl Fn(f64) -> bool,
    ) -> usize {
        let mut sorted: Vec<f64> = chunk
            .profile
            .samples
            .iter()
            .map(|s| s.timestamp)
            .filter(|t| t.is_finite())
            .collect();
        sorted.sort_by(f64::total_cmp);
        for m in chunk.measurements.values_mut() {
            m.values.retain(|v| {
                !place::measurement_anchor(&self.grid, &sorted, v.timestamp).is_some_and(&consumed)
            });
        }
        chunk.measurements.retain(|_, m| !m.values.is_empty());
        let before = chunk.profile.samples.len();
        chunk.profile.samples.retain(|s| !consumed(s.timestamp));
        before - chunk.profile.samples.len()
    }

    /// Records that an emitted chunk covering `inputs` is persisted (or given up); returns the
    /// inputs no longer needed by any open or unpersisted chunk, which may be acknowledged.
    pub fn release(&mut self, inputs: &[u64]) -> Vec<u64> {
        let mut done = Vec::new();
        for id in inputs {
            if let Some(n) = self.pending.get_mut(id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.pending.remove(id);
                    done.push(*id);
                }
            }
        }
        done
    }
}

/// The chunk of window `w` of session `key`.
fn finish_window(
    key: SessionKey,
    w: Window,
    policy: crate::config::SparseThreads,
    reason: EmitReason,
) -> Emitted {
    let inputs: Vec<u64> = w.inputs.into_iter().collect();
    Emitted::finished(
        key, w.builder, &w.linked, policy, inputs, w.consumed, reason,
    )
}

/// The timestamp range of `indices` (sorted by timestamp, non-empty) of a part.
fn range_of(id: u64, part: u32, chunk: &ProfileChunk, indices: &[usize]) -> Consumed {
    let ts = |i: Option<&usize>| i.map_or(0.0, |&i| chunk.profile.samples[i].timestamp);
    Consumed::new(id, part, ts(indices.first()), ts(indices.last()))
}
