//! Proxy overhead of the Sentry receiver with an `upstream`, per envelope, against the direct
//! path (the SDK posting to Sentry itself).
//!
//! An in-process Sentry stand-in answers 200 at once. Envelopes are posted one after the
//! other, as an SDK's transport does, gzip-compressed:
//!
//! * `direct`: to the stand-in;
//! * `proxy`: to the real `profilink` binary (a process), whose `sentry` receiver forwards to
//!   the stand-in through its durable queue (fsync on, the default) and taps the pipeline
//!   (`profile_linking` into an OTLP exporter aimed at a loopback OTLP receiver).
//!
//! Reported per scenario: the SDK's answer latency p50/p99 (direct and proxy), the proxy's
//! delivery latency (post → arrival upstream) p50/p99, and profilink's CPU (utime + stime)
//! per MB of envelopes (compressed as sent, and uncompressed) and per envelope. Scenarios:
//! an error event plus a transaction (nothing for the profile pipelines but the transaction),
//! and a profile chunk of a real Python SDK run (130 KB of JSON, tapped into OTLP too).
//!
//! ```text
//! cargo build --release --bin profilink --example relay_overhead
//! target/release/examples/relay_overhead [--envelopes N] [--binary PATH]
//! ```

use axum::Router;
use axum::extract::State;
use flate2::Compression;
use flate2::write::GzEncoder;
use profilink_proto::sentry::{Envelope, EnvelopeItem};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

const KEY: &str = "0123456789abcdef0123456789abcdef";

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
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

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::new(6));
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// The stand-in: counts arrivals and reports each on a channel.
async fn standin(tx: mpsc::UnboundedSender<Instant>) -> String {
    async fn any(
        State(tx): State<Arc<mpsc::UnboundedSender<Instant>>>,
        body: axum::body::Bytes,
    ) -> &'static str {
        let _ = body.len();
        let _ = tx.send(Instant::now());
        "{}"
    }
    let app = Router::new().fallback(any).with_state(Arc::new(tx));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

fn envelopes() -> Vec<(&'static str, Vec<u8>)> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sentry/python");
    let chunk_env = std::fs::read(python.join("trace-chunk-00.envelope")).unwrap();
    let transaction = std::fs::read_to_string(python.join("trace-transactions.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let frames: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"function":"handler_{i}","module":"app.views","filename":"app/views.py","lineno":{i},"in_app":true}}"#))
        .collect();
    let event = format!(
        r#"{{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","level":"error","platform":"python","exception":{{"values":[{{"type":"ValueError","value":"boom","stacktrace":{{"frames":[{}]}}}}]}}}}"#,
        frames.join(",")
    );
    let mut e = Envelope::default();
    e.items.push(EnvelopeItem::new("event", event.into_bytes()));
    e.items
        .push(EnvelopeItem::new("transaction", transaction.into_bytes()));
    vec![
        ("error + transaction", e.to_bytes()),
        ("profile chunk", chunk_env),
    ]
}

struct Run {
    answer: Vec<Duration>,
    delivered: Vec<Duration>,
}

async fn post_all(
    client: &reqwest::Client,
    url: &str,
    body: &[u8],
    n: usize,
    arrivals: &mut mpsc::UnboundedReceiver<Instant>,
) -> Run {
    let mut run = Run {
        answer: Vec::with_capacity(n),
        delivered: Vec::with_capacity(n),
    };
    let body = bytes::Bytes::from(gzip(body));
    for _ in 0..n {
        let t0 = Instant::now();
        let r = client
            .post(url)
            .header(
                "x-sentry-auth",
                format!(
                    "Sentry sentry_key={KEY}, sentry_version=7, sentry_client=sentry.python/2.75.0"
                ),
            )
            .header("content-encoding", "gzip")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        run.answer.push(t0.elapsed());
        let at = tokio::time::timeout(Duration::from_secs(30), arrivals.recv())
            .await
            .expect("delivered upstream")
            .unwrap();
        run.delivered.push(at.saturating_duration_since(t0));
    }
    run.answer.sort();
    run.delivered.sort();
    run
}

#[tokio::main]
async fn main() {
    let mut n = 500usize;
    let mut binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent()?.parent().map(|d| d.join("profilink")))
        .unwrap_or_else(|| PathBuf::from("target/release/profilink"));
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--envelopes" => n = it.next().unwrap().parse().unwrap(),
            "--binary" => binary = PathBuf::from(it.next().unwrap()),
            other => panic!("unknown flag {other}"),
        }
    }
    let (tx, mut arrivals) = mpsc::unbounded_channel();
    let upstream = standin(tx).await;
    let (otlp_consumer, mut otlp_rx) = profilink_consumer::ChannelConsumer::new(1024);
    let otlp = profilink_receiver::serve_otlp_grpc(
        &profilink_receiver::OtlpGrpcConfig {
            endpoint: "127.0.0.1:0".into(),
            ..Default::default()
        },
        Arc::new(otlp_consumer),
        Arc::new(profilink_receiver::Stats::default()),
        std::future::pending(),
    )
    .await
    .unwrap();
    tokio::spawn(async move { while otlp_rx.recv().await.is_some() {} });

    let dir = tempfile::tempdir().unwrap();
    let listen = free_addr();
    let config = dir.path().join("profilink.yaml");
    std::fs::write(
        &config,
        format!(
            r#"
receivers:
  sentry: {{ endpoint: "{listen}", upstream: {{ endpoint: "{upstream}", sending_queue: {{ storage: ./forward }} }} }}
processors:
  profile_linking: {{ join_window: 1s }}
exporters:
  otlp: {{ endpoint: "{}", tls: {{ insecure: true }} }}
service:
  pipelines:
    profiles: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: none }}
