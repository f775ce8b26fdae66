//! The OTLP exporter against a tonic gRPC server and an HTTP stand-in on 127.0.0.1.

mod common;

use common::*;
use profilink_exporter::{
    ClientTlsConfig, OtlpExporter, OtlpExporterConfig, OtlpProtocol, RetryConfig,
};
use profilink_proto::otlp::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    ResourceProfiles,
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
};
use prost::Message;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Code, Request, Response, Status};

fn request(n: usize) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: (0..n).map(|_| ResourceProfiles::default()).collect(),
        dictionary: None,
    }
}

fn retry() -> RetryConfig {
    RetryConfig {
        initial_interval: Duration::from_millis(20),
        max_interval: Duration::from_millis(50),
        max_elapsed_time: Duration::from_secs(5),
        ..Default::default()
    }
}

#[derive(Default)]
struct SvcState {
    calls: AtomicUsize,
    received: Mutex<Vec<(usize, Option<String>)>>,
}

struct Svc(Arc<SvcState>);

#[tonic::async_trait]
impl ProfilesService for Svc {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let call = self.0.calls.fetch_add(1, Ordering::SeqCst);
        let enc = req
            .metadata()
            .get("grpc-encoding")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match call {
            0 => Err(Status::unavailable("warming up")),
            1 => Err(Status::new(
                Code::ResourceExhausted,
                "no retry info: permanent",
            )),
            _ => {
                let n = req.get_ref().resource_profiles.len();
                self.0.received.lock().unwrap().push((n, enc));
                Ok(Response::new(ExportProfilesServiceResponse {
                    partial_success: Some(ExportProfilesPartialSuccess {
                        rejected_profiles: 1,
                        error_message: "one profile was empty".into(),
                    }),
                }))
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_retries_unavailable_and_counts_partial_success() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let svc = Arc::new(SvcState::default());
    let server = ProfilesServiceServer::new(Svc(svc.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(server)
            .serve(addr),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cfg = OtlpExporterConfig {
        endpoint: addr.to_string(),
        protocol: OtlpProtocol::Grpc,
        // A cleartext stand-in: without a scheme, gRPC dials TLS unless `insecure`.
        tls: ClientTlsConfig {
            insecure: true,
            ..Default::default()
        },
        retry_on_failure: retry(),
        num_consumers: 1,
        ..Default::default()
    };
    let exp = OtlpExporter::start(cfg).await.unwrap();
    let metrics = exp.metrics();
    exp.export(request(3)).await.unwrap(); // UNAVAILABLE, then RESOURCE_EXHAUSTED: dropped
    exp.export(request(2)).await.unwrap(); // delivered with a partial success
    exp.shutdown(Duration::from_secs(10)).await;
    let m = metrics.snapshot();
    assert_eq!(m.retries, 1);
    assert_eq!(m.sent_chunks, 1);
    assert_eq!(m.dropped(profilink_exporter::DiscardReason::SendError), 1);
    assert_eq!(m.partial_successes, 1);
    assert_eq!(m.rejected_profiles, 1);
    let got = svc.received.lock().unwrap().clone();
    assert_eq!(got, vec![(2, Some("gzip".to_string()))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_retries_503_with_retry_after_and_reads_partial_success() {
    let server = StandIn::start().await;
    let partial = ExportProfilesServiceResponse {
        partial_success: Some(ExportProfilesPartialSuccess {
            rejected_profiles: 2,
            error_message: "two rejected".into(),
        }),
    }
    .encode_to_vec();
    server.script(vec![
        Behaviour::with_header(503, "Retry-After", "0"),
        Behaviour::Drop,
        Behaviour::Respond(
            200,
            vec![("content-type".into(), "application/x-protobuf".into())],
            partial,
        ),
        Behaviour::status(400),
    ]);
    let cfg = OtlpExporterConfig {
        endpoint: format!("http://{}", server.addr),
        protocol: OtlpProtocol::Http,
        retry_on_failure: retry(),
        num_consumers: 1,
        ..Default::default()
    };
    let exp = OtlpExporter::start(cfg).await.unwrap();
    let metrics = exp.metrics();
    exp.export(request(4)).await.unwrap();
    exp.export(request(1)).await.unwrap();
    exp.shutdown(Duration::from_secs(10)).await;
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        assert_eq!(r.path, "/v1development/profiles");
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
    }
    let first = ExportProfilesServiceRequest::decode(&reqs[0].decoded_body()[..]).unwrap();
    assert_eq!(first.resource_profiles.len(), 4);
    let m = metrics.snapshot();
    assert_eq!(m.retries, 2);
    assert_eq!(m.sent_chunks, 1);
    assert_eq!(m.rejected_profiles, 2);
    assert_eq!(
        m.dropped(profilink_exporter::DiscardReason::SendError),
        1,
        "400 is permanent"
    );
}
