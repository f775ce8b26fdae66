//! The real binary with TLS on both hops, configured in YAML: Sentry envelopes over HTTPS with
//! a client certificate (receiver `client_ca_file`) in, OTLP/gRPC over TLS with a private CA
//! (`ca_file`) and a client certificate out, to a backend that requires one.

mod service_support;

use profilink_consumer::{ChannelConsumer, Payload};
use profilink_receiver::{OtlpGrpcConfig, Stats, TlsConfig};
use profilink_tls::test_pki::TestCa;
use service_support::*;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_in_over_mtls_and_otlp_out_over_mtls() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = TestCa::new("private CA");
    let clients = TestCa::new("client CA");
    let (backend_cert, backend_key) = ca.server(&["localhost"]).write(d, "backend");
    let (front_cert, front_key) = ca.server(&["localhost"]).write(d, "front");
    let (out_cert, out_key) = clients.client("profilink").write(d, "profilink-client");
    let ca_file = ca.write(d, "ca.pem");
    let clients_file = clients.write(d, "clients.pem");

    // The OTLP backend: TLS, client certificates required.
    let mut backend_tls = TlsConfig::new(backend_cert, backend_key);
    backend_tls.client_ca_file = Some(clients_file.clone());
    let (consumer, mut batches) = ChannelConsumer::new(64);
    let backend = profilink_receiver::serve_otlp_grpc(
        &OtlpGrpcConfig {
            endpoint: "127.0.0.1:0".into(),
            tls: Some(backend_tls),
            ..Default::default()
        },
        Arc::new(consumer),
        Arc::new(Stats::default()),
        std::future::pending(),
    )
    .await
    .unwrap();
    let backend_port = backend.local_addr().port();

    let sentry_port = free_port();
    let config = write_config(
        d,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry:
    endpoint: "127.0.0.1:{sentry_port}"
    tls: {{ cert_file: "{front_cert}", key_file: "{front_key}", client_ca_file: "{clients_file}", min_version: "1.2", reload_interval: 1h }}
processors:
  profile_linking: {{ join_window: 0s }}
exporters:
  otlp:
    endpoint: "localhost:{backend_port}"
    tls: {{ ca_file: "{ca_file}", cert_file: "{out_cert}", key_file: "{out_key}" }}
    retry_on_failure: {{ initial_interval: 50ms, max_interval: 100ms }}
service:
  pipelines:
    profiles: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: none }}
"#,
            front_cert = front_cert.display(),
            front_key = front_key.display(),
            clients_file = clients_file.display(),
            ca_file = ca_file.display(),
            out_cert = out_cert.display(),
            out_key = out_key.display(),
        ),
    );
    let mut p = Profilink::start(d, &["run", "--config", config.to_str().unwrap()], &[]);
    p.wait_port(&format!("127.0.0.1:{sentry_port}"), Duration::from_secs(10));

    let envelope = std::fs::read_dir(fixtures().join("sentry/python"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("chunk"))
        .min()
        .expect("a chunk envelope fixture");
    let body = std::fs::read(&envelope).unwrap();
    let root = reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap();
    let post = |client: reqwest::Client| {
        let body = body.clone();
        async move {
            client
                .post(format!("https://localhost:{sentry_port}/api/42/envelope/"))
                .header(
                    "x-sentry-auth",
                    format!("Sentry sentry_key={KEY}, sentry_version=7"),
                )
                .body(body)
                .send()
                .await
        }
    };
    let anonymous = reqwest::Client::builder()
        .add_root_certificate(root.clone())
        .build()
        .unwrap();
    assert!(
        post(anonymous).await.is_err(),
        "no client certificate: refused"
    );
    let sdk = clients.client("sdk");
    let identity =
        reqwest::Identity::from_pem(format!("{}{}", sdk.cert_pem, sdk.key_pem).as_bytes()).unwrap();
    let with_cert = reqwest::Client::builder()
        .add_root_certificate(root)
        .identity(identity)
        .build()
        .unwrap();
    let resp = post(with_cert)
        .await
        .expect("accepted with a client certificate");
    assert_eq!(resp.status(), 200);

    let batch = tokio::time::timeout(Duration::from_secs(15), batches.recv())
        .await
        .unwrap_or_else(|_| panic!("nothing reached the TLS backend; stderr:\n{}", p.stderr()))
        .unwrap();
    assert!(matches!(batch.payload, Payload::Otlp(_)));
    assert!(batch.samples > 0);

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    backend.abort();
}
