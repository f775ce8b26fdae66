//! Load test of the running `profilink` binary: OTLP over gRPC (gzip) in, Sentry envelopes
//! (gzip, or zstd with `--compression zstd`) out to an in-process stand-in.
//!
//! Requests are the real eBPF fixture (`ebpf-profile.pb`) replicated: each carries `--sessions`
//! copies of its resources (a distinct `service.instance.id` each, so distinct profiler
//! sessions and threads), and each client sends consecutive 5 s rounds of its sessions, so the
//! exporter merges 12 rounds into one 60 s chunk per session. Bodies are built and gzipped
//! before the clock starts (so the load generator costs the 2-core machine little), then sent
//! by `--clients` concurrent HTTP/2 connections for `--seconds`. A refused request
//! (`UNAVAILABLE`, backpressure) is retried after its `RetryInfo` delay, as an OTLP client does.
//!
//! Reports accepted samples/s, export-call latency (p50/p99), delivery latency (p50/p99: from
//! the acknowledgement of the request that completed a chunk to the stand-in receiving it;
//! sampled), profilink's CPU use and peak RSS (VmHWM).
//!
//! ```sh
//! cargo build --release && cargo run --release --example load -- --clients 4 --seconds 20
//! cargo run --release --example load -- --overload    # 10x the clients against a slow Sentry
//! ```
//!
//! Options: `--clients N` (4), `--seconds T` (20), `--sessions K` (16 resource copies per
//! request), `--binary PATH` (default: `profilink` beside this example's directory),
//! `--against PATH` (repeatable: the same load against these binaries too, interleaved with
//! `--binary` over `--repeat N` rounds, each a fresh process; prints every run, then per
//! binary the median and range of samples per CPU-second, the ratio to the floor (over the
//! clients' span, and over the whole job: that span, the drain of the backlog it left and the
//! shutdown's flush, from the process's exit), samples/s, p99 export call latency and peak
//! RSS), `--floor PATH` (with `--against`: the independent
//! `floor --service` program, run before every run so each ratio is taken in the same
//! conditions),
//! `--overload` (10x clients, Sentry answering after 100 ms with 4 senders, 64 MiB queue),
//! `--no-fsync`, `--budget-mib M` (memory for pre-built requests, 1024), `--sample-rate R`
//! (`profile_sampling` rate; 0 measures receiving and translating alone), `--compression C`
//! (the exporter's `compression`: `gzip`, the default, `zstd` or `none`), `--target ADDR` (send
//! to an OTLP/gRPC endpoint already running, e.g. nginx in front of replicas as
//! `examples/scale-out/run.sh` starts them, instead of starting profilink and a stand-in; each
//! client sends the header `x-agent-id: load-<client>`; reports what was accepted only),
//! `--pprof DIR` (profilink runs its `pprof` extension and a CPU profile of each measured
//! load is written to `DIR/<run>.pb.gz`: `load`, or `off`, `cold`, `warm`, or
//! `binary<I>-round<R>` with `--against`), `--symbolize`
//! and `--kafka` (below).
//!
//! **`--symbolize`** measures the `symbolize` processor under this load, in one invocation:
//! it compiles three native objects with hundreds of functions (`g++`/`gcc -g -O2`, debug
//! files split into a build-id directory; gcc, g++ and binutils must be installed), points
//! the fixture's native frames into them (90 native locations per request, 111 of the
//! fixture's 333 frames; addresses sweep every function, so the address cache keeps missing
//! until all of them were sent once), and sends the same load three times, each against a
//! fresh profilink: `off` (no processor), `cold` (`symbolize` from the debug directory, empty
//! caches, measured from the first request) and `warm` (after a warm-up that sent every
//! address once). Per phase: samples/s, samples per CPU-second, peak RSS, the symbolizer's
//! frames by outcome and cache hits/misses over the measured load, and how many native frames
//! of the sampled chunks are named; then warm and cold against off. See `symbolize.rs`.
//!
//! ```sh
//! cargo build --release --bin profilink --examples
//! target/release/examples/load --symbolize --clients 4 --seconds 15
//! ```
//!
//! **`--kafka`** measures the `kafka` receiver's consumer throughput against the OTLP/gRPC receiver's in
//! one run (`--messages N` requests, 3000 by default, first produced as unkeyed messages to
//! two 6-partition topics on a Tansu broker, round-robin and one partition per client, each
//! consumed by a fresh profilink, then sent over OTLP/gRPC to a fresh one; prints samples,
//! seconds, CPU seconds, samples per CPU-second and peak RSS of each, and the ratios; see
//! `kafka.rs`):
//!
//! ```sh
//! cargo build --release --bin profilink --examples
//! target/release/examples/load --kafka --messages 3000
//! ```
//!
//! Modules: `args` (the command line), `clients` (the producers), `standin` (the Sentry
//! stand-in), `service` (the profilink under test and its `/metrics`), `run` (one run against
//! a fresh profilink), `process` (CPU and memory from `/proc`), `delivery` (delivery latency,
//! sampled chunks), `report` (what is printed), `compare` (`--against`), `symbolize` (the
//! `--symbolize` phases) with
//! `native_source` (the generated programs), `native` (compiling them, the build-id
//! directory) and `native_frames` (the fixture's native frames pointed into them), `kafka`
//! (the `--kafka` comparison).

