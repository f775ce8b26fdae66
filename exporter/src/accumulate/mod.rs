//! Chunk accumulation: many short chunks of one profiler session become chunks of up to
//! `chunk_duration` (default 60 s) of samples.
//!
//! Producers such as the eBPF profiler report every 5 s, which translates into 5 s chunks;
//! Sentry expects a chunk per minute per profiler session. [`ChunkAccumulator`] keeps one open
//! window per session (key: route, profiler id, platform) anchored at its first sample, and
//! emits a merged chunk
//! * when a sample at or past `window start + chunk_duration` arrives (the incoming chunk is
//!   split at the boundary, so no emitted chunk spans `chunk_duration` or more),
//! * when adding would push the estimated serialized size past `max_chunk_bytes`,
//! * when the session saw no new samples for `chunk_idle_timeout` ([`ChunkAccumulator::poll`]),
//! * on [`ChunkAccumulator::flush_all`] (shutdown).
//!
//! Samples older than the open window (late data) join it when the window, moved back to
//! start at them, still holds everything the session has (its newest sample less than
//! `chunk_duration` after them): parts read out of order merge as if read in order. Older
//! samples are emitted at once as their own chunk.
//!
//! **Sparse threads.** Only a finished chunk's thread counts are final, so this is where threads
//! Relay would drop (fewer than 2 samples with a stack) are handled, as `sparse_threads` says:
//! grouped ([`ThreadGroups`](profilink_proto::sentry::ThreadGroups), the default) and then, if still sparse,
//! dropped and counted. Each input comes with the thread ids that spans may reference (its
//! linked threads); a session keeps the union of its inputs' sets, and those threads are never
//! grouped, so the thread id a span stamping wrote for a linked sample is the one it is sent
//! under.
//!
//! Every input is identified by its queue id. An input may end up in several emitted chunks
//! (when split); [`ChunkAccumulator::release`] tells which inputs are fully covered by persisted
//! output and may be acknowledged, and each emitted chunk lists the timestamp range it took
//! from each input part ([`Emitted::consumed`], see [`crate::queue::consumed`]). A part's
//! time-sorted samples are only ever cut between distinct timestamps, so these ranges are
//! disjoint. Time is passed in (`now`), so tests need no sleeps.
//!
//! Files: this one holds the [`ChunkAccumulator`]; `session` the session keys and the
//! [`Emitted`] chunks.

mod session;
#[cfg(test)]
mod tests;

pub use session::{EmitReason, Emitted, PushOutcome, SessionKey};

use crate::config::AccumulateConfig;
use crate::merge::ChunkBuilder;
use crate::queue::consumed::Consumed;
use profilink_proto::sentry::{CompactString, MeasurementValue, ProfileChunk};
use session::SessionRef;
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

type SessionMap = hashbrown::HashMap<SessionKey, Session>;

#[derive(Debug)]
struct Session {
    builder: ChunkBuilder,
    window_start: f64,
    inputs: BTreeSet<u64>,
    consumed: Vec<Consumed>,
    /// Thread ids spans may reference, over every input merged into the chunk.
    linked: BTreeSet<CompactString>,
    last_activity: Instant,
}

/// Merges chunks per profiler session. See the module docs.
#[derive(Debug)]
pub struct ChunkAccumulator {
    cfg: AccumulateConfig,
    sessions: SessionMap,
    pending: HashMap<u64, u32>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dest {
    Session,
    Group(usize),
}

impl ChunkAccumulator {
    /// An empty accumulator.
    pub fn new(cfg: AccumulateConfig) -> Self {
        ChunkAccumulator {
            cfg,
            sessions: SessionMap::default(),
            pending: HashMap::new(),
        }
    }

    /// Open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Samples held in open sessions.
    pub fn pending_samples(&self) -> usize {
        self.sessions
            .values()
            .map(|s| s.builder.sample_count())
            .sum()
    }

    /// How many open or unpersisted chunks hold samples of input `id`.
    pub fn pending_count(&self, id: u64) -> u32 {
        self.pending.get(&id).copied().unwrap_or(0)
    }

    /// The earliest instant at which [`ChunkAccumulator::poll`] will emit something.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.sessions
            .values()
            .map(|s| s.last_activity + self.cfg.chunk_idle_timeout)
            .min()
    }

    fn window(&self) -> f64 {
        self.cfg.chunk_duration.as_secs_f64().max(1e-6)
    }

    fn max_bytes(&self) -> u64 {
        self.cfg.max_chunk_bytes.max(1)
    }

