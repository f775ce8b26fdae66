// Over 600 lines on purpose: a self-contained load tool (its own HTTP/2 sender and Sentry
// stand-in), run as one program.
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
//! client sends the header `x-agent-id: load-<client>`; reports what was accepted only).

#[path = "support/load_request.rs"]
mod load_request;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use prost::Message;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ROUND_NS: u64 = 5_000_000_000;
const ROUNDS_PER_CHUNK: usize = 12;

struct Args {
    clients: usize,
    seconds: u64,
    sessions: usize,
    binary: PathBuf,
    overload: bool,
    fsync: bool,
    budget_mib: usize,
    sample_rate: f64,
    compression: String,
    target: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        clients: 4,
        seconds: 20,
        sessions: 16,
        binary: std::env::current_exe()
            .ok()
            .and_then(|p| p.parent()?.parent().map(|d| d.join("profilink")))
            .unwrap_or_else(|| PathBuf::from("target/release/profilink")),
        overload: false,
        fsync: true,
        budget_mib: 1024,
        sample_rate: 1.0,
        compression: "gzip".into(),
        target: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().expect("flag value");
        match flag.as_str() {
            "--clients" => a.clients = val().parse().expect("--clients N"),
            "--seconds" => a.seconds = val().parse().expect("--seconds T"),
            "--sessions" => a.sessions = val().parse().expect("--sessions K"),
            "--binary" => a.binary = PathBuf::from(val()),
            "--budget-mib" => a.budget_mib = val().parse().expect("--budget-mib M"),
            "--overload" => a.overload = true,
            "--no-fsync" => a.fsync = false,
            "--sample-rate" => a.sample_rate = val().parse().expect("--sample-rate R"),
            "--compression" => a.compression = val(),
            "--target" => a.target = Some(val()),
            other => panic!("unknown flag {other}"),
        }
    }
    if a.overload {
        a.clients *= 10;
    }
    a
}

/// A gRPC message frame: compressed flag, big-endian length, gzipped protobuf.
fn frame(req: &ExportProfilesServiceRequest) -> Bytes {
    let gz = load_request::gzip(&req.encode_to_vec());
    let mut out = Vec::with_capacity(gz.len() + 5);
    out.push(1);
    out.extend_from_slice(&(gz.len() as u32).to_be_bytes());
    out.extend_from_slice(&gz);
    Bytes::from(out)
}

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

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

// ---- the Sentry stand-in: minimal HTTP/1.1, counts everything, parses one envelope in 8 ----

struct StandIn {
    envelopes: AtomicU64,
    bytes: AtomicU64,
    delay: Duration,
    start: Instant,
    /// (receive time since start in seconds, raw compressed body) of sampled envelopes.
    sampled: Mutex<Vec<(f64, Vec<u8>)>>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn serve_standin(listener: TcpListener, st: Arc<StandIn>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let st = st.clone();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let mut buf = Vec::new();
            let mut tmp = vec![0u8; 64 << 10];
            loop {
                let head = loop {
                    if let Some(p) = find(&buf, b"\r\n\r\n") {
                        break p + 4;
                    }
                    match stream.read(&mut tmp).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                };
                let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < head + len {
                    match stream.read(&mut tmp).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&tmp[..n]),
                    }
                }
                let n = st.envelopes.fetch_add(1, Ordering::Relaxed);
                st.bytes.fetch_add(len as u64, Ordering::Relaxed);
                if n.is_multiple_of(8) {
                    let t = st.start.elapsed().as_secs_f64();
                    st.sampled
                        .lock()
                        .unwrap()
                        .push((t, buf[head..head + len].to_vec()));
                }
                buf.drain(..head + len);
                if !st.delay.is_zero() {
                    tokio::time::sleep(st.delay).await;
                }
                let resp = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                if stream.write_all(resp).await.is_err() {
                    return;
                }
            }
        });
    }
}

// ---- profilink process ----

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn proc_status(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// utime + stime of a process, in seconds.
/// (busy, total) CPU seconds of the whole machine, from `/proc/stat`.
fn machine_cpu() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<f64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().sum();
    // idle + iowait are not busy.
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    ((total - idle) / 100.0, total / 100.0)
}

