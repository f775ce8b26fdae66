//! The Collector's command line and confmap, on the real binary: `profilink --config` runs
//! like `otelcol --config`, `validate --config` checks a configuration, several `--config`
//! sources merge in order, `--set` overrides, `${env:VAR:-default}` / `${file:...}` /
//! typed whole references resolve, and `components` lists what the configuration accepts.

mod service_support;

use profilink_proto::sentry::{Envelope, ProfileChunk};
use service_support::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn profilink(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profilink"));
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env_remove("SENTRY_DSN")
        .env_remove("PROFILINK_TEST_SIZE")
        .env_remove("PROFILINK_TEST_OUT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// A base configuration in the Collector documentation's shape; the sizes and the output
/// directory come from whole references.
const BASE: &str = r#"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: ${env:PROFILINK_TEST_GRPC:-127.0.0.1:4317}
        max_recv_msg_size_mib: ${env:PROFILINK_TEST_SIZE:-16}
exporters:
  file:
    path: ${env:PROFILINK_TEST_OUT}
    chunk_idle_timeout: 1s
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
  telemetry:
    metrics:
      level: none
"#;

fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn usage_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn validate_config_merges_sources_and_sets() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_config(dir.path(), "base.yaml", BASE);
    let base = base.to_str().unwrap();
    let out_dir = dir.path().join("out");
    let out_dir = out_dir.to_str().unwrap();
    let env = [
        ("PROFILINK_TEST_OUT", out_dir),
        ("PROFILINK_TEST_SIZE", "32"),
    ];

    ok(&profilink(
        dir.path(),
        &["validate", "--config", base],
        &env,
    ));
    ok(&profilink(dir.path(), &["check", "--config", base], &env));
    // An unset variable without a default names its key.
    let err = usage_error(&profilink(dir.path(), &["validate", "--config", base], &[]));
    assert!(
        err.contains("exporters.file.path: environment variable PROFILINK_TEST_OUT is not set"),
        "{err}"
    );
    // A number from the environment is a number: a non-number names the key.
    let err = usage_error(&profilink(
        dir.path(),
        &["validate", "--config", base],
        &[
            ("PROFILINK_TEST_OUT", out_dir),
            ("PROFILINK_TEST_SIZE", "lots"),
        ],
    ));
    assert!(
        err.contains("receivers.otlp.protocols.grpc.max_recv_msg_size_mib"),
        "{err}"
    );
    // A later source and --set override keys of the first; a bad override names its key.
    let err = usage_error(&profilink(
        dir.path(),
        &[
            "validate",
            "--config",
            base,
            "--config",
            "yaml:exporters::file::sparse_threads: sometimes",
        ],
        &env,
    ));
    assert!(err.contains("exporters.file.sparse_threads"), "{err}");
    ok(&profilink(
        dir.path(),
        &[
            "validate",
            "--config",
            base,
            "--config",
            "yaml:exporters::file::sparse_threads: sometimes",
            "--set",
            "exporters::file::sparse_threads=drop",
        ],
        &env,
    ));
    let err = usage_error(&profilink(
        dir.path(),
        &[
            "validate",
            "--config",
            base,
            "--set",
            "exporters::file::chunk_duration=soon",
        ],
        &env,
    ));
    assert!(err.contains("exporters.file.chunk_duration"), "{err}");
    // Usage errors.
    usage_error(&profilink(dir.path(), &["validate"], &[]));
    usage_error(&profilink(
        dir.path(),
        &["--set", "a=b", "validate", "x.pb"],
        &[],
    ));
    let err = usage_error(&profilink(
        dir.path(),
        &["validate", "--config", "https://example.invalid/c.yaml"],
        &[],
    ));
    assert!(err.contains("unsupported source"), "{err}");
}

#[test]
fn file_references_and_pull_readers_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::write(
        dir.path().join("out_path"),
        format!("{}\n", out_dir.display()),
    )
    .unwrap();
    let exporters = format!(
        "file:\n  path: ${{file:{}}}\n",
        dir.path().join("out_path").display()
    );
    std::fs::write(dir.path().join("exporters.yaml"), exporters).unwrap();
    let config = format!(
        r#"
receivers:
  otlp: {{ protocols: {{ grpc: {{ endpoint: "{grpc}" }} }} }}
exporters: ${{file:{dir}/exporters.yaml}}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [file] }}
  telemetry:
    metrics:
      level: detailed
      readers:
        - pull: {{ exporter: {{ prometheus: {{ host: 127.0.0.1, port: {port} }} }} }}
