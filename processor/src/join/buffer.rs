//! The trace-linking join buffer of Sentry → OTLP pipelines (the rule is on [`JoinConfig`]).

use crate::store::estimated_bytes;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::secs_to_nanos;
use profilink_translator::{SpanInterval, TransactionLinks};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Margin on the order in which an SDK sends spans: spans ending within it of each other may
/// arrive in either order (see [`JoinConfig`]).
pub(crate) const ORDER_SLACK: Duration = Duration::from_secs(1);

/// Settings of the trace-linking join buffer of Sentry → OTLP pipelines.
///
/// SDKs send a profiler session's chunks (one a minute) and its transactions (when each ends)
/// in separate envelopes, in either order. To give every observation the `Link` the link rule
/// ([`LinkSource`](profilink_translator::LinkSource)) assigns, a pipeline holds each chunk until the spans that
/// may cover it have arrived, keyed by profiler id:
///
/// * **Spans** (the intervals of transactions and of span-streaming items) are kept per profiler
///   for [`JoinConfig::span_retention`] after they arrive, so a chunk arriving after its
///   transactions still finds them.
/// * **A chunk is released** when it has waited [`JoinConfig::window`] (default 30 s), or
///   earlier when the session's spans prove that no span overlapping the chunk can still
///   come (*covered*, below). It is translated with the links of every span its profiler has in
///   the buffer.
/// * **Bounds**: held chunks are limited by [`JoinConfig::max_bytes`] (estimated in-memory
///   size) and by [`JoinConfig::max_sessions`] profiler sessions; spans by
///   [`JoinConfig::max_spans`]. Past a bound the oldest chunks are released early and the oldest
///   spans forgotten; both are counted. A chunk released without any span of its profiler
///   covering its time range is counted as unlinked.
///
/// # The covered release
///
/// What is knowable: SDKs send a transaction when it *ends* (span streaming: a span when it
/// ends, in batches), so a session's spans arrive in order of their end time; and a span that
/// links a sample of a chunk started at or before the chunk's last sample `C`. With several
/// threads, transactions still open at `C` end, and arrive, after others that end past `C`, so
/// the first span past `C` proves nothing by itself. Per session the buffer keeps `D`, the
/// longest duration (end − start) of any span seen in the session, and `E`, the latest end of the
/// spans that arrived. A chunk is **covered** when
///
/// `E > C + D + ORDER_SLACK` (`ORDER_SLACK` = 1 s)
///
/// A span that overlaps the chunk and has not arrived yet ends, in SDK order, at or after about
/// `E` (within the slack, for threads whose transactions end within a second of each other and
/// reach the transport in either order), so it lasts longer than `E − C − ORDER_SLACK > D`:
/// longer than every span the session has shown so far. Hence, for traffic in SDK order whose
/// spans arrive within `join_window` of the chunk, the live links equal the offline ones
/// (`profilink translate --transactions` over the same inputs) **unless a span longer than any
/// earlier span of its session is open across a chunk's end**: the *worst case*, where that
/// span's samples in the chunk lose their link when the chunk is released before it arrives.
///
/// Latency: a chunk leaves about `D + 1 s` of the session's (SDK clock) time after its last
/// sample, once a span ending that late arrives (with 60 s chunks and sub-second transactions,
/// a second or two after the chunk); never later than the window. A session whose longest span
/// is at least the window waits the window. A chunk that arrives after spans ending late
/// enough is released at once.
///
/// Limits: spans arriving more than `join_window` after their chunk (a slow or retrying SDK, a
/// proxy that reorders) are not linked to it; neither are spans arriving out of SDK order after
/// the covered release (e.g. a long transaction sent late). Transactions of a profiler session
/// that ends (sentry-python's `trace` lifecycle stops the profiler when no transaction runs)
/// are all sent before its last chunk, which is released by the window.
///
/// The buffer is plain state: callers pass the time, so tests drive it without sleeping.
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
    /// Its record in the join log (0: not logged).
    record: u64,
}

