//! Two adjacent windows as one chunk (`pair`): when they pair, when a due window waits for the
//! next one, and when it goes out alone after all.

use super::*;
use profilink_proto::sentry::{Frame, Sample};
use std::time::Duration;

/// A part of session "s" with one sample per `(timestamp, thread)`.
fn part(samples: &[(f64, &str)]) -> ProfileChunk {
    let mut c = ProfileChunk {
        chunk_id: "1".repeat(32),
        profiler_id: "c".repeat(32),
        platform: "rust".into(),
        version: "2".into(),
        ..Default::default()
    };
    c.profile.frames = vec![std::sync::Arc::new(Frame {
        function: Some("main".into()),
        ..Default::default()
    })];
    c.profile.stacks = vec![vec![0]];
    for &(t, tid) in samples {
        c.profile.samples.push(Sample {
            timestamp: t,
            stack_id: 0,
            thread_id: tid.into(),
        });
    }
    c
}

/// Samples every `step` seconds in `[from, to)` on thread "1".
fn every(from: f64, to: f64, step: f64) -> Vec<(f64, &'static str)> {
    let n = ((to - from) / step).round() as usize;
    (0..n).map(|i| (from + i as f64 * step, "1")).collect()
}

fn spans(out: &[Emitted]) -> Vec<(f64, f64, EmitReason)> {
    out.iter()
        .map(|e| {
            let ts = e.chunk.profile.samples.iter().map(|s| s.timestamp);
            let first = ts.clone().fold(f64::INFINITY, f64::min);
            (first, ts.fold(f64::NEG_INFINITY, f64::max), e.reason)
        })
        .collect()
}

#[test]
fn a_capture_across_a_boundary_is_one_chunk_and_keeps_its_sparse_threads() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
    let t0 = Instant::now();
    // 5 s from 57 to 62; thread "9" has one sample on each side of the boundary at 60. As two
    // chunks it would have one sample in each, and Relay would drop both.
    let mut samples = every(57.0, 62.0, 0.5);
    samples.extend([(58.2, "9"), (61.2, "9")]);
    acc.push(1, "", &part(&samples), 100, t0);
    assert_eq!(acc.window_count(), 2);
    let out = acc.flush_all();
    assert_eq!(spans(&out), vec![(57.0, 61.5, EmitReason::Flush)]);
    assert_eq!(out[0].sparse_samples_dropped, 0);
    assert_eq!(out[0].sparse_samples_grouped, 0);
    assert_eq!(out[0].chunk.profile.samples.len(), 12);
    assert_eq!(out[0].inputs, vec![1]);
    assert_eq!(acc.release(&out[0].inputs), vec![1]);
}

#[test]
fn windows_spanning_more_than_a_window_together_stay_apart() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
    let t0 = Instant::now();
    acc.push(1, "", &part(&every(50.0, 115.0, 1.0)), 100, t0);
    let out = acc.flush_all();
    assert_eq!(
        spans(&out),
        vec![
            (50.0, 59.0, EmitReason::Flush),
            (60.0, 114.0, EmitReason::Flush)
        ]
    );
}

#[test]
fn a_settled_window_waits_for_its_pair_then_goes_out_with_it() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
    let t0 = Instant::now();
    acc.push(1, "", &part(&every(50.0, 65.0, 1.0)), 100, t0);
    // [0, 60) is passed and settles after 5 s, but pairs with [60, 120): it is held.
    assert!(acc.poll(t0 + Duration::from_secs(6)).is_empty());
    assert_eq!(acc.window_count(), 2);
    // A held window does not keep the engine's timer busy: the next deadline is the idle one.
    assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_secs(10)));
    let t1 = t0 + Duration::from_secs(7);
    assert!(
        acc.push(2, "", &part(&every(65.0, 70.0, 1.0)), 100, t1)
            .emitted
            .is_empty()
    );
    let out = acc.poll(t1 + Duration::from_secs(10));
    assert_eq!(spans(&out), vec![(50.0, 69.0, EmitReason::Idle)]);
    assert_eq!(out[0].inputs, vec![1, 2]);
    // Input 1 was in both windows: it is released once, by the one chunk.
    assert_eq!(acc.release(&out[0].inputs), vec![1, 2]);
}

#[test]
fn a_held_window_goes_out_alone_once_the_next_one_grows_past_a_window() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
    let t0 = Instant::now();
    acc.push(1, "", &part(&every(50.0, 65.0, 1.0)), 100, t0);
    assert!(acc.poll(t0 + Duration::from_secs(6)).is_empty());
    // 110 is 60 s after the held window's first sample: they can no longer pair.
    let out = acc
        .push(
            2,
            "",
            &part(&every(105.0, 111.0, 1.0)),
            100,
            t0 + Duration::from_secs(7),
        )
        .emitted;
    assert_eq!(spans(&out), vec![(50.0, 59.0, EmitReason::Settled)]);
    assert_eq!(acc.window_count(), 1);
    let rest = acc.flush_all();
    assert_eq!(spans(&rest), vec![(60.0, 110.0, EmitReason::Flush)]);
}

