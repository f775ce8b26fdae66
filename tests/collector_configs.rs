//! Configurations in the OpenTelemetry Collector's shape (`tests/testdata/collector/`, see its
//! README): every `ok_*` passes `profilink validate --config`, every `refuse_*` is refused with
//! one line naming the Collector key, and several run with `profilink --config FILE` (the
//! Collector's command line) and move a real OTLP profile to a Sentry stand-in, envelope files
//! or an OTLP backend.

mod service_support;

use prost::Message;
use service_support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/collector")
        .join(name)
}

/// The `${env:...}` values of the testdata, for one run in `dir`.
struct Env {
    vars: Vec<(String, String)>,
}

impl Env {
    fn new(dir: &Path, dsn: &str, otlp_backend: &str) -> Env {
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage).unwrap();
        let vars = [
            ("GRPC_ENDPOINT", free_addr()),
            ("HTTP_ENDPOINT", free_addr()),
            ("METRICS_PORT", free_port().to_string()),
            ("SENTRY_DSN", dsn.to_string()),
            ("OTLP_BACKEND", otlp_backend.to_string()),
            ("OTLP_HTTP_BACKEND", format!("http://{otlp_backend}")),
            ("STORAGE_DIR", storage.display().to_string()),
            ("OUT_DIR", dir.join("out").display().to_string()),
        ];
        Env {
            vars: vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn get(&self, name: &str) -> &str {
        &self.vars.iter().find(|(k, _)| k == name).unwrap().1
    }

    fn pairs(&self) -> Vec<(&str, Option<&str>)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect()
    }
}

