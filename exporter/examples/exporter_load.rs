//! Load test of the Sentry exporter alone: simulated eBPF-profiler traffic (one export per 5 s
//! slot carrying a 5 s chunk for every process) into the exporter, delivered with gzip to a
//! counting stand-in Sentry on 127.0.0.1. Prints accepted and delivered chunks/s and MB/s and
//! the peak resident memory (VmHWM).
//!
//! ```sh
//! cargo run --release -p profilink-exporter --example exporter_load -- [sessions] [minutes] [fsync]
//! ```
//! Defaults: 50 sessions, 3 minutes of profile time, fsync on.

use profilink_consumer::ExportChunk;
use profilink_exporter::{QueueConfig, SentryExporter, SentryExporterConfig};
use profilink_proto::sentry::{ClientSdk, Frame, ProfileChunk, Sample, ThreadMetadata};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    bytes: AtomicU64,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn serve(listener: TcpListener, counts: Arc<Counts>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let counts = counts.clone();
        tokio::spawn(async move {
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
                buf.drain(..head + len);
                counts.requests.fetch_add(1, Ordering::Relaxed);
                counts.bytes.fetch_add(len as u64, Ordering::Relaxed);
                let resp = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                if stream.write_all(resp).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// A 5 s chunk of 20 Hz samples on 4 threads, with 300 distinct frames and 64 stacks.
fn chunk(session: usize, start: f64) -> ProfileChunk {
    let mut c = ProfileChunk {
        chunk_id: format!("{:032x}", session * 1_000_000 + start as usize),
        profiler_id: format!("{:032x}", session + 1),
        platform: "rust".into(),
        version: "2".into(),
        release: Some("svc@1.2.3".into()),
        environment: Some("production".into()),
        client_sdk: Some(ClientSdk {
            name: "profilink.otlp".into(),
            version: "0.1.0".into(),
        }),
        ..Default::default()
    };
    c.profile.frames = (0..300)
        .map(|i| {
            Frame {
                function: Some(format!("crate::module_{}::function_{}", i % 17, i).into()),
                filename: Some(format!("src/module_{}.rs", i % 17).into()),
                lineno: Some(10 + i as u32),
                in_app: Some(i % 3 != 0),
                instruction_addr: Some(format!("{:#x}", 0x55_0000_0000u64 + i as u64 * 64).into()),
                ..Default::default()
            }
            .into()
        })
        .collect();
    c.profile.stacks = (0..64)
        .map(|s| (0..20).map(|d| (s * 7 + d * 13) % 300).collect())
        .collect();
    for t in 0..4 {
        c.profile.thread_metadata.insert(
            format!("{}", 1000 + t),
            ThreadMetadata {
                name: Some(format!("worker-{t}")),
                priority: None,
            },
        );
        for i in 0..100 {
            c.profile.samples.push(Sample {
                timestamp: start + i as f64 * 0.05 + t as f64 * 0.001,
                stack_id: (i * 7 + t * 3 + session) % 64,
                thread_id: format!("{}", 1000 + t).into(),
            });
        }
    }
    c
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sessions: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    let minutes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let fsync = args.get(3).is_none_or(|a| a != "nofsync");

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let counts = Arc::new(Counts::default());
    tokio::spawn(serve(listener, counts.clone()));

    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = SentryExporterConfig {
        dsn: Some(format!("http://0123456789abcdef0123456789abcdef@{addr}/1")),
        sending_queue: QueueConfig {
            storage: Some(dir.path().join("queue")),
            fsync,
            ..Default::default()
        },
        ..Default::default()
    };
    let exp = SentryExporter::start(cfg).await.expect("start");
    let metrics = exp.metrics();

    // Input is generated on the fly (so the harness does not hold it all); generation time is
    // measured and subtracted from the accept time.
    let t0 = 1_750_000_000.0;
    let slots = minutes * 12;
    let input_chunks = slots * sessions;
    let mut input_bytes = 0usize;
    let mut generating = Duration::ZERO;
    let hwm_before = vm_hwm_kib();
    let start = Instant::now();
    for slot in 0..slots {
        let g = Instant::now();
        let batch: Vec<ExportChunk> = (0..sessions)
            .map(|s| ExportChunk::new(chunk(s, t0 + slot as f64 * 5.0)))
            .collect();
        input_bytes += batch.iter().map(|c| c.chunk.to_json().len()).sum::<usize>();
        generating += g.elapsed();
        // A producer told "full" (UNAVAILABLE / 429) retries later, as the eBPF profiler does.
        loop {
            match exp.export(batch.clone()).await {
                Ok(()) => break,
                Err(profilink_consumer::ExportError::Full { .. }) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("export: {e}"),
            }
        }
    }
    let accepted = start.elapsed().saturating_sub(generating);
    exp.shutdown(Duration::from_secs(300)).await;
    let total = start.elapsed().saturating_sub(generating);
    let m = metrics.snapshot();
    let wire = counts.bytes.load(Ordering::Relaxed);
    let requests = counts.requests.load(Ordering::Relaxed);
    let mb = |b: f64| b / 1e6;
    println!("sessions={sessions} minutes={minutes} fsync={fsync}");
    println!(
        "input: {input_chunks} chunks, {:.1} MB JSON ({} export calls)",
        mb(input_bytes as f64),
        slots
    );
    println!(
        "accept (durable, fsync per export call): {:.2} s = {:.0} chunks/s, {:.1} MB/s",
        accepted.as_secs_f64(),
        input_chunks as f64 / accepted.as_secs_f64(),
        mb(input_bytes as f64) / accepted.as_secs_f64()
    );
    println!(
        "end to end (accept + merge + gzip + POST, incl. shutdown flush): {:.2} s = {:.0} input chunks/s, {:.1} MB/s of input JSON",
        total.as_secs_f64(),
        input_chunks as f64 / total.as_secs_f64(),
        mb(input_bytes as f64) / total.as_secs_f64()
    );
    println!(
        "delivered: {} merged chunks in {} requests, {:.1} MB gzip on the wire ({:.1} MB/s), ratio {:.1}x",
        m.sent_chunks,
        requests,
        mb(wire as f64),
        mb(wire as f64) / total.as_secs_f64(),
        input_bytes as f64 / wire.max(1) as f64
    );
    println!(
        "peak RSS (VmHWM): {:.1} MiB (at start: {:.1} MiB)",
        vm_hwm_kib() as f64 / 1024.0,
        hwm_before as f64 / 1024.0
    );
    println!("metrics: {m:?}");
    assert_eq!(
        m.sent_chunks as usize,
        sessions * minutes,
        "one merged chunk per session-minute"
    );
}
