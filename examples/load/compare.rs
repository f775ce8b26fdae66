//! `--against PATH` (repeatable): the same load against several binaries, interleaved. Each of
//! `--repeat N` rounds runs `--binary`, then every `--against` binary, each a fresh profilink
//! with a fresh stand-in and queue; then, per binary, the median and range of samples per
//! CPU-second, CPU per observation, samples/s, p99 export call latency and peak RSS.
//! Identical runs on a shared 2-core machine spread by ±15%, so one run of each says little
//! about a change of a few percent.
//!
//! With `--floor PATH`, the independent floor (`PATH --service FIXTURE`: inflate, decode, append
//! and fdatasync the body, samples JSON, gzip level 2, per load-test request) runs right before
//! each binary's run, and the run's CPU per observation is reported as a ratio to that floor,
//! so both are measured in the same conditions. The ratio is given twice: over the clients'
//! span (what the issue targets), and over the whole job, whose CPU is read from the process's
//! exit: deliveries the load left queued are done during the drain and the shutdown, so the
//! first ratio leaves them out.

use crate::args::Args;
use crate::report::{Run, median, percentile};
use crate::run::{self, Load, Setup};
use std::path::{Path, PathBuf};

/// One run's figures.
struct Measure {
    per_cpu_second: f64,
    us_per_observation: f64,
    /// CPU per observation over the floor measured just before the run (NaN without `--floor`).
    floor_ratio: f64,
    /// The same over the whole job: the load, the drain of its backlog and the shutdown.
    job_floor_ratio: f64,
    job_us_per_observation: f64,
    per_second: f64,
    p99_ms: f64,
    hwm_mib: f64,
}

impl Measure {
    fn of(r: &Run, floor_us: f64) -> Self {
        let samples = r.clients.accepted_samples as f64;
        let us = r.cpu * 1e6 / samples.max(1.0);
        let job_us = r.job_cpu * 1e6 / samples.max(1.0);
        let mut lat = r.clients.latencies.clone();
        Measure {
            job_floor_ratio: job_us / floor_us,
            job_us_per_observation: job_us,
            per_cpu_second: samples / r.cpu.max(1e-9),
            us_per_observation: us,
            floor_ratio: us / floor_us,
            per_second: samples / r.elapsed.max(1e-9),
            p99_ms: percentile(&mut lat, 0.99) * 1e3,
            hwm_mib: r.hwm as f64 / 1024.0,
        }
    }
}

/// The fixture `floor --service` reads (the load test's requests are built from it).
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp/ebpf-profile.pb")
}

/// Runs `floor --service` and reads its `service floor: X us per observation` line.
fn floor_us(floor: &Path) -> f64 {
    let out = std::process::Command::new(floor)
        .arg("--service")
        .arg(fixture())
        .output()
        .expect("run the floor program");
    let text = String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("service floor: ")?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `service floor:` line from {}: {text}", floor.display()))
}

/// Runs the rounds and prints every run and the summary.
pub async fn run(a: &Args, load: &Load) {
    let binaries: Vec<PathBuf> = std::iter::once(a.binary.clone())
        .chain(a.against.iter().cloned())
        .collect();
    let rounds = a.repeat.max(1);
    let mut measured: Vec<Vec<Measure>> = binaries.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (i, binary) in binaries.iter().enumerate() {
            let mut this = a.clone();
            this.binary = binary.clone();
            let setup = Setup {
                pprof_to: a
                    .pprof
                    .as_ref()
                    .map(|d| crate::pprof_path(d, &format!("binary{i}-round{round}"))),
                ..Default::default()
            };
            let floor = a.floor.as_deref().map_or(f64::NAN, floor_us);
            eprintln!("round {}/{rounds}: {}…", round + 1, binary.display());
            let r = run::run(&this, load, setup).await;
            let m = Measure::of(&r, floor);
            let against_floor = if a.floor.is_some() {
                format!(
                    ", floor {floor:.3} us, {:.2}x; whole job {:.3} us, {:.2}x",
                    m.floor_ratio, m.job_us_per_observation, m.job_floor_ratio
                )
            } else {
                String::new()
            };
            println!(
                "round {} {}: {:.0} samples per CPU-second ({:.3} us per observation{against_floor}), {:.0} samples/s, export p99 {:.1} ms, peak RSS {:.1} MiB, {}",
                round + 1,
                binary.display(),
                m.per_cpu_second,
                m.us_per_observation,
                m.per_second,
                m.p99_ms,
                m.hwm_mib,
                r.status
            );
            measured[i].push(m);
        }
    }
    println!("summary over {rounds} interleaved round(s): median (min-max)");
    for (binary, ms) in binaries.iter().zip(&measured) {
        let col = |f: fn(&Measure) -> f64, decimals| spread(ms.iter().map(f).collect(), decimals);
        // Without `--floor` there is no ratio to print.
        let ratio = if a.floor.is_some() {
            format!(
                "{} x the floor ({} over the whole job); ",
                col(|m| m.floor_ratio, 2),
                col(|m| m.job_floor_ratio, 2)
            )
        } else {
            String::new()
        };
        println!(
            "  {}: {} samples per CPU-second; {ratio}{} samples/s; export p99 {} ms; peak RSS {} MiB",
            binary.display(),
            col(|m| m.per_cpu_second, 0),
            col(|m| m.per_second, 0),
            col(|m| m.p99_ms, 0),
            col(|m| m.hwm_mib, 0),
        );
    }
}

/// `median (min-max)` of `v`, with `decimals` decimals.
fn spread(v: Vec<f64>, decimals: usize) -> String {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    format!("{:.d$} ({lo:.d$}-{hi:.d$})", median(v), d = decimals)
}
