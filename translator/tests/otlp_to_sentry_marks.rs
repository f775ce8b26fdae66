//! `sentry.*` marks in OTLP: only profilink's own complete encoding of a chunk is restored
//! (the marker set of `sentry_to_otlp::restore`); another producer's partial marks are
//! translated normally, keeping its valid ids; and no invalid chunk is ever emitted.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{
    B, actual_observations, assert_same_observations, check_chunk, expected_observations,
    int_value, kv, resource, sample, str_value,
};
use profilink_proto::otlp::{ExportProfilesServiceRequest, InstrumentationScope};
use profilink_proto::sentry::{DebugImage, DebugMeta, Envelope, ProfileChunk};
use profilink_proto::validate::validate_chunk;
use profilink_translator::Dictionary;
use profilink_translator::SampleLink;
use profilink_translator::otlp_to_sentry::{ChunkOptions, SparseThreadPolicy, request_to_chunks};
use profilink_translator::sentry_to_otlp::{self, SentryInput};
use profilink_translator::sentry_to_otlp::{canonical_form, check_marker};
use profilink_translator::{ExactLinks, NoLinks};

const T0: u64 = 1_795_317_063_000_000_000;
const MS: u64 = 1_000_000;
const CHUNK_ID: &str = "5d8f3c2a1b4e4f6a9c0d7e8f1a2b3c4d";
const PROFILER_ID: &str = "0a1b2c3d4e5f40718293a4b5c6d7e8f9";

/// A request shaped like an independent converter's: `sentry.chunk_id` and
/// `sentry.profiler_id` as *profile* attributes, `service.*` on the resource, no
/// `sentry.platform` / `sentry.version`; two threads of 3 samples each over `span_ms`.
fn other_producer(chunk_id: &str, profiler_id: &str, span_ms: u64) -> ExportProfilesServiceRequest {
    let mut b = B::new();
    let main = b.fn_loc("main", "/app/main.py", 10, "cpython");
    let work = b.fn_loc("work", "/app/work.py", 20, "cpython");
    let s1 = b.stack(&[work, main]);
    let s2 = b.stack(&[main]);
    let t1 = [
        b.attr_int("thread.id", 7),
        b.attr_str("thread.name", "MainThread"),
    ];
    let t2 = [
        b.attr_int("thread.id", 8),
        b.attr_str("thread.name", "worker"),
    ];
    let samples = vec![
        sample(
            s1,
            t1.to_vec(),
            vec![T0, T0 + span_ms / 2 * MS, T0 + span_ms * MS],
        ),
        sample(s2, t2.to_vec(), vec![T0 + MS, T0 + 2 * MS, T0 + 3 * MS]),
    ];
    let mut p = b.cpu_profile(T0, span_ms * MS + 1, samples);
    p.attribute_indices = vec![
        b.attr_str("sentry.chunk_id", chunk_id),
        b.attr_str("sentry.profiler_id", profiler_id),
    ];
    let rp = resource(
        vec![
            kv("service.name", str_value("checkout")),
            kv("service.version", str_value("checkout@1.2.3")),
            kv("deployment.environment.name", str_value("prod")),
            kv("telemetry.sdk.language", str_value("python")),
            kv("process.pid", int_value(4242)),
        ],
        vec![p],
    );
    b.request(vec![rp])
}

fn assert_valid_and_faithful(
    req: &ExportProfilesServiceRequest,
    opts: &ChunkOptions,
) -> Vec<ProfileChunk> {
    let t = request_to_chunks(req, opts);
    assert!(t.rejected.is_empty(), "{:?}", t.rejected);
    assert!(t.invalid_chunks.is_empty(), "{:?}", t.invalid_chunks);
    assert_eq!(t.stats.profiles_restored, 0);
    assert_eq!(t.stats.restore_fallbacks, 1);
    let keeps_sparse = opts.sparse_thread_policy != SparseThreadPolicy::Drop;
    for c in &t.chunks {
        check_chunk(c, opts, keeps_sparse);
        assert_eq!(c.version, "2");
        assert_eq!(c.platform, "python");
        assert_eq!(c.release.as_deref(), Some("checkout@1.2.3"));
        assert_eq!(c.environment.as_deref(), Some("prod"));
    }
    assert_same_observations(
        actual_observations(&t),
        expected_observations(req, opts.max_stack_depth),
    );
    t.chunks
}

