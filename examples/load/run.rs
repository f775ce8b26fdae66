//! One run of the load against a fresh profilink and a fresh Sentry stand-in: start both,
//! optionally send a warm-up and let its chunks go out, then send the measured load for
//! `--seconds`, let the backlog drain and stop profilink; what was measured, for `report`.

use crate::args::Args;
use crate::clients::{self, Plan};
use crate::report;
use crate::service::{Service, scrape};
use crate::standin::StandIn;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The load: what every run sends.
pub struct Load {
    /// Each client's gRPC bodies, in order.
    pub bodies: Vec<Vec<Bytes>>,
    /// Observations per request.
    pub samples_per_request: u64,
    /// Resources per request.
    pub resources: usize,
    /// Which client owns which profiler session (for delivery latency).
    pub owner: HashMap<String, usize>,
    /// The fixture's first sample time (round 0).
    pub base: u64,
}

/// What the service runs besides the load test's own pipeline.
#[derive(Default)]
pub struct Setup {
    /// The `symbolize` processor's settings (a YAML flow mapping), when it runs one.
    pub symbolize: Option<String>,
    /// Bodies sent (and their chunks delivered) before the measured load: other sessions than
    /// the load's, so they do not merge with it.
    pub warmup: Option<Vec<Vec<Bytes>>>,
    /// Where to write profilink's CPU profile of the measured load (`--pprof`).
    pub pprof_to: Option<std::path::PathBuf>,
}

/// Sends `warmup` and waits until the exporter has sent their chunks (their sessions idle for
/// `chunk_idle_timeout`, then the queue empty).
async fn warm_up(service: &Service, warmup: Vec<Vec<Bytes>>, samples_per_request: u64) {
    let t = Instant::now();
    let plan = Plan {
        addr: service.grpc.clone(),
        samples_per_request,
        deadline: t + Duration::from_secs(600),
        start: t,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let stats = clients::run(&plan, warmup, &[]).await;
    let sent = t.elapsed().as_secs_f64();
    // The load's `chunk_idle_timeout` (5 s) and a tick.
    tokio::time::sleep(Duration::from_secs(6)).await;
    while scrape(&service.metrics().await, "profilink_queue_size_bytes") > 0
        && t.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "  warm-up: {} requests in {sent:.1} s ({} refused, {} errors), delivered after {:.1} s",
        stats.accepted_requests,
        stats.refused,
        stats.errors,
        t.elapsed().as_secs_f64()
    );
}

/// Runs `load` against a fresh profilink set up with `setup`.
pub async fn run(a: &Args, load: &Load, mut setup: Setup) -> report::Run {
    let start = Instant::now();
    let delay = if a.overload {
        Duration::from_millis(100)
    } else {
        Duration::ZERO
    };
    let (st, sentry_addr) = StandIn::start(delay, start).await;
    let service = Service::start(
        a,
        &crate::service::Door::Otlp,
        sentry_addr,
        setup.symbolize.as_deref(),
        setup.pprof_to.is_some(),
    )
    .await;
    let pid = service.pid;
    if let Some(w) = setup.warmup.take() {
        warm_up(&service, w, load.samples_per_request).await;
    }
    let start_metrics = service.metrics().await;
    let (envelopes0, bytes0) = (
        st.envelopes.load(Ordering::Relaxed),
        st.bytes.load(Ordering::Relaxed),
    );

    // Run.
    let cpu0 = crate::process::cpu_seconds(pid);
    let machine0 = crate::process::machine_cpu();
    let t0 = Instant::now();
    let plan = Plan {
        addr: service.grpc.clone(),
        samples_per_request: load.samples_per_request,
        deadline: t0 + Duration::from_secs(a.seconds),
        start,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let rounds = load.bodies.first().map_or(0, Vec::len);
    let acks: Vec<Arc<Vec<AtomicU64>>> = (0..load.bodies.len())
        .map(|_| Arc::new((0..rounds).map(|_| AtomicU64::new(0)).collect()))
        .collect();
    let sampler = crate::process::sample_rss(pid, plan.stop.clone());
    let profile = async {
        if let Some(to) = &setup.pprof_to {
            service.cpu_profile(a.seconds, to).await;
        }
    };
    let send = async {
        let total = clients::run(&plan, load.bodies.clone(), &acks).await;
        let elapsed = t0.elapsed().as_secs_f64();
        let cpu = crate::process::cpu_seconds(pid) - cpu0;
        (total, elapsed, cpu, crate::process::machine_cpu())
    };
    let ((total, elapsed, cpu, machine1), ()) = tokio::join!(send, profile);
    let machine_busy = (machine1.0 - machine0.0) / (machine1.1 - machine0.1).max(1e-9);
    let end_metrics = service.metrics().await;
    let queue_bytes = scrape(&end_metrics, "profilink_queue_size_bytes");

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
    let hwm = crate::process::proc_status(pid, "VmHWM:").unwrap_or(0);
    let final_metrics = service.metrics().await;
    let (status, life_cpu) = service.stop_counted();

    let delivery = crate::delivery::latencies(
        &st.sampled.lock().unwrap(),
        &a.compression,
        &load.owner,
        load.base,
        &acks,
    );
    let sampled = std::mem::take(&mut *st.sampled.lock().unwrap());
    report::Run {
        sampled,
        samples_per_request: load.samples_per_request,
        resources: load.resources,
        elapsed,
        clients: total,
        delivery,
        envelopes: st.envelopes.load(Ordering::Relaxed) - envelopes0,
        bytes: st.bytes.load(Ordering::Relaxed) - bytes0,
        queue_bytes,
        drain_s,
        cpu,
        job_cpu: life_cpu - cpu0,
        machine_busy,
        hwm,
        rss_peak,
        start_metrics,
        end_metrics,
        final_metrics,
        status,
    }
}
