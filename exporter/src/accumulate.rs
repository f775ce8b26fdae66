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
//! Samples older than the open window (late data) are emitted at once as their own chunk.
//!
//! **Sparse threads.** Only a finished chunk's thread counts are final, so this is where threads
//! Relay would drop (fewer than 2 samples with a stack) are handled, as `sparse_threads` says:
//! grouped ([`profilink_proto::sentry::thread_groups`], the default) and then, if still sparse,
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

use crate::config::{AccumulateConfig, SparseThreads};
use crate::merge::ChunkBuilder;
use crate::queue::consumed::Consumed;
use profilink_proto::sentry::{CompactString, MeasurementValue, ProfileChunk};
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

type SessionMap = hashbrown::HashMap<SessionKey, Session>;

/// Identifies an accumulation session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// Routing key (resource attribute value, or empty for the default destination).
    pub route: String,
    /// The chunk's profiler id.
    pub profiler_id: String,
    /// The chunk's platform.
    pub platform: String,
}

/// A [`SessionKey`] made of borrowed parts, to look sessions up without allocating. Its hash
/// equals the owned key's (the same fields in the same order; `&str` hashes as `String`).
#[derive(Hash)]
struct SessionRef<'a> {
    route: &'a str,
    profiler_id: &'a str,
    platform: &'a str,
}

impl SessionRef<'_> {
    fn owned(&self) -> SessionKey {
        SessionKey {
            route: self.route.to_string(),
            profiler_id: self.profiler_id.to_string(),
            platform: self.platform.to_string(),
        }
    }
}

impl hashbrown::Equivalent<SessionKey> for SessionRef<'_> {
    fn equivalent(&self, key: &SessionKey) -> bool {
        self.route == key.route
            && self.profiler_id == key.profiler_id
            && self.platform == key.platform
    }
}

/// Why a chunk was emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitReason {
    /// The window reached `chunk_duration`.
    Duration,
    /// The size limit would have been exceeded.
    Size,
    /// No samples for `chunk_idle_timeout`.
    Idle,
    /// Shutdown flush.
    Flush,
    /// Samples older than the session's open window.
    Late,
}

/// A merged chunk ready to be persisted and sent.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// The session it belongs to.
    pub key: SessionKey,
    /// The merged chunk (deterministic id).
    pub chunk: ProfileChunk,
    /// Queue ids of the inputs that contributed samples.
    pub inputs: Vec<u64>,
    /// Why it was emitted.
    pub reason: EmitReason,
    /// Samples removed because their thread had fewer than 2 samples in the finished chunk
    /// (Relay drops such threads, and rejects a chunk left without samples) and could not be
    /// grouped.
    pub sparse_samples_dropped: usize,
    /// Samples of such threads moved into group threads instead.
    pub sparse_samples_grouped: usize,
    /// Threads whose samples were moved into group threads.
    pub sparse_threads_grouped: usize,
    /// The size estimate of the merged chunk (the sum of its inputs' shares).
    pub est_bytes: u64,
    /// The timestamp range taken from each input part.
    pub consumed: Vec<Consumed>,
}

impl Emitted {
    /// Finishes a merged chunk. Only now, with all its samples merged, is a thread's sample
    /// count final, so this is where threads Relay would drop are grouped (unless `policy` is
    /// [`SparseThreads::Drop`]; never the `linked` ones) and what is still sparse is removed
    /// (and counted).
    fn finished(
        key: SessionKey,
        builder: ChunkBuilder,
        linked: &BTreeSet<CompactString>,
        policy: SparseThreads,
        inputs: Vec<u64>,
        consumed: Vec<Consumed>,
        reason: EmitReason,
    ) -> Self {
        let est_bytes = builder.est_bytes();
        let mut chunk = builder.finish();
        let grouped = match policy {
            SparseThreads::Group => chunk.profile.group_sparse_threads(|t| linked.contains(t)),
            SparseThreads::Drop => Default::default(),
        };
        let (_, sparse_samples_dropped) = chunk.profile.drop_sparse_threads();
        Emitted {
            key,
            chunk,
            inputs,
            reason,
            sparse_samples_dropped,
            sparse_samples_grouped: grouped.samples,
            sparse_threads_grouped: grouped.threads,
            est_bytes,
            consumed,
        }
    }
}