#[test]
fn another_producers_marks_give_valid_chunks_with_its_ids() {
    // Upper case with dashes: valid, normalized.
    let profiler = "0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9";
    let req = other_producer(CHUNK_ID, profiler, 200);
    let chunks = assert_valid_and_faithful(&req, &ChunkOptions::default());
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].profiler_id, PROFILER_ID);
    assert_eq!(chunks[0].chunk_id, CHUNK_ID);
}

#[test]
fn invalid_producer_ids_are_derived_as_usual() {
    let plain = {
        // The same data without any `sentry.*` mark.
        let mut req = other_producer(CHUNK_ID, PROFILER_ID, 200);
        for p in &mut req.resource_profiles[0].scope_profiles[0].profiles {
            p.attribute_indices.clear();
        }
        request_to_chunks(&req, &ChunkOptions::default()).chunks
    };
    for (chunk_id, profiler_id) in [
        ("", ""),
        ("not-an-id", "zz"),
        (
            "00000000000000000000000000000000",
            "00000000-0000-0000-0000-00000000000",
        ),
    ] {
        let req = other_producer(chunk_id, profiler_id, 200);
        let chunks = assert_valid_and_faithful(&req, &ChunkOptions::default());
        assert_eq!(chunks.len(), 1);
        assert_eq!(
            chunks[0].profiler_id, plain[0].profiler_id,
            "{profiler_id:?}"
        );
        assert_eq!(chunks[0].chunk_id, plain[0].chunk_id, "{chunk_id:?}");
    }
}

#[test]
fn a_producer_chunk_id_is_not_reused_for_several_chunks() {
    // 90 s of samples: two chunks, each with its own derived id; the profiler id is kept.
    let req = other_producer(CHUNK_ID, PROFILER_ID, 90_000);
    let chunks = assert_valid_and_faithful(&req, &ChunkOptions::default());
    assert_eq!(chunks.len(), 2);
    assert!(chunks.iter().all(|c| c.profiler_id == PROFILER_ID));
    assert!(chunks.iter().all(|c| c.chunk_id != CHUNK_ID));
    assert_ne!(chunks[0].chunk_id, chunks[1].chunk_id);
}

#[test]
fn the_cli_policy_drops_nothing_here_either() {
    let opts = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    let chunks = assert_valid_and_faithful(&other_producer(CHUNK_ID, PROFILER_ID, 200), &opts);
    assert_eq!(chunks.len(), 1);
}

// --- profilink's own output ---------------------------------------------------------------

fn fixture_chunk() -> ProfileChunk {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/sentry/python/trace-chunk-00.envelope"
    );
    let env = Envelope::parse(&std::fs::read(path).unwrap()).unwrap();
    let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
    ProfileChunk::from_json(&item.payload).unwrap()
}

fn profilink_otlp(chunk: &ProfileChunk) -> ExportProfilesServiceRequest {
    sentry_to_otlp::try_to_otlp(
        &SentryInput {
            chunks: std::slice::from_ref(chunk),
            v1_profiles: &[],
        },
        &NoLinks,
        &sentry_to_otlp::OtlpOptions::default(),
    )
    .unwrap()
}

/// Removes the profile attribute `key` from every profile.
fn drop_profile_attr(req: &mut ExportProfilesServiceRequest, key: &str) {
    let dict = req.dictionary.clone();
    let d = Dictionary::new(dict.as_ref());
    for p in req
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
        .flat_map(|s| &mut s.profiles)
    {
        p.attribute_indices
            .retain(|&i| d.attribute(i).unwrap().is_none_or(|a| a.key != key));
    }
}

