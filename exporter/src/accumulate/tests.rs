//! The accumulator's rules, one by one: merging into time-aligned windows, closing them
//! (lateness, settling, size, memory, idle), late data, sparse threads, acknowledgements.

use super::*;
use crate::config::SparseThreads;
use profilink_proto::sentry::{Frame, Measurement, MeasurementValue, Sample};
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

/// Windows close as soon as the newest sample passes their end.
fn no_lateness() -> AccumulateConfig {
    AccumulateConfig {
        chunk_lateness: Duration::ZERO,
        ..cfg()
    }
}

fn timestamps(e: &Emitted) -> Vec<f64> {
    e.chunk
        .profile
        .samples
        .iter()
        .map(|s| s.timestamp)
        .collect()
}

#[test]
fn twelve_five_second_chunks_make_one_minute() {
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    let mut acked = Vec::new();
    for i in 0..12u64 {
        let out = acc.push(i, "", &chunk(960.0 + 5.0 * i as f64, 5.0, 20.0), 1000, t0);
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
    let group = profilink_proto::sentry::group_id(b"name\0w").to_string();
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
    let mut acc = ChunkAccumulator::new(no_lateness());
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
    let mut acc = ChunkAccumulator::new(no_lateness());
    let t0 = Instant::now();
    // 100..250 covers the windows starting at 60, 120, 180 and 240: the first three are
    // passed by its own newest sample (249.5).
    let out = acc.push(1, "", &chunk(100.0, 150.0, 2.0), 3000, t0);
    assert_eq!(out.emitted.len(), 3);
    let firsts: Vec<f64> = out.emitted.iter().map(|e| timestamps(e)[0]).collect();
    assert_eq!(firsts, vec![100.0, 120.0, 180.0]);
    assert_eq!(acc.session_count(), 1);
    let late = acc.push(2, "", &chunk(10.0, 5.0, 2.0), 100, t0);
    assert_eq!(late.emitted.len(), 1);
    assert_eq!(late.emitted[0].reason, EmitReason::Late);
    assert_eq!(acc.release(&late.emitted[0].inputs), vec![2]);
    assert_eq!(acc.release(&[1, 1, 1]), Vec::<u64>::new());
    let rest = acc.flush_all();
    assert_eq!(timestamps(&rest[0])[0], 240.0);
    assert_eq!(acc.release(&rest[0].inputs), vec![1]);
}

#[test]
fn parts_read_out_of_order_merge_into_their_window() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig {
        chunk_lateness: Duration::from_secs(60),
        ..cfg()
    });
    let t0 = Instant::now();
    // Five-second parts of the minute [120, 180) in the order a partitioned backlog may give.
    for (id, start) in [(1, 150.0), (2, 135.0), (3, 170.0), (4, 120.0), (5, 145.0)] {
        let out = acc.push(id, "", &chunk(start, 5.0, 2.0), 100, t0);
        assert!(out.emitted.is_empty(), "part at {start} emitted alone");
    }
    assert!(
        acc.push(6, "", &chunk(175.0, 5.0, 2.0), 100, t0)
            .emitted
            .is_empty()
    );
    // The window [0, 60) ended 60 s (the lateness) or more before the newest sample (179.5):
    // its samples go alone.
    let late = acc.push(7, "", &chunk(40.0, 0.5, 2.0), 10, t0);
    assert_eq!(late.emitted.len(), 1);
    assert_eq!(late.emitted[0].reason, EmitReason::Late);
    // [60, 120) is still within the lateness: a part for it opens it.
    assert!(
        acc.push(8, "", &chunk(100.0, 5.0, 2.0), 100, t0)
            .emitted
            .is_empty()
    );
    // A sample at 240 puts [120, 180) (and [60, 120)) past the lateness.
    let next = acc.push(9, "", &chunk(240.0, 5.0, 2.0), 100, t0);
    assert_eq!(next.emitted.len(), 2);
    assert!(
        next.emitted
            .iter()
            .all(|e| e.reason == EmitReason::Duration)
    );
    assert_eq!(next.emitted[0].inputs, vec![8]);
    let minute = &next.emitted[1];
    assert_eq!(minute.inputs, vec![1, 2, 3, 4, 5, 6]);
    let mut want: Vec<f64> = [150.0, 135.0, 170.0, 120.0, 145.0, 175.0]
        .iter()
        .flat_map(|&start| (0..10).map(move |i| start + i as f64 / 2.0))
        .collect();
    want.sort_by(f64::total_cmp);
    assert_eq!(
        timestamps(minute),
        want,
        "every sample of the six parts, once, in order"
    );
    // Each input's range is recorded once, as taken.
    assert_eq!(minute.consumed.len(), 6);
    // Measurement values went along with their samples.
    assert_eq!(minute.chunk.measurements["cpu"].values.len(), 6);
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

