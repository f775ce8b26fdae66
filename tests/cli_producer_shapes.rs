//! Real producers' shapes through the real binary's `translate` and `validate` (issue 43):
//! async-profiler (`itimer`, `ctimer`; its proto 1.9 encoding and the same in 1.10 numbers),
//! heap/alloc profiles, one stray byte in a thread name, and the eBPF fixture in proto 1.9 in
//! both detection cases. Chunks are checked with `profilink validate` (the Relay rules) and
//! each stack's count against the input.

#[path = "common/async_profiler.rs"]
mod async_profiler;
mod common;
#[path = "common/thread_name.rs"]
mod thread_name;

use async_profiler::Layout;
use common::{fixtures, profilink, write};
use profilink_proto::otlp::{ExportProfilesServiceRequest, Profile, ValueType};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::wire::v1_9;
use prost::Message;
use std::collections::BTreeMap;
use std::path::Path;
use thread_name::with_thread_name;

fn fixture() -> ExportProfilesServiceRequest {
    let bytes = std::fs::read(fixtures().join("otlp/ebpf-profile.pb")).unwrap();
    ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap()
}

/// `translate --to sentry` of `input`: (exit code, stderr, chunks), every chunk checked by
/// `profilink validate` (Relay's rules).
fn translate(dir: &Path, name: &str, input: &[u8]) -> (i32, String, Vec<ProfileChunk>) {
    let path = write(dir, name, input);
    let out = dir.join(format!("{name}.ndjson"));
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
        path.as_os_str(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let chunks: Vec<ProfileChunk> = text
        .lines()
        .map(|l| ProfileChunk::from_json(l.as_bytes()).unwrap())
        .collect();
    if !chunks.is_empty() {
        let check = profilink(["validate".as_ref(), out.as_os_str()]);
        assert_eq!(
            check.code, 0,
            "{name}: chunks fail validation:\n{}",
            check.stdout
        );
    }
    (run.code, run.stderr, chunks)
}

/// `validate` of `input`: (exit code, stdout).
fn validate(dir: &Path, name: &str, input: &[u8]) -> (i32, String) {
    let path = write(dir, name, input);
    let run = profilink(["validate".as_ref(), path.as_os_str()]);
    (run.code, run.stdout)
}

/// Per stack (function names leaf first), its samples in `chunks`.
fn chunk_stack_counts(chunks: &[ProfileChunk]) -> BTreeMap<Vec<String>, u64> {
    let mut m = BTreeMap::new();
    for c in chunks {
        for s in &c.profile.samples {
            let names: Vec<String> = c.profile.stacks[s.stack_id]
                .iter()
                .map(|&f| {
                    let frame = &c.profile.frames[f];
                    frame.function.as_deref().unwrap_or("").to_owned()
                })
                .collect();
            *m.entry(names).or_default() += 1;
        }
    }
    m
}

const START: u64 = 1_760_000_000_000_000_000;
const DURATION: u64 = 10_000_000_000;

#[test]
fn async_profiler_itimer_and_ctimer_keep_every_stack_count() {
    let dir = tempfile::tempdir().unwrap();
    let samples = async_profiler::aggregate(&fixture());
    let want = async_profiler::stack_counts(&samples);
    assert!(want.len() > 10, "the fixture gives {} stacks", want.len());
    let mut outputs = Vec::new();
    for engine in ["itimer", "ctimer"] {
        for layout in [Layout::V1_9, Layout::V1_10] {
            let name = format!("async-profiler-{engine}-{layout:?}.pb");
            let bytes = async_profiler::encode(&samples, engine, "count", START, DURATION, layout);
            let (code, stderr, chunks) = translate(dir.path(), &name, &bytes);
            assert_eq!(code, 0, "{name}: {stderr}");
            assert!(!chunks.is_empty(), "{name}: no chunks; {stderr}");
            assert!(!stderr.contains("skipped"), "{name}: {stderr}");
            assert_eq!(
                layout == Layout::V1_9,
                stderr.contains("proto 1.9 Sample layout"),
                "{name}: {stderr}"
            );
            // Every stack keeps its exact count, those through location_table[0] included.
            assert_eq!(chunk_stack_counts(&chunks), want, "{name}");
            let first = &samples[0].0[0];
            assert!(
                want.keys().any(|k| k.contains(first)),
                "a stack holds function 0 ({first})"
            );
            for c in &chunks {
                for s in &c.profile.samples {
                    let t = s.timestamp;
                    let (lo, hi) = (START as f64 / 1e9, (START + DURATION) as f64 / 1e9);
                    assert!(
                        t >= lo && t < hi,
                        "{name}: sample at {t} outside the profile"
                    );
                }
            }
            outputs.push(std::fs::read(dir.path().join(format!("{name}.ndjson"))).unwrap());
            // validate warns about the real index-0 entries (and the layout), no errors.
            let (code, out) = validate(dir.path(), &name, &bytes);
            assert_eq!(code, 0, "{name}: {out}");
            for rule in [
                "warning[string-table-zero] dictionary.string_table[0]",
                "warning[table-zero] dictionary.location_table[0]",
                "warning[table-zero] dictionary.function_table[0]",
                "warning[table-zero] dictionary.attribute_table[0]",
            ] {
                assert!(out.contains(rule), "{name}: no {rule}:\n{out}");
            }
            assert_eq!(
                out.contains("warning[proto-1.9-layout]"),
                layout == Layout::V1_9,
                "{name}:\n{out}"
            );
        }
    }
    // Both encodings of one engine give the same chunks.
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[2], outputs[3]);
}

