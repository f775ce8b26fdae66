//! End-to-end: `profilink translate --to sentry` keeps the eBPF samples Relay's thread rule
//! would drop by grouping sparse threads (`--sparse-threads group`, the default), and
//! `--sparse-threads drop` keeps the behaviour before grouping. Observations are counted from
//! the input with the plain OTLP types (not the translator), and the output is checked with
//! `profilink validate` and vroomrs.

mod common;

use common::{fixtures, profilink, vroomrs_available};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use prost::Message;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// (fixture, kept with grouping, kept when dropping, observations in all). With grouping the
/// limit is reached: every sample of a process seen at least twice in its (60 s) chunk.
const FIXTURES: [(&str, usize, usize, usize); 3] = [
    ("ebpf-profile.pb", 189, 179, 189),
    ("ebpf-k8s-0.pb", 55, 27, 58),
    ("ebpf-k8s-1.pb", 101, 46, 107),
];

/// Input observation timestamps (nanoseconds), with multiplicity.
fn input_timestamps(path: &Path) -> BTreeMap<u64, usize> {
    let req =
        ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
    let mut out = BTreeMap::new();
    for p in req
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
    {
        for s in &p.samples {
            assert!(
                !s.timestamps_unix_nano.is_empty(),
                "eBPF samples have timestamps"
            );
            for &t in &s.timestamps_unix_nano {
                *out.entry(t).or_insert(0) += 1;
            }
        }
    }
    out
}

fn translate(input: &Path, out: &Path, extra: &[&str]) -> (Vec<ProfileChunk>, String) {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    args.push(input.as_os_str());
    let run = profilink(args);
    assert_eq!(run.code, 0, "{}: {}", input.display(), run.stderr);
    let chunks = std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| ProfileChunk::from_json(l.as_bytes()).unwrap())
        .collect();
    (chunks, run.stderr)
}

/// Every output sample is an input observation (timestamps to the microsecond, with
/// multiplicity): nothing invented. Returns the samples.
fn assert_nothing_invented(
    name: &str,
    chunks: &[ProfileChunk],
    input: &BTreeMap<u64, usize>,
) -> usize {
    let mut left = input.clone();
    let mut n = 0;
    for c in chunks {
        for s in &c.profile.samples {
            let ns = (s.timestamp * 1e9) as u64;
            let hit = left
                .range(ns.saturating_sub(2_000)..=ns + 2_000)
                .find(|(_, k)| **k > 0)
                .map(|(t, _)| *t);
            let t =
                hit.unwrap_or_else(|| panic!("{name}: sample at {} not in the input", s.timestamp));
            *left.get_mut(&t).unwrap() -= 1;
            n += 1;
        }
    }
    n
}

fn validate(name: &str, out: &Path, chunks: usize) {
    let check = profilink(["validate".as_ref(), out.as_os_str()]);
    assert_eq!(check.code, 0, "{name}: {}", check.stdout);
    assert!(
        !check.stdout.contains("thread-too-few-samples"),
        "{name}: {}",
        check.stdout
    );
    if vroomrs_available() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vroomrs_check.py");
        let res = Command::new("python3")
            .arg(script)
            .arg(out)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&res.stdout);
        assert!(res.status.success(), "vroomrs rejected {name}:\n{report}");
        assert_eq!(report.lines().count(), chunks);
    }
}

#[test]
fn grouping_keeps_the_ebpf_samples_relay_would_drop() {
    let dir = tempfile::tempdir().unwrap();
    for (name, grouped, dropped, all) in FIXTURES {
        let input = fixtures().join("otlp").join(name);
        let ts = input_timestamps(&input);
        assert_eq!(ts.values().sum::<usize>(), all, "{name}");

        let out = dir.path().join(format!("{name}.grouped.ndjson"));
        let (chunks, stderr) = translate(&input, &out, &[]);
        let kept = assert_nothing_invented(name, &chunks, &ts);
        assert_eq!(kept, grouped, "{name}: kept {kept} of {all}");
        assert!(
            kept * 10 >= all * 9,
            "{name}: kept {kept} of {all}, want >= 90%"
        );
        assert!(stderr.contains("grouped"), "{name}: {stderr}");
        validate(name, &out, chunks.len());
        // Group threads are named.
        for c in &chunks {
            for s in &c.profile.samples {
                let named = c
                    .profile
                    .thread_metadata
                    .get(s.thread_id.as_str())
                    .and_then(|m| m.name.as_deref())
                    .is_some();
                assert!(named, "{name}: thread {} unnamed", s.thread_id);
            }
        }

        let out = dir.path().join(format!("{name}.dropped.ndjson"));
        let (chunks, _) = translate(&input, &out, &["--sparse-threads", "drop"]);
        let kept = assert_nothing_invented(name, &chunks, &ts);
        assert_eq!(kept, dropped, "{name}: --sparse-threads drop kept {kept}");
        validate(name, &out, chunks.len());
    }
}

#[test]
fn an_unknown_sparse_threads_value_is_a_usage_error() {
    let input = fixtures().join("otlp/ebpf-profile.pb");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        "--sparse-threads".as_ref(),
        "keep".as_ref(),
        input.as_os_str(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
