//! The trace-linking join buffer of Sentry → OTLP pipelines.
//!
//! SDKs send a profiler session's chunks (one a minute) and its transactions (when each ends)
//! in separate envelopes, in either order. To give every observation the `Link` the link rule
//! ([`profilink_translator::linking`]) assigns, a pipeline holds each chunk until the spans that
//! may cover it have arrived, keyed by profiler id:
//!
//! * **Spans** (the intervals of transactions and of span-streaming items) are kept per profiler
//!   for [`JoinConfig::span_retention`] after they arrive, so a chunk arriving after its
//!   transactions still finds them.
//! * **A chunk is released** when it has waited [`JoinConfig::window`] (default 30 s), or
//!   earlier when the session's spans prove that no span overlapping the chunk can still
//!   come (*covered*, below). It is translated with the links of every span its profiler has in
//!   the buffer.
//! * **Bounds**: held chunks are limited by [`JoinConfig::max_bytes`] (estimated in-memory
//!   size) and by [`JoinConfig::max_sessions`] profiler sessions; spans by
//!   [`JoinConfig::max_spans`]. Past a bound the oldest chunks are released early and the oldest
//!   spans forgotten; both are counted. A chunk released without any span of its profiler
//!   covering its time range is counted as unlinked.
//!
//! # The covered release
//!
//! What is knowable: SDKs send a transaction when it *ends* (span streaming: a span when it
//! ends, in batches), so a session's spans arrive in order of their end time; and a span that
//! links a sample of a chunk started at or before the chunk's last sample `C`. With several
//! threads, transactions still open at `C` end, and arrive, after others that end past `C`, so
//! the first span past `C` proves nothing by itself. Per session the buffer keeps `D`, the
//! longest duration (end − start) of any span seen in the session, and `E`, the latest end of the
//! spans that arrived. A chunk is **covered** when
//!
//! `E > C + D + ORDER_SLACK` ([`ORDER_SLACK`] = 1 s)
//!
//! A span that overlaps the chunk and has not arrived yet ends, in SDK order, at or after about
//! `E` (within the slack, for threads whose transactions end within a second of each other and
//! reach the transport in either order), so it lasts longer than `E − C − ORDER_SLACK > D`:
//! longer than every span the session has shown so far. Hence, for traffic in SDK order whose
//! spans arrive within `join_window` of the chunk, the live links equal the offline ones
//! (`profilink translate --transactions` over the same inputs) **unless a span longer than any
//! earlier span of its session is open across a chunk's end**: the *worst case*, where that
//! span's samples in the chunk lose their link when the chunk is released before it arrives.
//!
//! Latency: a chunk leaves about `D + 1 s` of the session's (SDK clock) time after its last
//! sample, once a span ending that late arrives (with 60 s chunks and sub-second transactions,
//! a second or two after the chunk); never later than the window. A session whose longest span
//! is at least the window waits the window. A chunk that arrives after spans ending late
//! enough is released at once.
//!
//! Limits: spans arriving more than `join_window` after their chunk (a slow or retrying SDK, a
//! proxy that reorders) are not linked to it; neither are spans arriving out of SDK order after
//! the covered release (e.g. a long transaction sent late). Transactions of a profiler session
//! that ends (sentry-python's `trace` lifecycle stops the profiler when no transaction runs)
//! are all sent before its last chunk, which is released by the window.
//!
//! The buffer is plain state: callers pass the time, so tests drive it without sleeping.

use crate::store::estimated_bytes;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::timestamp::secs_to_nanos;
use profilink_translator::linking::{SpanInterval, TransactionLinks};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Margin on the order in which an SDK sends spans: spans ending within it of each other may
/// arrive in either order (see the module docs).
pub const ORDER_SLACK: Duration = Duration::from_secs(1);

/// Settings of a [`JoinBuffer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConfig {
    /// Longest a chunk waits for its spans (0 releases every chunk at once, linked only to the
    /// spans already known).
    pub window: Duration,
    /// How long spans are kept for chunks that arrive after them.
    pub span_retention: Duration,
    /// Upper bound of held chunk data (estimated bytes).
    pub max_bytes: u64,
    /// Upper bound of profiler sessions holding chunks.
    pub max_sessions: usize,
    /// Upper bound of kept spans.
    pub max_spans: usize,
}

impl Default for JoinConfig {
    fn default() -> Self {
        JoinConfig {
            window: Duration::from_secs(30),
            span_retention: Duration::from_secs(120),
            max_bytes: 64 << 20,
            max_sessions: 10_000,
            max_spans: 1_000_000,
        }
    }
}

