//! Tests of merging: deduplication and re-indexing, invalid references, content-derived ids.

use super::chunk_id::content_checksum_hashed;
use super::*;
use profilink_proto::sentry::{
    DebugImage, DebugMeta, Frame, MeasurementValue, ProfileChunk, Sample, ThreadMetadata,
};

fn frame(name: &str) -> Frame {
    Frame {
        function: Some(name.into()),
        ..Default::default()
    }
}

fn chunk(frames: &[&str], stacks: Vec<Vec<usize>>, samples: &[(f64, usize, &str)]) -> ProfileChunk {
    let mut c = ProfileChunk {
        chunk_id: "0".repeat(32),
        profiler_id: "a".repeat(32),
        platform: "python".into(),
        version: "2".into(),
        ..Default::default()
    };
    c.profile.frames = frames.iter().map(|f| frame(f).into()).collect();
    c.profile.stacks = stacks;
    c.profile.samples = samples
        .iter()
        .map(|(t, s, tid)| Sample {
            timestamp: *t,
            stack_id: *s,
            thread_id: (*tid).into(),
        })
        .collect();
    c
}

#[test]
fn remembered_frame_digests_give_the_same_checksum() {
    let a = chunk(
        &["cached_f", "cached_g", "cached_h"],
        vec![vec![0, 1], vec![2, 1, 0]],
        &[(1.0, 0, "1"), (2.0, 1, "2"), (3.0, 0, "1")],
    );
    let hashes: Vec<u64> = a.profile.frames.iter().map(|f| frame_hash(f)).collect();
    let fresh = content_checksum(&a);
    // First call computes and remembers the digests, the second finds them.
    assert_eq!(content_checksum_hashed(&a, &hashes), fresh);
    assert_eq!(content_checksum_hashed(&a, &hashes), fresh);
    // A different frame under a remembered hash is not taken for the remembered one.
    let mut b = a.clone();
    b.profile.frames[0] = frame("other").into();
    assert_ne!(content_checksum_hashed(&b, &hashes), fresh);
    assert_eq!(content_checksum_hashed(&b, &hashes), content_checksum(&b));
    // A builder's finished chunk gets the id the uncached checksum gives.
    let mut m = ChunkBuilder::new(&a);
    m.add(&a, &[0, 1, 2], &[], 10);
    let out = m.finish();
    let (first, last) = (1.0, 3.0);
    assert_eq!(
        out.chunk_id,
        merged_chunk_id(&out.profiler_id, first, last, 3, content_checksum(&out))
    );
}

#[test]
fn dedups_and_reindexes() {
    let a = chunk(
        &["f", "g"],
        vec![vec![0, 1]],
        &[(2.0, 0, "1"), (1.0, 0, "1")],
    );
    let b = chunk(
        &["h", "g", "f"],
        vec![vec![0], vec![2, 1]],
        &[(3.0, 1, "1"), (4.0, 0, "2")],
    );
    let mut m = ChunkBuilder::new(&a);
    m.add(&a, &[0, 1], &[], 10);
    m.add(&b, &[0, 1], &[], 10);
    let out = m.finish();
    assert_eq!(out.profile.frames.len(), 3);
    assert_eq!(out.profile.stacks, vec![vec![0, 1], vec![2]]);
    let ts: Vec<f64> = out.profile.samples.iter().map(|s| s.timestamp).collect();
    assert_eq!(ts, vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(out.profile.samples[2].stack_id, 0);
    assert_eq!(out.profile.samples[3].stack_id, 1);
    let sum = content_checksum(&out);
    assert_eq!(
        out.chunk_id,
        merged_chunk_id(&"a".repeat(32), 1.0, 4.0, 4, sum)
    );
    assert!(profilink_proto::sentry::is_sentry_id(&out.chunk_id));
    assert_eq!(&out.chunk_id[12..13], "4");
}

/// Two replicas merging different requests of one session's window (here: the same
/// timestamps on another thread, or another stack) must not produce one chunk id: Sentry
/// stores a chunk under its id and would keep only one. The same samples merged from
/// differently indexed inputs, in another order, keep one id (replays, retries).
#[test]
fn ids_follow_the_samples_not_only_their_range_and_count() {
    let merged = |parts: &[&ProfileChunk]| {
        let mut m = ChunkBuilder::new(parts[0]);
        for p in parts {
            let all: Vec<usize> = (0..p.profile.samples.len()).collect();
            m.add(p, &all, &[], 1);
        }
        m.finish().chunk_id
    };
    let a = chunk(
        &["f", "g"],
        vec![vec![0, 1]],
        &[(1.0, 0, "1"), (2.0, 0, "1")],
    );
    let other_thread = chunk(
        &["f", "g"],
        vec![vec![0, 1]],
        &[(1.0, 0, "2"), (2.0, 0, "2")],
    );
    let other_stack = chunk(
        &["f", "h"],
        vec![vec![0, 1]],
        &[(1.0, 0, "1"), (2.0, 0, "1")],
    );
    let id = merged(&[&a]);
    assert_ne!(id, merged(&[&other_thread]));
    assert_ne!(id, merged(&[&other_stack]));
    let first = chunk(&["g", "f"], vec![vec![1, 0]], &[(1.0, 0, "1")]);
    let second = chunk(&["x", "f", "g"], vec![vec![1, 2]], &[(2.0, 0, "1")]);
    assert_eq!(id, merged(&[&second, &first]));
}

#[test]
fn skips_invalid_references_and_unions_metadata() {
    let mut a = chunk(&["f"], vec![vec![0, 5]], &[(1.0, 0, "1"), (2.0, 9, "1")]);
    a.profile.thread_metadata.insert(
        "1".into(),
        ThreadMetadata {
            name: Some("main".into()),
            priority: None,
        },
    );
    let image = DebugImage {
        image_type: "symbolic".into(),
        debug_id: Some("x".into()),
        ..Default::default()
    };
    a.debug_meta = Some(DebugMeta {
        images: vec![image.clone(), image],
    });
    let mut m = ChunkBuilder::new(&a);
    m.add(
        &a,
        &[0, 1],
        &[(
            "cpu".into(),
            "percent".into(),
            vec![MeasurementValue {
                timestamp: 1.0,
                value: 3.0,
            }],
        )],
        1,
    );
    m.add(&a, &[0], &[], 1);
    assert_eq!(m.dropped_invalid(), 3);
    let out = m.finish();
    assert_eq!(out.profile.samples.len(), 2);
    assert_eq!(out.profile.stacks, vec![vec![0]]);
    assert_eq!(
        out.profile.thread_metadata["1"].name.as_deref(),
        Some("main")
    );
    assert_eq!(out.debug_meta.map(|d| d.images.len()), Some(1));
    assert_eq!(out.measurements["cpu"].values.len(), 1);
}
