//! `--against PATH` (repeatable): the same load against several binaries, interleaved. Each of
//! `--repeat N` rounds runs `--binary`, then every `--against` binary, each a fresh profilink
//! with a fresh stand-in and queue; then, per binary, the median and range of samples per
//! CPU-second, samples/s and peak RSS. Identical runs on a shared 2-core machine spread by
//! ±15%, so one run of each says little about a change of a few percent.

use crate::args::Args;
use crate::report::{Run, median};
use crate::run::{self, Load, Setup};
use std::path::PathBuf;

/// One run's figures.
struct Measure {
    per_cpu_second: f64,
    per_second: f64,
    hwm_mib: f64,
}

impl Measure {
    fn of(r: &Run) -> Self {
        let samples = r.clients.accepted_samples as f64;
        Measure {
            per_cpu_second: samples / r.cpu.max(1e-9),
            per_second: samples / r.elapsed.max(1e-9),
            hwm_mib: r.hwm as f64 / 1024.0,
        }
    }
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
            eprintln!("round {}/{rounds}: {}…", round + 1, binary.display());
            let r = run::run(&this, load, setup).await;
            let m = Measure::of(&r);
            println!(
                "round {} {}: {:.0} samples per CPU-second, {:.0} samples/s, peak RSS {:.1} MiB, {}",
                round + 1,
                binary.display(),
                m.per_cpu_second,
                m.per_second,
                m.hwm_mib,
                r.status
            );
            measured[i].push(m);
        }
    }
    println!("summary over {rounds} interleaved round(s): median (min-max)");
    for (binary, ms) in binaries.iter().zip(&measured) {
        let col = |f: fn(&Measure) -> f64| spread(ms.iter().map(f).collect());
        println!(
            "  {}: {} samples per CPU-second; {} samples/s; peak RSS {} MiB",
            binary.display(),
            col(|m| m.per_cpu_second),
            col(|m| m.per_second),
            col(|m| m.hwm_mib),
        );
    }
}

/// `median (min-max)` of `v`, rounded.
fn spread(v: Vec<f64>) -> String {
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    format!("{:.0} ({lo:.0}-{hi:.0})", median(v))
}
