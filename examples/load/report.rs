//! What the load test prints.

use crate::args::Args;
use crate::clients::ClientStats;
use crate::service::{closed_by_reason, scrape};
use std::process::ExitStatus;

/// What a run against a profilink of its own measured.
pub struct Run {
    /// Observations per request.
    pub samples_per_request: u64,
    /// Resources per request.
    pub resources: usize,
    /// Seconds the clients ran.
    pub elapsed: f64,
    pub clients: ClientStats,
    /// Delivery latencies, seconds.
    pub delivery: Vec<f64>,
    /// Envelopes and bytes the stand-in received.
    pub envelopes: u64,
    pub bytes: u64,
    /// The exporter's queue when the clients stopped, bytes.
    pub queue_bytes: u64,
    /// Seconds the backlog took to drain.
    pub drain_s: f64,
    /// profilink's CPU seconds while the clients ran.
    pub cpu: f64,
    /// profilink's CPU seconds from the start of the load to its exit: the clients' span, the
    /// drain of the backlog and the shutdown's flush (the deliveries the load left behind).
    pub job_cpu: f64,
    /// Share of the machine's CPU that was busy meanwhile.
    pub machine_busy: f64,
    /// profilink's VmHWM and sampled VmRSS peak, kB.
    pub hwm: u64,
    pub rss_peak: u64,
    /// `/metrics` when the measured load started (after any warm-up), when it ended, and
    /// before the stop.
    pub start_metrics: String,
    pub end_metrics: String,
    pub final_metrics: String,
    /// profilink's exit.
    pub status: ExitStatus,
    /// The envelopes the stand-in kept (one in 8: arrival time, body as received).
    pub sampled: Vec<(f64, Vec<u8>)>,
}

/// Prints a run against a profilink of its own.
pub fn print_run(a: &Args, mut r: Run) {
    let elapsed = r.elapsed;
    println!(
        "profilink load test ({} mode)",
        if a.overload {
            "10x overload"
        } else {
            "throughput"
        }
    );
    println!(
        "  clients {}, {} observations/request ({} resources), {:.1} s, fsync {}",
        a.clients, r.samples_per_request, r.resources, elapsed, a.fsync
    );
    print_clients(&mut r.clients, elapsed);
    println!(
        "  delivery latency (chunk complete -> stand-in, {} sampled): p50 {:.1} ms, p99 {:.1} ms",
        r.delivery.len(),
        percentile(&mut r.delivery, 0.5) * 1e3,
        percentile(&mut r.delivery, 0.99) * 1e3
    );
    println!(
        "  delivered: {} envelopes, {:.1} MiB ({}); queue at end of load {:.1} MiB, drained in {:.1} s",
        r.envelopes,
        r.bytes as f64 / (1 << 20) as f64,
        a.compression,
        r.queue_bytes as f64 / (1 << 20) as f64,
        r.drain_s
    );
    println!(
        "  profilink CPU: {:.2} cores (machine {:.0}% busy; {:.0} samples per CPU-second = {:.3} us per observation); peak RSS (VmHWM) {:.1} MiB (sampled VmRSS peak {:.1} MiB)",
        r.cpu / elapsed,
        r.machine_busy * 100.0,
        r.clients.accepted_samples as f64 / r.cpu.max(1e-9),
        r.cpu * 1e6 / (r.clients.accepted_samples as f64).max(1.0),
        r.hwm as f64 / 1024.0,
        r.rss_peak as f64 / 1024.0
    );
    println!(
        "  whole job (load, drain, shutdown): {:.1} CPU-seconds = {:.0} samples per CPU-second = {:.3} us per observation",
        r.job_cpu,
        r.clients.accepted_samples as f64 / r.job_cpu.max(1e-9),
        r.job_cpu * 1e6 / (r.clients.accepted_samples as f64).max(1.0),
    );
    println!(
        "  exporter: sent {} chunks, refused_full {}, dropped {}; exit {}",
        scrape(&r.final_metrics, "profilink_exporter_sent_chunks_total"),
        scrape(&r.final_metrics, "profilink_exporter_refused_full_total"),
        scrape(&r.final_metrics, "profilink_exporter_dropped_chunks_total"),
        r.status
    );
    let closed: Vec<String> = closed_by_reason(&r.final_metrics)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| format!("{why} {n}"))
        .collect();
    println!("  chunks closed by: {}", closed.join(", "));
}

