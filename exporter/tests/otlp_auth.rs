//! The OTLP exporter's `auth` header, over HTTP (the stand-in) and gRPC (a tonic server): it
//! is asked for at every attempt, so a changed token is sent from the next request on, and
//! while there is no token nothing is sent (the request waits in the queue and goes out once
//! a token is back).

mod common;

use common::*;
use profilink_exporter::{
    AuthSlot, ClientAuth, ClientTlsConfig, DiscardReason, OtlpExporter, OtlpExporterConfig,
    OtlpProtocol, RetryConfig,
};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, ResourceProfiles,
    profiles_service_server::{ProfilesService, ProfilesServiceServer},
};
use prost::Message;
use reqwest::header::{HeaderName, HeaderValue};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Request, Response, Status};

/// A token that the test switches, as a rotated (or emptied) token file would.
struct Switch(Mutex<Option<&'static str>>);

impl Switch {
    fn set(&self, token: Option<&'static str>) {
        *self.0.lock().unwrap() = token;
    }
}

impl ClientAuth for Switch {
    fn header(&self) -> Option<(HeaderName, HeaderValue)> {
        let token = (*self.0.lock().unwrap())?;
        let value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        Some((HeaderName::from_static("authorization"), value))
    }

    fn name(&self) -> String {
        "bearertokenauth/test".into()
    }
}

/// What a server received: the `authorization` header and the number of resources.
type Seen = Arc<Mutex<Vec<(String, usize)>>>;

struct Recorder(Seen);

#[tonic::async_trait]
impl ProfilesService for Recorder {
    async fn export(
        &self,
        req: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let auth = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("<none>")
            .to_string();
        let n = req.get_ref().resource_profiles.len();
        self.0.lock().unwrap().push((auth, n));
        Ok(Response::new(ExportProfilesServiceResponse::default()))
    }
}

fn request(n: usize) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: (0..n).map(|_| ResourceProfiles::default()).collect(),
        dictionary: None,
    }
}

fn config(endpoint: String, protocol: OtlpProtocol, auth: Arc<Switch>) -> OtlpExporterConfig {
    let mut headers = std::collections::BTreeMap::new();
    // A configured header of the same name is replaced by the auth header.
    headers.insert("Authorization".to_string(), "Bearer configured".to_string());
    OtlpExporterConfig {
        endpoint,
        protocol,
        compression: profilink_exporter::Compression::None,
        tls: ClientTlsConfig {
            insecure: true,
            ..Default::default()
        },
        retry_on_failure: RetryConfig {
            initial_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(50),
            max_elapsed_time: Duration::from_secs(30),
            ..Default::default()
        },
        num_consumers: 1,
        headers,
        auth: AuthSlot::new(auth),
        ..Default::default()
    }
}

/// Exports through `exp` while `auth` changes, reading what the server saw with `seen`.
async fn token_changes(exp: OtlpExporter, auth: &Switch, seen: impl Fn() -> Vec<(String, usize)>) {
    let metrics = exp.metrics();
    let wait = |n: usize| {
        let seen = &seen;
        async move {
            let end = tokio::time::Instant::now() + Duration::from_secs(10);
            while seen().len() < n && tokio::time::Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            seen()
        }
    };
    exp.export(request(1)).await.unwrap();
    assert_eq!(wait(1).await, vec![("Bearer one".to_string(), 1)]);
    auth.set(Some("two"));
    exp.export(request(2)).await.unwrap();
    assert_eq!(wait(2).await[1], ("Bearer two".to_string(), 2));

    // No token: the request is not sent (not even without the header), and it is retried.
    auth.set(None);
    exp.export(request(3)).await.unwrap();
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while metrics.snapshot().retries < 3 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(metrics.snapshot().retries >= 3, "{:?}", metrics.snapshot());
    assert_eq!(seen().len(), 2, "nothing is sent without a token");
    auth.set(Some("three"));
    assert_eq!(wait(3).await[2], ("Bearer three".to_string(), 3));

    exp.shutdown(Duration::from_secs(10)).await;
    let m = metrics.snapshot();
    assert_eq!(m.sent_chunks, 3);
    assert_eq!(m.dropped(DiscardReason::NetworkError), 0);
    assert_eq!(m.dropped(DiscardReason::SendError), 0);
    assert_eq!(seen().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_auth_header_follows_its_source() {
    let server = StandIn::start().await;
    let auth = Arc::new(Switch(Mutex::new(Some("one"))));
    let cfg = config(
        format!("http://{}", server.addr),
        OtlpProtocol::Http,
        auth.clone(),
    );
    let exp = OtlpExporter::start(cfg).await.unwrap();
    token_changes(exp, &auth, || {
        server
            .requests()
            .iter()
            .map(|r| {
                let auth = r.header("authorization").unwrap_or("<none>").to_string();
                let req = ExportProfilesServiceRequest::decode(&r.decoded_body()[..]).unwrap();
                (auth, req.resource_profiles.len())
            })
            .collect()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_auth_metadata_follows_its_source() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ProfilesServiceServer::new(Recorder(seen.clone())))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let auth = Arc::new(Switch(Mutex::new(Some("one"))));
    let cfg = config(addr.to_string(), OtlpProtocol::Grpc, auth.clone());
    let exp = OtlpExporter::start(cfg).await.unwrap();
    token_changes(exp, &auth, || seen.lock().unwrap().clone()).await;
}