#[test]
fn heap_and_alloc_profiles_are_skipped_with_their_type_named_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let samples = async_profiler::aggregate(&fixture());
    // async-profiler's allocation engine in counter mode: (alloc_tracer, bytes).
    let alloc = async_profiler::encode(
        &samples,
        "alloc_tracer",
        "bytes",
        START,
        DURATION,
        Layout::V1_9,
    );
    let (code, stderr, chunks) = translate(dir.path(), "alloc.pb", &alloc);
    assert_eq!(code, 0, "{stderr}");
    assert!(chunks.is_empty());
    assert!(
        stderr.contains("skipped 1 profile(s) that are not CPU/wall samples, by sample_type: alloc_tracer:bytes (1)"),
        "{stderr}"
    );
    // Go heap profiles: the fixture's CPU profiles as inuse_space/bytes and alloc_objects/count.
    let mut heap = fixture();
    let d = heap.dictionary.as_mut().unwrap();
    let base = d.string_table.len() as i32;
    d.string_table
        .extend(["inuse_space", "bytes", "alloc_objects", "count"].map(String::from));
    let mut n = 0;
    for (i, p) in heap
        .resource_profiles
        .iter_mut()
        .flat_map(|rp| &mut rp.scope_profiles)
        .flat_map(|sp| &mut sp.profiles)
        .enumerate()
    {
        let st = if i % 2 == 0 {
            (base, base + 1)
        } else {
            (base + 2, base + 3)
        };
        p.sample_type = Some(ValueType {
            type_strindex: st.0,
            unit_strindex: st.1,
        });
        n += 1;
    }
    let (code, stderr, chunks) = translate(dir.path(), "heap.pb", &heap.encode_to_vec());
    assert_eq!(code, 0, "{stderr}");
    assert!(chunks.is_empty());
    assert!(
        stderr.contains(&format!("skipped {n} profile(s)")),
        "{stderr}"
    );
    assert!(stderr.contains("inuse_space:bytes ("), "{stderr}");
    assert!(stderr.contains("alloc_objects:count ("), "{stderr}");
    // --cpu-sample-type makes one of them CPU: translated.
    let path = write(dir.path(), "heap2.pb", &heap.encode_to_vec());
    let out = dir.path().join("heap2.ndjson");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        "--cpu-sample-type".as_ref(),
        "alloc_objects:count".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
        path.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!std::fs::read_to_string(&out).unwrap().is_empty());
    assert!(
        !run.stderr.contains("alloc_objects:count"),
        "{}",
        run.stderr
    );
}