/// The outcome of [`ChunkAccumulator::push`].
#[derive(Debug, Default)]
pub struct PushOutcome {
    /// Chunks completed by this input.
    pub emitted: Vec<Emitted>,
    /// Inputs that contributed nothing (no valid samples): acknowledge at once.
    pub ack_now: Vec<u64>,
}

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
            windows.push((s.window_start, Dest::Session));
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

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::{Frame, Measurement, Sample};
    use std::time::Duration;

    fn chunk(start: f64, secs: f64, hz: f64) -> ProfileChunk {
        let mut c = ProfileChunk {
            chunk_id: "1".repeat(32),
            profiler_id: "b".repeat(32),
            platform: "rust".into(),
            version: "2".into(),
            ..Default::default()
        };
        c.profile.frames = vec![std::sync::Arc::new(Frame {
            function: Some("main".into()),
            ..Default::default()
        })];
        c.profile.stacks = vec![vec![0]];
        let n = (secs * hz).round() as usize;
        for i in 0..n {
            c.profile.samples.push(Sample {
                timestamp: start + i as f64 / hz,
                stack_id: 0,
                thread_id: "7".into(),
            });
        }
        c.measurements.insert(
            "cpu".into(),
            Measurement {
                unit: "percent".into(),
                values: vec![MeasurementValue {
                    timestamp: start,
                    value: 1.0,
                }],
            },
        );
        c
    }

    fn cfg() -> AccumulateConfig {
        AccumulateConfig::default()
    }

    #[test]
    fn twelve_five_second_chunks_make_one_minute() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        let mut acked = Vec::new();
        for i in 0..12u64 {
            let out = acc.push(i, "", &chunk(1000.0 + 5.0 * i as f64, 5.0, 20.0), 1000, t0);
            assert!(out.emitted.is_empty(), "emitted at {i}");
            acked.extend(out.ack_now);
        }
        assert!(acked.is_empty());
        assert!(acc.poll(t0 + Duration::from_secs(9)).is_empty());
        let out = acc.poll(t0 + Duration::from_secs(10));
        assert_eq!(out.len(), 1);
        let c = &out[0].chunk;
        assert_eq!(c.profile.samples.len(), 1200);
        assert_eq!(c.profile.frames.len(), 1);
        assert_eq!(c.measurements["cpu"].values.len(), 12);
        let span = c.profile.samples[1199].timestamp - c.profile.samples[0].timestamp;
        assert!(span < 60.0 && span > 59.9);
        assert_eq!(out[0].inputs, (0..12).collect::<Vec<_>>());
        assert_eq!(acc.release(&out[0].inputs).len(), 12);
    }

    #[test]
    fn threads_relay_would_drop_are_dropped_only_after_merging() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        // Thread "9" has one sample in each of two inputs: two once merged, so it stays.
        // Thread "8" has one sample in all: Relay would drop it, so it is dropped and counted.
        let mut a = chunk(0.0, 5.0, 2.0);
        let mut b = chunk(5.0, 5.0, 2.0);
        for (c, t) in [(&mut a, 1.0), (&mut b, 6.0)] {
            c.profile.samples.push(Sample {
                timestamp: t,
                stack_id: 0,
                thread_id: "9".into(),
            });
        }
        a.profile.samples.push(Sample {
            timestamp: 2.0,
            stack_id: 0,
            thread_id: "8".into(),
        });
        acc.push(1, "", &a, 100, t0);
        acc.push(2, "", &b, 100, t0);
        let out = acc.flush_all();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].sparse_samples_dropped, 1);
        let threads: BTreeSet<&str> = out[0]
            .chunk
            .profile
            .samples
            .iter()
            .map(|s| s.thread_id.as_str())
            .collect();
        assert_eq!(threads, BTreeSet::from(["7", "9"]));
    }

    /// A thread's single sample at `t` on `tid` named `name`.
    fn one(c: &mut ProfileChunk, t: f64, tid: &str, name: &str) {
        c.profile.samples.push(Sample {
            timestamp: t,
            stack_id: 0,
            thread_id: tid.into(),
        });
        c.profile.thread_metadata.insert(
            tid.into(),
            profilink_proto::sentry::ThreadMetadata {
                name: Some(name.into()),
                priority: None,
            },
        );
    }

    #[test]
    fn sparse_threads_are_grouped_after_merging_except_linked_ones() {
        let run = |policy: SparseThreads| {
            let mut acc = ChunkAccumulator::new(AccumulateConfig {
                sparse_threads: policy,
                ..cfg()
            });
            let t0 = Instant::now();
            // Threads 21 and 22 ("w") are seen once each, in different inputs: a group once
            // merged. Thread 23 ("w") once too, but a span references it (input 2 says so):
            // it keeps its id, and being sparse it is dropped.
            let mut a = chunk(0.0, 5.0, 2.0);
            let mut b = chunk(5.0, 5.0, 2.0);
            one(&mut a, 1.0, "21", "w");
            one(&mut b, 6.0, "22", "w");
            one(&mut b, 7.0, "23", "w");
            let mut emitted = Vec::new();
            acc.push_part(1, 0, "", &a, &[], None, 100, t0, &mut emitted);
            acc.push_part(2, 0, "", &b, &["23".into()], None, 100, t0, &mut emitted);
            let mut out = acc.flush_all();
            assert_eq!(out.len(), 1);
            out.remove(0)
        };
        let e = run(SparseThreads::Group);
        let group = profilink_proto::sentry::thread_groups::group_id(b"name\0w").to_string();
        let threads: BTreeSet<&str> = e
            .chunk
            .profile
            .samples
            .iter()
            .map(|s| s.thread_id.as_str())
            .collect();
        assert_eq!(threads, BTreeSet::from(["7", group.as_str()]));
        assert_eq!(
            e.chunk.profile.thread_metadata[&group].name.as_deref(),
            Some("w")
        );
        assert_eq!(
            (
                e.sparse_samples_grouped,
                e.sparse_threads_grouped,
                e.sparse_samples_dropped
            ),
            (2, 2, 1)
        );
        // The same chunk id on replay, and `drop` keeps today's behaviour.
        assert_eq!(run(SparseThreads::Group).chunk, e.chunk);
        let d = run(SparseThreads::Drop);
        assert_eq!((d.sparse_samples_grouped, d.sparse_samples_dropped), (0, 3));
    }

    #[test]
    fn splits_at_the_window_boundary() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        acc.push(1, "", &chunk(0.0, 50.0, 10.0), 1000, t0);
        // 50..70 straddles the 60 s boundary.
        let out = acc.push(2, "", &chunk(50.0, 20.0, 10.0), 1000, t0);
        assert_eq!(out.emitted.len(), 1);
        let first = &out.emitted[0];
        assert_eq!(first.reason, EmitReason::Duration);
        assert_eq!(first.chunk.profile.samples.len(), 600);
        assert!(first.chunk.profile.samples.last().unwrap().timestamp < 60.0);
        assert_eq!(first.inputs, vec![1, 2]);
        // input 1 is done, input 2 is still partly open.
        assert_eq!(acc.release(&first.inputs), vec![1]);
        let rest = acc.flush_all();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].chunk.profile.samples.len(), 100);
        assert_eq!(rest[0].chunk.profile.samples[0].timestamp, 60.0);
        assert_eq!(acc.release(&rest[0].inputs), vec![2]);
    }

    #[test]
    fn long_input_is_cut_into_windows_and_late_data_goes_alone() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        let out = acc.push(1, "", &chunk(100.0, 150.0, 2.0), 3000, t0);
        assert_eq!(out.emitted.len(), 2);
        assert_eq!(acc.session_count(), 1);
        let late = acc.push(2, "", &chunk(10.0, 5.0, 2.0), 100, t0);
        assert_eq!(late.emitted.len(), 1);
        assert_eq!(late.emitted[0].reason, EmitReason::Late);
        assert_eq!(acc.release(&late.emitted[0].inputs), vec![2]);
        assert_eq!(acc.release(&[1, 1]), Vec::<u64>::new());
        let rest = acc.flush_all();
        assert_eq!(acc.release(&rest[0].inputs), vec![1]);
    }

    #[test]
    fn size_limit_emits_early() {
        let mut acc = ChunkAccumulator::new(AccumulateConfig {
            max_chunk_bytes: 2500,
            ..cfg()
        });
        let t0 = Instant::now();
        assert!(
            acc.push(1, "", &chunk(0.0, 5.0, 20.0), 1000, t0)
                .emitted
                .is_empty()
        );
        assert!(
            acc.push(2, "", &chunk(5.0, 5.0, 20.0), 1000, t0)
                .emitted
                .is_empty()
        );
        let out = acc.push(3, "", &chunk(10.0, 5.0, 20.0), 1000, t0);
        assert_eq!(out.emitted.len(), 1);
        assert_eq!(out.emitted[0].reason, EmitReason::Size);
        assert_eq!(out.emitted[0].chunk.profile.samples.len(), 200);
    }

    #[test]
    fn empty_input_is_acked_and_sessions_are_separate() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        let mut empty = chunk(0.0, 0.0, 1.0);
        empty.profile.samples.clear();
        assert_eq!(acc.push(9, "", &empty, 10, t0).ack_now, vec![9]);
        acc.push(1, "a", &chunk(0.0, 5.0, 20.0), 10, t0);
        acc.push(2, "b", &chunk(0.0, 5.0, 20.0), 10, t0);
        assert_eq!(acc.session_count(), 2);
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_secs(10)));
    }

    #[test]
    fn an_input_of_several_chunks_is_acknowledged_once_all_are_persisted() {
        let mut acc = ChunkAccumulator::new(cfg());
        let t0 = Instant::now();
        let a = chunk(0.0, 5.0, 20.0);
        let mut b = chunk(0.0, 5.0, 20.0);
        b.profiler_id = "c".repeat(32);
        let mut empty = chunk(0.0, 0.0, 1.0);
        empty.profile.samples.clear();
        // Input 1: an empty chunk first (which alone would be acknowledged at once), then two
        // sessions; input 2 only an empty chunk.
        let mut emitted = Vec::new();
        acc.push_part(1, 0, "", &empty, &[], None, 10, t0, &mut emitted);
        acc.push_part(1, 1, "", &a, &[], None, 100, t0, &mut emitted);
        acc.push_part(1, 2, "", &b, &[], None, 100, t0, &mut emitted);
        // The same session twice in one input counts the input once.
        acc.push_part(
            1,
            3,
            "",
            &chunk(5.0, 5.0, 20.0),
            &[],
            None,
            100,
            t0,
            &mut emitted,
        );
        assert!(emitted.is_empty());
        assert!(!acc.finish_input(1));
        acc.push_part(2, 0, "", &empty, &[], None, 10, t0, &mut emitted);
        assert!(acc.finish_input(2));
        let out = acc.flush_all();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].inputs, vec![1]);
        assert_eq!(acc.release(&out[0].inputs), Vec::<u64>::new());
        assert_eq!(acc.release(&out[1].inputs), vec![1]);
        assert_eq!(
            out.iter()
                .map(|e| e.chunk.profile.samples.len())
                .sum::<usize>(),
            300
        );
    }

    #[test]
    fn replay_gives_the_same_chunk_id() {
        let run = || {
            let mut acc = ChunkAccumulator::new(cfg());
            let t0 = Instant::now();
            for i in 0..3u64 {
                acc.push(i, "", &chunk(5.0 * i as f64, 5.0, 20.0), 100, t0);
            }
            acc.flush_all()[0].chunk.chunk_id.clone()
        };
        assert_eq!(run(), run());
    }
}