#[test]
fn windows_are_aligned_to_the_epoch_not_to_the_first_sample() {
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    // 50..120 crosses the boundary at 60 although it is the session's first part (and spans
    // more than a window, so the two do not pair).
    acc.push(1, "", &chunk(50.0, 70.0, 10.0), 1000, t0);
    assert_eq!(acc.window_count(), 2);
    let out = acc.flush_all();
    let spans: Vec<(f64, f64)> = out
        .iter()
        .map(|e| {
            let ts = timestamps(e);
            (ts[0], ts[ts.len() - 1])
        })
        .collect();
    assert_eq!(spans, vec![(50.0, 59.9), (60.0, 119.9)]);
    assert!(out.iter().all(|e| e.reason == EmitReason::Flush));
}

#[test]
fn a_window_passed_after_a_poll_still_settles_on_time() {
    // `poll` skips its look until the earliest deadline it found; a later push that passes a
    // window must bring that deadline forward.
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    acc.push(1, "", &chunk(0.0, 10.0, 2.0), 100, t0);
    assert!(acc.poll(t0 + Duration::from_secs(1)).is_empty());
    // Another session's samples pass its window [0, 60) at t0 + 2 s: it settles at t0 + 7 s,
    // before the first session's idle deadline (t0 + 10 s).
    let mut b = chunk(0.0, 70.0, 2.0);
    b.profiler_id = "c".repeat(32);
    let t2 = t0 + Duration::from_secs(2);
    assert!(acc.push(2, "", &b, 100, t2).emitted.is_empty());
    assert!(acc.poll(t2 + Duration::from_millis(4999)).is_empty());
    let settled = acc.poll(t2 + Duration::from_secs(5));
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0].reason, EmitReason::Settled);
    assert_eq!(settled[0].chunk.profiler_id, "c".repeat(32));
}

#[test]
fn a_passed_window_settles_after_half_the_idle_timeout_the_newest_waits_for_idle() {
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    acc.push(1, "", &chunk(0.0, 70.0, 2.0), 100, t0);
    // [0, 60) is passed (newest 69.5), [60, 120) is not (they span more than a window: no
    // pair).
    assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_secs(5)));
    assert!(acc.poll(t0 + Duration::from_millis(4999)).is_empty());
    // A sample joining the passed window keeps it open for another 5 s.
    let t1 = t0 + Duration::from_secs(3);
    assert!(
        acc.push(2, "", &chunk(58.0, 1.0, 2.0), 10, t1)
            .emitted
            .is_empty()
    );
    assert!(acc.poll(t0 + Duration::from_secs(6)).is_empty());
    let settled = acc.poll(t1 + Duration::from_secs(5));
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].reason, EmitReason::Settled);
    assert_eq!(settled[0].inputs, vec![1, 2]);
    assert_eq!(settled[0].chunk.profile.samples.len(), 120 + 2);
    // The newest window goes on idle (10 s after the last sample).
    assert!(acc.poll(t1 + Duration::from_millis(9999)).is_empty());
    let idle = acc.poll(t1 + Duration::from_secs(10));
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0].reason, EmitReason::Idle);
    assert_eq!(timestamps(&idle[0])[0], 60.0);
    assert_eq!(acc.session_count(), 0);
}

