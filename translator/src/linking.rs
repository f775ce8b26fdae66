//! The link rule: which span an observation `(profiler_id, thread_id, time)` belongs to.
//!
//! Sentry links spans to profile chunks by profiler id, thread id and time (see the Sentry
//! ingestion notes §2); chunks themselves carry no trace ids. From transaction payloads:
//!
//! * A transaction takes part when its profiler id ([`Transaction::profiler_id`]:
//!   `contexts.profile.profiler_id`, else `contexts.trace.data.profiler_id`) equals the
//!   observation's profiler id.
//! * **Child spans** (`spans[]`) run on their own `data["thread.id"]`, over
//!   `[start_timestamp, timestamp]`. Spans without a thread id, a start or an end, or ending
//!   before they start, take no part.
//! * The **root span** (`contexts.trace.span_id`) runs on `contexts.trace.data["thread.id"]`
//!   ([`Transaction::root_thread_id`]; for V1 profiles, the profile's `active_thread_id` when
//!   that is missing) over the transaction's `[start_timestamp, timestamp]`.
//! * Ids: a span's trace id is its own `trace_id` when valid, else the transaction's
//!   `contexts.trace.trace_id`. Trace ids must be 32 hex digits (16 bytes), span ids 16 hex
//!   digits (8 bytes), not all zeros; a span without valid ids takes no part.
//! * Thread ids compare as strings (integers in span data are read as decimal strings).
//! * Intervals are closed: a span covers `t` when `start ≤ t ≤ end` (ns, from
//!   [`Timestamp::as_unix_nanos`], i.e. the digits the SDK wrote).
//!
//! **Rule.** An observation links to the *innermost* child span on its thread that covers its
//! time: the one with the latest start; among equal starts the shortest (earliest end); among
//! full ties the first in input order (transactions in order, spans in order). When no child span
//! covers it, it links to a root span that covers it and runs on that thread (several such roots:
//! the same innermost order). Otherwise it has no link.
//!
//! Span-streaming items (`span` items whose attributes carry `sentry.profiler_id`) take part
//! like a transaction's spans ([`span_item_interval`]; segments rank as roots).
//!
//! [`link_sample`] is the rule as a plain linear scan. [`TransactionLinks`] answers the same
//! question in `O(log n)`: per `(profiler_id, thread_id)` it precomputes, by a sweep over the
//! sorted span boundaries, the winner at each boundary and in each gap between boundaries, so a
//! lookup is one hash lookup and one binary search. [`ExactLinks`] replays known
//! [`SampleLink`]s (OTLP → chunk → OTLP keeps links that way).

use crate::SampleLink;
use crate::fx_hash::FxHashMap;
use profilink_proto::sentry::SpanItem;
use profilink_proto::sentry::Timestamp;
use profilink_proto::sentry::Transaction;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// A trace id and span id.
pub type LinkIds = ([u8; 16], [u8; 8]);

/// Something that knows which span an observation belongs to.
pub trait LinkSource {
    /// The `(trace_id, span_id)` of the span that observation `(profiler_id, thread_id,
    /// timestamp_ns)` belongs to, if any.
    fn link(&self, profiler_id: &str, thread_id: &str, timestamp_ns: u64) -> Option<LinkIds>;

    /// A lookup bound to one `(profiler_id, thread_id)`, for callers that ask about many
    /// observations of one thread (mostly in time order). The default asks [`LinkSource::link`];
    /// implementations may resolve the thread once and keep a cursor. It must answer exactly as
    /// `link` does.
    fn thread_links<'a>(&'a self, profiler_id: &'a str, thread_id: &'a str) -> ThreadLinks<'a> {
        Box::new(move |t| self.link(profiler_id, thread_id, t))
    }
}

/// A per-thread link lookup: observation time (Unix ns) → link (see
/// [`LinkSource::thread_links`]).
pub type ThreadLinks<'a> = Box<dyn FnMut(u64) -> Option<LinkIds> + 'a>;

/// No links at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLinks;

impl LinkSource for NoLinks {
    fn link(&self, _: &str, _: &str, _: u64) -> Option<LinkIds> {
        None
    }

    fn thread_links<'a>(&'a self, _: &'a str, _: &'a str) -> ThreadLinks<'a> {
        Box::new(|_| None)
    }
}

impl<T: LinkSource + ?Sized> LinkSource for &T {
    fn link(&self, profiler_id: &str, thread_id: &str, timestamp_ns: u64) -> Option<LinkIds> {
        (**self).link(profiler_id, thread_id, timestamp_ns)
    }

