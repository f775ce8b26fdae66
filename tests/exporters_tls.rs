//! The exporters over real TLS on 127.0.0.1, to profilink's own receivers, with CAs and
//! certificates generated here: a private CA only in `ca_file`, `insecure` to a cleartext
//! server, a client certificate for a receiver with `client_ca_file`, an expired server
//! certificate. Each case also shows the connection failing without the setting it needs.

// The exporter crate's stand-in Sentry server and chunk builders.
#[path = "../exporter/tests/common/mod.rs"]
mod common;

use common::{KEY, PROFILER_A, T0, chunk};
use profilink_consumer::ExportChunk;
use profilink_consumer::{Batch, ChannelConsumer, Payload, ReceiverKind, Transport};
use profilink_exporter::{
    ClientTlsConfig, DiscardReason, OtlpExporter, OtlpExporterConfig, OtlpProtocol, QueueConfig,
    RetryConfig, SentryExporter, SentryExporterConfig,
};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_receiver::{
    OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig, ServerHandle, Stats, TlsConfig,
    serve_otlp_grpc, serve_otlp_http, serve_sentry,
};
use profilink_tls::test_pki::TestCa;
use prost::Message;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

const WAIT: Duration = Duration::from_secs(10);

/// A receiver with the batches it took.
struct Server {
    addr: SocketAddr,
    batches: mpsc::Receiver<Batch>,
    stop: oneshot::Sender<()>,
    handle: ServerHandle,
}

impl Server {
    async fn next_batch(&mut self) -> Batch {
        tokio::time::timeout(WAIT, self.batches.recv())
            .await
            .expect("a batch within the wait")
            .expect("receiver running")
    }

    fn assert_no_batch(&mut self) {
        assert!(self.batches.try_recv().is_err(), "nothing was delivered");
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(WAIT, self.handle.wait()).await;
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Grpc,
    Http,
    Sentry,
}

async fn start(kind: Kind, tls: Option<TlsConfig>) -> Server {
    let (consumer, batches) = ChannelConsumer::new(16);
    let (consumer, stats) = (Arc::new(consumer), Arc::new(Stats::default()));
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let endpoint = "127.0.0.1:0".to_string();
    let handle = match kind {
        Kind::Grpc => {
            let cfg = OtlpGrpcConfig {
                endpoint,
                tls,
                ..Default::default()
            };
            serve_otlp_grpc(&cfg, consumer, stats, shutdown).await
        }
        Kind::Http => {
            let cfg = OtlpHttpConfig {
                endpoint,
                tls,
                ..Default::default()
            };
            serve_otlp_http(&cfg, consumer, stats, shutdown).await
        }
        Kind::Sentry => {
            let cfg = SentryReceiverConfig {
                endpoint,
                tls,
                ..Default::default()
            };
            serve_sentry(&cfg, consumer, stats, shutdown).await
        }
    }
    .expect("receiver starts");
    Server {
        addr: handle.local_addr(),
        batches,
        stop,
        handle,
    }
}

/// A server certificate for `localhost` signed by `ca`, as receiver TLS settings.
fn server_tls(ca: &TestCa, dir: &Path) -> TlsConfig {
    let (cert, key) = ca.server(&["localhost"]).write(dir, "server");
    TlsConfig::new(cert, key)
}

fn otlp_request() -> ExportProfilesServiceRequest {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/otlp/ebpf-profile.pb"
    );
    ExportProfilesServiceRequest::decode(std::fs::read(path).expect("fixture").as_slice())
        .expect("decodes")
}

fn quick_retry() -> RetryConfig {
    RetryConfig {
        initial_interval: Duration::from_millis(20),
        max_interval: Duration::from_millis(50),
        max_elapsed_time: Duration::from_millis(400),
        ..Default::default()
    }
}

fn otlp_config(
    endpoint: String,
    protocol: OtlpProtocol,
    tls: ClientTlsConfig,
) -> OtlpExporterConfig {
    OtlpExporterConfig {
        endpoint,
        protocol,
        tls,
        timeout: Duration::from_secs(3),
        retry_on_failure: quick_retry(),
        num_consumers: 1,
        ..Default::default()
    }
}

fn ca_file(path: PathBuf) -> ClientTlsConfig {
    ClientTlsConfig {
        ca_file: Some(path),
        ..Default::default()
    }
}

