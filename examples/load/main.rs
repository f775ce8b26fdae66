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
//! `--overload` (10x clients, Sentry answering after 100 ms with 4 senders, 64 MiB queue),
//! `--no-fsync`, `--budget-mib M` (memory for pre-built requests, 1024), `--sample-rate R`
//! (`profile_sampling` rate; 0 measures receiving and translating alone), `--compression C`
//! (the exporter's `compression`: `gzip`, the default, `zstd` or `none`), `--target ADDR` (send
//! to an OTLP/gRPC endpoint already running, e.g. nginx in front of replicas as
//! `examples/scale-out/run.sh` starts them, instead of starting profilink and a stand-in; each
//! client sends the header `x-agent-id: load-<client>`; reports what was accepted only),
//! `--kafka` (the `kafka` receiver's consumer throughput against the OTLP/gRPC receiver's in
//! one run: `--messages N` requests, 3000 by default, first produced as unkeyed messages to
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
//! stand-in), `service` (the profilink under test and its `/metrics`), `process` (CPU and
//! memory from `/proc`), `delivery` (delivery latency), `report` (what is printed), `kafka`
//! (the `--kafka` comparison).

mod args;
mod clients;
mod delivery;
mod kafka;
#[path = "../support/load_request.rs"]
mod load_request;
mod process;
mod report;
mod service;
mod standin;

use bytes::Bytes;
use clients::Plan;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use prost::Message;
use service::{Service, scrape};
use standin::StandIn;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The time between a client's consecutive requests of a session, in profile time.
const ROUND_NS: u64 = 5_000_000_000;
/// Rounds the exporter merges into one chunk (60 s).
const ROUNDS_PER_CHUNK: usize = 12;

fn min_timestamp(req: &ExportProfilesServiceRequest) -> u64 {
    req.resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .flat_map(|p| &p.samples)
        .flat_map(|s| s.timestamps_unix_nano.iter().copied())
        .min()
        .unwrap_or(0)
}

/// Each client's gRPC bodies: `rounds` consecutive 5 s rounds of its template.
fn build_bodies(templates: &[ExportProfilesServiceRequest], rounds: usize) -> Vec<Vec<Bytes>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = templates
            .iter()
            .map(|t| {
                s.spawn(move || {
                    (0..rounds)
                        .map(|r| {
                            let mut req = t.clone();
                            load_request::shift(&mut req, r as u64 * ROUND_NS);
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
    if a.kafka {
        kafka::run(&a, &fixture).await;
        return;
    }
    let base = min_timestamp(&fixture);

    // Pre-build the requests.
    let templates: Vec<_> = (0..a.clients)
        .map(|c| load_request::replicated(&fixture, &format!("load-{c}"), a.sessions))
        .collect();
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
    let bodies = build_bodies(&templates, rounds);
    eprintln!("built in {:.1} s", t_build.elapsed().as_secs_f64());
    if let Some(target) = &a.target {
        // `--target`: the clients against an endpoint already running.
        let start = Instant::now();
        let plan = Plan {
            addr: target.clone(),
            samples_per_request,
            deadline: start + Duration::from_secs(a.seconds),
            start,
            stop: Arc::new(AtomicBool::new(false)),
        };
        let total = clients::run(&plan, bodies, &[]).await;
        let elapsed = start.elapsed().as_secs_f64();
        report::print_target(&a, samples_per_request, elapsed, total);
        return;
    }

    // Which client owns which profiler session (for delivery latency).
    let owner = delivery::owners(&templates);
    drop(templates);

    let start = Instant::now();
    let delay = if a.overload {
        Duration::from_millis(100)
    } else {
        Duration::ZERO
    };
    let (st, sentry_addr) = StandIn::start(delay, start).await;
    let service = Service::start(&a, &service::Door::Otlp, sentry_addr).await;
    let pid = service.pid;

    // Run.
    let cpu0 = process::cpu_seconds(pid);
    let machine0 = process::machine_cpu();
    let t0 = Instant::now();
    let plan = Plan {
        addr: service.grpc.clone(),
        samples_per_request,
        deadline: t0 + Duration::from_secs(a.seconds),
        start,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let acks: Vec<Arc<Vec<AtomicU64>>> = (0..a.clients)
        .map(|_| Arc::new((0..rounds).map(|_| AtomicU64::new(0)).collect()))
        .collect();
    let sampler = process::sample_rss(pid, plan.stop.clone());
    let total = clients::run(&plan, bodies, &acks).await;
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = process::cpu_seconds(pid) - cpu0;
    let machine1 = process::machine_cpu();
    let machine_busy = (machine1.0 - machine0.0) / (machine1.1 - machine0.1).max(1e-9);
    let queue_bytes = scrape(&service.metrics().await, "profilink_queue_size_bytes");

    // Let the backlog drain (bounded), then stop profilink (flushes open sessions).
    let t_drain = Instant::now();
    let mut last = u64::MAX;
    while t_drain.elapsed() < Duration::from_secs(if a.overload { 5 } else { 30 }) {
        let q = scrape(&service.metrics().await, "profilink_queue_size_bytes");
        if q == 0 || (q == last && t_drain.elapsed() > Duration::from_secs(3)) {
            break;
        }
        last = q;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drain_s = t_drain.elapsed().as_secs_f64();
    plan.stop.store(true, Ordering::Relaxed);
    let rss_peak = sampler.await.unwrap_or(0);
    let hwm = process::proc_status(pid, "VmHWM:").unwrap_or(0);
    let final_metrics = service.metrics().await;
    let status = service.stop();

    let delivery = delivery::latencies(
        &st.sampled.lock().unwrap(),
        &a.compression,
        &owner,
        base,
        &acks,
    );
    report::print_run(
        &a,
        report::Run {
            samples_per_request,
            resources: a.sessions * fixture.resource_profiles.len(),
            elapsed,
            clients: total,
            delivery,
            envelopes: st.envelopes.load(Ordering::Relaxed),
            bytes: st.bytes.load(Ordering::Relaxed),
            queue_bytes,
            drain_s,
            cpu,
            machine_busy,
            hwm,
            rss_peak,
            final_metrics,
            status,
        },
    );
}
