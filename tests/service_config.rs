//! `profilink check` and `profilink run` on good and bad configurations: bad ones give one
//! error line naming the key and exit 2; the shipped examples pass `check`.

mod service_support;

use service_support::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const DSN: &str = "https://0123456789abcdef0123456789abcdef@o1.ingest.example/42";

fn profilink(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profilink"));
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .env_remove("SENTRY_DSN")
        .env_remove("OTLP_BACKEND")
        .env_remove("UNSET_VARIABLE_FOR_TEST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn good(grpc: &str) -> String {
    format!(
        r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}", max_recv_msg_size_mib: 64 }}
processors:
  batch: {{ timeout: 1s, send_batch_size: 8192 }}
exporters:
  sentry:
    dsn: ${{env:SENTRY_DSN}}
    timeout: 5s
    sending_queue: {{ storage: ./q }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], processors: [batch], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: none }}
"#
    )
}

#[test]
fn bad_configs_give_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let base = good(&free_addr());
    let cases = [
        (
            "unknown key",
            base.replace("timeout: 5s", "timout: 5s"),
            "exporters.sentry.timout: unknown field `timout`",
        ),
        (
            "unknown top-level key",
            base.replace("processors:", "procesors:"),
            "procesors",
        ),
        (
            "missing exporter",
            base.replace("exporters: [sentry]", "exporters: [otlp/backend]"),
            "service.pipelines.profiles.exporters: exporter \"otlp/backend\" is not defined under exporters",
        ),
        (
            "no exporter",
            base.replace("exporters: [sentry]", "exporters: []"),
            "service.pipelines.profiles.exporters: at least one is required",
        ),
        (
            "bad duration",
            base.replace("timeout: 5s", "timeout: 5x"),
            "exporters.sentry.timeout: ",
        ),
        (
            "unset env var",
            base.replace("${env:SENTRY_DSN}", "${env:UNSET_VARIABLE_FOR_TEST}"),
            "exporters.sentry.dsn: environment variable UNSET_VARIABLE_FOR_TEST is not set",
        ),
        (
            "compression level out of range",
            base.replace(
                "timeout: 5s",
                // gzip named: zstd, the default, takes levels up to 22.
                "timeout: 5s\n    compression: gzip\n    compression_params: { level: 12 }",
            ),
            "exporters.sentry.compression_params.level: 12 is out of range for Gzip (1..=9)",
        ),
        (
            "unreadable exporter CA file",
            base.replace(
                "timeout: 5s",
                "timeout: 5s\n    tls: { ca_file: ./missing-ca.pem }",
            ),
            "exporters.sentry.tls.ca_file: cannot read ./missing-ca.pem",
        ),
        (
            "unreadable receiver certificate",
            base.replace(
                "max_recv_msg_size_mib: 64",
                "max_recv_msg_size_mib: 64, tls: { cert_file: ./nope.pem, key_file: ./nope.key }",
            ),
            "receivers.otlp.protocols.grpc.tls.cert_file: cannot read ./nope.pem",
        ),
        (
            "unknown TLS version",
            base.replace(
                "timeout: 5s",
                "timeout: 5s\n    tls: { min_version: \"1.4\" }",
            ),
            "exporters.sentry.tls.min_version: unknown variant `1.4`",
        ),
        (
            "bad protocol",
            base.replace("grpc: {", "grcp: {"),
            "receivers.otlp.protocols.grcp: unknown protocol",
        ),
    ];
    for (what, text, expected) in cases {
        let path = write_config(dir.path(), "bad.yaml", &text);
        for cmd in ["check", "run"] {
            let out = profilink(
                dir.path(),
                &[cmd, "--config", path.to_str().unwrap()],
                &[("SENTRY_DSN", DSN)],
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {what}: {stderr}");
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{cmd} {what}: one line, got {stderr:?}");
            assert!(
                lines[0].starts_with("error: ") && lines[0].contains(expected),
                "{cmd} {what}: {:?} should contain {expected:?}",
                lines[0]
            );
            assert!(out.stdout.is_empty(), "{cmd} {what}: nothing on stdout");
        }
    }
}

#[test]
fn check_accepts_a_good_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "good.yaml", &good("127.0.0.1:4317"));
    let out = profilink(
        dir.path(),
        &["check", "--config", path.to_str().unwrap()],
        &[("SENTRY_DSN", DSN)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "config OK");
    // Nothing was created: check does not start anything.
    assert!(!dir.path().join("q").exists());
}

#[test]
fn examples_pass_check() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for name in ["sidecar.yaml", "gateway.yaml", "sentry-to-otlp.yaml"] {
        let path = examples.join(name);
        let out = profilink(
            dir.path(),
            &["check", "--config", path.to_str().unwrap()],
            &[
                ("SENTRY_DSN", DSN),
                ("OTLP_BACKEND", "127.0.0.1:4317"),
                ("PROFILINK_API_TOKEN", "t0ken"),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "config OK");
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn run_reports_a_busy_port_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let path = write_config(dir.path(), "busy.yaml", &good(&addr));
    let out = profilink(
        dir.path(),
        &["run", "--config", path.to_str().unwrap()],
        &[("SENTRY_DSN", DSN)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: receivers.otlp.protocols.grpc: cannot listen on"),
        "{stderr}"
    );
}
