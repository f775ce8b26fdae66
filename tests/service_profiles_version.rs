//! The OTLP profiles development version with the real binary (issue 32): the receivers read
//! `otlp-profiles-development-version` (gRPC metadata) / `OTLP-Profiles-Development-Version`
//! (HTTP) before the body, accept it absent or `1`, and refuse `2`, `01`, `x`, `abc` and a
//! repeated value with `INVALID_ARGUMENT` / 400 naming the supported version, counted as
//! refused requests with `reason="unsupported_version"` and no samples. An undecodable body
//! under version 7 is refused for its version, not as a decode error. Both OTLP exporters
//! send `1`, checked on stand-in receivers that record what arrives.

mod service_support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::profiles_service_server::{ProfilesService, ProfilesServiceServer};
use profilink_proto::otlp::{
    EXPORT_PATH, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use prost::Message;
use service_support::raw_codec::RawCodec;
use service_support::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::{Code, Status};

const HEADER: &str = "otlp-profiles-development-version";

/// The version values of each request a stand-in received.
type Seen = Arc<Mutex<Vec<Vec<String>>>>;

fn values<'a>(all: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    all.map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// An OTLP/HTTP stand-in recording the version headers of every profiles request.
async fn http_standin() -> (String, Seen) {
    let seen = Seen::default();
    let record = |State(seen): State<Seen>, headers: HeaderMap, _body: Bytes| async move {
        let v = values(headers.get_all(HEADER).iter().map(|v| v.as_bytes()));
        seen.lock().unwrap().push(v);
        (
            [("content-type", "application/x-protobuf")],
            Vec::<u8>::new(),
        )
    };
    let app = Router::new()
        .route("/v1development/profiles", post(record))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

/// An OTLP/gRPC stand-in recording the version metadata of every profiles request.
struct GrpcStandIn(Seen);

#[tonic::async_trait]
impl ProfilesService for GrpcStandIn {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, Status> {
        let v = values(
            request
                .metadata()
                .get_all(HEADER)
                .iter()
                .map(|v| v.as_encoded_bytes()),
        );
        self.0.lock().unwrap().push(v);
        Ok(tonic::Response::new(
            ExportProfilesServiceResponse::default(),
        ))
    }
}

async fn grpc_standin() -> (String, Seen) {
    let seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = ProfilesServiceServer::new(GrpcStandIn(seen.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap()
    });
    (format!("http://{addr}"), seen)
}

/// `ProfilesService/Export` with `body` as the message and `versions` as metadata values.
async fn grpc_raw(addr: &str, body: Vec<u8>, versions: &[&str]) -> Result<(), Status> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut request = tonic::Request::new(body);
    for v in versions {
        request.metadata_mut().append(HEADER, v.parse().unwrap());
    }
    grpc.unary(request, PathAndQuery::from_static(EXPORT_PATH), RawCodec)
        .await
        .map(|_| ())
}

/// POSTs `body` (protobuf) with `versions` as `OTLP-Profiles-Development-Version` headers.
async fn http_post(http: &str, body: Vec<u8>, versions: &[&str]) -> (u16, tonic_status::Parsed) {
    let mut r = reqwest::Client::new()
        .post(format!("http://{http}/v1development/profiles"))
        .header("content-type", "application/x-protobuf")
        .body(body);
    for v in versions {
        r = r.header("OTLP-Profiles-Development-Version", *v);
    }
    let response = r.send().await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    (status, tonic_status::parse(&bytes))
}

mod tonic_status {
    /// The `google.rpc.Status` of an OTLP/HTTP error answer (code, message); zero and empty for
    /// a success body.
    pub type Parsed = (i32, String);

    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }

    pub fn parse(body: &[u8]) -> Parsed {
        match <RpcStatus as prost::Message>::decode(body) {
            Ok(s) => (s.code, s.message),
            Err(_) => (-1, String::from_utf8_lossy(body).into_owned()),
        }
    }
}

