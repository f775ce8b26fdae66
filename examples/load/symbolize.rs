//! `--symbolize`: what the `symbolize` processor costs under the load, in one invocation.
//!
//! The load is the usual one (the eBPF fixture replicated into sessions, `--clients` for
//! `--seconds`) with its native frames pointed into real objects compiled at start
//! (`native`, `native_frames`): 90 native locations per request (111 of the fixture's 333
//! frames), their addresses sweeping every function of three `-O2` objects, debug files in a
//! build-id directory. The same bodies are sent in three phases, each against a fresh
//! profilink and Sentry stand-in:
//!
//! * `off`: no `symbolize` processor;
//! * `cold`: `symbolize` with `sources: [debug_dirs]`, the objects' debug directory, and an
//!   empty symbol cache directory: nothing loaded, measured from the first request (each
//!   object's DWARF is opened and every address looked up once, as they arrive);
//! * `warm`: the same, after a warm-up (other sessions) that sent every address once, so the
//!   measured load finds the objects loaded and every (build id, address) cached.
//!
//! Each phase prints samples/s, samples per CPU-second of profilink, its peak RSS, the
//! symbolizer's `profilink_symbolizer_frames_total{outcome}` and cache hits/misses over the
//! measured load (from `/metrics`), and the native frames of the sampled chunks that Sentry
//! would get with a name; then warm and cold against off.
//!
//! Measured 2026-11-28 (`--clients 4 --seconds 15 --repeat 3`, the shared 2-core machine
//! 95-100% busy; medians, samples/s and samples per CPU-second against `off`): with every
//! native address repeating (`--new-addresses 0`) cold +2.2% / -9.8%, warm -8.8% / -6.4%;
//! with half new (the default) cold -31.7% / -31.8%, warm -30.5% / -32.3% (on a quieter machine,
//! profilink at 1.7 cores: cold -39.1% / -37.5%, warm -34.8% / -32.7%); with all new cold
//! -40.9% / -42.9%, warm -37.8% / -36.4%. Peak RSS off ~325 MiB, cold 376-490, warm 453-548.
//! The symbolizer takes 2-3% of the CPU warm, ~5% cold (`--pprof`); the rest is the exporter
//! handling the named frames (2.4 inline levels per C++ address, names and paths): see
//! *What it costs under load* in the README's Symbolization section.

use crate::args::Args;
use crate::load_request;
use crate::native::{self, Objects};
use crate::native_frames::NativeFrames;
use crate::report::{Run, median};
use crate::run::{self, Setup};
use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::ExportProfilesServiceRequest;

/// The outcomes of `profilink_symbolizer_frames_total`.
const OUTCOMES: [&str; 6] = [
    "symbolized",
    "no_debug_info",
    "build_id_mismatch",
    "fetch_failed",
    "timeout",
    "not_native",
];

/// The processor's settings: the objects' debug directory only, and a symbol cache directory
/// of its own (empty).
fn processor(objects: &Objects, cache: &std::path::Path) -> String {
    format!(
        "{{ sources: [debug_dirs], debug_dirs: [\"{}\"], debuginfod: {{ urls: [], cache_dir: \"{}\" }} }}",
        objects.debug_dir.display(),
        cache.display()
    )
}

/// A counter's increase over the measured load.
fn delta(r: &Run, name: &str, labels: &[(&str, &str)]) -> u64 {
    let end = scrape(&r.end_metrics, name, labels).unwrap_or(0);
    end.saturating_sub(scrape(&r.start_metrics, name, labels).unwrap_or(0))
}

/// Native frames (those with an `instruction_addr`) in the sampled chunks: (named, all).
fn sampled_native(r: &Run, compression: &str) -> (u64, u64) {
    let (mut named, mut all) = (0, 0);
    for (_, body) in &r.sampled {
        for chunk in crate::delivery::chunks(body, compression) {
            for f in &chunk.profile.frames {
                if f.instruction_addr.is_some() {
                    all += 1;
                    named += u64::from(f.function.is_some());
                }
            }
        }
    }
    (named, all)
}

/// Runs the three phases and prints them.
pub async fn run(a: &Args, fixture: ExportProfilesServiceRequest) {
    let objects = native::build();
    let mut fx = fixture.clone();
    let frames = NativeFrames::prepare(&mut fx, &objects);
    let clients = a.clients;
    let number = |c: usize, r: usize| (r * clients + c) as u64;
    let new_percent = a.new_addresses.min(100);
    let templates: Vec<_> = (0..clients)
        .map(|c| load_request::replicated(&fx, &format!("load-{c}"), a.sessions))
        .collect();
    let load = crate::prepare(a, &fixture, templates, &|req, c, r| {
        frames.apply(req, number(c, r), number(c, 0), new_percent)
    });
    // The warm-up: other sessions, every address once (all new: the requests numbered as
    // the load's first ones).
    let warm_rounds = (frames.cycle() as usize).div_ceil(clients);
    let warm_templates: Vec<_> = (0..clients)
        .map(|c| load_request::replicated(&fx, &format!("warm-{c}"), a.sessions))
        .collect();
    let warmup = crate::build_bodies(&warm_templates, warm_rounds, &|req, c, r| {
        frames.apply(req, number(c, r), 0, 100)
    });
    drop(warm_templates);
    eprintln!(
        "native frames: {} locations per request ({new_percent}% with new addresses), {} addresses in {} functions, all sent once every {} requests",
        frames.locations(),
        frames.addresses(),
        objects.objects.iter().map(|o| o.functions).sum::<usize>(),
        frames.cycle()
    );

    let mut results: Vec<[Phase; 3]> = Vec::new();
    for rep in 0..a.repeat.max(1) {
        let mut row = Vec::new();
        for name in PHASES {
            let cache = tempfile::tempdir().expect("cache dir");
            let setup = Setup {
                symbolize: (name != "off").then(|| processor(&objects, cache.path())),
                warmup: (name == "warm").then(|| warmup.clone()),
                pprof_to: a.pprof.as_ref().map(|d| crate::pprof_path(d, name)),
            };
            eprintln!("run {}/{}: {name}…", rep + 1, a.repeat.max(1));
            let r = run::run(a, &load, setup).await;
            let p = Phase::of(name, &r, &a.compression);
            p.print();
            row.push(p);
        }
        if let Ok(row) = <[Phase; 3]>::try_from(row) {
            results.push(row);
        }
    }
    print_summary(&results);
}