    fn thread_links<'a>(&'a self, profiler_id: &'a str, thread_id: &'a str) -> ThreadLinks<'a> {
        (**self).thread_links(profiler_id, thread_id)
    }
}

/// One span as the link rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanInterval {
    /// The profiler id it belongs to.
    pub profiler_id: String,
    /// The thread it ran on.
    pub thread_id: String,
    /// Start, Unix ns.
    pub start_ns: u64,
    /// End, Unix ns (inclusive).
    pub end_ns: u64,
    /// True for a transaction's root span (ranked below every child span).
    pub is_root: bool,
    /// Trace id.
    pub trace_id: [u8; 16],
    /// Span id.
    pub span_id: [u8; 8],
}

/// Rank of a candidate: larger wins (child over root, later start, earlier end, earlier input).
type Rank = (bool, u64, Reverse<u64>, Reverse<usize>);

impl SpanInterval {
    /// Whether the span covers `t` (closed interval).
    pub fn covers(&self, t: u64) -> bool {
        self.start_ns <= t && t <= self.end_ns
    }

    fn rank(&self, order: usize) -> Rank {
        (
            !self.is_root,
            self.start_ns,
            Reverse(self.end_ns),
            Reverse(order),
        )
    }

    fn ids(&self) -> LinkIds {
        (self.trace_id, self.span_id)
    }
}

fn hex_id<const N: usize>(s: Option<&str>) -> Option<[u8; N]> {
    let s = s?;
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    (out != [0u8; N]).then_some(out)
}

fn nanos(t: Option<Timestamp>) -> Option<u64> {
    t?.as_unix_nanos()
}

struct Parts<'a> {
    thread: Option<&'a str>,
    trace_id: Option<[u8; 16]>,
    span_id: Option<[u8; 8]>,
    start: Option<Timestamp>,
    end: Option<Timestamp>,
}

impl Parts<'_> {
    fn interval(self, profiler_id: &str, is_root: bool) -> Option<SpanInterval> {
        let (start_ns, end_ns) = (nanos(self.start)?, nanos(self.end)?);
        (start_ns <= end_ns).then_some(())?;
        Some(SpanInterval {
            profiler_id: profiler_id.to_owned(),
            thread_id: self.thread?.to_owned(),
            start_ns,
            end_ns,
            is_root,
            trace_id: self.trace_id?,
            span_id: self.span_id?,
        })
    }
}

/// The spans of `txn` under the link rule, for observations of `profiler_id`, with the root
/// span on `root_thread` (callers pass [`Transaction::root_thread_id`], or a fallback).
pub fn span_intervals_with(
    txn: &Transaction,
    profiler_id: &str,
    root_thread: Option<&str>,
) -> Vec<SpanInterval> {
    let trace = txn.contexts.trace.as_ref();
    let txn_trace: Option<[u8; 16]> = hex_id(trace.and_then(|t| t.trace_id.as_deref()));
    let root = Parts {
        thread: root_thread,
        trace_id: txn_trace,
        span_id: hex_id(trace.and_then(|t| t.span_id.as_deref())),
        start: txn.start_timestamp,
        end: txn.timestamp,
    };
    let mut out = Vec::with_capacity(txn.spans.len() + 1);
    out.extend(root.interval(profiler_id, true));
    for span in &txn.spans {
        let thread = span.thread_id();
        let parts = Parts {
            thread: thread.as_deref(),
            trace_id: hex_id(span.trace_id.as_deref()).or(txn_trace),
            span_id: hex_id(span.span_id.as_deref()),
            start: span.start_timestamp,
            end: span.timestamp,
        };
        out.extend(parts.interval(profiler_id, false));
    }
    out
}

/// A span-streaming item (`span` envelope item) under the link rule: it takes part with its
/// `sentry.profiler_id` and `thread.id` attributes, as a root span when it is a segment, and
/// with the same id and time rules as a transaction's spans. `None` when it has no profiler id.
pub fn span_item_interval(item: &SpanItem) -> Option<SpanInterval> {
    let profiler_id = item.profiler_id()?;
    let thread = item.thread_id();
    Parts {
        thread: thread.as_deref(),
        trace_id: hex_id(Some(item.trace_id.as_str())),
        span_id: hex_id(Some(item.span_id.as_str())),
        start: Some(item.start_timestamp),
        end: Some(item.end_timestamp),
    }
    .interval(profiler_id, item.is_segment.unwrap_or(false))
}

/// The spans of `txn` under the link rule: its profiler id and root thread from the payload.
/// Empty when the transaction has no profiler id.
pub fn span_intervals(txn: &Transaction) -> Vec<SpanInterval> {
    match txn.profiler_id() {
        Some(p) => span_intervals_with(txn, p, txn.root_thread_id().as_deref()),
        None => Vec::new(),
    }
}

