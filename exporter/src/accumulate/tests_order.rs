//! Properties over random inputs (proptest): parts of a session read in any order within the
//! lateness bound give the same chunks as read in order; a crash with any prefix of the
//! emitted chunks persisted, then the replay of what was not acknowledged (less what the
//! persisted chunks hold), gives the chunks of an uninterrupted run; and whatever the order and
//! the limits, every sample ends up in exactly one chunk, every part's consumed ranges are
//! disjoint, and every input is released once its chunks are.

use super::*;
use crate::queue::consumed::ConsumedIndex;
use profilink_proto::sentry::{Frame, Measurement, MeasurementValue, Sample};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Around 2026: a realistic epoch, not a multiple of the window.
const BASE: f64 = 1_780_000_017.0;

/// One part: (session 0 or 1, start offset in 50 ms steps, samples, thread pattern).
type PartSpec = (u8, u32, u32, u8);

fn part(spec: PartSpec) -> ProfileChunk {
    let (session, start, n, threads) = spec;
    let mut c = ProfileChunk {
        chunk_id: "1".repeat(32),
        profiler_id: if session == 0 { "a" } else { "b" }.repeat(32),
        platform: "rust".into(),
        version: "2".into(),
        ..Default::default()
    };
    c.profile.frames = ["main", "work", "idle"]
        .iter()
        .map(|f| {
            Arc::new(Frame {
                function: Some((*f).into()),
                ..Default::default()
            })
        })
        .collect();
    c.profile.stacks = vec![vec![0], vec![1, 0], vec![2, 0]];
    let t0 = BASE + f64::from(start) * 0.05;
    for i in 0..n {
        let thread = 1 + (i + u32::from(threads)) % (1 + u32::from(threads % 3));
        c.profile.samples.push(Sample {
            timestamp: t0 + f64::from(i) * 0.05,
            stack_id: ((i + u32::from(threads)) % 3) as usize,
            thread_id: thread.to_string().into(),
        });
    }
    c.measurements.insert(
        "cpu".into(),
        Measurement {
            unit: "percent".into(),
            values: vec![MeasurementValue {
                timestamp: t0,
                value: f64::from(n),
            }],
        },
    );
    c
}

/// A chunk as Sentry reads it, whatever the frame and stack indexing and the sample order:
/// its samples as (timestamp bits, thread, frame names), sorted, and its measurement values.
type Canonical = (Vec<(u64, String, Vec<String>)>, Vec<(u64, u64)>);

fn canonical(c: &ProfileChunk) -> Canonical {
    let p = &c.profile;
    let mut samples: Vec<(u64, String, Vec<String>)> = p
        .samples
        .iter()
        .map(|s| {
            let frames = p.stacks[s.stack_id]
                .iter()
                .map(|&f| p.frames[f].function.clone().unwrap_or_default().to_string())
                .collect();
            (s.timestamp.to_bits(), s.thread_id.to_string(), frames)
        })
        .collect();
    samples.sort();
    let mut values: Vec<(u64, u64)> = c
        .measurements
        .values()
        .flat_map(|m| &m.values)
        .map(|v| (v.timestamp.to_bits(), v.value.to_bits()))
        .collect();
    values.sort();
    (samples, values)
}

/// Chunks by id (an id must never name two contents).
fn by_id(chunks: &[Emitted]) -> BTreeMap<String, Canonical> {
    let mut out = BTreeMap::new();
    for e in chunks {
        let c = canonical(&e.chunk);
        if let Some(prev) = out.insert(e.chunk.chunk_id.clone(), c.clone()) {
            assert_eq!(prev, c, "two contents under id {}", e.chunk.chunk_id);
        }
    }
    out
}

/// No size or memory cuts: chunks depend on timestamps and lateness only.
fn unbounded(lateness: u64) -> AccumulateConfig {
    AccumulateConfig {
        chunk_lateness: Duration::from_secs(lateness),
        max_chunk_bytes: u64::MAX / 4,
        max_open_bytes: u64::MAX / 4,
        sparse_threads: crate::config::SparseThreads::Drop,
        ..AccumulateConfig::default()
    }
}

/// Pushes `parts` (id, chunk) in order, then flushes; every chunk emitted.
fn run(cfg: &AccumulateConfig, parts: &[(u64, ProfileChunk)]) -> Vec<Emitted> {
    let mut acc = ChunkAccumulator::new(cfg.clone());
    let now = Instant::now();
    let mut out = Vec::new();
    for (id, c) in parts {
        let bytes = 40 * c.profile.samples.len() as u64;
        out.extend(acc.push(*id, "", c, bytes, now).emitted);
    }
    out.extend(acc.flush_all());
    out
}

