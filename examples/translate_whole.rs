//! Times the whole `profilink translate --to sentry` process on a 1,000,000-observation
//! request and compares it with an in-memory floor.
//!
//! The request is the translator benchmark's eBPF-profiler-shaped one
//! (`translator/benches/support/ebpf_request.rs`: 4 processes × 10 threads at 20 Hz, 2,000
//! stacks of depth 20–60, 1,000,000 observations; 13.6 MB of protobuf, 84 chunks and 106 MB
//! of NDJSON out). It is written to a temporary file once; then each round runs, interleaved:
//!
//! * **floor**: in this process, in memory, with the binary's allocator (mimalloc): prost
//!   decode of the request's bytes (and dropping the request) plus `ProfileChunk::to_json` of
//!   every chunk `profilink translate` writes for it (computed beforehand, outside the timing);
//!   the benchmark's serialization floor plus decoding. No translation, no file I/O, no process
//!   start.
//! * **each binary**: `BINARY translate --to sentry --output TMPFILE REQUEST` as a child
//!   process, from spawn to exit: wall time, and peak RSS (`ru_maxrss` of that child, from
//!   `wait4`, in a small launcher process so that this tool's own memory is not counted).
//!   Its output is checked to be exactly as long as the expected NDJSON. The output file is
//!   written as the CLI always writes files: to a temporary file, fsynced, renamed.
//!
//! Prints, per binary, the medians over the rounds (with min–max, since the machine may be
//! shared), the median peak RSS and the ratio median wall / median floor. The issue's goal is a
//! ratio of at most 1.5 and at most 256 MiB peak RSS.
//!
//! ```sh
//! cargo build --release --bin profilink --example translate_whole
//! target/release/examples/translate_whole                       # target/release/profilink
//! target/release/examples/translate_whole --rounds 9 /tmp/profilink-before target/release/profilink
//! ```
//!
//! Options: `--rounds N` (7); `--write-request FILE` (write the request's protobuf there and
//! exit, e.g. to profile `profilink translate` on it); then the binaries to compare (default:
//! `profilink` beside this example's directory). Temporary files go to the system temp
//! directory and are removed.

#[path = "../translator/benches/support/ebpf_request.rs"]
mod ebpf_request;

use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_translator::otlp_to_sentry::{ChunkOptions, SparseThreadPolicy, request_to_chunks};
use prost::Message;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// Runs `binary translate --to sentry --output output input` and measures it, through
/// [`launch`] in a fresh process of this tool (see there why).
fn run_translate(binary: &Path, input: &Path, output: &Path) -> Result<Run, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = Command::new(exe)
        .arg(LAUNCH)
        .arg(binary)
        .args(["translate", "--to", "sentry", "--output"])
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

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(LAUNCH) && argv.len() > 2 {
        return launch(&argv[2], &argv[3..]);
    }
    let mut rounds = 7usize;
    let mut binaries = Vec::new();
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
        } else if a == "--write-request" {
            write_request = args.next().map(PathBuf::from);
        } else {
            binaries.push(PathBuf::from(a));
        }
    }
    if binaries.is_empty() {
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        binaries.push(dir.join("profilink"));
    }

    let request = ebpf_request::build_request();
    let bytes = request.encode_to_vec();
    drop(request);
    if let Some(path) = write_request {
        return match std::fs::write(&path, &bytes) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                std::process::ExitCode::from(1)
            }
        };
    }
    let tmp = std::env::temp_dir();
    let id = std::process::id();
    let input = tmp.join(format!("profilink-translate-whole-{id}.pb"));
    let output = tmp.join(format!("profilink-translate-whole-{id}.ndjson"));
    let _cleanup = TempFiles(vec![input.clone(), output.clone()]);
    if let Err(e) = std::fs::write(&input, &bytes) {
        eprintln!("{}: {e}", input.display());
        return std::process::ExitCode::from(1);
    }

    // What `profilink translate --to sentry` writes (it drops sparse threads; this request has
    // none), computed once, outside the timing.
    let options = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    let chunks = {
        let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap_or_default();
        request_to_chunks(&req, &options).chunks
    };
    let samples: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
    let ndjson_len: usize = chunks.iter().map(|c| c.to_json().len() + 1).sum();
    eprintln!(
        "request: {:.1} MB protobuf, {samples} observations; output: {} chunks, {:.1} MB NDJSON; {rounds} interleaved rounds",
        bytes.len() as f64 / 1e6,
        chunks.len(),
        ndjson_len as f64 / 1e6
    );

    let mut floor = Vec::new();
    let mut runs: Vec<Vec<Run>> = binaries.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        let start = Instant::now();
        let req = ExportProfilesServiceRequest::decode(black_box(bytes.as_slice()));
        drop(black_box(req));
        let json: usize = chunks.iter().map(|c| black_box(c.to_json()).len()).sum();
        black_box(json);
        floor.push(start.elapsed().as_secs_f64() * 1e3);
        for (b, out) in binaries.iter().zip(&mut runs) {
            // A fresh output file each time: replacing the previous run's 100 MB file would
            // add the cost of freeing its blocks to the rename.
            let _ = std::fs::remove_file(&output);
            match run_translate(b, &input, &output) {
                Ok(run) => out.push(run),
                Err(e) => {
                    eprintln!("{e}");
                    return std::process::ExitCode::from(1);
                }
            }
            let written = std::fs::metadata(&output).map_or(0, |m| m.len() as usize);
            if written != ndjson_len {
                eprintln!(
                    "{}: wrote {written} bytes, expected {ndjson_len}",
                    b.display()
                );
                return std::process::ExitCode::from(1);
            }
        }
    }

    let (lo, hi) = min_max(&floor);
    let floor_ms = median(floor);
    println!("floor (decode + to_json): median {floor_ms:.0} ms (min {lo:.0}, max {hi:.0})");
    for (b, runs) in binaries.iter().zip(runs) {
        let wall: Vec<f64> = runs.iter().map(|r| r.wall_ms).collect();
        let rss: Vec<f64> = runs.iter().map(|r| r.max_rss_kib as f64 / 1024.0).collect();
        let (lo, hi) = min_max(&wall);
        let (rlo, rhi) = min_max(&rss);
        let wall_ms = median(wall);
        println!(
            "{}: whole process median {wall_ms:.0} ms (min {lo:.0}, max {hi:.0}), ratio {:.2}x the floor; peak RSS median {:.0} MiB (min {rlo:.0}, max {rhi:.0})",
            b.display(),
            wall_ms / floor_ms,
            median(rss),
        );
    }
    std::process::ExitCode::SUCCESS
}