/// The phases, in the order they run.
const PHASES: [&str; 3] = ["off", "cold", "warm"];

/// What one phase measured.
struct Phase {
    name: &'static str,
    samples_per_s: f64,
    per_cpu_s: f64,
    cores: f64,
    machine_busy: f64,
    hwm_mib: f64,
    requests: u64,
    elapsed: f64,
    refused: u64,
    errors: u64,
    delivered_mib: f64,
    sent_chunks: u64,
    dropped_chunks: u64,
    exit: String,
    /// `profilink_symbolizer_frames_total` over the measured load, by outcome.
    frames: Vec<(&'static str, u64)>,
    cache_hits: u64,
    cache_misses: u64,
    /// Native frames of the sampled chunks: (named, all).
    sampled: (u64, u64),
}

impl Phase {
    fn of(name: &'static str, r: &Run, compression: &str) -> Phase {
        Phase {
            name,
            samples_per_s: r.clients.accepted_samples as f64 / r.elapsed,
            per_cpu_s: r.clients.accepted_samples as f64 / r.cpu.max(1e-9),
            cores: r.cpu / r.elapsed,
            machine_busy: r.machine_busy,
            hwm_mib: r.hwm as f64 / 1024.0,
            requests: r.clients.accepted_requests,
            elapsed: r.elapsed,
            refused: r.clients.refused,
            errors: r.clients.errors,
            delivered_mib: r.bytes as f64 / f64::from(1 << 20),
            sent_chunks: crate::service::scrape(
                &r.final_metrics,
                "profilink_exporter_sent_chunks_total",
            ),
            dropped_chunks: crate::service::scrape(
                &r.final_metrics,
                "profilink_exporter_dropped_chunks_total",
            ),
            exit: r.status.to_string(),
            frames: OUTCOMES
                .iter()
                .map(|o| {
                    (
                        *o,
                        delta(r, "profilink_symbolizer_frames_total", &[("outcome", o)]),
                    )
                })
                .collect(),
            cache_hits: delta(r, "profilink_symbolizer_cache_hits_total", &[]),
            cache_misses: delta(r, "profilink_symbolizer_cache_misses_total", &[]),
            sampled: sampled_native(r, compression),
        }
    }

    fn print(&self) {
        println!(
            "{:>4}: {:.0} samples/s, {:.0} samples per CPU-second ({:.2} cores, machine {:.0}% busy), peak RSS (VmHWM) {:.1} MiB; {} requests in {:.1} s, refused {}, errors {}; delivered {:.1} MiB, sent {} chunks, dropped {}; {}",
            self.name,
            self.samples_per_s,
            self.per_cpu_s,
            self.cores,
            self.machine_busy * 100.0,
            self.hwm_mib,
            self.requests,
            self.elapsed,
            self.refused,
            self.errors,
            self.delivered_mib,
            self.sent_chunks,
            self.dropped_chunks,
            self.exit
        );
        if self.name == "off" {
            return;
        }
        let frames: Vec<String> = self
            .frames
            .iter()
            .map(|(o, n)| format!("{o} {n}"))
            .collect();
        println!(
            "      frames: {}; cache hits {}, misses {}; sampled chunks: {} of {} native frames named",
            frames.join(", "),
            self.cache_hits,
            self.cache_misses,
            self.sampled.0,
            self.sampled.1
        );
    }
}

/// Medians over the repetitions, and each phase against `off` of the same repetition.
fn print_summary(results: &[[Phase; 3]]) {
    let pct = |x: f64, base: f64| (x / base - 1.0) * 100.0;
    println!("summary over {} repetition(s), medians:", results.len());
    for (i, name) in PHASES.iter().enumerate() {
        let m = |f: &dyn Fn(&Phase) -> f64| median(results.iter().map(|r| f(&r[i])).collect());
        let vs_off = |f: &dyn Fn(&Phase) -> f64| {
            median(results.iter().map(|r| pct(f(&r[i]), f(&r[0]))).collect())
        };
        let against = if i == 0 {
            String::new()
        } else {
            format!(
                "; against off: samples/s {:+.1}%, samples per CPU-second {:+.1}%, peak RSS {:+.1} MiB",
                vs_off(&|p| p.samples_per_s),
                vs_off(&|p| p.per_cpu_s),
                median(
                    results
                        .iter()
                        .map(|r| r[i].hwm_mib - r[0].hwm_mib)
                        .collect()
                )
            )
        };
        println!(
            "  {name:>4}: {:.0} samples/s, {:.0} samples per CPU-second, peak RSS {:.1} MiB{against}",
            m(&|p| p.samples_per_s),
            m(&|p| p.per_cpu_s),
            m(&|p| p.hwm_mib)
        );
    }
}
