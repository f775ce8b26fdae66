//! Helpers for the pprof and Pyroscope receiver tests: the real producers (the Go service of
//! `tests/testdata/gosvc`, built with the machine's `go` at test time; Python with the
//! `pyroscope-io` SDK), each `None` (the test skips, saying so) when its tool is missing,
//! unless `PROFILINK_REQUIRE_PPROF_TOOLS=1`, when a missing tool fails the test; a profilink
//! with a file exporter; and the stack counts of a pprof profile and of chunks, to compare.
#![allow(dead_code)]

use crate::service_support::*;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::pprof::{PprofOptions, PprofProfile, decode_pprof};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Stacks (function names, leaf first) and how many observations each has.
pub type StackCounts = BTreeMap<Vec<String>, u64>;

/// `None` after saying why the test skips, or panics when the tools are required.
pub fn missing(tool: &str, why: &str) -> Option<std::convert::Infallible> {
    if std::env::var("PROFILINK_REQUIRE_PPROF_TOOLS").as_deref() == Ok("1") {
        panic!(
            "PROFILINK_REQUIRE_PPROF_TOOLS=1 but {tool} is missing: {why} (.ci/run installs it)"
        );
    }
    eprintln!("skipping: {tool} is missing ({why}); .ci/run installs it");
    None
}

/// The Go service of `tests/testdata/gosvc`, built once per test process with `go build`.
pub fn gosvc() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/gosvc");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gosvc-pprof-receiver");
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build-cache");
        let status = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(".")
            .current_dir(&src)
            .env("GOCACHE", &cache)
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .status();
        match status {
            Ok(s) if s.success() => Ok(out),
            Ok(s) => panic!("go build of {} failed: {s}", src.display()),
            Err(e) => Err(e.to_string()),
        }
    });
    match built {
        Ok(p) => Some(p.clone()),
        Err(e) => {
            missing("go (Debian's golang)", e)?;
            None
        }
    }
}

/// A running Go service serving `net/http/pprof`; killed when dropped.
pub struct GoService {
    child: Child,
    /// `host:port` it listens on.
    pub addr: String,
}

impl GoService {
    /// Starts `gosvc -listen 127.0.0.1:0` and reads the address it bound.
    pub fn start(binary: &Path) -> GoService {
        let mut child = Command::new(binary)
            .args(["-listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start gosvc");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("gosvc said {line:?}"))
            .to_string();
        GoService { child, addr }
    }
}