    /// Splits sorted sample indices into groups that each span less than the window and stay
    /// under the size limit. Samples with equal timestamps stay in one group (so each group
    /// of a part covers its own timestamp range; a group may pass the size limit by them).
    fn partition(
        &self,
        chunk: &ProfileChunk,
        sorted: &[usize],
        per_sample: f64,
    ) -> Vec<Vec<usize>> {
        let window = self.window();
        let max = self.max_bytes() as f64;
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut start = 0.0;
        let mut prev = f64::NAN;
        for &i in sorted {
            let ts = chunk.profile.samples[i].timestamp;
            let fits = groups.last().is_some_and(|g| {
                ts < start + window && (ts == prev || (g.len() as f64 + 1.0) * per_sample <= max)
            });
            prev = ts;
            if fits {
                if let Some(g) = groups.last_mut() {
                    g.push(i);
                }
            } else {
                start = ts;
                groups.push(vec![i]);
            }
        }
        groups
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
        let out = emitted;
        let key = SessionRef {
            route,
            profiler_id: &chunk.profiler_id,
            platform: &chunk.platform,
        };
        let samples = &chunk.profile.samples;
        let mut sorted: Vec<usize> = Vec::with_capacity(samples.len());
        sorted.extend((0..samples.len()).filter(|&i| samples[i].timestamp.is_finite()));
        sorted.sort_by(|&a, &b| samples[a].timestamp.total_cmp(&samples[b].timestamp));
        if sorted.is_empty() {
            return;
        }
        let per_sample = approx_bytes as f64 / sorted.len() as f64;
        let window = self.window();
        let max = self.max_bytes();

        let (mut late, mut in_win, mut after) = (Vec::new(), Vec::new(), Vec::new());
        let mut flush_first = false;
        match self.sessions.get(&key) {
            Some(s) => {
                // Mostly all of them: the window is open and the input continues it.
                in_win.reserve(sorted.len());
                for &i in &sorted {
                    let ts = samples[i].timestamp;
                    if ts < s.window_start {
                        late.push(i);
                    } else if ts < s.window_start + window {
                        in_win.push(i);
                    } else {
                        after.push(i);
                    }
                }
                // Late samples that fit one window with everything the session holds (its
                // newest sample less than `chunk_duration` after them) join it, the window
                // moving back to start at them: parts read out of order (a Kafka backlog
                // spread over partitions, retries) merge instead of each going alone. The
                // admitted ones are the newest late samples, so they and `in_win` stay one
                // contiguous, sorted range of the part.
                let newest = in_win
                    .last()
                    .map_or(f64::NEG_INFINITY, |&i| samples[i].timestamp)
                    .max(s.builder.last_ts());
                let cut = late.partition_point(|&i| samples[i].timestamp <= newest - window);
                if cut < late.len() {
                    let mut joined = late.split_off(cut);
                    joined.append(&mut in_win);
                    in_win = joined;
                }
                let add = (in_win.len() as f64 * per_sample) as u64;
                if !in_win.is_empty()
                    && s.builder.sample_count() > 0
                    && s.builder.est_bytes().saturating_add(add) > max
                {
                    flush_first = true;
                    in_win.append(&mut after);
                    after = in_win;
                    in_win = Vec::new();
                }
            }
            None => after = sorted,
        }
        let late_groups = self.partition(chunk, &late, per_sample);
        let after_groups = self.partition(chunk, &after, per_sample);
        let session_open = self.sessions.contains_key(&key) && !flush_first;

        // Measurement values go to the destination whose window starts last at or before them.
        let mut windows: Vec<(f64, Dest)> = Vec::new();
        let mut groups: Vec<(Vec<usize>, bool)> = Vec::new(); // (samples, is_late)
        for g in late_groups {
            windows.push((samples[g[0]].timestamp, Dest::Group(groups.len())));
            groups.push((g, true));
        }
        if session_open
            && !in_win.is_empty()
            && let Some(s) = self.sessions.get(&key)
        {
            let start = s.window_start.min(samples[in_win[0]].timestamp);
            windows.push((start, Dest::Session));
        }
        for g in after_groups {
            windows.push((samples[g[0]].timestamp, Dest::Group(groups.len())));
            groups.push((g, false));
        }
        windows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut session_meas = Vec::new();
        let mut group_meas: Vec<Vec<(String, String, Vec<MeasurementValue>)>> =
            vec![Vec::new(); groups.len()];
        for (name, m) in &chunk.measurements {
            let mut per_dest: HashMap<usize, Vec<MeasurementValue>> = HashMap::new();
            let mut to_session = Vec::new();
            for v in &m.values {
                let dest = windows
                    .iter()
                    .rev()
                    .find(|(start, _)| *start <= v.timestamp)
                    .or(windows.first())
                    .map(|(_, d)| *d);
                match dest {
                    Some(Dest::Session) => to_session.push(v.clone()),
                    Some(Dest::Group(g)) => per_dest.entry(g).or_default().push(v.clone()),
                    None => {}
                }
            }
            if !to_session.is_empty() {
                session_meas.push((name.clone(), m.unit.clone(), to_session));
            }
            for (g, vals) in per_dest {
                if let Some(slot) = group_meas.get_mut(g) {
                    slot.push((name.clone(), m.unit.clone(), vals));
                }
            }
        }

        if flush_first && let Some(s) = self.sessions.remove(&key) {
            out.extend(self.finish_session(key.owned(), s, EmitReason::Size));
        }
        if session_open
            && !in_win.is_empty()
            && let Some(s) = self.sessions.get_mut(&key)
        {
            let bytes = (in_win.len() as f64 * per_sample) as u64;
            s.window_start = s.window_start.min(samples[in_win[0]].timestamp);
            s.builder
                .add_hashed(chunk, frame_hashes, &in_win, &session_meas, bytes);
            s.consumed.push(range_of(id, part, chunk, &in_win));
            if s.inputs.insert(id) {
                *self.pending.entry(id).or_insert(0) += 1;
            }
            s.linked.extend(linked.iter().cloned());
            s.last_activity = now;
        }
        let has_after = groups.iter().any(|(_, is_late)| !is_late);
        if has_after && let Some(s) = self.sessions.remove(&key) {
            out.extend(self.finish_session(key.owned(), s, EmitReason::Duration));
        }
        let last_after = groups.iter().rposition(|(_, is_late)| !is_late);
        for (gi, ((g, is_late), meas)) in groups.into_iter().zip(group_meas).enumerate() {
            let mut builder = ChunkBuilder::new(chunk);
            let bytes = (g.len() as f64 * per_sample) as u64;
            builder.add_hashed(chunk, frame_hashes, &g, &meas, bytes);
            *self.pending.entry(id).or_insert(0) += 1;
            let consumed = vec![range_of(id, part, chunk, &g)];
            if Some(gi) == last_after {
                let window_start = samples[g[0]].timestamp;
                self.sessions.insert(
                    key.owned(),
                    Session {
                        builder,
                        window_start,
                        inputs: BTreeSet::from([id]),
                        consumed,
                        linked: linked.iter().cloned().collect(),
                        last_activity: now,
                    },
                );
            } else {
                let reason = if is_late {
                    EmitReason::Late
                } else {
                    EmitReason::Duration
                };
                let linked: BTreeSet<CompactString> = linked.iter().cloned().collect();
                out.push(Emitted::finished(
                    key.owned(),
                    builder,
                    &linked,
                    self.cfg.sparse_threads,
                    vec![id],
                    consumed,
                    reason,
                ));
            }
        }
    }