/// The encoded fixture with one invalid byte in a thread name (`worker-X\xffZ-1`).
fn stray_byte(
    req: &ExportProfilesServiceRequest,
    encode: fn(&ExportProfilesServiceRequest) -> Vec<u8>,
) -> Vec<u8> {
    let mut bytes = encode(&with_thread_name(req, "worker-XYZ-1"));
    let pos = bytes
        .windows(12)
        .position(|w| w == b"worker-XYZ-1")
        .unwrap();
    bytes[pos + 8] = 0xff;
    bytes
}

#[test]
fn one_stray_byte_in_a_thread_name_keeps_every_observation() {
    let dir = tempfile::tempdir().unwrap();
    let req = fixture();
    let (code, stderr, clean) = translate(
        dir.path(),
        "clean.pb",
        &with_thread_name(&req, "worker-X\u{FFFD}Z-1").encode_to_vec(),
    );
    assert_eq!(code, 0, "{stderr}");
    let bytes = stray_byte(&req, |r| r.encode_to_vec());
    let (code, stderr, chunks) = translate(dir.path(), "stray.pb", &bytes);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("replaced 1 invalid UTF-8 sequence(s)"),
        "{stderr}"
    );
    assert_eq!(
        chunks, clean,
        "the same chunks as the name with U+FFFD sent as valid UTF-8"
    );
    let samples: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
    let (_, _, plain) = translate(dir.path(), "plain.pb", &req.encode_to_vec());
    assert_eq!(
        samples,
        plain.iter().map(|c| c.profile.samples.len()).sum::<usize>()
    );
    assert!(chunks.iter().any(|c| {
        c.profile
            .thread_metadata
            .values()
            .any(|t| t.name.as_deref() == Some("worker-X\u{FFFD}Z-1"))
    }));
    let (code, out) = validate(dir.path(), "stray.pb", &bytes);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning[invalid-utf8]"), "{out}");
}

#[test]
fn the_ebpf_fixture_in_proto_1_9_gives_the_chunks_of_1_10_in_both_cases() {
    let dir = tempfile::tempdir().unwrap();
    // Case 1: as the Collector up to v0.147 sends it (packed attribute indices at field 3):
    // it does not decode as 1.10.
    let req = fixture();
    let (code, stderr, want) = translate(dir.path(), "v110.pb", &req.encode_to_vec());
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr, got) = translate(dir.path(), "v19.pb", &v1_9::encode(&req));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("it does not decode as 1.10"), "{stderr}");
    assert_eq!(got, want);
    // Case 2: values with the timestamps and no sample attributes (the values then read as
    // attribute indices in 1.10 without a decode error).
    let mut plain = req.clone();
    for p in plain
        .resource_profiles
        .iter_mut()
        .flat_map(|rp| &mut rp.scope_profiles)
        .flat_map(|sp| &mut sp.profiles)
    {
        let p: &mut Profile = p;
        for s in &mut p.samples {
            s.attribute_indices.clear();
            if s.values.is_empty() {
                s.values = vec![1; s.timestamps_unix_nano.len()];
            }
        }
    }
    let (code, stderr, want) = translate(dir.path(), "plain-v110.pb", &plain.encode_to_vec());
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr, got) = translate(dir.path(), "plain-v19.pb", &v1_9::encode(&plain));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("breaks the dictionary's bounds"),
        "{stderr}"
    );
    assert_eq!(got, want);
    assert!(!got.is_empty());
    // And a stray byte in a 1.9 request.
    let (code, stderr, _) = translate(dir.path(), "stray-v19.pb", &stray_byte(&req, v1_9::encode));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("replaced 1 invalid UTF-8"), "{stderr}");
}

#[test]
fn a_request_neither_layout_fits_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let mut req = fixture();
    let attrs = req.dictionary.as_ref().unwrap().attribute_table.len() as i32;
    let s = &mut req.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
    s.attribute_indices = vec![attrs + 5];
    s.timestamps_unix_nano = vec![1, 2];
    s.values.clear();
    let (code, stderr, chunks) = translate(dir.path(), "neither.pb", &req.encode_to_vec());
    assert_eq!(code, 1, "{stderr}");
    assert!(chunks.is_empty());
    assert!(
        stderr.contains("neither OTLP profiles layout fits"),
        "{stderr}"
    );
    assert!(
        stderr.contains("as proto 1.10") && stderr.contains("as proto 1.9"),
        "{stderr}"
    );
}