impl Drop for GoService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CPU profile of `seconds` recorded by the Go service (`-cpuprofile`): gzipped pprof.
pub fn go_cpu_profile(binary: &Path, dir: &Path, seconds: f64) -> Vec<u8> {
    let path = dir.join("go-cpu.pb.gz");
    let heap = dir.join("go-heap.pb.gz");
    let ok = Command::new(binary)
        .arg("-cpuprofile")
        .arg(&path)
        .arg("-heapprofile")
        .arg(&heap)
        .args(["-seconds", &seconds.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "gosvc -cpuprofile failed");
    std::fs::read(path).unwrap()
}

/// `python3` when it imports the `pyroscope` module of the `pyroscope-io` SDK.
pub fn python_with_pyroscope() -> Option<&'static str> {
    let ok = Command::new("python3")
        .args(["-c", "import pyroscope"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some("python3")
    } else {
        missing(
            "the pyroscope-io SDK (PyPI)",
            "python3 cannot import pyroscope",
        )?;
        None
    }
}

/// The samples of `profile` per stack: function names leaf first (inlined functions too, the
/// innermost first, as pprof lists a location's lines), counted as observations: the
/// `samples`/`count` value when the profile has one, else the first type's value over the
/// period.
pub fn pprof_stack_counts(profile: &PprofProfile) -> StackCounts {
    let s = |i: i64| profile.string_table[i as usize].clone();
    let types: Vec<(String, String)> = profile
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    let count_index = types
        .iter()
        .position(|(t, u)| (t == "samples" || t == "sample") && u == "count");
    let functions: BTreeMap<u64, String> =
        profile.function.iter().map(|f| (f.id, s(f.name))).collect();
    let locations: BTreeMap<u64, Vec<String>> = profile
        .location
        .iter()
        .map(|l| {
            let names = l
                .line
                .iter()
                .map(|line| {
                    functions
                        .get(&line.function_id)
                        .cloned()
                        .unwrap_or_default()
                })
                .collect();
            (l.id, names)
        })
        .collect();
    let mut counts = StackCounts::new();
    for sample in &profile.sample {
        let n = match count_index {
            Some(i) => sample.value[i],
            None => sample.value[0] / profile.period.max(1),
        };
        if n <= 0 {
            continue;
        }
        let stack: Vec<String> = sample
            .location_id
            .iter()
            .flat_map(|id| locations[id].clone())
            .collect();
        *counts.entry(stack).or_default() += n as u64;
    }
    counts
}

/// Decodes a pprof profile (raw or gzipped).
pub fn decode(bytes: &[u8]) -> PprofProfile {
    decode_pprof(bytes, &PprofOptions::default()).expect("a pprof profile")
}

/// The observations of `chunks` per stack (function names, leaf first).
pub fn chunk_stack_counts(chunks: &[ProfileChunk]) -> StackCounts {
    let mut counts = StackCounts::new();
    for c in chunks {
        let p = &c.profile;
        for sample in &p.samples {
            let stack: Vec<String> = p.stacks[sample.stack_id]
                .iter()
                .map(|f| p.frames[*f].function.as_deref().unwrap_or("").to_string())
                .collect();
            *counts.entry(stack).or_default() += 1;
        }
    }
    counts
}

/// The chunks of every `.envelope` file in `dir`.
pub fn envelope_chunks(dir: &Path) -> Vec<ProfileChunk> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "envelope"))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| std::fs::read(f).ok())
        .filter_map(|b| Envelope::parse(&b).ok())
        .flat_map(|e| {
            e.profile_chunks()
                .filter_map(|i| ProfileChunk::from_json(&i.payload).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits (at most `timeout`) until the chunks written to `dir` hold `n` observations; returns
/// them and when that was.
pub fn wait_for_observations(
    p: &Profilink,
    dir: &Path,
    n: usize,
    timeout: Duration,
) -> Vec<ProfileChunk> {
    let start = Instant::now();
    loop {
        let chunks = envelope_chunks(dir);
        let have: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
        if have >= n {
            return chunks;
        }
        assert!(
            start.elapsed() < timeout,
            "{have} of {n} observations written to {} in {timeout:?}; stderr:\n{}",
            dir.display(),
            p.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `profilink validate` on every envelope in `dir`; panics on the first that fails.
pub fn validate_envelopes(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let f = entry.unwrap().path();
        if f.extension().is_none_or(|x| x != "envelope") {
            continue;
        }
        let out = Command::new(env!("CARGO_BIN_EXE_profilink"))
            .arg("validate")
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "validate {}: {}{}",
            f.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        n += 1;
    }
    n
}

/// `profilink run` in `dir` with `receivers` (YAML under `receivers:`, indented by 2) feeding
/// `receiver` into a file exporter writing `dir/out` (chunks idle after 300 ms), metrics at
/// `metrics`; waits for `listening`.
pub fn start_to_files(
    dir: &Path,
    receivers: &str,
    receiver: &str,
    metrics: &str,
    listening: &[&str],
) -> Profilink {
    let yaml = format!(
        r#"
receivers:
{receivers}
exporters:
  file: {{ path: ./out, chunk_idle_timeout: 300ms, tick: 20ms }}
service:
  pipelines:
    profiles: {{ receivers: [{receiver}], exporters: [file] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
    );
    let mut p = start_with_config(dir, &yaml, listening);
    p.wait_port(metrics, Duration::from_secs(20));
    p
}