    fn finish_session(&self, key: SessionKey, s: Session, reason: EmitReason) -> Option<Emitted> {
        let inputs: Vec<u64> = s.inputs.into_iter().collect();
        Some(Emitted::finished(
            key,
            s.builder,
            &s.linked,
            self.cfg.sparse_threads,
            inputs,
            s.consumed,
            reason,
        ))
    }

    /// Emits the sessions idle for at least `chunk_idle_timeout` at `now`.
    pub fn poll(&mut self, now: Instant) -> Vec<Emitted> {
        let idle = self.cfg.chunk_idle_timeout;
        let mut keys: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.last_activity) >= idle)
            .map(|(k, _)| k.clone())
            .collect();
        keys.sort();
        self.take(keys, EmitReason::Idle)
    }

    /// Emits every open session (shutdown).
    pub fn flush_all(&mut self) -> Vec<Emitted> {
        let mut keys: Vec<SessionKey> = self.sessions.keys().cloned().collect();
        keys.sort();
        self.take(keys, EmitReason::Flush)
    }

    fn take(&mut self, keys: Vec<SessionKey>, reason: EmitReason) -> Vec<Emitted> {
        let mut out = Vec::new();
        for k in keys {
            if let Some(s) = self.sessions.remove(&k) {
                out.extend(self.finish_session(k, s, reason));
            }
        }
        out
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

/// The timestamp range of `indices` (sorted by timestamp, non-empty) of a part.
fn range_of(id: u64, part: u32, chunk: &ProfileChunk, indices: &[usize]) -> Consumed {
    let ts = |i: Option<&usize>| i.map_or(0.0, |&i| chunk.profile.samples[i].timestamp);
    Consumed::new(id, part, ts(indices.first()), ts(indices.last()))
}