fn specs(max_parts: usize) -> impl Strategy<Value = Vec<PartSpec>> {
    // Starts within 4 minutes, up to 10 s per part.
    prop::collection::vec((0u8..2, 0u32..4800, 1u32..200, any::<u8>()), 1..max_parts)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Parts spread over less than the lateness bound, in any order: the same chunks (ids and
    /// contents) as in time order.
    #[test]
    fn any_order_within_the_lateness_gives_the_chunks_of_time_order(
        (parts, order) in specs(24).prop_flat_map(|p| {
            let n = p.len();
            (Just(p), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        })
    ) {
        let cfg = unbounded(600);
        let mut in_time: Vec<(u64, ProfileChunk)> =
            parts.iter().enumerate().map(|(i, s)| (i as u64, part(*s))).collect();
        in_time.sort_by_key(|(_, c)| c.profile.samples[0].timestamp.to_bits());
        let shuffled: Vec<(u64, ProfileChunk)> =
            order.iter().map(|&i| (i as u64, part(parts[i]))).collect();
        let a = run(&cfg, &in_time);
        let b = run(&cfg, &shuffled);
        prop_assert!(a.iter().all(|e| e.reason == EmitReason::Flush));
        prop_assert_eq!(by_id(&a), by_id(&b));
    }

    /// A crash after any number of parts, with any prefix of the emitted chunks persisted
    /// (the persist jobs run in order), then the replay of the unacknowledged inputs less what
    /// the persisted chunks hold, then the rest of the stream: the chunks of an uninterrupted
    /// run, each sample once.
    #[test]
    fn a_crash_and_replay_give_the_chunks_of_an_uninterrupted_run(
        lens in prop::collection::vec((1u32..400, 0u32..300), 1..20),
        lateness in prop::sample::select(vec![0u64, 30, 600]),
        crash in any::<prop::sample::Index>(),
        persisted in any::<prop::sample::Index>(),
    ) {
        // Consecutive parts of one session (lengths and gaps in 50 ms steps).
        let mut parts = Vec::new();
        let mut start = 0u32;
        for (i, (n, gap)) in lens.iter().enumerate() {
            parts.push((i as u64, part((0, start, *n, i as u8))));
            start += n + gap;
        }
        let cfg = unbounded(lateness);
        let reference = by_id(&run(&cfg, &parts));

        let crash = crash.index(parts.len() + 1);
        let mut acc = ChunkAccumulator::new(cfg.clone());
        let now = Instant::now();
        let mut emitted = Vec::new();
        for (id, c) in &parts[..crash] {
            emitted.extend(acc.push(*id, "", c, 40 * c.profile.samples.len() as u64, now).emitted);
        }
        let kept = persisted.index(emitted.len() + 1);
        let open = acc.flush_all();
        let mut replay: BTreeSet<u64> = BTreeSet::new();
        for e in emitted[kept..].iter().chain(&open) {
            replay.extend(e.inputs.iter().copied());
        }
        let mut ledger = ConsumedIndex::default();
        ledger.extend(emitted[..kept].iter().flat_map(|e| &e.consumed));
        let mut second: Vec<(u64, ProfileChunk)> = Vec::new();
        for (id, c) in &parts[..crash] {
            if replay.contains(id) {
                let mut c = c.clone();
                acc.filter_replayed(&mut c, |ts| ledger.covers(*id, 0, ts));
                second.push((*id, c));
            }
        }
        second.extend(parts[crash..].iter().cloned());
        let mut got = emitted[..kept].to_vec();
        got.extend(run(&cfg, &second));
        let samples: usize = got
            .iter()
            .map(|e| e.chunk.profile.samples.len() + e.sparse_samples_dropped)
            .sum();
        let want: usize = parts.iter().map(|(_, c)| c.profile.samples.len()).sum();
        prop_assert_eq!(samples, want, "each sample once");
        prop_assert_eq!(by_id(&got), reference);
    }

    /// Any order, any limits: every sample in exactly one chunk, each part's consumed ranges
    /// disjoint and covering exactly its samples in the chunk, open memory within the bound
    /// after every push, and every input released once its chunks are.
    #[test]
    fn whatever_the_order_and_limits_every_sample_is_in_one_chunk(
        parts in specs(24),
        lateness in prop::sample::select(vec![0u64, 30, 600]),
        max_chunk in 400u64..20_000,
        max_open in 400u64..40_000,
    ) {
        let cfg = AccumulateConfig {
            chunk_lateness: Duration::from_secs(lateness),
            max_chunk_bytes: max_chunk,
            max_open_bytes: max_open,
            sparse_threads: crate::config::SparseThreads::Drop,
            ..AccumulateConfig::default()
        };
        let mut acc = ChunkAccumulator::new(cfg);
        let now = Instant::now();
        let mut out = Vec::new();
        let chunks: Vec<ProfileChunk> = parts.iter().map(|s| part(*s)).collect();
        for (id, c) in chunks.iter().enumerate() {
            out.extend(acc.push(id as u64, "", c, 40 * c.profile.samples.len() as u64, now).emitted);
            prop_assert!(acc.open_bytes() <= max_open);
        }
        out.extend(acc.poll(now + Duration::from_secs(5)));
        out.extend(acc.flush_all());
        // Each (input, timestamp) once; Drop only removes single-sample threads.
        let mut seen: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        let mut released = BTreeSet::new();
        for e in &out {
            for c in &e.consumed {
                let (lo, hi) = (f64::from_bits(c.lo), f64::from_bits(c.hi));
                prop_assert!(lo <= hi);
                let src = &chunks[c.input as usize];
                for s in &src.profile.samples {
                    if lo <= s.timestamp && s.timestamp <= hi {
                        *seen.entry((c.input, s.timestamp.to_bits())).or_default() += 1;
                    }
                }
            }
            released.extend(acc.release(&e.inputs));
        }
        for (id, c) in chunks.iter().enumerate() {
            for s in &c.profile.samples {
                prop_assert_eq!(seen.get(&(id as u64, s.timestamp.to_bits())), Some(&1));
            }
        }
        prop_assert_eq!(released.len(), chunks.len());
    }
}
