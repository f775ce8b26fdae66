//! Every real OTLP fixture translates into chunks Sentry accepts, preserving every observation.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{
    actual_observations, assert_same_observations, check_chunk, expected_observations,
    otlp_fixtures as fixtures,
};
use profilink_translator::otlp_to_sentry::{Options, SparseThreadPolicy, translate_request};
use std::collections::BTreeSet;

#[test]
fn every_fixture_translates_and_preserves_observations() {
    let opts = Options {
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..Options::default()
    };
    for (name, req) in fixtures() {
        let t = translate_request(&req, &opts);
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
            translate_request(&req, &opts),
            t,
            "{name}: not deterministic"
        );
    }
}

#[test]
fn dropping_sparse_threads_leaves_only_chunks_relay_keeps() {
    let opts = Options {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..Options::default()
    };
    for (name, req) in fixtures() {
        let t = translate_request(&req, &opts);
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

#[test]
fn ebpf_fixture_shapes() {
    let (_, req) = fixtures()
        .into_iter()
        .find(|(n, _)| n == "ebpf-profile.pb")
        .unwrap();
    let t = translate_request(&req, &Options::default());
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

#[test]
fn python_fixture_metadata_and_links() {
    let (_, req) = fixtures()
        .into_iter()
        .find(|(n, _)| n.starts_with("python"))
        .unwrap();
    let t = translate_request(&req, &Options::default());
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