"#,
            otlp.local_addr()
        ),
    )
    .unwrap();
    let mut child = Command::new(&binary)
        .args(["run", "--config", config.to_str().unwrap()])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
    let start = Instant::now();
    while std::net::TcpStream::connect(&listen).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "profilink did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    let client = reqwest::Client::new();
    println!("profilink relay overhead, {n} envelopes per scenario, one at a time, gzip (level 6)");
    for (name, body) in envelopes() {
        let compressed = gzip(&body).len();
        // Warm both paths up.
        post_all(
            &client,
            &format!("{upstream}/api/42/envelope/"),
            &body,
            20,
            &mut arrivals,
        )
        .await;
        post_all(
            &client,
            &format!("http://{listen}/api/42/envelope/"),
            &body,
            20,
            &mut arrivals,
        )
        .await;
        let direct = post_all(
            &client,
            &format!("{upstream}/api/42/envelope/"),
            &body,
            n,
            &mut arrivals,
        )
        .await;
        let cpu0 = cpu_seconds(pid);
        let proxy = post_all(
            &client,
            &format!("http://{listen}/api/42/envelope/"),
            &body,
            n,
            &mut arrivals,
        )
        .await;
        // Let the tap's background work (join release, OTLP export) finish inside the window.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let cpu = cpu_seconds(pid) - cpu0;
        let mb_c = (compressed * n) as f64 / 1e6;
        let mb_u = (body.len() * n) as f64 / 1e6;
        println!(
            "\n{name}: {} bytes ({} gzip)\n  answer  direct p50 {:.2} ms  p99 {:.2} ms | proxy p50 {:.2} ms  p99 {:.2} ms\n  proxy delivery upstream p50 {:.2} ms  p99 {:.2} ms\n  profilink CPU {:.0} ms per MB gzip, {:.0} ms per MB uncompressed, {:.0} µs per envelope",
            body.len(),
            compressed,
            percentile(&direct.answer, 0.5),
            percentile(&direct.answer, 0.99),
            percentile(&proxy.answer, 0.5),
            percentile(&proxy.answer, 0.99),
            percentile(&proxy.delivered, 0.5),
            percentile(&proxy.delivered, 0.99),
            cpu * 1e3 / mb_c,
            cpu * 1e3 / mb_u,
            cpu * 1e6 / n as f64,
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();
}
