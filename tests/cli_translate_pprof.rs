//! End-to-end: `profilink translate` on real producers' pprof and folded output (a Go CPU
//! profile with labels and inlined functions, a Go heap profile, an `@datadog/pprof` wall
//! profile, py-spy's raw output). Expected stack counts come from plain decodes of the
//! inputs (tests/common/pprof_truth.rs), never from the translator; `--to pprof` output is
//! read back by `go tool pprof -traces` (skipped only where `go` is missing, unless
//! `PROFILINK_REQUIRE_PPROF_TOOLS=1`).

mod common;
#[path = "common/pprof_truth.rs"]
mod pprof_truth;

use common::{fixtures, profilink};
use pprof_truth::{
    Counts, folded_counts, go_available, go_tool_counts, otlp_count_profiles, pprof_counts,
    pprof_sample_types, sentry_counts,
};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    fixtures().join("pprof").join(name)
}

fn translate(to: &str, input: &Path, out: &Path, extra: &[&str]) -> common::Run {
    let mut args = vec!["translate", "--to", to, "--output", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(input.to_str().unwrap());
    let run = profilink(args);
    assert_eq!(run.code, 0, "translate --to {to}: {}", run.stderr);
    run
}

fn total(c: &Counts) -> u64 {
    c.values().sum()
}

/// `--to otlp` keeps one profile per sample type and the count profile's stack counts.
fn check_otlp(input: &Path, expected: &Counts, types: usize, dir: &Path) {
    let out = dir.join("out.otlp.pb");
    translate("otlp", input, &out, &[]);
    let (got, profiles) = otlp_count_profiles(&std::fs::read(&out).unwrap());
    assert_eq!(profiles, types, "one OTLP profile per pprof sample type");
    assert_eq!(&got, expected, "OTLP stack counts");
    let run = profilink(["validate", "--strict", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "validate: {}{}", run.stdout, run.stderr);
}

/// `--to pprof` output read by `go tool pprof -traces` has the same stack counts.
fn check_pprof(input: &Path, expected: &Counts, time_type: Option<&str>, dir: &Path) {
    let out = dir.join("out.pb.gz");
    translate("pprof", input, &out, &[]);
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.starts_with(&[0x1f, 0x8b]), "gzipped");
    assert_eq!(
        &pprof_counts(&bytes),
        expected,
        "pprof stack counts (plain decode)"
    );
    let mut types = vec!["samples/count".to_owned()];
    types.extend(time_type.map(str::to_owned));
    assert_eq!(pprof_sample_types(&bytes), types);
    if go_available() {
        let (got, header) = go_tool_counts(&out);
        // go tool pprof does not print samples without locations (they are in the file: the
        // plain decode above counted them).
        let mut located = expected.clone();
        located.remove(&Vec::<String>::new());
        assert_eq!(got, located, "go tool pprof -traces stack counts");
        assert_eq!(
            header, "samples",
            "go tool pprof names the first sample type"
        );
    } else {
        eprintln!("go is missing: go tool pprof check skipped");
    }
}

/// `--to sentry` gives chunks the validator accepts with the expected stack counts.
fn check_sentry(input: &Path, expected: &Counts, dir: &Path) {
    let out = dir.join("out.ndjson");
    translate("sentry", input, &out, &[]);
    let run = profilink(["validate", "--strict", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "validate: {}{}", run.stdout, run.stderr);
    let got = sentry_counts(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(total(&got), total(expected), "Sentry observations");
    assert_eq!(&got, expected, "Sentry stack counts");
}

#[test]
fn go_cpu_profile_with_labels_and_inlining() {
    let input = fixture("go-cpu-labels-inline.pb.gz");
    let bytes = std::fs::read(&input).unwrap();
    let expected = pprof_counts(&bytes);
    assert_eq!(total(&expected), 364);
    // Inlining: some stack holds main.mix inlined into main.step inlined into main.hashLoop.
    assert!(expected.keys().any(|s| {
        s.windows(3)
            .any(|w| w == ["main.mix", "main.step", "main.hashLoop"])
    }));
    let dir = tempfile::tempdir().unwrap();
    check_otlp(&input, &expected, 2, dir.path());
    check_pprof(&input, &expected, Some("cpu/nanoseconds"), dir.path());
    // Labels survive pprof -> OTLP -> pprof.
    let out = dir.path().join("out.pb.gz");
    if go_available() {
        let raw = std::process::Command::new("go")
            .args(["tool", "pprof", "-raw"])
            .arg(&out)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&raw.stdout);
        assert!(
            text.contains("worker:[hash]") && text.contains("worker:[parse]"),
            "{text}"
        );
    }
}

#[test]

fn go_cpu_profile_to_sentry() {
    let input = fixture("go-cpu-labels-inline.pb.gz");
    let expected = pprof_counts(&std::fs::read(&input).unwrap());
    let dir = tempfile::tempdir().unwrap();
    check_sentry(&input, &expected, dir.path());
}

#[test]
fn node_wall_profile() {
    let input = fixture("node-wall.pb.gz");
    let bytes = std::fs::read(&input).unwrap();
    assert_eq!(
        pprof_sample_types(&bytes),
        ["sample/count", "wall/nanoseconds"]
    );
    let expected = pprof_counts(&bytes);
    assert_eq!(total(&expected), 112);
    let dir = tempfile::tempdir().unwrap();
    check_otlp(&input, &expected, 2, dir.path());
    check_pprof(&input, &expected, Some("wall/nanoseconds"), dir.path());
    check_sentry(&input, &expected, dir.path());
}

#[test]
fn py_spy_folded() {
    let input = fixture("py-spy-raw.folded");
    let expected = folded_counts(&std::fs::read_to_string(&input).unwrap());
    assert_eq!(total(&expected), 307);
    let dir = tempfile::tempdir().unwrap();
    check_otlp(&input, &expected, 1, dir.path());
    // Folded stacks carry no period: the pprof has samples/count only.
    check_pprof(&input, &expected, None, dir.path());
    check_sentry(&input, &expected, dir.path());
    // Detected, or named by --from.
    let out = dir.path().join("from.otlp.pb");
    translate("otlp", &input, &out, &["--from", "folded"]);
}

#[test]
fn heap_profile_is_skipped_visibly() {
    let input = fixture("go-heap.pb.gz");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.ndjson");
    let run = translate("sentry", &input, &out, &[]);
    assert!(
        run.stderr.contains("skipped 4 profile(s)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("0 chunk(s) written"), "{}", run.stderr);
    let out = dir.path().join("out.pb.gz");
    let run = translate("pprof", &input, &out, &[]);
    for t in [
        "alloc_objects:count",
        "alloc_space:bytes",
        "inuse_objects:count",
        "inuse_space:bytes",
    ] {
        assert!(run.stderr.contains(t), "{t} named: {}", run.stderr);
    }
}

#[test]
fn bad_pprof_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    // A pprof whose sample names location 9, which is not defined.
    let bad =
        b"\x0a\x04\x08\x01\x10\x02\x12\x04\x08\x09\x10\x01\x32\x00\x32\x07samples\x32\x05count";
    let input = common::write(dir.path(), "bad.pb", bad);
    let run = profilink([
        "translate",
        "--to",
        "otlp",
        "--output",
        "/dev/null",
        input.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("location id 9 is not defined"),
        "{}",
        run.stderr
    );
    // Truncated gzip.
    let gz = std::fs::read(fixture("go-cpu-labels-inline.pb.gz")).unwrap();
    let input = common::write(dir.path(), "cut.pb.gz", &gz[..gz.len() / 2]);
    let run = profilink([
        "translate",
        "--to",
        "otlp",
        "--output",
        "/dev/null",
        input.to_str().unwrap(),
    ]);
    assert_ne!(run.code, 0);
    assert!(!run.stderr.is_empty());
}
