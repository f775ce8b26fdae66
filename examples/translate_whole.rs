//! Times the whole `profilink translate` process on 1,000,000-observation inputs and compares
//! it with an in-memory floor, per input shape (`--shape`, repeatable; default all three):
//!
//! * `ebpf`: the translator benchmark's eBPF-profiler-shaped request
//!   (`translator/benches/support/ebpf_request.rs`: 4 processes × 10 threads at 20 Hz, one
//!   profile each, 2,000 stacks of depth 20–60; 13.6 MB of protobuf, 84 chunks and 106 MB of
//!   NDJSON out), through `translate --to sentry`.
//! * `session`: one long sentry-python session (`translator/benches/support/session_request.rs`:
//!   the real fixture's samples repeated into 150 consecutive 65 s profiles of one process, 4
//!   threads, about half of the observations linked to spans), through `translate --to sentry`.
//! * `chunks`: the `session` shape's chunks as the NDJSON `translate --to sentry` writes,
//!   through `translate --to otlp` (Sentry -> OTLP).
//!
//! Each input is written to a temporary file once; then each round runs, interleaved:
//!
//! * **floor**: in this process, in memory, with the binary's allocator (jemalloc), no
//!   translation, no file I/O, no process start. To Sentry: prost decode of the request's
//!   bytes (and dropping the request) plus `ProfileChunk::to_json` of every chunk `profilink
//!   translate` writes for it (computed beforehand, outside the timing). To OTLP:
//!   `ProfileChunk::from_json` of every NDJSON line plus prost encoding of the request
//!   `profilink translate` writes (computed beforehand).
//! * **each binary**: `BINARY translate --to FORMAT --output TMPFILE INPUT` as a child process,
//!   from spawn to exit: wall time, and peak RSS (`ru_maxrss` of that child, from `wait4`, in a
//!   small launcher process so that this tool's own memory is not counted). Its output is
//!   checked to be byte for byte the expected one. The output file is written as the CLI
//!   always writes files: to a temporary file, fsynced, renamed.
//!
//! Prints, per shape and binary, the medians over the rounds (with min–max, since the machine
//! may be shared), the median peak RSS and the ratio median wall / median floor. Issue #33's
//! goals: at most 1.5x and 128 MiB for both shapes to Sentry, at most 1.2x for chunks to OTLP.
//!
//! ```sh
//! cargo build --release --bin profilink --example translate_whole
//! target/release/examples/translate_whole                       # target/release/profilink
//! target/release/examples/translate_whole --rounds 9 /tmp/profilink-before target/release/profilink
//! target/release/examples/translate_whole --shape session --write-request /tmp/session.pb
//! ```
//!
//! Options: `--rounds N` (7); `--shape ebpf|session|chunks` (repeatable); `--write-request
//! FILE` (write the first shape's input there and exit, e.g. to profile `profilink translate`
//! on it); then the binaries to compare (default: `profilink` beside this example's directory).
//! Temporary files go to the system temp directory and are removed.

#[path = "../translator/benches/support/ebpf_request.rs"]
mod ebpf_request;
#[path = "../translator/benches/support/session_request.rs"]
mod session_request;

use profilink_proto::input::InputFormat;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::otlp_to_sentry::{ChunkOptions, SparseThreadPolicy, request_to_chunks};
use profilink_translator::sentry_to_otlp::OtlpOptions;
use profilink_translator::{SentryParts, ndjson_lines};
use prost::Message;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

// As in the `profilink` binary.
profilink::global_allocator!();

/// Removes the temporary files however the tool ends.
struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One run of a binary.
struct Run {
    wall_ms: f64,
    max_rss_kib: i64,
}

/// Runs `binary translate --to to --output output input` and measures it, through [`launch`]
/// in a fresh process of this tool (see there why).
fn run_translate(binary: &Path, to: &str, input: &Path, output: &Path) -> Result<Run, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .arg(LAUNCH)
        .arg(binary)
        .args(["translate", "--to", to, "--output"])
        .arg(output)
        .arg(input)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the launcher: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    match (
        out.status.success(),
        fields.next().and_then(|w| w.parse().ok()),
        fields.next().and_then(|m| m.parse().ok()),
    ) {
        (true, Some(wall_ms), Some(max_rss_kib)) => Ok(Run {
            wall_ms,
            max_rss_kib,
        }),
        _ => Err(format!("{} failed: {text}", binary.display())),
    }
}

/// First argument of the launcher mode.
const LAUNCH: &str = "--launch";