/// Prints a run against `--target`: what the clients saw.
pub fn print_target(a: &Args, samples_per_request: u64, elapsed: f64, mut clients: ClientStats) {
    println!(
        "profilink load test against {}",
        a.target.as_deref().unwrap_or_default()
    );
    println!(
        "  clients {}, {} observations/request, {:.1} s",
        a.clients, samples_per_request, elapsed
    );
    print_clients(&mut clients, elapsed);
}

/// The clients' lines: accepted, refused, export call latency.
fn print_clients(c: &mut ClientStats, elapsed: f64) {
    println!(
        "  accepted: {} requests, {} samples = {:.0} samples/s",
        c.accepted_requests,
        c.accepted_samples,
        c.accepted_samples as f64 / elapsed
    );
    println!(
        "  refused (backpressure, retried): {}, errors: {}",
        c.refused, c.errors
    );
    println!(
        "  export call latency: p50 {:.1} ms, p99 {:.1} ms",
        percentile(&mut c.latencies, 0.5) * 1e3,
        percentile(&mut c.latencies, 0.99) * 1e3
    );
}

/// The `p` quantile (nearest rank) of `v`, sorting it; NaN when empty.
/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The `p` quantile of `v` (sorted in place), NaN when empty.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

/// Prints `--kafka`'s comparison: each phase, then the ratios of each Kafka phase to OTLP.
pub fn print_kafka(a: &Args, c: &crate::kafka::Comparison) {
    use crate::kafka::Phase;
    println!(
        "profilink kafka receiver vs OTLP/gRPC receiver: {} requests of {} observations ({} resources, {} B protobuf / {} B gzipped); sentry exporter, {}, fsync {}",
        c.messages,
        c.samples_per_request,
        c.resources,
        c.protobuf_bytes,
        c.gzip_bytes,
        a.compression,
        a.fsync
    );
    println!(
        "  produced before profilink started, unkeyed otlp_proto, one request per message, {} partitions: round-robin in {:.1} s, by client in {:.1} s",
        crate::kafka::PARTITIONS,
        c.produce_s.0,
        c.produce_s.1
    );
    let per_cpu = |p: &Phase| p.samples as f64 / p.cpu.max(1e-9);
    let per_s = |p: &Phase| p.samples as f64 / p.wall.max(1e-9);
    let line = |name: &str, p: &Phase, extra: String| {
        println!(
            "  {name}: {} samples in {:.1} s = {:.0} samples/s; CPU {:.2} s ({:.2} cores, machine {:.0}% busy) = {:.0} samples per CPU-second; peak RSS (VmHWM) {:.1} MiB; {} envelopes; {extra}",
            p.samples,
            p.wall,
            per_s(p),
            p.cpu,
            p.cpu / p.wall.max(1e-9),
            p.machine_busy * 100.0,
            per_cpu(p),
            p.hwm as f64 / 1024.0,
            p.envelopes,
        );
    };
    let closed = |p: &Phase| {
        let by: Vec<String> = p
            .closed
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        by.join(", ")
    };
    let kafka_extra = |p: &Phase| {
        format!(
            "group join {:.1} s ({:.2} CPU-s, not counted), {} backpressure pauses, partitions up to {} messages apart; chunks before the stop by why: {}",
            p.join.0,
            p.join.1,
            p.refused,
            p.spread,
            closed(p)
        )
    };
    line(
        "kafka, round-robin",
        &c.round_robin,
        kafka_extra(&c.round_robin),
    );
    line(
        "kafka, by client  ",
        &c.by_client,
        kafka_extra(&c.by_client),
    );
    line(
        "otlp/grpc         ",
        &c.otlp,
        format!(
            "{} clients, {} requests refused and retried",
            a.clients, c.otlp.refused
        ),
    );
    for (name, p) in [("round-robin", &c.round_robin), ("by client", &c.by_client)] {
        println!(
            "  kafka ({name}) / otlp: samples per CPU-second {:.2}x, samples/s {:.2}x, peak RSS {:.2}x, envelopes {:.2}x",
            per_cpu(p) / per_cpu(&c.otlp).max(1e-9),
            per_s(p) / per_s(&c.otlp).max(1e-9),
            p.hwm as f64 / (c.otlp.hwm as f64).max(1.0),
            p.envelopes as f64 / (c.otlp.envelopes as f64).max(1.0)
        );
    }
}
