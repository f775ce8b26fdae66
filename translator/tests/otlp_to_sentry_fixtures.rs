//! Every real OTLP fixture translates into chunks Sentry accepts, preserving every observation.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{
    B, Obs, actual_observations, assert_same_observations, check_chunk, expected_observations, kv,
    otlp_fixtures as fixtures, resource, sample, str_value,
};
use profilink_translator::otlp_to_sentry::{
    ChunkOptions, SparseThreadGrouping, SparseThreadPolicy, request_to_chunks,
};
use std::collections::BTreeSet;

#[test]
fn every_fixture_translates_and_preserves_observations() {
    // Threads as they are: every observation on its own thread.
    let opts = ChunkOptions {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..ChunkOptions::default()
    };
    for (name, req) in fixtures() {
        let t = request_to_chunks(&req, &opts);
        assert!(t.rejected.is_empty(), "{name}: {:?}", t.rejected);
        assert!(!t.chunks.is_empty(), "{name}: no chunks");
        for c in &t.chunks {
            check_chunk(c, &opts, true);
        }
        assert_eq!(
            t.stats.samples_in, t.stats.samples_out,
            "{name}: {:?}",
            t.stats
        );
        assert_eq!(t.stats.chunks as usize, t.chunks.len());
        let expected = expected_observations(&req, opts.max_stack_depth);
        assert_same_observations(actual_observations(&t), expected);
        // Deterministic: the same input gives the same output.
        assert_eq!(
            request_to_chunks(&req, &opts),
            t,
            "{name}: not deterministic"
        );
    }
}

#[test]
fn dropping_sparse_threads_leaves_only_chunks_relay_keeps() {
    let opts = ChunkOptions {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    for (name, req) in fixtures() {
        let t = request_to_chunks(&req, &opts);
        assert!(t.rejected.is_empty());
        for c in &t.chunks {
            check_chunk(c, &opts, false);
            let warnings: Vec<_> = profilink_proto::validate::validate_chunk(c)
                .into_iter()
                .filter(|f| f.rule == "thread-too-few-samples")
                .collect();
            assert!(warnings.is_empty(), "{name}: {warnings:?}");
        }
        let s = t.stats;
        assert_eq!(
            s.samples_in,
            s.samples_out + s.samples_dropped_sparse,
            "{name}: {s:?}"
        );
    }
}

/// The real eBPF profiler fixture.
fn ebpf_fixture() -> profilink_proto::otlp::ExportProfilesServiceRequest {
    fixtures()
        .into_iter()
        .find_map(|(n, req)| (n == "ebpf-profile.pb").then_some(req))
        .unwrap()
}

#[test]
fn ebpf_fixture_shapes() {
    let req = ebpf_fixture();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    let platforms: BTreeSet<&str> = t.chunks.iter().map(|c| c.platform.as_str()).collect();
    // A JVM process, native-only processes, ...
    assert!(platforms.contains("java"), "{platforms:?}");
    // One profiler id per process: samples carry process.pid, so sessions > resources.
    let sessions: BTreeSet<&str> = t.chunks.iter().map(|c| c.profiler_id.as_str()).collect();
    assert!(
        sessions.len() > req.resource_profiles.len(),
        "{} sessions",
        sessions.len()
    );
    // Native frames are unsymbolized: instruction addresses with debug images to symbolicate.
    let native = t
        .chunks
        .iter()
        .flat_map(|c| &c.profile.frames)
        .filter(|f| f.instruction_addr.is_some())
        .count();
    assert!(native > 0);
    let images = t
        .chunks
        .iter()
        .filter_map(|c| c.debug_meta.as_ref())
        .flat_map(|d| &d.images)
        .count();
    assert!(images > 0);
    for c in &t.chunks {
        if c.platform == "java" {
            // Native and kernel frames in a Java process are marked as foreign.
            for f in &c.profile.frames {
                if f.instruction_addr.is_some() || f.package.as_deref() == Some("vmlinux") {
                    assert_eq!(f.platform.as_deref(), Some("native"), "{f:?}");
                    assert_eq!(f.in_app, Some(false));
                }
            }
        }
    }
}

/// A producer sends the same frames request after request; each translation, on whichever
/// thread, hands out the very `Arc`s of the one before, so whoever merges a session's chunks
/// across requests (the exporter) finds a frame it already holds by pointer, without comparing
/// its strings.
#[test]
fn a_second_request_shares_the_first_ones_frames() {
    let req = ebpf_fixture();
    let opts = ChunkOptions::default();
    let first = request_to_chunks(&req, &opts);
    let second = request_to_chunks(&req, &opts);
    let elsewhere = {
        let (req, opts) = (req.clone(), opts.clone());
        std::thread::spawn(move || request_to_chunks(&req, &opts))
            .join()
            .unwrap()
    };
    assert_eq!(first, second);
    assert_eq!(first, elsewhere);
    let mut frames = 0;
    for ((a, b), c) in first
        .chunks
        .iter()
        .zip(&second.chunks)
        .zip(&elsewhere.chunks)
    {
        assert_eq!(a.profile.frames.len(), b.profile.frames.len());
        for ((fa, fb), fc) in a
            .profile
            .frames
            .iter()
            .zip(&b.profile.frames)
            .zip(&c.profile.frames)
        {
            assert!(std::sync::Arc::ptr_eq(fa, fb), "{fa:?} copied, not shared");
            assert!(
                std::sync::Arc::ptr_eq(fa, fc),
                "{fa:?} copied on another thread, not shared"
            );
            frames += 1;
        }
    }
    assert!(frames > 100, "{frames} frames");
    // Frames of another platform are other frames (a Java process's native frames carry
    // `platform: native`): shared too, but never mixed up with the platform-less copy.
    let java = first.chunks.iter().find(|c| c.platform == "java").unwrap();
    assert!(
        java.profile
            .frames
            .iter()
            .any(|f| f.platform.as_deref() == Some("native"))
    );
}

#[test]
fn python_fixture_metadata_and_links() {
    let (_, req) = fixtures()
        .into_iter()
        .find(|(n, _)| n.starts_with("python"))
        .unwrap();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.chunks.len(), 1);
    let c = &t.chunks[0];
    assert_eq!(c.platform, "python");
    assert_eq!(c.release.as_deref(), Some("clients-demo@1.0.0"));
    assert_eq!(c.environment.as_deref(), Some("research"));
    assert_eq!(c.client_sdk.as_ref().unwrap().name, "profilink");
    assert!(
        c.profile
            .thread_metadata
            .values()
            .any(|m| m.name.as_deref() == Some("sentry.monitor"))
    );
    assert!(c.profile.frames.iter().all(|f| f.platform.is_none()));
    // Every linked observation comes back as a link of this chunk's session.
    assert!(!t.links.is_empty());
    assert_eq!(t.stats.links as usize, t.links.len());
    let tids: BTreeSet<&str> = c
        .profile
        .samples
        .iter()
        .map(|s| s.thread_id.as_str())
        .collect();
    for l in &t.links {
        assert_eq!(l.profiler_id, c.profiler_id);
        assert!(tids.contains(l.thread_id.as_str()));
    }
    let linked: usize = req.resource_profiles[0].scope_profiles[0].profiles[0]
        .samples
        .iter()
        .filter(|s| s.link_index != 0)
        .map(|s| s.timestamps_unix_nano.len())
        .sum();
    assert_eq!(t.links.len(), linked);
}