fn set_scope(req: &mut ExportProfilesServiceRequest, name: &str) {
    for sp in req
        .resource_profiles
        .iter_mut()
        .flat_map(|r| &mut r.scope_profiles)
    {
        sp.scope = Some(InstrumentationScope {
            name: name.into(),
            ..Default::default()
        });
    }
}

fn restored(req: &ExportProfilesServiceRequest) -> Option<ProfileChunk> {
    let t = request_to_chunks(req, &ChunkOptions::default());
    assert!(t.invalid_chunks.is_empty(), "{:?}", t.invalid_chunks);
    assert_eq!(t.stats.profiles_restored + t.stats.restore_fallbacks, 1);
    for c in &t.chunks {
        let errors: Vec<_> = validate_chunk(c)
            .into_iter()
            .filter(|f| f.is_error())
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        if t.stats.restore_fallbacks == 1 {
            check_chunk(c, &ChunkOptions::default(), true);
        }
    }
    (t.stats.profiles_restored == 1).then(|| t.chunks[0].clone())
}

#[test]
fn profilink_output_passes_the_marker_check_and_comes_back_exactly() {
    let chunk = fixture_chunk();
    let req = profilink_otlp(&chunk);
    let d = Dictionary::new(req.dictionary.as_ref());
    let rp = &req.resource_profiles[0];
    let sp = &rp.scope_profiles[0];
    let scope = sp.scope.as_ref().map_or("", |s| s.name.as_str());
    assert_eq!(check_marker(&d, scope, rp, &sp.profiles[0]), Ok(()));
    let back = restored(&req).expect("restored");
    assert_eq!(canonical_form(&back), canonical_form(&chunk));
}

#[test]
fn output_of_earlier_versions_without_the_mark_is_restored_by_its_scope() {
    let chunk = fixture_chunk();
    let mut req = profilink_otlp(&chunk);
    drop_profile_attr(&mut req, "profilink.format");
    let back = restored(&req).expect("restored by the profilink scope");
    assert_eq!(canonical_form(&back), canonical_form(&chunk));
    // Without the mark and under another scope: not profilink's, translated.
    set_scope(&mut req, "converter");
    assert_eq!(restored(&req), None);
}

#[test]
fn an_incomplete_or_invalid_marker_set_falls_back_to_translation() {
    let chunk = fixture_chunk();
    type Edit = fn(&mut ExportProfilesServiceRequest);
    let edits: [(&str, Edit); 6] = [
        ("no sentry.platform", |r| {
            r.resource_profiles[0]
                .resource
                .as_mut()
                .unwrap()
                .attributes
                .retain(|kv| kv.key != "sentry.platform")
        }),
        ("unknown platform", |r| {
            for kv in &mut r.resource_profiles[0].resource.as_mut().unwrap().attributes {
                if kv.key == "sentry.platform" {
                    kv.value = Some(str_value("klingon"));
                }
            }
        }),
        ("no sentry.profiler_id", |r| {
            r.resource_profiles[0]
                .resource
                .as_mut()
                .unwrap()
                .attributes
                .retain(|kv| kv.key != "sentry.profiler_id")
        }),
        ("bad profiler id", |r| {
            for kv in &mut r.resource_profiles[0].resource.as_mut().unwrap().attributes {
                if kv.key == "sentry.profiler_id" {
                    kv.value = Some(str_value("not-an-id"));
                }
            }
        }),
        ("no sdk", |r| {
            r.resource_profiles[0]
                .resource
                .as_mut()
                .unwrap()
                .attributes
                .retain(|kv| !kv.key.starts_with("telemetry.sdk.n"))
        }),
        ("no sentry.version", |r| {
            drop_profile_attr(r, "sentry.version")
        }),
    ];
    for (what, edit) in edits {
        let mut req = profilink_otlp(&chunk);
        edit(&mut req);
        let d = Dictionary::new(req.dictionary.as_ref());
        let rp = &req.resource_profiles[0];
        assert!(
            check_marker(&d, "profilink", rp, &rp.scope_profiles[0].profiles[0]).is_err(),
            "{what}"
        );
        assert_eq!(restored(&req), None, "{what}");
        let t = request_to_chunks(&req, &ChunkOptions::default());
        assert!(!t.chunks.is_empty(), "{what}");
        let n: usize = t.chunks.iter().map(|c| c.profile.samples.len()).sum();
        assert_eq!(
            n,
            chunk.profile.samples.len(),
            "{what}: every observation kept"
        );
    }
}