fn cpu_seconds(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let after = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

fn scrape(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(name))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

async fn metrics(addr: &str) -> String {
    let mut s = match TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(_) => return String::new(),
    };
    let req = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

// ---- clients ----

#[derive(Default)]
struct ClientStats {
    accepted_samples: u64,
    accepted_requests: u64,
    refused: u64,
    errors: u64,
    latencies: Vec<f64>,
}

/// The gRPC status of a response: from the headers (trailers-only) or the trailers.
fn grpc_status(headers: &hyper::HeaderMap, trailers: Option<&hyper::HeaderMap>) -> (i32, Duration) {
    let get = |h: &hyper::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
    };
    let code = get(headers)
        .or_else(|| trailers.and_then(get))
        .unwrap_or(-1);
    // RetryInfo is in grpc-status-details-bin; honour a fixed short delay instead.
    (code, Duration::from_millis(if code == 14 { 50 } else { 0 }))
}

#[allow(clippy::too_many_arguments)]
async fn client(
    addr: String,
    agent: String,
    bodies: Vec<Bytes>,
    samples_per_request: u64,
    deadline: Instant,
    start: Instant,
    acks: Arc<Vec<AtomicU64>>,
    stop: Arc<AtomicBool>,
) -> ClientStats {
    let mut stats = ClientStats::default();
    let stream = TcpStream::connect(&addr).await.expect("connect");
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(4 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(TokioIo::new(stream))
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let uri = format!(
        "http://{addr}/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
    );
    let mut round = 0;
    while round < bodies.len() && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let req = Request::post(&uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-encoding", "gzip")
            .header("grpc-accept-encoding", "gzip")
            .header("x-agent-id", agent.as_str())
            .body(Full::new(bodies[round].clone()))
            .unwrap();
        let t0 = Instant::now();
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("request failed: {e}");
                stats.errors += 1;
                break;
            }
        };
        let (parts, body) = resp.into_parts();
        let collected = match body.collect().await {
            Ok(c) => c,
            Err(_) => {
                stats.errors += 1;
                break;
            }
        };
        let (code, wait) = grpc_status(&parts.headers, collected.trailers());
        let dt = t0.elapsed().as_secs_f64();
        match code {
            0 => {
                stats.latencies.push(dt);
                stats.accepted_samples += samples_per_request;
                stats.accepted_requests += 1;
                if let Some(a) = acks.get(round) {
                    a.store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                round += 1;
            }
            14 | 8 => {
                stats.refused += 1;
                tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
            }
            other => {
                if stats.errors < 3 {
                    eprintln!("grpc-status {other}");
                }
                stats.errors += 1;
                round += 1;
            }
        }
    }
    stats
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
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
    let base = min_timestamp(&fixture);

    // Pre-build the requests.
    let templates: Vec<_> = (0..a.clients)
        .map(|c| load_request::replicated(&fixture, &format!("load-{c}"), a.sessions))
        .collect();
    let samples_per_request =
        profilink_proto::signal::profile_counts(&templates[0].resource_profiles).samples;
    let probe = frame(&templates[0]);
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
    let bodies: Vec<Vec<Bytes>> = std::thread::scope(|s| {
        let handles: Vec<_> = templates
            .iter()
            .map(|t| {
                s.spawn(move || {
                    (0..rounds)
                        .map(|r| {
                            let mut req = t.clone();
                            load_request::shift(&mut req, r as u64 * ROUND_NS);
                            frame(&req)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("built in {:.1} s", t_build.elapsed().as_secs_f64());
    if let Some(target) = &a.target {
        drive_only(target, bodies, samples_per_request, &a).await;
        return;
    }

    // Which client owns which profiler session (for delivery latency).
    let mut owner: HashMap<String, usize> = HashMap::new();
    {
        use profilink_translator::otlp_to_sentry::{ChunkOptions, to_chunks};
        for (c, t) in templates.iter().enumerate() {
            for ch in to_chunks(
                t.dictionary.as_ref(),
                &t.resource_profiles,
                &ChunkOptions::default(),
            )
            .chunks
            {
                owner.insert(ch.profiler_id, c);
            }
        }
    }
    drop(templates);

    // The Sentry stand-in.
    let start = Instant::now();
    let st = Arc::new(StandIn {
        envelopes: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        delay: if a.overload {
            Duration::from_millis(100)
        } else {
            Duration::ZERO
        },
        start,
        sampled: Mutex::new(Vec::new()),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sentry_addr = listener.local_addr().unwrap();
    tokio::spawn(serve_standin(listener, st.clone()));

    // profilink.
    let dir = tempfile::tempdir().unwrap();
    let grpc = free_addr();
    let metrics_addr = free_addr();
    let (queue_mib, consumers) = if a.overload { (64, 4) } else { (256, 8) };
    let config = format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}", max_recv_msg_size_mib: 64 }}
processors:
  profile_sampling: {{ session_sample_rate: {rate} }}
exporters:
  sentry:
    dsn: "http://0123456789abcdef0123456789abcdef@{sentry_addr}/1"
    compression: {compression}
    num_consumers: {consumers}
    chunk_duration: 60s
    chunk_idle_timeout: 5s
    sending_queue: {{ storage: ./queue, max_size_mib: {queue_mib}, fsync: {fsync} }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], processors: [profile_sampling], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics_addr}" }}
    logs: {{ level: warn }}
"#,
        fsync = a.fsync,
        rate = a.sample_rate,
        compression = a.compression
    );
    std::fs::write(dir.path().join("load.yaml"), config).unwrap();
    let mut child = Command::new(&a.binary)
        .args(["run", "--config", "load.yaml"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start profilink");
    let pid = child.id();
    let t_wait = Instant::now();
    while TcpStream::connect(&grpc).await.is_err() {
        assert!(
            t_wait.elapsed() < Duration::from_secs(10),
            "profilink did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Run.
    let cpu0 = cpu_seconds(pid);
    let machine0 = machine_cpu();
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(a.seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let acks: Vec<Arc<Vec<AtomicU64>>> = (0..a.clients)
        .map(|_| Arc::new((0..rounds).map(|_| AtomicU64::new(0)).collect()))
        .collect();
    let mut tasks = Vec::new();
    for (c, b) in bodies.into_iter().enumerate() {
        tasks.push(tokio::spawn(client(
            grpc.clone(),
            format!("load-{c}"),
            b,
            samples_per_request,
            deadline,
            start,
            acks[c].clone(),
            stop.clone(),
        )));
    }
    let mut rss_peak_seen = 0;
    let sampler = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(proc_status(pid, "VmRSS:").unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        })
    };
    let mut total = ClientStats::default();
    for t in tasks {
        let s = t.await.unwrap();
        total.accepted_samples += s.accepted_samples;
        total.accepted_requests += s.accepted_requests;
        total.refused += s.refused;
        total.errors += s.errors;
        total.latencies.extend(s.latencies);
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu0;
    let machine1 = machine_cpu();
    let machine_busy = (machine1.0 - machine0.0) / (machine1.1 - machine0.1).max(1e-9);
    let text = metrics(&metrics_addr).await;
    let queue_bytes = scrape(&text, "profilink_queue_size_bytes");

    // Let the backlog drain (bounded), then stop profilink (flushes open sessions).
    let t_drain = Instant::now();
    let mut last = u64::MAX;
    while t_drain.elapsed() < Duration::from_secs(if a.overload { 5 } else { 30 }) {
        let q = scrape(&metrics(&metrics_addr).await, "profilink_queue_size_bytes");
        if q == 0 || (q == last && t_drain.elapsed() > Duration::from_secs(3)) {
            break;
        }
        last = q;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drain_s = t_drain.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    rss_peak_seen = rss_peak_seen.max(sampler.await.unwrap_or(0));
    let hwm = proc_status(pid, "VmHWM:").unwrap_or(0);
    let final_metrics = metrics(&metrics_addr).await;
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = child.wait().unwrap();

    // Delivery latency from the sampled envelopes.
    let mut delivery = Vec::new();
    for (t, body) in st.sampled.lock().unwrap().iter() {
        let mut raw = Vec::new();
        let decoded = match a.compression.as_str() {
            "zstd" => zstd::stream::read::Decoder::new(body.as_slice())
                .and_then(|mut d| d.read_to_end(&mut raw)),
            "gzip" => flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut raw),
            _ => {
                raw.extend_from_slice(body);
                Ok(raw.len())
            }
        };
        if decoded.is_err() {
            continue;
        }
        let Ok(env) = Envelope::parse(&raw) else {
            continue;
        };
        for item in env.profile_chunks() {
            let Ok(chunk) = ProfileChunk::from_json(&item.payload) else {
                continue;
            };
            let (Some(&c), Some(first)) =
                (owner.get(&chunk.profiler_id), chunk.profile.samples.first())
            else {
                continue;
            };
            let first_ns = (first.timestamp * 1e9) as u64;
            let r0 = (first_ns.saturating_sub(base) + ROUND_NS / 2) / ROUND_NS;
            let closing = r0 as usize + ROUNDS_PER_CHUNK;
            if let Some(ack) = acks[c].get(closing) {
                let ack = ack.load(Ordering::Relaxed);
                if ack > 0 {
                    delivery.push(t - ack as f64 / 1e9);
                }
            }
        }
    }

    let mut lat = total.latencies;
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
        a.clients,
        samples_per_request,
        a.sessions * fixture.resource_profiles.len(),
        elapsed,
        a.fsync
    );
    println!(
        "  accepted: {} requests, {} samples = {:.0} samples/s",
        total.accepted_requests,
        total.accepted_samples,
        total.accepted_samples as f64 / elapsed
    );
    println!(
        "  refused (backpressure, retried): {}, errors: {}",
        total.refused, total.errors
    );
    println!(
        "  export call latency: p50 {:.1} ms, p99 {:.1} ms",
        percentile(&mut lat, 0.5) * 1e3,
        percentile(&mut lat, 0.99) * 1e3
    );
    println!(
        "  delivery latency (chunk complete -> stand-in, {} sampled): p50 {:.1} ms, p99 {:.1} ms",
        delivery.len(),
        percentile(&mut delivery, 0.5) * 1e3,
        percentile(&mut delivery, 0.99) * 1e3
    );
    println!(
        "  delivered: {} envelopes, {:.1} MiB ({}); queue at end of load {:.1} MiB, drained in {:.1} s",
        st.envelopes.load(Ordering::Relaxed),
        st.bytes.load(Ordering::Relaxed) as f64 / (1 << 20) as f64,
        a.compression,
        queue_bytes as f64 / (1 << 20) as f64,
        drain_s
    );
    println!(
        "  profilink CPU: {:.2} cores (machine {:.0}% busy; {:.0} samples per CPU-second); peak RSS (VmHWM) {:.1} MiB (sampled VmRSS peak {:.1} MiB)",
        cpu / elapsed,
        machine_busy * 100.0,
        total.accepted_samples as f64 / cpu.max(1e-9),
        hwm as f64 / 1024.0,
        rss_peak_seen as f64 / 1024.0
    );
    println!(
        "  exporter: sent {} chunks, refused_full {}, dropped {}; exit {status}",
        scrape(&final_metrics, "profilink_exporter_sent_chunks_total"),
        scrape(&final_metrics, "profilink_exporter_refused_full_total"),
        scrape(&final_metrics, "profilink_exporter_dropped_chunks_total"),
    );
}

/// `--target`: the clients against an endpoint already running; prints what was accepted.
async fn drive_only(target: &str, bodies: Vec<Vec<Bytes>>, samples_per_request: u64, a: &Args) {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(a.seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let acks = Arc::new(Vec::new());
    let tasks: Vec<_> = bodies
        .into_iter()
        .enumerate()
        .map(|(c, b)| {
            tokio::spawn(client(
                target.to_string(),
                format!("load-{c}"),
                b,
                samples_per_request,
                deadline,
                start,
                acks.clone(),
                stop.clone(),
            ))
        })
        .collect();
    let mut total = ClientStats::default();
    for t in tasks {
        let s = t.await.unwrap();
        total.accepted_samples += s.accepted_samples;
        total.accepted_requests += s.accepted_requests;
        total.refused += s.refused;
        total.errors += s.errors;
        total.latencies.extend(s.latencies);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut lat = total.latencies;
    println!("profilink load test against {target}");
    println!(
        "  clients {}, {} observations/request, {:.1} s",
        a.clients, samples_per_request, elapsed
    );
    println!(
        "  accepted: {} requests, {} samples = {:.0} samples/s",
        total.accepted_requests,
        total.accepted_samples,
        total.accepted_samples as f64 / elapsed
    );
    println!(
        "  refused (backpressure, retried): {}, errors: {}",
        total.refused, total.errors
    );
    println!(
        "  export call latency: p50 {:.1} ms, p99 {:.1} ms",
        percentile(&mut lat, 0.5) * 1e3,
        percentile(&mut lat, 0.99) * 1e3
    );
}
