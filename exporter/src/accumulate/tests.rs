use super::*;
use crate::config::SparseThreads;
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
fn parts_read_out_of_order_merge_when_they_fit_one_window() {
    let mut acc = ChunkAccumulator::new(cfg());
    let t0 = Instant::now();
    // Five-second parts of the minute [100, 160) in the order a partitioned backlog may give.
    for (id, start) in [(1, 130.0), (2, 115.0), (3, 150.0), (4, 100.0), (5, 125.0)] {
        let out = acc.push(id, "", &chunk(start, 5.0, 2.0), 100, t0);
        assert!(out.emitted.is_empty(), "part at {start} emitted alone");
    }
    // The window now starts at 100: a sample at 160 or later closes it, one before joins.
    assert!(
        acc.push(6, "", &chunk(155.0, 5.0, 2.0), 100, t0)
            .emitted
            .is_empty()
    );
    // 94.5 is 65 s before the newest sample (159.5): it cannot join and goes alone.
    let late = acc.push(7, "", &chunk(94.5, 0.5, 2.0), 10, t0);
    assert_eq!(late.emitted.len(), 1);
    assert_eq!(late.emitted[0].reason, EmitReason::Late);
    let next = acc.push(8, "", &chunk(160.0, 5.0, 2.0), 100, t0);
    assert_eq!(next.emitted.len(), 1);
    let minute = &next.emitted[0];
    assert_eq!(minute.reason, EmitReason::Duration);
    assert_eq!(minute.inputs, vec![1, 2, 3, 4, 5, 6]);
    let ts: Vec<f64> = minute
        .chunk
        .profile
        .samples
        .iter()
        .map(|s| s.timestamp)
        .collect();
    let mut want: Vec<f64> = [130.0, 115.0, 150.0, 100.0, 125.0, 155.0]
        .iter()
        .flat_map(|&start| (0..10).map(move |i| start + i as f64 / 2.0))
        .collect();
    want.sort_by(f64::total_cmp);
    assert_eq!(ts, want, "every sample of the six parts, once, in order");
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