#[test]
fn the_lateness_rule_waits_for_a_next_window_not_yet_read() {
    // With a 60 s lateness, [0, 60) expires once the newest sample reaches 120; a part of
    // [60, 120) read after that still pairs with it, as it would have in time order.
    let cfg = AccumulateConfig {
        chunk_lateness: Duration::from_secs(60),
        ..AccumulateConfig::default()
    };
    let t0 = Instant::now();
    let mut acc = ChunkAccumulator::new(cfg.clone());
    acc.push(1, "", &part(&every(55.0, 60.0, 1.0)), 100, t0);
    assert!(
        acc.push(2, "", &part(&every(125.0, 130.0, 1.0)), 100, t0)
            .emitted
            .is_empty()
    );
    let late = acc
        .push(3, "", &part(&every(60.0, 64.0, 1.0)), 100, t0)
        .emitted;
    assert!(late.is_empty(), "{:?}", spans(&late));
    // [120, 180) passes both windows' lateness: they go out as one chunk.
    let out = acc
        .push(4, "", &part(&every(181.0, 182.0, 1.0)), 100, t0)
        .emitted;
    assert_eq!(spans(&out), vec![(55.0, 63.0, EmitReason::Duration)]);

    // Without the part of [60, 120), [0, 60) goes out alone when [60, 120)'s lateness passes.
    let mut acc = ChunkAccumulator::new(cfg);
    acc.push(1, "", &part(&every(55.0, 60.0, 1.0)), 100, t0);
    assert!(
        acc.push(2, "", &part(&every(125.0, 130.0, 1.0)), 100, t0)
            .emitted
            .is_empty()
    );
    let out = acc
        .push(4, "", &part(&every(181.0, 182.0, 1.0)), 100, t0)
        .emitted;
    assert_eq!(spans(&out), vec![(55.0, 59.0, EmitReason::Duration)]);
}

#[test]
fn windows_too_large_together_do_not_pair() {
    let cfg = AccumulateConfig {
        max_chunk_bytes: 150,
        ..AccumulateConfig::default()
    };
    let mut acc = ChunkAccumulator::new(cfg);
    let t0 = Instant::now();
    acc.push(1, "", &part(&every(57.0, 63.0, 1.0)), 200, t0);
    let out = acc.flush_all();
    assert_eq!(
        spans(&out),
        vec![
            (57.0, 59.0, EmitReason::Flush),
            (60.0, 62.0, EmitReason::Flush)
        ]
    );
}

#[test]
fn a_lone_sample_before_a_minute_goes_out_with_it_within_relays_limit() {
    let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
    let t0 = Instant::now();
    // The process is seen once at 53.5, then runs on through the next minute. Alone,
    // window 0 would be a chunk of one sample, which Relay drops.
    let mut first = vec![(53.5, "1")];
    first.extend(every(60.0, 65.0, 1.0));
    acc.push(1, "", &part(&first), 60, t0);
    // Window 0 settles (passed, quiet for half the idle timeout) but is held for window 1.
    assert!(acc.poll(t0 + Duration::from_secs(5)).is_empty());
    let mut id = 2;
    for from in (65..120).step_by(5) {
        let from = f64::from(from);
        let t = t0 + Duration::from_secs(5 + id);
        acc.push(id, "", &part(&every(from, from + 5.0, 1.0)), 50, t);
        id += 1;
    }
    // Window 1 holds 60-119: 65.5 s with the lone sample, under Relay's 66 s.
    acc.push(
        id,
        "",
        &part(&[(126.0, "1")]),
        10,
        t0 + Duration::from_secs(5 + id),
    );
    let out = acc.poll(t0 + Duration::from_secs(5 + id + 5));
    assert_eq!(spans(&out), vec![(53.5, 119.0, EmitReason::Settled)]);
    assert_eq!(out[0].sparse_samples_dropped, 0);
    assert_eq!(out[0].chunk.profile.samples.len(), 61);
    assert_eq!(out[0].inputs.len(), id as usize - 1);
}

#[test]
fn a_lone_sample_stays_alone_past_relays_limit() {
    let t0 = Instant::now();
    let flushed = |lone: f64| {
        let mut acc = ChunkAccumulator::new(AccumulateConfig::default());
        let mut samples = vec![(lone, "1")];
        samples.extend(every(60.0, 120.0, 1.0));
        acc.push(1, "", &part(&samples), 100, t0);
        acc.flush_all()
    };
    // 53 to 119 is 66 s: one chunk.
    let out = flushed(53.0);
    assert_eq!(spans(&out), vec![(53.0, 119.0, EmitReason::Flush)]);
    assert_eq!(out[0].sparse_samples_dropped, 0);
    // 52.5 to 119 is 66.5 s: Relay would refuse it, so the lone sample goes alone (and is
    // dropped, counted) and the minute keeps its own chunk.
    let out = flushed(52.5);
    assert_eq!(out.len(), 2);
    assert!(out[0].chunk.profile.samples.is_empty());
    assert_eq!(out[0].sparse_samples_dropped, 1);
    assert_eq!(spans(&out[1..]), vec![(60.0, 119.0, EmitReason::Flush)]);
}