/// Exports one request; true when it was delivered, false when it was dropped.
async fn otlp_export(cfg: OtlpExporterConfig) -> bool {
    let exp = OtlpExporter::start(cfg).await.expect("exporter starts");
    exp.export(otlp_request()).await.expect("queued");
    let metrics = exp.metrics();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = metrics.snapshot();
        if m.sent_chunks == 1 {
            break;
        }
        if m.dropped(DiscardReason::NetworkError) + m.dropped(DiscardReason::SendError) > 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{m:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    exp.shutdown(Duration::from_secs(1)).await;
    metrics.snapshot().sent_chunks == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_grpc_exporter_trusts_a_private_ca_in_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("private CA");
    let mut server = start(Kind::Grpc, Some(server_tls(&ca, dir.path()))).await;
    // host:port without a scheme: TLS, as the Collector's otlp exporter.
    let endpoint = format!("localhost:{}", server.addr.port());

    let failures = profilink_exporter::tls_handshake_failures();
    let system_roots = otlp_config(
        endpoint.clone(),
        OtlpProtocol::Grpc,
        ClientTlsConfig::default(),
    );
    assert!(
        !otlp_export(system_roots).await,
        "the private CA is not a system root"
    );
    assert!(
        profilink_exporter::tls_handshake_failures() > failures,
        "counted"
    );
    server.assert_no_batch();

    let trusted = otlp_config(
        endpoint,
        OtlpProtocol::Grpc,
        ca_file(ca.write(dir.path(), "ca.pem")),
    );
    assert!(otlp_export(trusted).await, "delivered over TLS");
    let batch = server.next_batch().await;
    assert_eq!(
        (batch.receiver, batch.transport),
        (ReceiverKind::Otlp, Transport::Grpc)
    );
    assert!(batch.samples > 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_grpc_exporter_with_insecure_dials_a_cleartext_server() {
    let mut server = start(Kind::Grpc, None).await;
    let endpoint = server.addr.to_string();
    let tls_by_default = otlp_config(
        endpoint.clone(),
        OtlpProtocol::Grpc,
        ClientTlsConfig::default(),
    );
    assert!(
        !otlp_export(tls_by_default).await,
        "TLS to a cleartext server fails"
    );
    server.assert_no_batch();
    let insecure = ClientTlsConfig {
        insecure: true,
        ..Default::default()
    };
    assert!(otlp_export(otlp_config(endpoint, OtlpProtocol::Grpc, insecure)).await);
    assert_eq!(server.next_batch().await.transport, Transport::Grpc);
    // An http:// endpoint is cleartext whatever `insecure` says.
    let url = format!("http://{}", server.addr);
    assert!(
        otlp_export(otlp_config(
            url,
            OtlpProtocol::Grpc,
            ClientTlsConfig::default()
        ))
        .await
    );
    server.next_batch().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_server_certificate_is_refused_unless_insecure_skip_verify() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("private CA");
    let (cert, key) = ca
        .expired_server(&["localhost"])
        .write(dir.path(), "expired");
    let mut server = start(Kind::Grpc, Some(TlsConfig::new(cert, key))).await;
    let endpoint = format!("localhost:{}", server.addr.port());
    let trusted = ca_file(ca.write(dir.path(), "ca.pem"));
    assert!(!otlp_export(otlp_config(endpoint.clone(), OtlpProtocol::Grpc, trusted)).await);
    server.assert_no_batch();
    let skip = ClientTlsConfig {
        insecure_skip_verify: true,
        ..Default::default()
    };
    assert!(otlp_export(otlp_config(endpoint, OtlpProtocol::Grpc, skip)).await);
    server.next_batch().await;
    server.stop().await;
}

/// A `kind` server at `localhost` that requires client certificates of its own CA: the server,
/// its `https://` endpoint, a client TLS config that trusts the server (no client
/// certificate), and the same presenting a client certificate.
async fn mutual_tls(kind: Kind, dir: &Path) -> (Server, String, ClientTlsConfig, ClientTlsConfig) {
    let ca = TestCa::new("private CA");
    let clients = TestCa::new("client CA");
    let mut tls = server_tls(&ca, dir);
    tls.client_ca_file = Some(clients.write(dir, "clients.pem"));
    let server = start(kind, Some(tls)).await;
    let endpoint = format!("https://localhost:{}", server.addr.port());
    let trusted = ca_file(ca.write(dir, "ca.pem"));
    let (cert, key) = clients.client("profilink").write(dir, "client");
    let with_cert = ClientTlsConfig {
        cert_file: Some(cert),
        key_file: Some(key),
        ..trusted.clone()
    };
    (server, endpoint, trusted, with_cert)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_http_exporter_presents_its_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, endpoint, trusted, with_cert) = mutual_tls(Kind::Http, dir.path()).await;

    let anonymous = otlp_config(endpoint.clone(), OtlpProtocol::Http, trusted.clone());
    assert!(
        !otlp_export(anonymous).await,
        "refused without a client certificate"
    );
    server.assert_no_batch();

    assert!(otlp_export(otlp_config(endpoint, OtlpProtocol::Http, with_cert)).await);
    let batch = server.next_batch().await;
    assert_eq!(
        (batch.receiver, batch.transport),
        (ReceiverKind::Otlp, Transport::Http)
    );
    server.stop().await;
}

/// Sends one chunk through a Sentry exporter to `dsn`; returns the exporter's counters.
async fn sentry_export(dsn: String, tls: ClientTlsConfig, dir: &Path) -> (u64, u64) {
    let cfg = SentryExporterConfig {
        dsn: Some(dsn),
        tls,
        timeout: Duration::from_secs(3),
        retry_on_failure: quick_retry(),
        sending_queue: QueueConfig {
            storage: Some(dir.to_path_buf()),
            ..Default::default()
        },
        flush_on_shutdown: true,
        tick: Duration::from_millis(10),
        client_report_interval: Duration::from_secs(3600),
        ..Default::default()
    };
    let exp = SentryExporter::start(cfg).await.expect("exporter starts");
    exp.export(vec![ExportChunk::new(chunk(
        PROFILER_A, "python", T0, 5.0, 20.0,
    ))])
    .await
    .expect("queued");
    let metrics = exp.metrics();
    exp.shutdown(WAIT).await;
    let m = metrics.snapshot();
    (m.sent_chunks, m.dropped(DiscardReason::NetworkError))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_exporter_trusts_a_ca_that_is_only_in_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("self-hosted Sentry CA");
    let mut server = start(Kind::Sentry, Some(server_tls(&ca, dir.path()))).await;
    let dsn = format!("https://{KEY}@localhost:{}/42", server.addr.port());

    let failures = profilink_exporter::tls_handshake_failures();
    let (sent, dropped) = sentry_export(
        dsn.clone(),
        ClientTlsConfig::default(),
        &dir.path().join("q1"),
    )
    .await;
    assert_eq!((sent, dropped), (0, 1), "system roots do not know the CA");
    assert!(
        profilink_exporter::tls_handshake_failures() > failures,
        "counted"
    );
    server.assert_no_batch();

    let trusted = ca_file(ca.write(dir.path(), "ca.pem"));
    let (sent, dropped) = sentry_export(dsn, trusted, &dir.path().join("q2")).await;
    assert_eq!((sent, dropped), (1, 0));
    let batch = server.next_batch().await;
    let Payload::Sentry(envelope) = batch.payload else {
        panic!("not a Sentry batch")
    };
    assert_eq!(envelope.project_id, 42);
    assert_eq!(envelope.chunks.len(), 1);
    assert_eq!(envelope.chunks[0].profiler_id, PROFILER_A);
    server.stop().await;
}

/// Forwards one envelope through a Sentry receiver's upstream forwarder with `tls`; returns
/// whether it was sent within a few seconds.
async fn forward_once(endpoint: String, tls: ClientTlsConfig, dir: &Path) -> bool {
    use profilink_consumer::{ForwardRequest, Upstream};
    use profilink_exporter::{ForwardConfig, Forwarder, QueueConfig};
    use std::sync::atomic::Ordering;
    let cfg = ForwardConfig {
        endpoint,
        tls,
        timeout: Duration::from_secs(3),
        sending_queue: QueueConfig {
            storage: Some(dir.to_path_buf()),
            ..Default::default()
        },
        retry_on_failure: quick_retry(),
        ..Default::default()
    };
    let forwarder = Forwarder::start(cfg).await.expect("forwarder starts");
    let payload = chunk(PROFILER_A, "python", T0, 5.0, 20.0).to_json();
    let mut body = format!(
        "{{}}\n{{\"type\":\"profile_chunk\",\"length\":{}}}\n",
        payload.len()
    )
    .into_bytes();
    body.extend_from_slice(&payload);
    forwarder
        .forward(ForwardRequest {
            project_id: 42,
            public_key: KEY.into(),
            path: "/api/42/envelope/".into(),
            query: None,
            headers: vec![
                (
                    "x-sentry-auth".into(),
                    format!("Sentry sentry_key={KEY}, sentry_version=7"),
                ),
                (
                    "content-type".into(),
                    "application/x-sentry-envelope".into(),
                ),
            ],
            body: body.into(),
        })
        .await
        .expect("queued");
    let metrics = forwarder.metrics();
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while metrics.sent.load(Ordering::Relaxed) == 0 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    metrics.sent.load(Ordering::Relaxed) == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_forwarder_presents_its_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, endpoint, trusted, with_cert) = mutual_tls(Kind::Sentry, dir.path()).await;

    assert!(
        !forward_once(endpoint.clone(), trusted.clone(), &dir.path().join("q1")).await,
        "refused without a client certificate"
    );
    server.assert_no_batch();

    assert!(forward_once(endpoint, with_cert, &dir.path().join("q2")).await);
    let batch = server.next_batch().await;
    let Payload::Sentry(envelope) = batch.payload else {
        panic!("not a Sentry batch")
    };
    assert_eq!(envelope.project_id, 42);
    assert_eq!(envelope.chunks[0].profiler_id, PROFILER_A);
    server.stop().await;
}