/// Observations of each eBPF fixture that reach a chunk Relay keeps when sparse threads are
/// grouped and what is still sparse is dropped (the CLI's rule), out of all: the limit is every
/// sample of a process seen at least twice in its chunk. Without grouping: 179, 27 and 46.
/// (`ebpf-k8s-1.pb` spans more than 60 s: the second chunk of one `etcd` process holds a single
/// sample, so its limit is 101, not the 102 of counting per process over the whole file.)
const KEPT: [(&str, usize, usize); 3] = [
    ("ebpf-k8s-0.pb", 55, 58),
    ("ebpf-k8s-1.pb", 101, 107),
    ("ebpf-profile.pb", 189, 189),
];

/// `actual` is a sub-multiset of `expected` when threads are ignored (timestamps to the
/// microsecond): nothing is invented.
fn assert_kept_without_threads(name: &str, actual: &[Obs], expected: &[Obs]) {
    let key = |o: &Obs| (o.2.clone(), o.1);
    let mut a: Vec<_> = actual.iter().map(key).collect();
    let mut e: Vec<_> = expected.iter().map(key).collect();
    a.sort();
    e.sort();
    let mut j = 0;
    for (stack, ts) in &a {
        while j < e.len() && (&e[j].0 < stack || (&e[j].0 == stack && e[j].1 + 1_000 < *ts)) {
            j += 1;
        }
        assert!(
            j < e.len() && &e[j].0 == stack && e[j].1.abs_diff(*ts) <= 1_000,
            "{name}: an observation not in the input: {stack:?} at {ts}"
        );
        j += 1;
    }
}

