//! The OTLP gRPC exporter through an HTTP `CONNECT` proxy named by `HTTPS_PROXY`, with TLS to
//! the endpoint inside the tunnel. Its own test binary: it sets process environment variables.

use profilink_consumer::ChannelConsumer;
use profilink_exporter::{ClientTlsConfig, OtlpExporter, OtlpExporterConfig, RetryConfig};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_receiver::{OtlpGrpcConfig, Stats, TlsConfig, serve_otlp_grpc};
use profilink_tls::test_pki::TestCa;
use prost::Message;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(10);

/// A minimal HTTP `CONNECT` proxy on 127.0.0.1: counts tunnels, records their targets.
async fn connect_proxy(tunnels: Arc<AtomicUsize>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let tunnels = tunnels.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                    if client.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let Some(target) = text
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix("CONNECT "))
                    .and_then(|l| l.split(' ').next())
                else {
                    let _ = client
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                        .await;
                    return;
                };
                let Ok(mut upstream) = TcpStream::connect(target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                tunnels.fetch_add(1, Ordering::SeqCst);
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn grpc_exporter_tunnels_through_https_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("private CA");
    let (cert, key) = ca.server(&["localhost"]).write(dir.path(), "server");
    let ca_file = ca.write(dir.path(), "ca.pem");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tunnels = Arc::new(AtomicUsize::new(0));
    let proxy = runtime.block_on(connect_proxy(tunnels.clone()));
    // SAFETY: this binary's only test; the runtime's threads do not read the environment.
    unsafe {
        std::env::set_var("HTTPS_PROXY", &proxy);
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
    }
    runtime.block_on(async {
        let (consumer, mut batches) = ChannelConsumer::new(4);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = serve_otlp_grpc(
            &OtlpGrpcConfig {
                endpoint: "127.0.0.1:0".into(),
                tls: Some(TlsConfig::new(cert, key)),
                ..Default::default()
            },
            Arc::new(consumer),
            Arc::new(Stats::default()),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        let exp = OtlpExporter::start(OtlpExporterConfig {
            endpoint: format!("localhost:{}", server.local_addr().port()),
            tls: ClientTlsConfig {
                ca_file: Some(ca_file),
                ..Default::default()
            },
            retry_on_failure: RetryConfig {
                initial_interval: Duration::from_millis(20),
                max_elapsed_time: Duration::from_secs(3),
                ..Default::default()
            },
            ..Default::default()
        })
        .await
        .unwrap();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/otlp/ebpf-profile.pb"
        );
        let req =
            ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
        exp.export(req).await.unwrap();
        let batch = tokio::time::timeout(WAIT, batches.recv())
            .await
            .expect("delivered through the proxy")
            .unwrap();
        assert_eq!(batch.transport, profilink_consumer::Transport::Grpc);
        assert!(
            tunnels.load(Ordering::SeqCst) >= 1,
            "went through the proxy"
        );
        exp.shutdown(Duration::from_secs(1)).await;
        let _ = stop.send(());
        let _ = server.wait().await;
    });
}
