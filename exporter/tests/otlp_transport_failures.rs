//! The OTLP/gRPC exporter when the connection fails under a request: the peer closes or resets
//! it after reading the request, without answering. No gRPC status came from the server, so
//! the request must be retried (as the Collector's gRPC client reports such failures as
//! UNAVAILABLE), never given up as a permanent error.

use profilink_exporter::{
    ClientTlsConfig, DiscardReason, OtlpExporter, OtlpExporterConfig, OtlpProtocol, RetryConfig,
};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, ResourceProfiles,
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tonic::codegen::tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

/// The backend: counts the resource profiles it receives.
struct Counting(Arc<AtomicUsize>);

#[tonic::async_trait]
impl ProfilesService for Counting {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        self.0
            .fetch_add(req.get_ref().resource_profiles.len(), Ordering::SeqCst);
        Ok(Response::new(ExportProfilesServiceResponse::default()))
    }
}

/// How the stand-in fails the first connections.
#[derive(Clone, Copy)]
enum Failure {
    /// Reads what the client sends, then closes (FIN).
    Close,
    /// Reads what the client sends, then resets (RST).
    Reset,
}

/// Fails the first `failing` connections as `how`; proxies the later ones to `backend`.
async fn flaky_front(failing: usize, how: Failure, backend: String) -> String {
    let front = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = front.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut conn, _)) = front.accept().await else {
                return;
            };
            n += 1;
            if n <= failing {
                tokio::spawn(async move {
                    // Wait for the preface, the SETTINGS, the headers and some of the body.
                    let mut seen = 0;
                    let mut buf = [0u8; 4096];
                    while seen < 200 {
                        match tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf))
                            .await
                        {
                            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                            Ok(Ok(k)) => seen += k,
                        }
                    }
                    if let Failure::Reset = how {
                        let _ = conn.set_zero_linger();
                    }
                    drop(conn);
                });
                continue;
            }
            let backend = backend.clone();
            tokio::spawn(async move {
                if let Ok(mut up) = TcpStream::connect(&backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                }
            });
        }
    });
    addr
}

fn request(n: usize) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: (0..n)
            .map(|i| ResourceProfiles {
                schema_url: format!("https://example.com/{i}/{}", "x".repeat(300)),
                ..Default::default()
            })
            .collect(),
        dictionary: None,
    }
}

async fn delivered_after(how: Failure) {
    let received = Arc::new(AtomicUsize::new(0));
    let backend = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backend_addr = backend.local_addr().unwrap().to_string();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                ProfilesServiceServer::new(Counting(received.clone()))
                    .accept_compressed(tonic::codec::CompressionEncoding::Gzip),
            )
            .serve_with_incoming(TcpListenerStream::new(backend)),
    );
    let front = flaky_front(2, how, backend_addr).await;
    let exp = OtlpExporter::start(OtlpExporterConfig {
        endpoint: front,
        protocol: OtlpProtocol::Grpc,
        tls: ClientTlsConfig {
            insecure: true,
            ..Default::default()
        },
        timeout: Duration::from_secs(5),
        retry_on_failure: RetryConfig {
            initial_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(100),
            max_elapsed_time: Duration::from_secs(20),
            ..Default::default()
        },
        num_consumers: 1,
        ..Default::default()
    })
    .await
    .unwrap();
    let metrics = exp.metrics();
    exp.export(request(3)).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while received.load(Ordering::SeqCst) < 3 && tokio::time::Instant::now() < deadline {
        let m = metrics.snapshot();
        if m.dropped.iter().any(|(_, n)| *n > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    exp.shutdown(Duration::from_secs(5)).await;
    let m = metrics.snapshot();
    assert_eq!(
        m.dropped(DiscardReason::SendError) + m.dropped(DiscardReason::NetworkError),
        0,
        "a request whose connection failed was given up: {:?}",
        m.dropped
    );
    assert!(m.retries >= 1, "the failed attempts were not retried");
    assert_eq!(received.load(Ordering::SeqCst), 3, "not delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_under_a_request_is_retried() {
    delivered_after(Failure::Close).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_under_a_request_is_retried() {
    delivered_after(Failure::Reset).await;
}