#[test]
fn grouping_sparse_threads_keeps_the_samples_relay_would_drop() {
    let opts = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    assert_eq!(opts.sparse_thread_grouping, SparseThreadGrouping::Group);
    for (name, req) in fixtures() {
        let t = request_to_chunks(&req, &opts);
        assert!(t.rejected.is_empty(), "{name}: {:?}", t.rejected);
        for c in &t.chunks {
            check_chunk(c, &opts, false);
            let sparse: Vec<_> = profilink_proto::validate::validate_chunk(c)
                .into_iter()
                .filter(|f| f.rule == "thread-too-few-samples")
                .collect();
            assert!(sparse.is_empty(), "{name}: {sparse:?}");
            // Group threads are named.
            use profilink_proto::sentry::{GROUP_ID_MAX, GROUP_ID_MIN};
            for smp in &c.profile.samples {
                let id: u64 = smp.thread_id.parse().unwrap_or(0);
                if !(GROUP_ID_MIN..=GROUP_ID_MAX).contains(&id) {
                    continue;
                }
                let meta = c.profile.thread_metadata.get(smp.thread_id.as_str());
                assert!(
                    meta.and_then(|m| m.name.as_deref()).is_some(),
                    "{name}: thread {} without a name",
                    smp.thread_id
                );
            }
        }
        let s = t.stats;
        assert_eq!(
            s.samples_in,
            s.samples_out + s.samples_dropped_sparse,
            "{name}: {s:?}"
        );
        let expected = expected_observations(&req, opts.max_stack_depth);
        let actual = actual_observations(&t);
        assert_eq!(actual.len() as u64, s.samples_out);
        assert_kept_without_threads(&name, &actual, &expected);
        if let Some(&(_, kept, all)) = KEPT.iter().find(|k| k.0 == name) {
            assert_eq!(expected.len(), all, "{name}");
            assert!(
                actual.len() >= kept,
                "{name}: kept {} of {all}, want {kept}",
                actual.len()
            );
            assert!(
                s.samples_grouped > 0 && s.thread_groups > 0,
                "{name}: {s:?}"
            );
        } else {
            // SDK data: every observation on its own thread, nothing grouped.
            assert_same_observations(actual, expected);
            assert_eq!(s.samples_grouped, 0, "{name}");
        }
        assert_eq!(
            request_to_chunks(&req, &opts),
            t,
            "{name}: not deterministic"
        );
    }
}

#[test]
fn linked_threads_keep_their_ids_and_their_links() {
    // One process: "worker" threads 11 and 12 are seen once each (grouped), thread 13 once
    // with a trace link (spans reference it: never grouped, so it stays sparse), thread 14
    // once with a link too and a same-name busy thread 10 (it may not join it).
    let mut b = B::new();
    let f = b.fn_loc("work", "w.go", 1, "go");
    let st = b.stack(&[f]);
    let link = b.link([7; 16], [8; 8]);
    let t0 = 1_700_000_000_000_000_000u64;
    let mut samples = Vec::new();
    for (tid, name, times, linked) in [
        (10, "main", vec![t0, t0 + 50_000_000], false),
        (11, "worker", vec![t0 + 1_000], false),
        (12, "worker", vec![t0 + 2_000], false),
        (13, "worker", vec![t0 + 3_000], true),
        (14, "main", vec![t0 + 4_000], true),
    ] {
        let attrs = vec![
            b.attr_int("thread.id", tid),
            b.attr_str("thread.name", name),
        ];
        let mut smp = sample(st, attrs, times);
        if linked {
            smp.link_index = link;
        }
        samples.push(smp);
    }
    let profile = b.cpu_profile(t0, 1_000_000_000, samples);
    let req = b.request(vec![resource(
        vec![kv("service.name", str_value("svc"))],
        vec![profile],
    )]);
    let keep = ChunkOptions::default();
    let t = request_to_chunks(&req, &keep);
    assert_eq!(t.chunks.len(), 1);
    let c = &t.chunks[0];
    let threads: BTreeSet<&str> = c
        .profile
        .samples
        .iter()
        .map(|s| s.thread_id.as_str())
        .collect();
    let group = profilink_proto::sentry::group_id(b"name\0worker").to_string();
    assert_eq!(threads, BTreeSet::from(["10", "13", "14", group.as_str()]));
    assert_eq!(
        c.profile.thread_metadata[&group].name.as_deref(),
        Some("worker")
    );
    assert_eq!((t.stats.samples_grouped, t.stats.threads_grouped), (2, 2));
    // Each link names the thread its sample is under in the chunk.
    assert_eq!(t.links.len(), 2);
    for l in &t.links {
        let ts = profilink_proto::sentry::nanos_to_secs(l.timestamp_ns);
        assert!(
            c.profile
                .samples
                .iter()
                .any(|s| s.thread_id == l.thread_id && s.timestamp == ts),
            "{l:?}"
        );
    }
    // Under `Drop` the linked sparse threads are then dropped, as Relay would.
    let drop = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&req, &drop);
    let threads: BTreeSet<&str> = t.chunks[0]
        .profile
        .samples
        .iter()
        .map(|s| s.thread_id.as_str())
        .collect();
    assert_eq!(threads, BTreeSet::from(["10", group.as_str()]));
    assert_eq!(t.stats.samples_dropped_sparse, 2);
}