mod args;
mod clients;
mod compare;
mod delivery;
mod kafka;
#[path = "../support/load_request.rs"]
mod load_request;
mod native;
mod native_frames;
mod native_source;
mod process;
mod report;
mod run;
mod service;
mod standin;
mod symbolize;

use bytes::Bytes;
use clients::Plan;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use prost::Message;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The time between a client's consecutive requests of a session, in profile time.
const ROUND_NS: u64 = 5_000_000_000;
/// Rounds the exporter merges into one chunk (60 s).
const ROUNDS_PER_CHUNK: usize = 12;

/// The first sample time of `req` (round 0 of the load).
pub fn min_timestamp(req: &ExportProfilesServiceRequest) -> u64 {
    req.resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .flat_map(|p| &p.samples)
        .flat_map(|s| s.timestamps_unix_nano.iter().copied())
        .min()
        .unwrap_or(0)
}

/// Each client's gRPC bodies: `rounds` consecutive 5 s rounds of its template, each given to
/// `edit` (with the client and round) before it is encoded.
pub fn build_bodies(
    templates: &[ExportProfilesServiceRequest],
    rounds: usize,
    edit: &(dyn Fn(&mut ExportProfilesServiceRequest, usize, usize) + Sync),
) -> Vec<Vec<Bytes>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = templates
            .iter()
            .enumerate()
            .map(|(c, t)| {
                s.spawn(move || {
                    (0..rounds)
                        .map(|r| {
                            let mut req = t.clone();
                            load_request::shift(&mut req, r as u64 * ROUND_NS);
                            edit(&mut req, c, r);
                            clients::frame(&req)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args::args();
    assert!(
        a.target.is_some() || a.binary.exists(),
        "{} not found: cargo build --release first, or pass --binary",
        a.binary.display()
    );
    let fixture_path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otlp/ebpf-profile.pb");
    let fixture = ExportProfilesServiceRequest::decode(
        std::fs::read(&fixture_path).expect("fixture").as_slice(),
    )
    .unwrap();
    if a.symbolize {
        symbolize::run(&a, fixture).await;
        return;
    }
    if a.kafka {
        kafka::run(&a, &fixture).await;
        return;
    }
    let templates: Vec<_> = (0..a.clients)
        .map(|c| load_request::replicated(&fixture, &format!("load-{c}"), a.sessions))
        .collect();
    let load = prepare(&a, &fixture, templates, &|_, _, _| {});
    if !a.against.is_empty() {
        assert!(
            a.target.is_none(),
            "--against measures binaries it starts, not --target"
        );
        for b in &a.against {
            assert!(b.exists(), "--against {}: not found", b.display());
        }
        compare::run(&a, &load).await;
        return;
    }
    if let Some(target) = &a.target {
        // `--target`: the clients against an endpoint already running.
        let start = Instant::now();
        let plan = Plan {
            addr: target.clone(),
            samples_per_request: load.samples_per_request,
            deadline: start + Duration::from_secs(a.seconds),
            start,
            stop: Arc::new(AtomicBool::new(false)),
        };
        let total = clients::run(&plan, load.bodies, &[]).await;
        let elapsed = start.elapsed().as_secs_f64();
        report::print_target(&a, load.samples_per_request, elapsed, total);
        return;
    }
    let setup = run::Setup {
        pprof_to: a.pprof.as_ref().map(|d| pprof_path(d, "load")),
        ..Default::default()
    };
    let r = run::run(&a, &load, setup).await;
    report::print_run(&a, r);
}

/// `DIR/<run>.pb.gz` (`--pprof DIR`), DIR created, absolute (profilink runs elsewhere).
pub fn pprof_path(dir: &std::path::Path, run: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("--pprof DIR");
    std::path::absolute(dir)
        .expect("--pprof DIR")
        .join(format!("{run}.pb.gz"))
}

/// The load from each client's template: as many rounds as `--seconds` may need at 1.5 M
/// samples/s, within `--budget-mib` (at least a chunk's worth), each round given to `edit`.
pub fn prepare(
    a: &args::Args,
    fixture: &ExportProfilesServiceRequest,
    templates: Vec<ExportProfilesServiceRequest>,
    edit: &(dyn Fn(&mut ExportProfilesServiceRequest, usize, usize) + Sync),
) -> run::Load {
    let samples_per_request =
        profilink_proto::signal::profile_counts(&templates[0].resource_profiles).samples;
    let probe = clients::frame(&templates[0]);
    let raw_len = templates[0].encoded_len();
    let budget = a.budget_mib << 20;
    let target_rounds =
        ((1_500_000 * a.seconds) as f64 / samples_per_request as f64 / a.clients as f64).ceil()
            as usize
            + 1;
    let rounds = target_rounds
        .min(budget / (probe.len() * a.clients))
        .max(ROUNDS_PER_CHUNK + 2);
    eprintln!(
        "request: {} resources, {samples_per_request} observations, {raw_len} B protobuf, {} B gzipped; building {rounds} rounds x {} clients ({} MiB)…",
        templates[0].resource_profiles.len(),
        probe.len(),
        a.clients,
        (rounds * a.clients * probe.len()) >> 20
    );
    let t_build = Instant::now();
    let bodies = build_bodies(&templates, rounds, edit);
    eprintln!("built in {:.1} s", t_build.elapsed().as_secs_f64());
    run::Load {
        bodies,
        samples_per_request,
        resources: a.sessions * fixture.resource_profiles.len(),
        owner: delivery::owners(&templates),
        base: min_timestamp(fixture),
    }
}