fn validate(dir: &Path, config: &Path, env: &Env) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profilink"));
    cmd.args(["validate", "--config", config.to_str().unwrap()])
        .current_dir(dir)
        .stdin(Stdio::null());
    for (k, v) in &env.vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn configs(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testdata(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_ok_config_validates() {
    let names = configs("ok_");
    assert!(names.len() >= 6, "{names:?}");
    for name in names {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::new(
            dir.path(),
            &format!("http://{KEY}@127.0.0.1:9/42"),
            "127.0.0.1:9",
        );
        let out = validate(dir.path(), &testdata(&name), &env);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "config OK",
            "{name}"
        );
        // validate starts nothing and creates nothing (not even create_directory's directory).
        assert!(!dir.path().join("storage/created").exists(), "{name}");
        assert!(!dir.path().join("out").exists(), "{name}");
    }
}

#[test]
fn keys_profilink_cannot_honour_are_refused_by_name() {
    let expected = [
        (
            "refuse_block_on_overflow.yaml",
            "error: exporters.sentry.sending_queue.block_on_overflow: true is not available",
        ),
        (
            "refuse_file_storage_missing_directory.yaml",
            "error: extensions.file_storage.directory: directory ",
        ),
        (
            "refuse_num_consumers_disagree.yaml",
            "error: exporters.sentry.sending_queue.num_consumers: 10 disagrees with num_consumers: 4",
        ),
        (
            "refuse_queue_batch.yaml",
            "error: exporters.sentry.sending_queue.batch: not available",
        ),
        (
            "refuse_queue_size_in_requests.yaml",
            "error: exporters.sentry.sending_queue.queue_size: counts requests without a sizer",
        ),
        (
            "refuse_sizer_items.yaml",
            "error: exporters.file.sending_queue.sizer: items is not available",
        ),
        (
            "refuse_undefined_storage.yaml",
            "error: exporters.sentry.sending_queue.storage: extension \"file_storage/missing\" is not defined under extensions",
        ),
    ];
    let names = configs("refuse_");
    assert_eq!(
        names,
        expected
            .iter()
            .map(|(n, _)| n.to_string())
            .collect::<Vec<_>>(),
        "every refusal config has its expected line"
    );
    for (name, want) in expected {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::new(
            dir.path(),
            &format!("http://{KEY}@127.0.0.1:9/42"),
            "127.0.0.1:9",
        );
        let out = validate(dir.path(), &testdata(name), &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one line, got {stderr:?}");
        assert!(
            lines[0].starts_with(want),
            "{name}: {:?} should start with {want:?}",
            lines[0]
        );
    }
}

/// Runs `profilink --config FILE` (as `otelcol --config`) and waits for its gRPC receiver.
fn run(dir: &Path, name: &str, env: &Env) -> Profilink {
    let config = testdata(name);
    let mut p = Profilink::start(dir, &["--config", config.to_str().unwrap()], &env.pairs());
    p.wait_port(env.get("GRPC_ENDPOINT"), Duration::from_secs(15));
    p
}

/// Sends the eBPF fixture and waits until the stand-in has every one of its observations.
async fn profile_reaches_sentry(p: &Profilink, standin: &SentryStandIn, grpc: &str) {
    let req = otlp_fixture("ebpf-profile.pb");
    let expected = expected_observations_dropped(&expected_chunks(&req));
    let n = observation_count(&expected);
    assert!(n > 0);
    grpc_export(grpc, req).await;
    let ok = standin
        .wait_for(Duration::from_secs(15), |c| {
            observation_count(&observations(c)) >= n
        })
        .await;
    assert!(ok, "profile not delivered; stderr:\n{}", p.stderr());
    assert_same_observations(&expected, &observations(&standin.chunks()), "at Sentry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_queue_in_file_storage_delivers_to_sentry() {
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(dir.path(), &standin.dsn(), "127.0.0.1:9");
    let p = run(dir.path(), "ok_exporterhelper_persistent.yaml", &env);
    profile_reaches_sentry(&p, &standin, env.get("GRPC_ENDPOINT")).await;
    // The queue lives where the Collector's file_storage would keep this exporter's data.
    let queue = Path::new(env.get("STORAGE_DIR")).join("exporter_sentry__profiles");
    assert!(queue.is_dir(), "no queue in {}", queue.display());
    assert!(
        std::fs::read_dir(&queue).unwrap().next().is_some(),
        "the queue directory is used"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_receiver_settings_deliver_to_sentry() {
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(dir.path(), &standin.dsn(), "127.0.0.1:9");
    let p = run(dir.path(), "ok_otlpreceiver_config.yaml", &env);
    profile_reaches_sentry(&p, &standin, env.get("GRPC_ENDPOINT")).await;
    // The Prometheus reader's host and port (typed from ${env:METRICS_PORT}) serve /metrics.
    let (status, text) = get_text(&format!(
        "http://127.0.0.1:{}/metrics",
        env.get("METRICS_PORT")
    ))
    .await;
    assert_eq!(status, 200);
    assert!(
        text.contains("profilink_exporter_sent_chunks_total"),
        "{text}"
    );
}

/// Waits for `.envelope` files in `out` holding `n` samples in all.
fn wait_for_envelopes(p: &Profilink, out: &Path, n: usize) -> Vec<PathBuf> {
    let start = Instant::now();
    loop {
        let files: Vec<PathBuf> = std::fs::read_dir(out)
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "envelope"))
                    .collect()
            })
            .unwrap_or_default();
        let samples: usize = files
            .iter()
            .filter_map(|f| std::fs::read(f).ok())
            .filter_map(|b| profilink_proto::sentry::Envelope::parse(&b).ok())
            .flat_map(|e| {
                e.profile_chunks()
                    .filter_map(|i| {
                        profilink_proto::sentry::ProfileChunk::from_json(&i.payload).ok()
                    })
                    .collect::<Vec<_>>()
            })
            .map(|c| c.profile.samples.len())
            .sum();
        if samples >= n {
            return files;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{samples} of {n} samples written to {}; stderr:\n{}",
            out.display(),
            p.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_storage_with_all_settings_holds_a_file_exporters_queue() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(
        dir.path(),
        &format!("http://{KEY}@127.0.0.1:9/42"),
        "127.0.0.1:9",
    );
    let created = Path::new(env.get("STORAGE_DIR")).join("created/otc");
    assert!(!created.exists());
    let p = run(dir.path(), "ok_file_storage_all_settings.yaml", &env);
    // create_directory: the directory exists once the service listens, with its permissions.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&created).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o750, 0, "created with at most 0750, got {mode:o}");
    assert!(created.join("exporter_file_all_profiles").is_dir());

    let req = otlp_fixture("ebpf-profile.pb");
    let n: usize = expected_chunks(&req)
        .iter()
        .map(|c| c.profile.samples.len())
        .sum();
    grpc_export(env.get("GRPC_ENDPOINT"), req).await;
    let files = wait_for_envelopes(&p, Path::new(env.get("OUT_DIR")), n);
    assert!(!files.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_otlp_receiver_over_http_writes_envelopes() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(
        dir.path(),
        &format!("http://{KEY}@127.0.0.1:9/42"),
        "127.0.0.1:9",
    );
    let mut p = run(dir.path(), "ok_otlpreceiver_default.yaml", &env);
    p.wait_port(env.get("HTTP_ENDPOINT"), Duration::from_secs(10));
    let req = otlp_fixture("ebpf-profile.pb");
    let n: usize = expected_chunks(&req)
        .iter()
        .map(|c| c.profile.samples.len())
        .sum();
    let resp = reqwest::Client::new()
        .post(format!(
            "http://{}/v1development/profiles",
            env.get("HTTP_ENDPOINT")
        ))
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    wait_for_envelopes(&p, Path::new(env.get("OUT_DIR")), n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_grpc_exporter_passes_profiles_on() {
    let (backend, mut batches) = otlp_backend(false).await;
    let dir = tempfile::tempdir().unwrap();
    let env = Env::new(
        dir.path(),
        &format!("http://{KEY}@127.0.0.1:9/42"),
        &backend.local_addr().to_string(),
    );
    let p = run(dir.path(), "ok_otlpexporter.yaml", &env);
    let req = otlp_fixture("ebpf-profile.pb");
    let (profiles, samples) = otlp_counts(&req);
    grpc_export(env.get("GRPC_ENDPOINT"), req).await;
    let (mut got_profiles, mut got_samples) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(15);
    while got_samples < samples {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, batches.recv()).await {
            Ok(Some(b)) => {
                got_profiles += b.profiles;
                got_samples += b.samples;
            }
            _ => panic!(
                "{got_samples} of {samples} samples at the backend; stderr:\n{}",
                p.stderr()
            ),
        }
    }
    assert_eq!((got_profiles, got_samples), (profiles, samples));
}