/// Why chunks left the buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinCounts {
    /// Released because spans of their session past their end plus the longest span duration
    /// arrived (see the module docs).
    pub released_covered: u64,
    /// Released because their window ran out.
    pub released_window: u64,
    /// Released early to stay within the bounds.
    pub released_overflow: u64,
    /// Released (for any reason) with no span of their profiler overlapping them.
    pub unlinked: u64,
    /// Spans forgotten early to stay within `max_spans`.
    pub spans_evicted: u64,
}

/// A chunk being held.
#[derive(Debug)]
struct Held {
    chunk: ProfileChunk,
    project_id: u64,
    arrived: Instant,
    bytes: u64,
    start_ns: u64,
    end_ns: u64,
    seq: u64,
}

#[derive(Debug, Default)]
struct Session {
    chunks: Vec<Held>,
    /// Spans with their arrival time, in arrival order.
    spans: Vec<(SpanInterval, Instant)>,
    /// Latest end among the spans that arrived.
    latest_end_ns: u64,
    /// Longest duration (end − start) among the spans that arrived.
    longest_ns: u64,
}

impl Session {
    /// Whether spans that arrived show that no span overlapping a chunk whose last sample is at
    /// `end_ns` is still to come (see the module docs).
    fn covers(&self, end_ns: u64) -> bool {
        let slack = ORDER_SLACK.as_nanos() as u64;
        !self.spans.is_empty()
            && self.latest_end_ns > end_ns.saturating_add(self.longest_ns).saturating_add(slack)
    }
}

/// Chunks released together: one profiler session's, with the links of its spans.
#[derive(Debug)]
pub struct Release {
    /// The profiler id.
    pub profiler_id: String,
    /// The chunks with the project they were received for.
    pub chunks: Vec<(u64, ProfileChunk)>,
    /// The spans of that profiler known at release.
    pub links: TransactionLinks,
}

/// The join buffer. See the module docs.
#[derive(Debug)]
pub struct JoinBuffer {
    cfg: JoinConfig,
    sessions: HashMap<String, Session>,
    bytes: u64,
    spans: usize,
    /// Sessions holding chunks (kept up to date: `is_full` runs on every request).
    with_chunks: usize,
    seq: u64,
    counts: JoinCounts,
}

fn sample_range_ns(chunk: &ProfileChunk) -> (u64, u64) {
    chunk
        .profile
        .samples
        .iter()
        .filter_map(|s| secs_to_nanos(s.timestamp))
        .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)))
}