#[derive(Debug, Default)]
struct Session {
    chunks: Vec<Held>,
    /// Spans with their arrival time and join log record (0: not logged), in arrival order.
    spans: Vec<(SpanInterval, Instant, u64)>,
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
    /// The profiler id (the pipeline takes it from the chunks; the tests group releases by it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub profiler_id: String,
    /// The chunks with the project they were received for.
    pub chunks: Vec<(u64, ProfileChunk)>,
    /// The join log record of each chunk, in the order of `chunks` (0: not logged).
    pub records: Vec<u64>,
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
    /// Spans still kept per join log record.
    span_records: HashMap<u64, usize>,
    /// Join log records of spans whose spans have all left the buffer, not yet taken.
    done_span_records: Vec<u64>,
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
            span_records: HashMap::new(),
            done_span_records: Vec::new(),
        }
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
    #[cfg(test)]
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
    #[cfg(test)]
    pub fn add_spans(&mut self, spans: impl IntoIterator<Item = SpanInterval>, now: Instant) {
        self.add_logged_spans(spans, now, 0);
    }

    /// Records spans that arrived at `now`, kept in join log record `record` (0: not logged):
    /// once they have all left the buffer, [`JoinBuffer::take_done_span_records`] names it.
    pub fn add_logged_spans(
        &mut self,
        spans: impl IntoIterator<Item = SpanInterval>,
        now: Instant,
        record: u64,
    ) {
        let mut n = 0;
        for s in spans {
            let session = self.sessions.entry(s.profiler_id.clone()).or_default();
            session.latest_end_ns = session.latest_end_ns.max(s.end_ns);
            session.longest_ns = session.longest_ns.max(s.end_ns.saturating_sub(s.start_ns));
            session.spans.push((s, now, record));
            self.spans += 1;
            n += 1;
        }
        if record != 0 {
            if n == 0 {
                self.done_span_records.push(record);
            } else {
                *self.span_records.entry(record).or_default() += n;
            }
        }
    }

    /// The join log records of spans whose spans have all left the buffer since the last call
    /// (past their retention or evicted): they can be acknowledged.
    pub fn take_done_span_records(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.done_span_records)
    }

    /// Holds `chunk` (received for `project_id`) from `now` on.
    #[cfg(test)]
    pub fn add_chunk(&mut self, chunk: ProfileChunk, project_id: u64, now: Instant) {
        self.add_logged_chunk(chunk, project_id, now, 0);
    }

    /// Holds `chunk` (received for `project_id`) from `now` on, kept in join log record
    /// `record` (0: not logged); its [`Release`] names the record.
    pub fn add_logged_chunk(
        &mut self,
        chunk: ProfileChunk,
        project_id: u64,
        now: Instant,
        record: u64,
    ) {
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
            record,
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
                .any(|(sp, _, _)| sp.start_ns <= h.end_ns && sp.end_ns >= h.start_ns);
            if !linked {
                self.counts.unlinked += 1;
            }
            let i = *index.entry(pid.clone()).or_insert_with(|| {
                out.push(Release {
                    profiler_id: pid.clone(),
                    chunks: Vec::new(),
                    records: Vec::new(),
                    links: TransactionLinks::from_intervals(
                        s.spans.iter().map(|(sp, _, _)| sp.clone()),
                    ),
                });
                out.len() - 1
            });
            out[i].chunks.push((h.project_id, h.chunk));
            out[i].records.push(h.record);
        }
        self.expire_spans(now);
        out
    }

    /// Forgets spans past their retention (and the oldest beyond `max_spans`), and sessions
    /// left with nothing.
    fn expire_spans(&mut self, now: Instant) {
        let retention = self.cfg.span_retention;
        let mut removed = 0usize;
        let mut left: Vec<u64> = Vec::new();
        for s in self.sessions.values_mut() {
            let before = s.spans.len();
            s.spans.retain(|(_, at, record)| {
                let keep = now.saturating_duration_since(*at) < retention;
                if !keep && *record != 0 {
                    left.push(*record);
                }
                keep
            });
            removed += before - s.spans.len();
        }
        self.spans -= removed;
        if self.spans > self.cfg.max_spans {
            let mut all: Vec<(Instant, String)> = self
                .sessions
                .iter()
                .flat_map(|(pid, s)| s.spans.iter().map(move |(_, at, _)| (*at, pid.clone())))
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
                    let n = n.min(s.spans.len());
                    left.extend(s.spans.drain(..n).map(|(_, _, r)| r).filter(|r| *r != 0));
                }
            }
            self.spans = self.cfg.max_spans;
            self.counts.spans_evicted += excess as u64;
        }
        for record in left {
            if let Some(n) = self.span_records.get_mut(&record) {
                *n -= 1;
                if *n == 0 {
                    self.span_records.remove(&record);
                    self.done_span_records.push(record);
                }
            }
        }
        self.sessions
            .retain(|_, s| !s.chunks.is_empty() || !s.spans.is_empty());
    }
}

#[cfg(test)]
mod tests;