/// The winner among `candidates` (in input order) for an observation at `t` on `thread_id`.
pub fn select_span<'a>(
    candidates: impl IntoIterator<Item = &'a SpanInterval>,
    profiler_id: &str,
    thread_id: &str,
    timestamp_ns: u64,
) -> Option<&'a SpanInterval> {
    candidates
        .into_iter()
        .enumerate()
        .filter(|(_, s)| {
            s.profiler_id == profiler_id && s.thread_id == thread_id && s.covers(timestamp_ns)
        })
        .max_by_key(|(order, s)| s.rank(*order))
        .map(|(_, s)| s)
}

/// The link rule as a plain function: scans every span of every transaction (`O(spans)`).
pub fn link_sample(
    transactions: &[Transaction],
    profiler_id: &str,
    thread_id: &str,
    timestamp_ns: u64,
) -> Option<LinkIds> {
    let spans: Vec<SpanInterval> = transactions.iter().flat_map(span_intervals).collect();
    select_span(&spans, profiler_id, thread_id, timestamp_ns).map(SpanInterval::ids)
}

/// The precomputed winners of one `(profiler_id, thread_id)`.
#[derive(Debug, Clone, Default)]
struct Timeline {
    /// Distinct span boundaries, ascending.
    points: Vec<u64>,
    /// Winner at exactly `points[i]`.
    at: Vec<Option<LinkIds>>,
    /// Winner in `(points[i], points[i + 1])`.
    after: Vec<Option<LinkIds>>,
}

impl Timeline {
    fn build(mut spans: Vec<(usize, SpanInterval)>) -> Self {
        let mut points: Vec<u64> = spans
            .iter()
            .flat_map(|(_, s)| [s.start_ns, s.end_ns])
            .collect();
        points.sort_unstable();
        points.dedup();
        spans.sort_by_key(|(order, s)| (s.start_ns, *order));
        let mut active: BTreeMap<Rank, LinkIds> = BTreeMap::new();
        let mut ends: BinaryHeap<Reverse<(u64, Rank)>> = BinaryHeap::new();
        let mut next = 0;
        let mut at = Vec::with_capacity(points.len());
        let mut after = Vec::with_capacity(points.len());
        for &p in &points {
            while let Some((order, s)) = spans.get(next).filter(|(_, s)| s.start_ns <= p) {
                let r = s.rank(*order);
                active.insert(r, s.ids());
                ends.push(Reverse((s.end_ns, r)));
                next += 1;
            }
            at.push(active.last_key_value().map(|(_, v)| *v));
            while let Some(Reverse((_, r))) =
                ends.peek().copied().filter(|Reverse((end, _))| *end <= p)
            {
                ends.pop();
                active.remove(&r);
            }
            after.push(active.last_key_value().map(|(_, v)| *v));
        }
        Timeline { points, at, after }
    }

    fn lookup(&self, t: u64) -> Option<LinkIds> {
        let i = self.points.partition_point(|&p| p <= t).checked_sub(1)?;
        self.answer(i, t)
    }

    fn answer(&self, i: usize, t: u64) -> Option<LinkIds> {
        if self.points[i] == t {
            self.at[i]
        } else {
            self.after[i]
        }
    }

    /// Like [`Timeline::lookup`], starting from the segment of the previous query (`cursor`):
    /// O(1) when queries move forward by less than a few segments, else a binary search.
    fn lookup_from(&self, cursor: &mut usize, t: u64) -> Option<LinkIds> {
        let n = self.points.len();
        let mut i = *cursor;
        if i < n && self.points[i] <= t {
            for _ in 0..4 {
                if i + 1 < n && self.points[i + 1] <= t {
                    i += 1;
                } else {
                    *cursor = i;
                    return self.answer(i, t);
                }
            }
        }
        let i = self.points.partition_point(|&p| p <= t).checked_sub(1)?;
        *cursor = i;
        self.answer(i, t)
    }
}

/// Links from transactions: per `(profiler_id, thread_id)` a precomputed timeline of winners.
#[derive(Debug, Clone, Default)]
pub struct TransactionLinks {
    index: FxHashMap<String, FxHashMap<String, Timeline>>,
}

impl TransactionLinks {
    /// Indexes the spans of `transactions` (see [`span_intervals`]).
    pub fn new(transactions: &[Transaction]) -> Self {
        Self::from_intervals(transactions.iter().flat_map(span_intervals))
    }