impl JoinBuffer {
    /// An empty buffer.
    pub fn new(cfg: JoinConfig) -> Self {
        JoinBuffer {
            cfg,
            sessions: HashMap::new(),
            bytes: 0,
            spans: 0,
            with_chunks: 0,
            seq: 0,
            counts: JoinCounts::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &JoinConfig {
        &self.cfg
    }

    /// What left the buffer so far.
    pub fn counts(&self) -> JoinCounts {
        self.counts
    }

    /// Estimated bytes of the held chunks.
    pub fn held_bytes(&self) -> u64 {
        self.bytes
    }

    /// Held chunks.
    pub fn held_chunks(&self) -> usize {
        self.sessions.values().map(|s| s.chunks.len()).sum()
    }

    /// Kept spans.
    pub fn kept_spans(&self) -> usize {
        self.spans
    }

    /// Profiler sessions with held chunks or kept spans.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Whether the buffer is at one of its bounds (a pipeline may refuse new data meanwhile).
    pub fn is_full(&self) -> bool {
        self.bytes >= self.cfg.max_bytes || self.chunk_sessions() >= self.cfg.max_sessions
    }

    /// Profiler sessions holding chunks.
    pub fn chunk_sessions(&self) -> usize {
        self.sessions
            .values()
            .filter(|s| !s.chunks.is_empty())
            .count()
    }

    /// Records spans (from transactions or span items) that arrived at `now`.
    pub fn add_spans(&mut self, spans: impl IntoIterator<Item = SpanInterval>, now: Instant) {
        for s in spans {
            let session = self.sessions.entry(s.profiler_id.clone()).or_default();
            session.latest_end_ns = session.latest_end_ns.max(s.end_ns);
            session.longest_ns = session.longest_ns.max(s.end_ns.saturating_sub(s.start_ns));
            session.spans.push((s, now));
            self.spans += 1;
        }
    }

    /// Holds `chunk` (received for `project_id`) from `now` on.
    pub fn add_chunk(&mut self, chunk: ProfileChunk, project_id: u64, now: Instant) {
        let (start_ns, end_ns) = sample_range_ns(&chunk);
        let bytes = estimated_bytes(&chunk);
        self.seq += 1;
        self.bytes += bytes;
        let session = self.sessions.entry(chunk.profiler_id.clone()).or_default();
        if session.chunks.is_empty() {
            self.with_chunks += 1;
        }
        session.chunks.push(Held {
            chunk,
            project_id,
            arrived: now,
            bytes,
            start_ns,
            end_ns,
            seq: self.seq,
        });
    }

    /// Releases what is due at `now` (see the module docs), enforces the bounds, and forgets
    /// spans past their retention. Releases come in order of the chunks' arrival.
    pub fn take_ready(&mut self, now: Instant) -> Vec<Release> {
        self.take(now, false)
    }

    /// Releases every held chunk (shutdown).
    pub fn take_all(&mut self, now: Instant) -> Vec<Release> {
        self.take(now, true)
    }

    fn take(&mut self, now: Instant, all: bool) -> Vec<Release> {
        let window = self.cfg.window;
        let mut due: Vec<(u64, String)> = Vec::new();
        let mut releasing: HashSet<u64> = HashSet::new();
        let mut bytes_after = self.bytes;
        for (pid, s) in &self.sessions {
            for h in &s.chunks {
                let covered = s.covers(h.end_ns);
                let expired = now.saturating_duration_since(h.arrived) >= window;
                if covered {
                    self.counts.released_covered += 1;
                } else if expired {
                    self.counts.released_window += 1;
                } else if !all {
                    continue;
                }
                due.push((h.seq, pid.clone()));
                releasing.insert(h.seq);
                bytes_after -= h.bytes;
            }
        }
        // Bounds: release the oldest remaining chunks until both hold.
        let mut remaining: HashMap<&str, usize> = HashMap::new();
        let mut rest: Vec<(Instant, u64, u64, &str)> = Vec::new();
        for (pid, s) in &self.sessions {
            for h in s.chunks.iter().filter(|h| !releasing.contains(&h.seq)) {
                *remaining.entry(pid.as_str()).or_default() += 1;
                rest.push((h.arrived, h.seq, h.bytes, pid.as_str()));
            }
        }
        let mut live = remaining.len();
        if bytes_after > self.cfg.max_bytes || live > self.cfg.max_sessions {
            rest.sort_unstable();
            for (_, seq, bytes, pid) in rest {
                if bytes_after <= self.cfg.max_bytes && live <= self.cfg.max_sessions {
                    break;
                }
                bytes_after -= bytes;
                self.counts.released_overflow += 1;
                if let Some(n) = remaining.get_mut(pid) {
                    *n -= 1;
                    if *n == 0 {
                        live -= 1;
                    }
                }
                due.push((seq, pid.to_string()));
            }
        }
        due.sort_unstable();

        // Take the chunks out, grouped by profiler in order of first release.
        let mut out: Vec<Release> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        for (seq, pid) in &due {
            let Some(s) = self.sessions.get_mut(pid) else {
                continue;
            };
            let Some(pos) = s.chunks.iter().position(|h| h.seq == *seq) else {
                continue;
            };
            let h = s.chunks.remove(pos);
            if s.chunks.is_empty() {
                self.with_chunks -= 1;
            }
            self.bytes -= h.bytes;
            let linked = s
                .spans
                .iter()
                .any(|(sp, _)| sp.start_ns <= h.end_ns && sp.end_ns >= h.start_ns);
            if !linked {
                self.counts.unlinked += 1;
            }
            let i = *index.entry(pid.clone()).or_insert_with(|| {
                out.push(Release {
                    profiler_id: pid.clone(),
                    chunks: Vec::new(),
                    links: TransactionLinks::from_intervals(
                        s.spans.iter().map(|(sp, _)| sp.clone()),
                    ),
                });
                out.len() - 1
            });
            out[i].chunks.push((h.project_id, h.chunk));
        }
        self.expire_spans(now);
        out
    }

    /// Forgets spans past their retention (and the oldest beyond `max_spans`), and sessions
    /// left with nothing.
    fn expire_spans(&mut self, now: Instant) {
        let retention = self.cfg.span_retention;
        let mut removed = 0usize;
        for s in self.sessions.values_mut() {
            let before = s.spans.len();
            s.spans
                .retain(|(_, at)| now.saturating_duration_since(*at) < retention);
            removed += before - s.spans.len();
        }
        self.spans -= removed;
        if self.spans > self.cfg.max_spans {
            let mut all: Vec<(Instant, String)> = self
                .sessions
                .iter()
                .flat_map(|(pid, s)| s.spans.iter().map(move |(_, at)| (*at, pid.clone())))
                .collect();
            all.sort();
            let excess = self.spans - self.cfg.max_spans;
            let mut per: HashMap<String, usize> = HashMap::new();
            for (_, pid) in all.into_iter().take(excess) {
                *per.entry(pid).or_default() += 1;
            }
            for (pid, n) in per {
                if let Some(s) = self.sessions.get_mut(&pid) {
                    // Spans are in arrival order: the oldest are first.
                    s.spans.drain(..n.min(s.spans.len()));
                }
            }
            self.spans = self.cfg.max_spans;
            self.counts.spans_evicted += excess as u64;
        }
        self.sessions
            .retain(|_, s| !s.chunks.is_empty() || !s.spans.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::{Frame, ProfileData, Sample};
    use profilink_translator::linking::LinkSource;

    const P1: &str = "11111111111111111111111111111111";
    const P2: &str = "22222222222222222222222222222222";
    const S: u64 = 1_000_000_000;

    /// A chunk of `profiler` with one sample per second on thread "7" over `[from, to]` s.
    fn chunk(profiler: &str, id: u64, from: u64, to: u64) -> ProfileChunk {
        chunk_on(profiler, id, from, to, &["7"])
    }

    /// A chunk of `profiler` with one sample per second on each of `threads` over `[from, to]` s.
    fn chunk_on(profiler: &str, id: u64, from: u64, to: u64, threads: &[&str]) -> ProfileChunk {
        ProfileChunk {
            chunk_id: format!("{id:032x}"),
            profiler_id: profiler.into(),
            platform: "python".into(),
            version: "2".into(),
            profile: ProfileData {
                frames: vec![std::sync::Arc::new(Frame {
                    function: Some("f".into()),
                    ..Default::default()
                })],
                stacks: vec![vec![0]],
                samples: (from..=to)
                    .flat_map(|t| {
                        threads.iter().map(move |th| Sample {
                            stack_id: 0,
                            thread_id: (*th).into(),
                            timestamp: t as f64,
                        })
                    })
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn span(profiler: &str, id: u8, from: u64, to: u64) -> SpanInterval {
        span_on(profiler, "7", id, from, to)
    }

    fn span_on(profiler: &str, thread: &str, id: u8, from: u64, to: u64) -> SpanInterval {
        SpanInterval {
            profiler_id: profiler.into(),
            thread_id: thread.into(),
            start_ns: from * S,
            end_ns: to * S,
            is_root: false,
            trace_id: [1; 16],
            span_id: [id; 8],
        }
    }

    fn ids(r: &[Release]) -> Vec<(String, Vec<String>)> {
        r.iter()
            .map(|r| {
                (
                    r.profiler_id.clone(),
                    r.chunks.iter().map(|(_, c)| c.chunk_id.clone()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn chunk_waits_past_its_end_by_the_longest_span_seen() {
        let t0 = Instant::now();
        let mut b = JoinBuffer::new(JoinConfig::default());
        b.add_chunk(chunk(P1, 1, 100, 160), 7, t0);
        b.add_spans([span(P1, 1, 110, 120)], t0);
        assert!(
            b.take_ready(t0).is_empty(),
            "the span ends before the chunk"
        );
        // The longest span is 15 s: a span ending at 165 does not show that every span open
        // at 160 has arrived (the old rule released here).
        b.add_spans([span(P1, 2, 150, 165)], t0 + Duration::from_secs(1));
        assert!(b.take_ready(t0 + Duration::from_secs(1)).is_empty());
        // 160 + 15 + 1 (slack) = 176 is not enough either: the end must be past it.
        b.add_spans([span(P1, 3, 170, 176)], t0 + Duration::from_secs(2));
        assert!(b.take_ready(t0 + Duration::from_secs(2)).is_empty());
        b.add_spans([span(P1, 4, 176, 177)], t0 + Duration::from_secs(3));
        let r = b.take_ready(t0 + Duration::from_secs(3));
        assert_eq!(ids(&r), vec![(P1.to_string(), vec![format!("{:032x}", 1)])]);
        assert_eq!(r[0].chunks[0].0, 7, "project kept");
        // Every span links.
        assert_eq!(r[0].links.link(P1, "7", 115 * S), Some(([1; 16], [1; 8])));
        assert_eq!(r[0].links.link(P1, "7", 155 * S), Some(([1; 16], [2; 8])));
        assert_eq!(r[0].links.link(P1, "8", 155 * S), None, "other thread");
        let c = b.counts();
        assert_eq!(
            (c.released_covered, c.released_window, c.unlinked),
            (1, 0, 0)
        );
        assert_eq!((b.held_chunks(), b.held_bytes()), (0, 0));
        assert_eq!(b.kept_spans(), 4, "spans stay for later chunks");
    }

    /// Four threads in SDK order (each transaction arrives when it ends): transactions open at
    /// the chunk's end arrive after the first one that ends past it, and still link.
    #[test]
    fn transactions_open_at_the_chunk_end_on_other_threads_link() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut b = JoinBuffer::new(JoinConfig::default());
        let threads = ["7", "8", "9", "10"];
        // Earlier transactions: the longest lasted 6 s.
        b.add_spans(
            [
                span_on(P1, "7", 1, 90, 92),
                span_on(P1, "8", 2, 88, 94),
                span_on(P1, "9", 3, 91, 93),
            ],
            at(0),
        );
        b.add_chunk(chunk_on(P1, 1, 100, 160, &threads), 1, at(0));
        // In end order: each one open at 160.
        let sdk_order = [
            span_on(P1, "7", 4, 158, 161),
            span_on(P1, "8", 5, 157, 162),
            span_on(P1, "9", 6, 159, 163),
            span_on(P1, "10", 7, 158, 164),
            span_on(P1, "7", 8, 161, 165),
        ];
        let mut released = Vec::new();
        for (i, s) in sdk_order.into_iter().enumerate() {
            b.add_spans([s], at(i as u64 + 1));
            released.extend(b.take_ready(at(i as u64 + 1)));
            assert!(released.is_empty(), "released after span {i}");
        }
        // 160 + 6 + 1 < 168.
        b.add_spans([span_on(P1, "8", 9, 163, 168)], at(10));
        let r = b.take_ready(at(10));
        assert_eq!(ids(&r), vec![(P1.to_string(), vec![format!("{:032x}", 1)])]);
        for (thread, id) in [("7", 4), ("8", 5), ("9", 6), ("10", 7)] {
            assert_eq!(
                r[0].links.link(P1, thread, 159 * S + S / 2),
                Some(([1; 16], [id; 8])),
                "thread {thread}"
            );
        }
        assert_eq!(b.counts().released_covered, 1);
    }

    /// The worst case, documented: a span longer than any the session showed before, open
    /// across the chunk's end and sent after the covered release, does not link.
    #[test]
    fn a_span_longer_than_any_seen_before_may_arrive_too_late() {
        let t0 = Instant::now();
        let mut b = JoinBuffer::new(JoinConfig::default());
        b.add_spans([span_on(P1, "7", 1, 150, 152)], t0);
        b.add_chunk(chunk_on(P1, 1, 100, 160, &["7", "8"]), 1, t0);
        b.add_spans([span_on(P1, "7", 2, 161, 163)], t0);
        assert!(b.take_ready(t0).is_empty(), "163 is not past 160 + 2 + 1");
        b.add_spans([span_on(P1, "7", 3, 163, 164)], t0);
        let r = b.take_ready(t0);
        assert_eq!(r.len(), 1);
        // Thread 8 ran one 20 s transaction, sent when it ended at 170: too late.
        b.add_spans([span_on(P1, "8", 4, 150, 170)], t0);
        assert_eq!(r[0].links.link(P1, "8", 155 * S), None);
        // From then on the session waits 20 s past a chunk's end.
        b.add_chunk(chunk_on(P1, 2, 161, 220, &["7", "8"]), 1, t0);
        b.add_spans([span_on(P1, "8", 5, 225, 241)], t0);
        assert!(b.take_ready(t0).is_empty(), "241 is not past 220 + 20 + 1");
        b.add_spans([span_on(P1, "8", 6, 241, 242)], t0);
        assert_eq!(b.take_ready(t0).len(), 1);
    }

    #[test]
    fn chunk_after_its_spans_is_released_linked() {
        let t0 = Instant::now();
        let mut b = JoinBuffer::new(JoinConfig::default());
        b.add_spans(
            [
                span(P1, 1, 100, 120),
                span(P1, 2, 120, 140),
                span(P1, 3, 170, 182),
            ],
            t0,
        );
        // 182 > 160 + 20 + 1: released as it arrives.
        b.add_chunk(chunk(P1, 1, 100, 160), 1, t0 + Duration::from_secs(60));
        let r = b.take_ready(t0 + Duration::from_secs(60));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].links.link(P1, "7", 130 * S), Some(([1; 16], [2; 8])));
        assert_eq!(b.counts().released_covered, 1);
        // Past the retention the spans are gone and the session with them.
        assert!(b.take_ready(t0 + Duration::from_secs(121)).is_empty());
        assert_eq!((b.kept_spans(), b.sessions()), (0, 0));
    }

    #[test]
    fn window_releases_unlinked_chunks_and_counts_them() {
        let t0 = Instant::now();
        let cfg = JoinConfig {
            window: Duration::from_secs(30),
            ..Default::default()
        };
        let mut b = JoinBuffer::new(cfg);
        b.add_chunk(chunk(P1, 1, 100, 160), 1, t0);
        b.add_chunk(chunk(P2, 2, 100, 160), 1, t0 + Duration::from_secs(10));
        // P2 has a span that overlaps but ends before the chunk ends: linked, not covered.
        b.add_spans([span(P2, 1, 90, 120)], t0);
        assert!(b.take_ready(t0 + Duration::from_secs(29)).is_empty());
        let r = b.take_ready(t0 + Duration::from_secs(30));
        assert_eq!(ids(&r), vec![(P1.to_string(), vec![format!("{:032x}", 1)])]);
        let r = b.take_ready(t0 + Duration::from_secs(40));
        assert_eq!(ids(&r), vec![(P2.to_string(), vec![format!("{:032x}", 2)])]);
        assert_eq!(r[0].links.link(P2, "7", 110 * S), Some(([1; 16], [1; 8])));
        let c = b.counts();
        assert_eq!(
            (c.released_window, c.unlinked),
            (2, 1),
            "only P1 is unlinked"
        );
    }

    #[test]
    fn zero_window_releases_at_once_and_take_all_drains() {
        let t0 = Instant::now();
        let mut b = JoinBuffer::new(JoinConfig {
            window: Duration::ZERO,
            ..Default::default()
        });
        b.add_chunk(chunk(P1, 1, 100, 160), 1, t0);
        assert_eq!(b.take_ready(t0).len(), 1);
        let mut b = JoinBuffer::new(JoinConfig::default());
        b.add_chunk(chunk(P1, 1, 100, 160), 1, t0);
        b.add_chunk(chunk(P1, 2, 160, 220), 1, t0);
        b.add_chunk(chunk(P2, 3, 100, 160), 1, t0);
        let r = b.take_all(t0);
        let mut got = ids(&r);
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    P1.to_string(),
                    vec![format!("{:032x}", 1), format!("{:032x}", 2)]
                ),
                (P2.to_string(), vec![format!("{:032x}", 3)]),
            ]
        );
        assert_eq!((b.held_chunks(), b.held_bytes(), b.sessions()), (0, 0, 0));
    }

    #[test]
    fn a_flood_without_transactions_stays_within_bounds() {
        let t0 = Instant::now();
        let one = estimated_bytes(&chunk(P1, 0, 0, 600));
        let cfg = JoinConfig {
            max_bytes: 50 * one,
            max_sessions: 20,
            max_spans: 500,
            ..Default::default()
        };
        let mut b = JoinBuffer::new(cfg.clone());
        let mut released = 0u64;
        let mut peak = 0u64;
        for i in 0..2_000u64 {
            let profiler = format!("{:032x}", i % 37 + 1);
            let now = t0 + Duration::from_millis(i);
            b.add_chunk(chunk(&profiler, i, i + 10, i + 610), 1, now);
            if i % 3 == 0 {
                b.add_spans([span(&profiler, 1, 0, 1)], now);
            }
            for r in b.take_ready(now) {
                released += r.chunks.len() as u64;
            }
            peak = peak.max(b.held_bytes());
            assert!(b.held_bytes() <= cfg.max_bytes, "bytes at {i}");
            assert!(b.chunk_sessions() <= cfg.max_sessions, "sessions at {i}");
            assert!(b.kept_spans() <= cfg.max_spans, "spans at {i}");
        }
        let c = b.counts();
        assert!(c.released_overflow > 1_900, "{c:?}");
        assert!(c.spans_evicted > 0, "{c:?}");
        assert_eq!(released + b.held_chunks() as u64, 2_000, "nothing lost");
        assert_eq!(c.unlinked, released, "no span overlaps the chunks");
        assert!(peak > 0);
    }
}
