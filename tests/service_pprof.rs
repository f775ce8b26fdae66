//! The `pprof` extension on the real binary: a CPU profile fetched under load decodes as a
//! pprof protobuf with samples in profilink's own functions; one profile at a time; bad
//! requests answered clearly; `save_to_file` writes the whole run's profile at shutdown.

mod service_support;

use pprof::protos::Message;
use prost::Message as _;
use service_support::*;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn start(dir: &Path, pprof: &str) -> (Profilink, String, String) {
    let (http, endpoint) = (free_addr(), free_addr());
    let config = write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
extensions:
  pprof: {{ endpoint: "{endpoint}"{pprof} }}
receivers:
  otlp:
    protocols:
      http: {{ endpoint: "{http}" }}
exporters:
  file: {{ path: ./out }}
service:
  extensions: [pprof]
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [file] }}
  telemetry:
    metrics: {{ address: none }}
"#
        ),
    );
    let mut p = Profilink::start(dir, &["run", "--config", config.to_str().unwrap()], &[]);
    // With save_to_file the start waits for the profiler, whose first start reads the debug
    // info of this debug build (seconds).
    p.wait_port(&http, Duration::from_secs(60));
    p.wait_port(&endpoint, Duration::from_secs(10));
    (p, http, endpoint)
}

/// Sends OTLP/HTTP requests until `stop` (at most `limit`), counting the successes.
fn load(http: &str, stop: Arc<AtomicBool>, limit: Duration) -> tokio::task::JoinHandle<u64> {
    let url = format!("http://{http}/v1development/profiles");
    let body = otlp_fixture("ebpf-profile.pb").encode_to_vec();
    let sent = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
            let r = client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body.clone())
                .send()
                .await;
            if r.is_ok_and(|r| r.status() == 200) {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
        sent.load(Ordering::Relaxed)
    })
}

/// The decoded profile and its function names.
fn decode(gzipped: &[u8]) -> (pprof::protos::Profile, Vec<String>) {
    assert_eq!(&gzipped[..2], &[0x1f, 0x8b], "gzip");
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut raw)
        .unwrap();
    let profile = pprof::protos::Profile::parse_from_bytes(&raw).expect("a pprof protobuf");
    let names = profile
        .function
        .iter()
        .map(|f| profile.string_table[f.name as usize].clone())
        .collect();
    (profile, names)
}

fn assert_profilink_samples(profile: &pprof::protos::Profile, names: &[String]) {
    let samples: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
    assert!(samples > 0, "no samples");
    let types: Vec<&str> = profile
        .sample_type
        .iter()
        .map(|t| profile.string_table[t.ty as usize].as_str())
        .collect();
    assert_eq!(types, ["samples", "cpu"]);
    assert_eq!(profile.period, 10_000_000, "100 Hz");
    assert!(
        names.iter().any(|n| n.starts_with("profilink")),
        "no profilink function among {} names: {:?}",
        names.len(),
        &names[..names.len().min(30)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_profile_of_profilink_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let (mut p, http, endpoint) = start(dir.path(), "");
    let base = format!("http://{endpoint}/debug/pprof");

    let (status, index) = get_text(&format!("{base}/")).await;
    assert_eq!(status, 200);
    assert!(index.contains("profile?seconds="), "{index}");
    let (status, text) = get_text(&format!("{base}/profile?seconds=0")).await;
    assert_eq!(status, 400);
    assert!(text.contains("from 1 to 300"), "{text}");
    let (status, text) = get_text(&format!("{base}/heap")).await;
    assert_eq!(status, 404);
    assert!(text.contains("only the CPU profile"), "{text}");

    let stop = Arc::new(AtomicBool::new(false));
    let load = load(&http, stop.clone(), Duration::from_secs(20));
    let profile = tokio::spawn({
        let url = format!("{base}/profile?seconds=2");
        async move {
            let r = reqwest::get(url).await.unwrap();
            let status = r.status().as_u16();
            let kind = r.headers()["content-type"].to_str().unwrap().to_string();
            (status, kind, r.bytes().await.unwrap())
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, text) = get_text(&format!("{base}/profile?seconds=1")).await;
    assert_eq!(status, 409, "one profile at a time: {text}");
    assert!(text.contains("already being taken"), "{text}");
    let (status, kind, bytes) = profile.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let sent = load.await.unwrap();
    assert!(sent > 0, "no load was accepted; stderr:\n{}", p.stderr());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(kind, "application/octet-stream");
    let (decoded, names) = decode(&bytes);
    assert_profilink_samples(&decoded, &names);
    // The profiler is free again.
    let (status, _) = get_text(&format!("{base}/profile?seconds=1")).await;
    assert_eq!(status, 200);
    assert!(p.running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_to_file_writes_the_run_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.pprof");
    let (mut p, http, endpoint) = start(
        dir.path(),
        &format!(", save_to_file: \"{}\"", file.display()),
    );
    // The whole-run profile holds the profiler.
    let (status, text) =
        get_text(&format!("http://{endpoint}/debug/pprof/profile?seconds=1")).await;
    assert_eq!(status, 409);
    assert!(text.contains("save_to_file"), "{text}");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = load(&http, stop, Duration::from_millis(1500))
        .await
        .unwrap();
    assert!(sent > 0);
    assert!(!file.exists(), "written at shutdown only");
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(30)).success());
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}; stderr:\n{}", p.stderr()));
    let (decoded, names) = decode(&bytes);
    assert_profilink_samples(&decoded, &names);
}
