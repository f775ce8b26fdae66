//! Crash durability of the real binary: data accepted over gRPC while Sentry is failing
//! survives a SIGKILL and is delivered, every observation, after a restart against a working
//! Sentry.

mod service_support;

use service_support::*;
use std::path::Path;
use std::time::Duration;

fn config(dir: &Path, grpc: &str, dsn_env: &str) -> std::path::PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
exporters:
  sentry:
    dsn: ${{env:{dsn_env}}}
    chunk_idle_timeout: 200ms
    tick: 20ms
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0s }}
    sending_queue: {{ storage: ./data/queue, max_size_mib: 64 }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: none }}
"#
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_data_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let failing = SentryStandIn::start(None).await;
    failing.set_status(503);
    let grpc = free_addr();
    let cfg = config(dir.path(), &grpc, "TEST_SENTRY_DSN");
    let stderr = dir.path().join("profilink.stderr");
    let args = ["run", "--config", cfg.to_str().unwrap()];

    let dsn = failing.dsn();
    let mut p = Profilink::start_logging_to(
        dir.path(),
        &args,
        &[("TEST_SENTRY_DSN", Some(&dsn))],
        &stderr,
    );
    p.wait_port(&grpc, Duration::from_secs(10));

    // Every session spans a few seconds, so each becomes exactly one merged chunk (and the
    // threads the exporter leaves out as sparse are known in advance).
    let ebpf = otlp_fixture("ebpf-profile.pb");
    let python = otlp_fixture("python-sdk-trace-chunk-00.pb");
    let mut sent = Vec::new();
    // The first two go idle, are merged and fail against the 503 Sentry (they sit in the
    // queue's ready log, being retried) ...
    for req in [ebpf.clone(), python] {
        sent.extend(expected_chunks(&req));
        grpc_export(&grpc, req).await;
    }
    let start = std::time::Instant::now();
    while failing.requests() < 2 && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        failing.requests() >= 2,
        "the exporter never tried the failing Sentry"
    );
    // ... the last ones (other processes) are only in the input log when the process dies.
    for tag in ["crash-1", "crash-2", "crash-3"] {
        let req = tagged(&ebpf, tag);
        sent.extend(expected_chunks(&req));
        grpc_export(&grpc, req).await;
    }
    p.signal("KILL");
    let status = p.wait_exit(Duration::from_secs(5));
    assert!(!status.success());
    assert!(failing.received().is_empty());

    let working = SentryStandIn::start(None).await;
    let dsn = working.dsn();
    let mut p = Profilink::start_logging_to(
        dir.path(),
        &args,
        &[("TEST_SENTRY_DSN", Some(&dsn))],
        &stderr,
    );
    p.wait_port(&grpc, Duration::from_secs(10));
    let want = expected_observations(&sent);
    let total = observation_count(&want);
    let delivered = working
        .wait_for(Duration::from_secs(20), |c| {
            diff_observations(&want, &observations(c)).0 == 0
        })
        .await;
    let got = observations(&working.chunks());
    let (missing, extra) = diff_observations(&want, &got);
    assert!(
        delivered && missing == 0,
        "{missing} of {total} accepted observations not delivered after the restart; stderr:\n{}",
        p.stderr()
    );
    assert_eq!(extra, 0, "duplicates or unexpected observations delivered");

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
}