/// Launcher mode (`--launch PROGRAM ARGS...`, run before anything is allocated): runs the
/// program with its stdout and stderr discarded, and prints its wall time (ms) and peak RSS
/// (KiB). Exits 1 if it did not exit 0.
///
/// Why a launcher: Linux records the address space a process leaves at `exec` in its peak RSS,
/// and a child spawned by this (large) process starts out sharing or copying this process's
/// memory, so `ru_maxrss` would report at least this tool's own size. The launcher is small.
/// `std::process::Child::wait` does not report resource usage, hence `wait4` (via `libc`); it
/// gives the peak RSS of that child alone (`RUSAGE_CHILDREN` is a maximum over all children).
fn launch(program: &str, args: &[String]) -> std::process::ExitCode {
    let start = Instant::now();
    let child = match Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot run {program}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped; both pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    if r != pid {
        eprintln!("wait4: {}", std::io::Error::last_os_error());
        return std::process::ExitCode::from(1);
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        eprintln!("{program} failed (wait status {status})");
        return std::process::ExitCode::from(1);
    }
    println!("{wall_ms:.3} {}", usage.ru_maxrss);
    std::process::ExitCode::SUCCESS
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// An input shape.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Ebpf,
    Session,
    Chunks,
}

impl Shape {
    fn parse(s: &str) -> Option<Shape> {
        match s {
            "ebpf" => Some(Shape::Ebpf),
            "session" => Some(Shape::Session),
            "chunks" => Some(Shape::Chunks),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Shape::Ebpf => "ebpf (to sentry)",
            Shape::Session => "session (to sentry)",
            Shape::Chunks => "session chunks (to otlp)",
        }
    }
}

/// One shape, ready to run: its input file's bytes, what the binaries must write, and the floor.
struct Case {
    shape: Shape,
    to: &'static str,
    input: Vec<u8>,
    expected: Vec<u8>,
    floor: Box<dyn Fn() -> usize>,
}

/// What `profilink translate --to sentry` writes for a request (it groups sparse threads and
/// drops what is still sparse), computed in this process.
fn sentry_options() -> ChunkOptions {
    ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    }
}

/// The `--to sentry` case of a request; also returns its chunks.
fn to_sentry_case(
    shape: Shape,
    request: ExportProfilesServiceRequest,
) -> (Case, Vec<ProfileChunk>) {
    let bytes = request.encode_to_vec();
    let chunks = request_to_chunks(&request, &sentry_options()).chunks;
    drop(request);
    let mut expected = Vec::new();
    for c in &chunks {
        expected.extend_from_slice(&c.to_json());
        expected.push(b'\n');
    }
    let samples: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
    eprintln!(
        "{}: {:.1} MB protobuf, {samples} observations; output: {} chunks, {:.1} MB NDJSON",
        shape.name(),
        bytes.len() as f64 / 1e6,
        chunks.len(),
        expected.len() as f64 / 1e6
    );
    let (input, floor_chunks) = (bytes.clone(), chunks.clone());
    let floor = Box::new(move || {
        let req = ExportProfilesServiceRequest::decode(black_box(bytes.as_slice()));
        drop(black_box(req));
        floor_chunks
            .iter()
            .map(|c| black_box(c.to_json()).len())
            .sum()
    });
    (
        Case {
            shape,
            to: "sentry",
            input,
            expected,
            floor,
        },
        chunks,
    )
}

