//! The join buffer driven with explicit times: covered, window and overflow releases, links.

use super::*;
use profilink_proto::sentry::{Frame, ProfileData, Sample};
use profilink_translator::LinkSource;

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

#[test]
fn a_span_record_is_done_once_all_its_spans_left() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let cfg = JoinConfig {
        span_retention: Duration::from_secs(10),
        max_spans: 3,
        ..JoinConfig::default()
    };
    let mut b = JoinBuffer::new(cfg);
    // Record 5: two spans of two sessions; record 6: two spans, a second later; an unlogged
    // span; record 7: one span, later.
    b.add_logged_spans([span(P1, 1, 1, 2), span(P2, 2, 1, 2)], t0, 5);
    b.add_logged_spans([span(P1, 3, 1, 2), span(P1, 4, 1, 2)], at(1), 6);
    b.add_spans([span(P2, 9, 1, 2)], at(2));
    b.add_logged_chunk(chunk(P1, 1, 100, 101), 1, t0, 8);
    // Five spans, three allowed: the two oldest go (all of record 5).
    assert!(b.take_ready(at(2)).is_empty());
    assert_eq!(b.take_done_span_records(), vec![5]);
    assert_eq!(b.kept_spans(), 3);
    b.add_logged_spans([span(P2, 7, 1, 2)], at(5), 7);
    // Past the retention of record 6's spans: it is done, 7 is not; the unlogged span names
    // no record.
    b.take_ready(at(11));
    assert_eq!(b.take_done_span_records(), vec![6]);
    let r = b.take_ready(at(40));
    assert_eq!(r[0].records, vec![8], "a released chunk names its record");
    assert_eq!(b.take_done_span_records(), vec![7]);
    assert!(b.take_done_span_records().is_empty());
}
