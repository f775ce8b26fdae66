//! `profilink` with no arguments and no `SENTRY_DSN`: OTLP in over gRPC, envelope files out in
//! `./profilink-data/`, valid for `profilink validate` after SIGTERM.

mod service_support;

use service_support::*;
use std::process::Command;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_service_writes_valid_envelopes() {
    let dir = tempfile::tempdir().unwrap();
    let grpc = free_addr();
    let http = free_addr();
    let mut p = Profilink::start(
        dir.path(),
        &[],
        &[
            ("SENTRY_DSN", None),
            ("PROFILINK_OTLP_GRPC_ENDPOINT", Some(&grpc)),
            ("PROFILINK_OTLP_HTTP_ENDPOINT", Some(&http)),
            ("PROFILINK_METRICS_ADDRESS", Some("none")),
            ("PROFILINK_DATA_DIR", None),
        ],
    );
    p.wait_port(&grpc, Duration::from_secs(10));
    p.wait_port(&http, Duration::from_secs(10));

    let req = otlp_fixture("ebpf-profile.pb");
    let expected = expected_observations(&expected_chunks(&req));
    grpc_export(&grpc, req).await;

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(15));
    let stderr = p.stderr();
    assert!(status.success(), "exit {status:?}; stderr:\n{stderr}");
    assert!(
        stderr.contains(&grpc),
        "listening address logged:\n{stderr}"
    );
    assert!(
        stderr.contains("profilink-data"),
        "data directory logged:\n{stderr}"
    );

    let data = dir.path().join("profilink-data");
    assert!(
        data.join("queue").is_dir(),
        "queue under ./profilink-data/queue"
    );
    let mut files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "envelope"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no envelopes in {}", data.display());

    let mut chunks = Vec::new();
    for f in &files {
        let env = profilink_proto::sentry::Envelope::parse(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(env.profile_chunks().count(), 1, "{}", f.display());
        for item in env.profile_chunks() {
            chunks.push(profilink_proto::sentry::ProfileChunk::from_json(&item.payload).unwrap());
        }
        let out = Command::new(env!("CARGO_BIN_EXE_profilink"))
            .arg("validate")
            .arg(f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "validate {}: {}{}",
            f.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_same_observations(&expected, &observations(&chunks), "written envelopes");
}