#[test]
fn lateness_bounds_how_long_a_window_waits_and_what_joins_it() {
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    // Default lateness (10 min): a part 9 min older than the newest still joins its window.
    acc.push(1, "", &chunk(600.0, 5.0, 2.0), 100, t0);
    assert!(
        acc.push(2, "", &chunk(1140.0, 5.0, 2.0), 100, t0)
            .emitted
            .is_empty()
    );
    assert!(
        acc.push(3, "", &chunk(610.0, 5.0, 2.0), 100, t0)
            .emitted
            .is_empty()
    );
    // The newest sample passing [600, 660) by 10 min closes it, with both of its parts.
    let out = acc.push(4, "", &chunk(1260.0, 5.0, 2.0), 100, t0);
    assert_eq!(out.emitted.len(), 1);
    assert_eq!(out.emitted[0].reason, EmitReason::Duration);
    assert_eq!(out.emitted[0].inputs, vec![1, 3]);
    // Now a part for it is late, and goes alone.
    let late = acc.push(5, "", &chunk(620.0, 5.0, 2.0), 100, t0);
    assert_eq!(late.emitted.len(), 1);
    assert_eq!(late.emitted[0].reason, EmitReason::Late);
    assert_eq!(late.emitted[0].inputs, vec![5]);
    assert_eq!(acc.window_count(), 2);
}

#[test]
fn a_part_that_does_not_fit_cuts_its_window_before_it_then_opens_it_again() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig {
        max_chunk_bytes: 2500,
        ..cfg()
    });
    let t0 = Instant::now();
    acc.push(1, "", &chunk(0.0, 5.0, 20.0), 1000, t0);
    acc.push(2, "", &chunk(5.0, 5.0, 20.0), 1000, t0);
    // Alone too large too: cut before it, then split at 2500 B (250 samples of 10 B).
    let out = acc.push(3, "", &chunk(10.0, 30.0, 20.0), 6000, t0);
    let sizes: Vec<usize> = out
        .emitted
        .iter()
        .map(|e| e.chunk.profile.samples.len())
        .collect();
    assert_eq!(sizes, vec![200, 250, 250]);
    assert!(out.emitted.iter().all(|e| e.reason == EmitReason::Size));
    let rest = acc.flush_all();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].chunk.profile.samples.len(), 100);
    // Input 3's three pieces took disjoint ranges of it.
    let mut ranges: Vec<(f64, f64)> = out.emitted[1..]
        .iter()
        .chain(&rest)
        .flat_map(|e| &e.consumed)
        .filter(|c| c.input == 3)
        .map(|c| (f64::from_bits(c.lo), f64::from_bits(c.hi)))
        .collect();
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(ranges.len(), 3);
    assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "{ranges:?}");
}

#[test]
fn the_memory_bound_cuts_the_least_recently_joined_windows_of_any_session() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig {
        max_open_bytes: 2500,
        ..cfg()
    });
    let t0 = Instant::now();
    let mut other = chunk(0.0, 5.0, 2.0);
    other.profiler_id = "c".repeat(32);
    acc.push(1, "", &chunk(60.0, 5.0, 2.0), 1000, t0);
    acc.push(2, "", &other, 1000, t0 + Duration::from_millis(1));
    assert_eq!(acc.open_bytes(), 2000);
    // A third window passes the bound: the one joined least recently (input 1's at 60, not
    // the other session's older one at 0) is cut.
    let out = acc.push(3, "", &chunk(120.0, 5.0, 2.0), 1000, t0);
    assert_eq!(out.emitted.len(), 1);
    assert_eq!(out.emitted[0].reason, EmitReason::Memory);
    assert_eq!(out.emitted[0].inputs, vec![1]);
    assert_eq!(acc.open_bytes(), 2000);
    assert_eq!(acc.window_count(), 2);
    // Bounded whatever comes: ten more windows, never more than 2500 B held.
    let mut all = out.emitted;
    for i in 0..10u64 {
        let out = acc.push(
            10 + i,
            "",
            &chunk(180.0 + 60.0 * i as f64, 5.0, 2.0),
            1000,
            t0,
        );
        assert!(out.emitted.iter().all(|e| e.reason == EmitReason::Memory));
        all.extend(out.emitted);
        assert!(acc.open_bytes() <= 2500);
    }
    // Nothing is lost: every input is in exactly one chunk.
    all.extend(acc.flush_all());
    let mut inputs: Vec<u64> = all.iter().flat_map(|e| e.inputs.clone()).collect();
    inputs.sort();
    let want: Vec<u64> = [1, 2, 3].into_iter().chain(10..20).collect();
    assert_eq!(inputs, want);
}