async fn wait_for(seen: &Seen, n: usize, p: &Profilink) -> Vec<Vec<String>> {
    let start = Instant::now();
    loop {
        let got = seen.lock().unwrap().clone();
        if got.len() >= n {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} of {n} exports arrived; stderr:\n{}",
            got.len(),
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_check_the_version_before_decoding_and_exporters_send_one() {
    let (grpc_backend, grpc_seen) = grpc_standin().await;
    let (http_backend, http_seen) = http_standin().await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
      http: {{ endpoint: "{http}" }}
exporters:
  otlp:
    endpoint: "{grpc_backend}"
    tls: {{ insecure: true }}
    # A configured version header is replaced by the one profilink encodes.
    headers: {{ otlp-profiles-development-version: "9" }}
  otlp_http:
    endpoint: "{http_backend}"
    compression: none
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [otlp, otlp_http] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&grpc, Duration::from_secs(10));
    p.wait_port(&http, Duration::from_secs(10));
    p.wait_port(&metrics, Duration::from_secs(10));
    let body = otlp_fixture("ebpf-profile.pb").encode_to_vec();
    let garbage = b"\xff\xff\xff\xff not a protobuf message".to_vec();

    // gRPC: no version and `1` are accepted.
    grpc_raw(&grpc, body.clone(), &[])
        .await
        .expect("no version");
    grpc_raw(&grpc, body.clone(), &["1"])
        .await
        .expect("version 1");
    // `2`, `01`, `x` and `1` twice are refused before decoding, naming the supported version.
    for versions in [&["2"][..], &["01"], &["x"], &["1", "1"]] {
        let status = grpc_raw(&grpc, body.clone(), versions)
            .await
            .expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{versions:?}");
        assert!(
            status.message().contains(HEADER) && status.message().contains('1'),
            "{versions:?}: {}",
            status.message()
        );
    }
    let status = grpc_raw(&grpc, body.clone(), &["2"]).await.unwrap_err();
    assert!(
        status.message().contains("supports version 1"),
        "{}",
        status.message()
    );
    // An undecodable body under version 7 is a version error; under version 1 a decode error.
    let v7 = grpc_raw(&grpc, garbage.clone(), &["7"]).await.unwrap_err();
    assert_eq!(v7.code(), Code::InvalidArgument);
    assert!(
        v7.message().contains("version 7") && !v7.message().contains("cannot decode"),
        "{}",
        v7.message()
    );
    let v1 = grpc_raw(&grpc, garbage.clone(), &["1"]).await.unwrap_err();
    assert_eq!(v1.code(), Code::InvalidArgument);
    assert!(v1.message().contains("cannot decode"), "{}", v1.message());

    // HTTP: `1` accepted, `2` and `abc` refused with a google.rpc.Status (INVALID_ARGUMENT).
    let (status, _) = http_post(&http, body.clone(), &["1"]).await;
    assert_eq!(status, 200);
    for v in ["2", "abc"] {
        let (status, (code, message)) = http_post(&http, body.clone(), &[v]).await;
        assert_eq!((status, code), (400, 3), "{v}: {message}");
        assert!(
            message.contains("supported") && message.contains(HEADER),
            "{message}"
        );
    }
    let (status, (code, message)) = http_post(&http, garbage.clone(), &["7"]).await;
    assert_eq!((status, code), (400, 3));
    assert!(
        message.contains("version 7") && !message.contains("cannot decode"),
        "{message}"
    );

    // Both exporters sent every accepted request (3) with exactly one value: `1`.
    for (what, seen) in [("otlp", &grpc_seen), ("otlp_http", &http_seen)] {
        let got = wait_for(seen, 3, &p).await;
        assert!(
            got.iter().all(|v| v == &["1".to_string()]),
            "{what}: {got:?}"
        );
    }

    // Counted: refused requests by reason; no sample refused (none was read).
    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    for (transport, refused_for_version, other, accepted) in [("grpc", 6, 1, 2), ("http", 3, 0, 1)]
    {
        let l = [("receiver", "otlp"), ("transport", transport)];
        let reason = |r| [l[0], l[1], ("reason", r)];
        assert_eq!(
            scrape(
                &text,
                "profilink_receiver_refusals_total",
                &reason("unsupported_version")
            ),
            Some(refused_for_version),
            "{transport}:\n{text}"
        );
        assert_eq!(
            scrape(
                &text,
                "profilink_receiver_refusals_total",
                &reason("invalid")
            ),
            (other > 0).then_some(other),
            "{transport}"
        );
        let outcome = |o| [l[0], l[1], ("outcome", o)];
        assert_eq!(
            scrape(
                &text,
                "otelcol_receiver_requests_total",
                &outcome("refused")
            ),
            Some(refused_for_version + other)
        );
        assert_eq!(
            scrape(
                &text,
                "otelcol_receiver_requests_total",
                &outcome("success")
            ),
            Some(accepted)
        );
        assert_eq!(
            scrape(&text, "otelcol_receiver_refused_profile_samples_total", &l).unwrap_or(0),
            0,
            "{transport}"
        );
        assert_eq!(
            scrape(&text, "profilink_receiver_refused_samples_total", &l),
            Some(0)
        );
        assert!(scrape(&text, "otelcol_receiver_accepted_profile_samples_total", &l).unwrap() > 0);
    }
}