/// The `--to otlp` case of chunks, as the NDJSON `translate --to sentry` writes.
fn to_otlp_case(chunks: &[ProfileChunk]) -> Result<Case, String> {
    let mut ndjson = Vec::new();
    for c in chunks {
        ndjson.extend_from_slice(&c.to_json());
        ndjson.push(b'\n');
    }
    let mut parts = SentryParts::default();
    parts
        .read(&ndjson, InputFormat::SentryChunkNdjson)
        .map_err(|e| format!("chunks: {e}"))?;
    let request = parts.to_otlp(&OtlpOptions::default()).request;
    let expected = request.encode_to_vec();
    eprintln!(
        "{}: {} chunks, {:.1} MB NDJSON; output: {:.1} MB protobuf",
        Shape::Chunks.name(),
        chunks.len(),
        ndjson.len() as f64 / 1e6,
        expected.len() as f64 / 1e6
    );
    let input = ndjson.clone();
    let floor = Box::new(move || {
        let mut n = 0;
        for (_, line) in ndjson_lines(black_box(&ndjson)) {
            n += black_box(ProfileChunk::from_json(line)).map_or(0, |c| c.profile.samples.len());
        }
        n + black_box(request.encode_to_vec()).len()
    });
    Ok(Case {
        shape: Shape::Chunks,
        to: "otlp",
        input,
        expected,
        floor,
    })
}

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(LAUNCH) && argv.len() > 2 {
        return launch(&argv[2], &argv[3..]);
    }
    let mut rounds = 7usize;
    let mut binaries = Vec::new();
    let mut shapes = Vec::new();
    let mut write_request = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n) if n > 0 => rounds = n,
                _ => {
                    eprintln!("--rounds takes a positive number");
                    return std::process::ExitCode::from(2);
                }
            }
        } else if a == "--shape" {
            match args.next().as_deref().and_then(Shape::parse) {
                Some(s) => shapes.push(s),
                None => {
                    eprintln!("--shape takes ebpf, session or chunks");
                    return std::process::ExitCode::from(2);
                }
            }
        } else if a == "--write-request" {
            write_request = args.next().map(PathBuf::from);
        } else {
            binaries.push(PathBuf::from(a));
        }
    }
    if shapes.is_empty() {
        shapes = vec![Shape::Ebpf, Shape::Session, Shape::Chunks];
    }
    if binaries.is_empty() {
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        binaries.push(dir.join("profilink"));
    }

    let mut cases = Vec::new();
    if shapes.contains(&Shape::Ebpf) {
        cases.push(to_sentry_case(Shape::Ebpf, ebpf_request::build_request()).0);
    }
    if shapes.contains(&Shape::Session) || shapes.contains(&Shape::Chunks) {
        let (case, chunks) = to_sentry_case(Shape::Session, session_request::build_request());
        if shapes.contains(&Shape::Session) {
            cases.push(case);
        }
        if shapes.contains(&Shape::Chunks) {
            match to_otlp_case(&chunks) {
                Ok(c) => cases.push(c),
                Err(e) => {
                    eprintln!("{e}");
                    return std::process::ExitCode::from(1);
                }
            }
        }
    }
    cases.sort_by_key(|c| shapes.iter().position(|s| *s == c.shape));
    if let Some(path) = write_request {
        return match std::fs::write(&path, &cases[0].input) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                std::process::ExitCode::from(1)
            }
        };
    }
    let tmp = std::env::temp_dir();
    let id = std::process::id();
    let output = tmp.join(format!("profilink-translate-whole-{id}.out"));
    let inputs: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, _)| tmp.join(format!("profilink-translate-whole-{id}-{i}.in")))
        .collect();
    let mut temp = inputs.clone();
    temp.push(output.clone());
    let _cleanup = TempFiles(temp);
    for (case, path) in cases.iter().zip(&inputs) {
        if let Err(e) = std::fs::write(path, &case.input) {
            eprintln!("{}: {e}", path.display());
            return std::process::ExitCode::from(1);
        }
    }
    eprintln!("{rounds} interleaved rounds");

    let mut floor: Vec<Vec<f64>> = cases.iter().map(|_| Vec::new()).collect();
    let mut runs: Vec<Vec<Vec<Run>>> = cases
        .iter()
        .map(|_| binaries.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            let start = Instant::now();
            black_box((case.floor)());
            floor[c].push(start.elapsed().as_secs_f64() * 1e3);
            // Each round starts with the next binary, so that none always runs right after
            // another one's 100 MB output was written and removed.
            let n = binaries.len();
            for k in (0..n).map(|k| (k + round) % n) {
                let (b, out) = (&binaries[k], &mut runs[c][k]);
                // A fresh output file each time: replacing the previous run's 100 MB file
                // would add the cost of freeing its blocks to the rename. And the removal is
                // flushed to disk before the run, so its block discards (ext4 `discard`) do
                // not land in the next run's fsync.
                let _ = std::fs::remove_file(&output);
                // SAFETY: `sync` takes no arguments and cannot fail.
                unsafe { libc::sync() };
                match run_translate(b, case.to, &inputs[c], &output) {
                    Ok(run) => out.push(run),
                    Err(e) => {
                        eprintln!("{e}");
                        return std::process::ExitCode::from(1);
                    }
                }
                let written = std::fs::read(&output).unwrap_or_default();
                if written != case.expected {
                    eprintln!(
                        "{}: {}: wrote {} bytes, not the expected {} bytes",
                        case.shape.name(),
                        b.display(),
                        written.len(),
                        case.expected.len()
                    );
                    return std::process::ExitCode::from(1);
                }
            }
        }
    }

    for ((case, floor), runs) in cases.iter().zip(floor).zip(runs) {
        let (lo, hi) = min_max(&floor);
        let floor_ms = median(floor);
        println!(
            "{}: floor median {floor_ms:.0} ms (min {lo:.0}, max {hi:.0})",
            case.shape.name()
        );
        for (b, runs) in binaries.iter().zip(runs) {
            let wall: Vec<f64> = runs.iter().map(|r| r.wall_ms).collect();
            let rss: Vec<f64> = runs.iter().map(|r| r.max_rss_kib as f64 / 1024.0).collect();
            let (lo, hi) = min_max(&wall);
            let (rlo, rhi) = min_max(&rss);
            let wall_ms = median(wall);
            println!(
                "  {}: whole process median {wall_ms:.0} ms (min {lo:.0}, max {hi:.0}), ratio {:.2}x the floor; peak RSS median {:.0} MiB (min {rlo:.0}, max {rhi:.0})",
                b.display(),
                wall_ms / floor_ms,
                median(rss),
            );
        }
    }
    std::process::ExitCode::SUCCESS
}