"#,
        grpc = free_addr(),
        dir = dir.path().display(),
        port = free_port(),
    );
    let path = write_config(dir.path(), "c.yaml", &config);
    ok(&profilink(
        dir.path(),
        &["validate", "--config", path.to_str().unwrap()],
        &[],
    ));
    let pushing = config.replace(
        "- pull: {",
        "- periodic: { exporter: { otlp: {} } }\n        - pull: {",
    );
    let path = write_config(dir.path(), "push.yaml", &pushing);
    let err = usage_error(&profilink(
        dir.path(),
        &["validate", "--config", path.to_str().unwrap()],
        &[],
    ));
    assert!(
        err.contains("service.telemetry.metrics.readers[0].periodic"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_config_flag_runs_the_service_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_config(dir.path(), "base.yaml", BASE);
    let out_dir = dir.path().join("out");
    let grpc = free_addr();
    let metrics = free_addr();
    let (host, port) = metrics.split_once(':').unwrap();
    let mut p = Profilink::start(
        dir.path(),
        &[
            "--config",
            base.to_str().unwrap(),
            "--set",
            &format!(
                "service::telemetry::metrics::readers=[{{pull: {{exporter: {{prometheus: {{host: {host}, port: {port}}}}}}}}}]"
            ),
            "--set",
            "service::telemetry::metrics::level=normal",
            "--feature-gates",
            "exporter.otlp.someGate",
        ],
        &[
            ("PROFILINK_TEST_OUT", Some(out_dir.to_str().unwrap())),
            ("PROFILINK_TEST_GRPC", Some(&grpc)),
        ],
    );
    p.wait_port(&grpc, Duration::from_secs(30));
    p.wait_port(&metrics, Duration::from_secs(10));
    let req = otlp_fixture("ebpf-profile.pb");
    let want = expected_observations(&expected_chunks(&req));
    grpc_export(&grpc, req).await;
    p.signal("TERM");
    assert!(
        p.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        p.stderr()
    );
    assert!(
        p.stderr().contains("profilink has no feature gates"),
        "{}",
        p.stderr()
    );
    let mut chunks = Vec::new();
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "envelope") {
            let envelope = Envelope::parse(&std::fs::read(&path).unwrap()).unwrap();
            for item in &envelope.items {
                chunks.push(ProfileChunk::from_json(&item.payload).unwrap());
            }
        }
    }
    assert!(!chunks.is_empty(), "no envelopes in {}", out_dir.display());
    assert_same_observations(&want, &observations(&chunks), "profilink --config");
}

#[test]
fn components_lists_every_type() {
    let dir = tempfile::tempdir().unwrap();
    let out = profilink(dir.path(), &["components"], &[]);
    ok(&out);
    let listing: serde_yaml_ng::Value =
        serde_yaml_ng::from_slice(&out.stdout).expect("components prints YAML");
    let names = |kind: &str| -> Vec<String> {
        listing[kind]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names("receivers").contains(&"sentry".to_owned()));
    assert!(names("exporters").contains(&"otlp_http".to_owned()));
    assert!(names("extensions").contains(&"health_check".to_owned()));
    assert_eq!(
        listing["exporters"][0]["stability"]["profiles"].as_str(),
        Some("Alpha")
    );
}