#[test]
fn a_marked_chunk_that_fails_the_validator_is_translated_instead() {
    let mut chunk = fixture_chunk();
    // Relay rejects ELF images: the exact chunk must not be emitted.
    chunk.debug_meta = Some(DebugMeta {
        images: vec![DebugImage {
            image_type: "elf".into(),
            ..Default::default()
        }],
    });
    let req = profilink_otlp(&chunk);
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.stats.profiles_restored, 0);
    assert_eq!(t.stats.restore_fallbacks, 1);
    assert!(t.invalid_chunks.is_empty());
    assert!(!t.chunks.is_empty());
    for c in &t.chunks {
        check_chunk(c, &ChunkOptions::default(), true);
    }
}

// --- strict out ---------------------------------------------------------------------------

#[test]
fn chunks_failing_the_validator_are_removed_counted_and_reported() {
    let mut req = other_producer(CHUNK_ID, PROFILER_ID, 200);
    // Link one thread's observations, to see the links go with the chunk.
    let table = &mut req.dictionary.as_mut().unwrap().link_table;
    table.push(profilink_proto::otlp::Link {
        trace_id: vec![7; 16],
        span_id: vec![9; 8],
    });
    let link = (table.len() - 1) as i32;
    req.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].link_index = link;
    // An empty client_sdk name makes every chunk invalid (`client-sdk`).
    let opts = ChunkOptions {
        sdk_name: String::new(),
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&req, &opts);
    assert!(t.chunks.is_empty());
    assert!(t.links.is_empty(), "{:?}", t.links);
    assert_eq!(t.stats.links, 0);
    assert_eq!(t.invalid_chunks.len(), 1);
    let bad = &t.invalid_chunks[0];
    assert_eq!(bad.finding.rule, "client-sdk");
    assert_eq!(bad.samples, 6);
    assert_eq!(bad.chunk_id, CHUNK_ID);
    assert_eq!(t.stats.chunks, 0);
    assert_eq!(t.stats.chunks_invalid, 1);
    assert_eq!(t.stats.samples_dropped_invalid, 6);
    assert_eq!(t.stats.samples_out, 0);
    assert_eq!(
        t.stats.samples_in,
        t.stats.samples_out
            + t.stats.samples_dropped_expansion
            + t.stats.samples_dropped_sparse
            + t.stats.samples_dropped_size
            + t.stats.samples_dropped_invalid
    );
    // With the default options the same request is emitted, links included.
    let ok = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(ok.chunks.len(), 1);
    assert_eq!(ok.links.len(), 3);
}

#[test]
fn restored_links_survive_the_marker_check() {
    let chunk = fixture_chunk();
    let tid = chunk.profile.samples[0].thread_id.clone();
    let links: Vec<SampleLink> = chunk
        .profile
        .samples
        .iter()
        .filter(|s| s.thread_id == tid)
        .map(|s| SampleLink {
            profiler_id: chunk.profiler_id.clone(),
            thread_id: tid.to_string(),
            timestamp_ns: profilink_proto::sentry::secs_to_nanos(s.timestamp).unwrap(),
            trace_id: [7; 16],
            span_id: [9; 8],
        })
        .collect();
    let req = sentry_to_otlp::try_to_otlp(
        &SentryInput {
            chunks: std::slice::from_ref(&chunk),
            v1_profiles: &[],
        },
        &ExactLinks::new(&links),
        &sentry_to_otlp::OtlpOptions::default(),
    )
    .unwrap();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.stats.profiles_restored, 1);
    assert_eq!(t.links.len(), links.len());
}
