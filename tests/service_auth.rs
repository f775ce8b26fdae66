//! The real binary with `bearertokenauth` extensions: receivers (gRPC and HTTP) refuse requests
//! without the token and accept them with it, a rotated token file takes effect without a
//! restart, OTLP exporters send their token to stand-ins that check it; and `cors` on the HTTP
//! receiver (preflight, simple cross-origin POST).

mod service_support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::routing::post;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use prost::Message;
use service_support::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::metadata::MetadataValue;

/// What an OTLP/HTTP endpoint saw: (path, `authorization` header) of each request.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A loopback OTLP/HTTP endpoint (profiles and traces) recording the `authorization` header
/// of every request.
async fn header_recorder() -> (String, Seen) {
    let seen = Seen::default();
    let record = |State(seen): State<Seen>, uri: Uri, headers: HeaderMap, _body: Bytes| async move {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("<none>")
            .to_string();
        seen.lock().unwrap().push((uri.path().to_string(), auth));
        (
            [("content-type", "application/x-protobuf")],
            Vec::<u8>::new(),
        )
    };
    let app = Router::new()
        .route("/v1development/profiles", post(record))
        .route("/v1/traces", post(record))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

async fn grpc_call(addr: &str, req: &ExportProfilesServiceRequest, auth: Option<&str>) -> Code {
    let mut client = ProfilesServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(req.clone());
    if let Some(value) = auth {
        request
            .metadata_mut()
            .insert("authorization", MetadataValue::try_from(value).unwrap());
    }
    match client.export(request).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

async fn http_post(url: &str, body: &[u8], headers: &[(&str, &str)]) -> reqwest::Response {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/x-protobuf")
        .body(body.to_vec());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_on_receivers_and_exporters_and_cors() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("receiver.tokens");
    std::fs::write(&token_file, "first-token\nsecond-token\n").unwrap();
    let (recorder, seen) = header_recorder().await;
    // A gRPC backend that itself requires the client token (the `bearer_token` shorthand).
    let (backend_cfg_consumer, mut backend_batches) = profilink_consumer::ChannelConsumer::new(64);
    let backend = profilink_receiver::serve_otlp_grpc(
        &profilink_receiver::OtlpGrpcConfig {
            endpoint: "127.0.0.1:0".into(),
            bearer_token: Some("client-secret".into()),
            ..Default::default()
        },
        Arc::new(backend_cfg_consumer),
        Arc::new(profilink_receiver::Stats::default()),
        std::future::pending(),
    )
    .await
    .unwrap();
    let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
extensions:
  bearertokenauth/in: {{ filename: "{file}" }}
  bearertokenauth/client: {{ token: client-secret }}
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}", auth: {{ authenticator: bearertokenauth/in }} }}
      http:
        endpoint: "{http}"
        auth: {{ authenticator: bearertokenauth/in }}
        cors:
          allowed_origins: ["https://*.example.com"]
          allowed_headers: [Authorization]
          max_age: 600
exporters:
  otlp_http:
    endpoint: "{recorder}"
    compression: none
    auth: {{ authenticator: bearertokenauth/client }}
  otlp:
    endpoint: "http://{backend}"
    tls: {{ insecure: true }}
    auth: {{ authenticator: bearertokenauth/client }}
service:
  extensions: [bearertokenauth/in, bearertokenauth/client]
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [otlp_http, otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            file = token_file.display(),
            backend = backend.local_addr(),
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&grpc, Duration::from_secs(10));
    p.wait_port(&http, Duration::from_secs(10));
    let req = otlp_fixture("ebpf-profile.pb");
    let body = req.encode_to_vec();
    let url = format!("http://{http}/v1development/profiles");

    // Refused: no token, wrong token, wrong scheme; nothing reaches the exporters.
    assert_eq!(grpc_call(&grpc, &req, None).await, Code::Unauthenticated);
    assert_eq!(
        grpc_call(&grpc, &req, Some("Bearer wrong")).await,
        Code::Unauthenticated
    );
    assert_eq!(
        grpc_call(&grpc, &req, Some("Basic first-token")).await,
        Code::Unauthenticated
    );
    let r = http_post(&url, &body, &[]).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let r = http_post(&url, &body, &[("authorization", "Bearer wrong")]).await;
    assert_eq!(r.status(), 401);
    let text = r.text().await.unwrap();
    assert!(!text.contains("wrong"), "the token is not echoed: {text}");

    // Accepted: either token of the file, over both transports.
    assert_eq!(
        grpc_call(&grpc, &req, Some("Bearer first-token")).await,
        Code::Ok
    );
    let r = http_post(&url, &body, &[("authorization", "Bearer second-token")]).await;
    assert_eq!(r.status(), 200);

    // Both exporters sent with the client token: the recorder saw it, and the gRPC backend
    // (which refuses anything else) received data.
    let waited = Instant::now();
    while seen.lock().unwrap().is_empty() {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "nothing exported; stderr:\n{}",
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let headers = seen.lock().unwrap().clone();
    assert!(
        headers.iter().all(|(_, h)| h == "Bearer client-secret"),
        "{headers:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), backend_batches.recv())
        .await
        .expect("the gRPC backend received the export")
        .expect("a batch");

    // The token file rotates: the new token works within the poll period, the old ones stop.
    std::fs::write(&token_file, "rotated-token\n").unwrap();
    let waited = Instant::now();
    while grpc_call(&grpc, &req, Some("Bearer rotated-token")).await != Code::Ok {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "rotated token not accepted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        grpc_call(&grpc, &req, Some("Bearer first-token")).await,
        Code::Unauthenticated
    );
    let r = http_post(&url, &body, &[("authorization", "Bearer second-token")]).await;
    assert_eq!(r.status(), 401);

    // CORS: a preflight from an allowed origin is answered before authentication.
    let client = reqwest::Client::new();
    let r = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "https://app.example.com")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    assert_eq!(h["access-control-allow-credentials"], "true");
    assert_eq!(h["access-control-max-age"], "600");
    let allowed = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    // Another origin gets no allow-origin: the browser blocks it.
    let r = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "https://evil.test")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    // The cross-origin POST itself: answered with the allow-origin header.
    let r = http_post(
        &url,
        &body,
        &[
            ("origin", "https://app.example.com"),
            ("authorization", "Bearer rotated-token"),
        ],
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let r = http_post(&url, &body, &[("origin", "https://evil.test")]).await;
    assert_eq!(r.status(), 401);
    assert!(!r.headers().contains_key("access-control-allow-origin"));

    // No token in the logs.
    p.signal("TERM");
    p.wait_exit(Duration::from_secs(20));
    let log = p.stderr();
    for secret in [
        "first-token",
        "second-token",
        "rotated-token",
        "client-secret",
    ] {
        assert!(!log.contains(secret), "{secret} logged:\n{log}");
    }
    assert!(log.contains("token file changed"), "{log}");
}

/// The `authorization` headers `seen` on `path`, in order.
fn auth_on(seen: &Seen, path: &str) -> Vec<String> {
    let seen = seen.lock().unwrap();
    seen.iter()
        .filter(|(p, _)| p == path)
        .map(|(_, a)| a.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_tokens_follow_their_file_for_profiles_and_traces() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("exporter.tokens");
    std::fs::write(&token_file, "old-token\n").unwrap();
    let (recorder, seen) = header_recorder().await;
    let http = free_addr();
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
extensions:
  bearertokenauth/out: {{ filename: "{file}" }}
receivers:
  otlp: {{ protocols: {{ http: {{ endpoint: "{http}" }} }} }}
processors:
  profile_linking: {{ wait: 0s }}
exporters:
  otlp_http:
    endpoint: "{recorder}"
    compression: none
    auth: {{ authenticator: bearertokenauth/out }}
service:
  extensions: [bearertokenauth/out]
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [otlp_http] }}
    traces: {{ receivers: [otlp], processors: [profile_linking], exporters: [otlp_http] }}
  telemetry:
    metrics: {{ address: none }}
"#,
            file = token_file.display(),
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&http, Duration::from_secs(20));
    let profile = otlp_fixture("ebpf-profile.pb").encode_to_vec();
    let trace = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"process.pid","value":{"intValue":"4242"}}]},
      "scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef",
        "spanId":"0123456789abcdef","name":"GET /","startTimeUnixNano":"1",
        "endTimeUnixNano":"2"}]}]}]}"#;
    let send_both = || async {
        let r = http_post(
            &format!("http://{http}/v1development/profiles"),
            &profile,
            &[],
        )
        .await;
        assert_eq!(r.status(), 200);
        let r = post_json_traces(&http, trace).await;
        assert_eq!(r.status(), 200);
    };
    let paths = ["/v1development/profiles", "/v1/traces"];
    // Sends both signals until each path has seen `token` (within 10 s).
    let until_seen = |token: &'static str| {
        let (seen, p, send_both) = (&seen, &p, &send_both);
        async move {
            let want = format!("Bearer {token}");
            let waited = Instant::now();
            while !paths.iter().all(|path| auth_on(seen, path).contains(&want)) {
                assert!(
                    waited.elapsed() < Duration::from_secs(10),
                    "{want} not seen on both paths: {:?}; stderr:\n{}",
                    seen.lock().unwrap(),
                    p.stderr()
                );
                send_both().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    until_seen("old-token").await;

    // The file rotates: both exporter instances (profiles and traces) send the new token
    // from then on, without a restart; nothing is ever sent without a token.
    std::fs::write(&token_file, "new-token\n").unwrap();
    until_seen("new-token").await;
    // Requests in flight at the switch may arrive in either order; the ones sent after it
    // all carry the new token.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before: Vec<usize> = paths.iter().map(|p| auth_on(&seen, p).len()).collect();
    for _ in 0..2 {
        send_both().await;
    }
    let waited = Instant::now();
    while paths
        .iter()
        .zip(&before)
        .any(|(p, n)| auth_on(&seen, p).len() < n + 2)
    {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "later requests not exported: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (path, n) in paths.iter().zip(before) {
        let auths = auth_on(&seen, path);
        assert!(
            auths[..n].iter().all(|a| a.starts_with("Bearer ")),
            "{path}: {auths:?}"
        );
        assert!(
            auths[n..].iter().all(|a| a == "Bearer new-token"),
            "{path}: {auths:?}"
        );
    }

    p.signal("TERM");
    p.wait_exit(Duration::from_secs(20));
    let log = p.stderr();
    for secret in ["old-token", "new-token"] {
        assert!(!log.contains(secret), "{secret} logged:\n{log}");
    }
}

#[test]
fn check_names_the_key_of_an_undefined_authenticator() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "bad.yaml",
        r#"
receivers:
  otlp:
    protocols:
      http: { auth: { authenticator: bearertokenauth } }
exporters:
  file: { path: ./out }
service:
  pipelines:
    profiles: { receivers: [otlp], exporters: [file] }
"#,
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_profilink"))
        .args(["check", "--config", config.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "receivers.otlp.protocols.http.auth.authenticator: \"bearertokenauth\" is not configured under extensions"
        ),
        "{stderr}"
    );
}