    /// Indexes the given spans; their order is the input order for full ties.
    pub fn from_intervals(spans: impl IntoIterator<Item = SpanInterval>) -> Self {
        let mut groups: FxHashMap<(String, String), Vec<(usize, SpanInterval)>> =
            FxHashMap::default();
        for (order, s) in spans.into_iter().enumerate() {
            groups
                .entry((s.profiler_id.clone(), s.thread_id.clone()))
                .or_default()
                .push((order, s));
        }
        let mut index: FxHashMap<String, FxHashMap<String, Timeline>> = FxHashMap::default();
        for ((p, t), spans) in groups {
            index
                .entry(p)
                .or_default()
                .insert(t, Timeline::build(spans));
        }
        TransactionLinks { index }
    }

    /// True when no span was indexed.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

impl LinkSource for TransactionLinks {
    fn link(&self, profiler_id: &str, thread_id: &str, timestamp_ns: u64) -> Option<LinkIds> {
        self.index
            .get(profiler_id)?
            .get(thread_id)?
            .lookup(timestamp_ns)
    }

    fn thread_links<'a>(&'a self, profiler_id: &'a str, thread_id: &'a str) -> ThreadLinks<'a> {
        match self.index.get(profiler_id).and_then(|m| m.get(thread_id)) {
            None => Box::new(|_| None),
            Some(timeline) => {
                let mut cursor = 0;
                Box::new(move |t| timeline.lookup_from(&mut cursor, t))
            }
        }
    }
}

/// Links replayed from known [`SampleLink`]s, matched on `(profiler_id, thread_id,
/// timestamp_ns)`. When several links share a key, the first wins.
#[derive(Debug, Clone, Default)]
pub struct ExactLinks {
    index: FxHashMap<String, FxHashMap<String, FxHashMap<u64, LinkIds>>>,
}

impl ExactLinks {
    /// Indexes `links`.
    pub fn new(links: &[SampleLink]) -> Self {
        let mut index: FxHashMap<String, FxHashMap<String, FxHashMap<u64, LinkIds>>> =
            FxHashMap::default();
        for l in links {
            index
                .entry(l.profiler_id.clone())
                .or_default()
                .entry(l.thread_id.clone())
                .or_default()
                .entry(l.timestamp_ns)
                .or_insert((l.trace_id, l.span_id));
        }
        ExactLinks { index }
    }
}

impl LinkSource for ExactLinks {
    fn link(&self, profiler_id: &str, thread_id: &str, timestamp_ns: u64) -> Option<LinkIds> {
        self.index
            .get(profiler_id)?
            .get(thread_id)?
            .get(&timestamp_ns)
            .copied()
    }

    fn thread_links<'a>(&'a self, profiler_id: &'a str, thread_id: &'a str) -> ThreadLinks<'a> {
        match self.index.get(profiler_id).and_then(|m| m.get(thread_id)) {
            None => Box::new(|_| None),
            Some(times) => Box::new(move |t| times.get(&t).copied()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(thread: &str, start: u64, end: u64, is_root: bool, span: u8) -> SpanInterval {
        SpanInterval {
            profiler_id: "p".into(),
            thread_id: thread.into(),
            start_ns: start,
            end_ns: end,
            is_root,
            trace_id: [1; 16],
            span_id: [span; 8],
        }
    }

    #[test]
    fn timeline_matches_linear_rule() {
        let spans = vec![
            iv("1", 0, 100, true, 1),
            iv("1", 10, 50, false, 2),
            iv("1", 20, 30, false, 3),
            iv("1", 20, 25, false, 4),
            iv("1", 40, 60, false, 5),
            iv("1", 60, 60, false, 6),
            iv("1", 90, 120, true, 7),
            iv("2", 0, 10, false, 8),
            iv("1", 20, 25, false, 9),
        ];
        let links = TransactionLinks::from_intervals(spans.clone());
        for t in 0..=130 {
            for th in ["1", "2", "3"] {
                let want = select_span(&spans, "p", th, t).map(SpanInterval::ids);
                assert_eq!(links.link("p", th, t), want, "t={t} thread={th}");
            }
        }
        for th in ["1", "2", "3"] {
            let mut cursor = links.thread_links("p", th);
            // Forward, backward and jumping queries all answer as `link` does.
            for t in (0..=130)
                .chain((0..=130).rev())
                .chain([5, 120, 3, 60, 61, 59])
            {
                assert_eq!(cursor(t), links.link("p", th, t), "t={t} thread={th}");
            }
        }
        assert_eq!(links.link("p", "1", 22).unwrap().1, [4; 8]);
        assert_eq!(links.link("p", "1", 95).unwrap().1, [7; 8]);
        assert_eq!(links.link("q", "1", 22), None);
    }
}
