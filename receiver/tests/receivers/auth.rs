//! `auth` with a `bearertokenauth` authenticator and `cors` on the OTLP listeners, with real
//! clients: refusals are `UNAUTHENTICATED` / 401 and counted as refused requests; an `auth`
//! whose authenticator was not resolved keeps the listener from starting.

use crate::common::*;
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_receiver::CorsConfig;
use profilink_receiver::auth::{
    AuthSettings, Authenticator, BearerTokenAuth, BearerTokenAuthConfig,
};
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, ReceiverError, Stats};
use prost::Message;
use std::sync::Arc;
use tonic::Code;
use tonic::metadata::MetadataValue;

fn authenticator(json: &str) -> (Option<AuthSettings>, Option<Authenticator>) {
    let config: BearerTokenAuthConfig = serde_json::from_str(json).unwrap();
    config.validate().unwrap();
    let auth = Arc::new(BearerTokenAuth::new(&config).unwrap());
    (
        Some(AuthSettings {
            authenticator: "bearertokenauth/in".into(),
        }),
        Some(Authenticator::new("bearertokenauth/in", auth)),
    )
}

#[tokio::test]
async fn grpc_auth_with_a_custom_header_and_scheme() {
    let (auth, authenticator) =
        authenticator(r#"{"tokens":["t1","t2"],"scheme":"Token","header":"X-Api-Key"}"#);
    let mut server = start_grpc(
        OtlpGrpcConfig {
            auth,
            authenticator,
            ..Default::default()
        },
        4,
    )
    .await;
    let channel = grpc_channel(server.addr).await;
    let mut client = ProfilesServiceClient::new(channel);
    let req = otlp_fixture("ebpf-profile.pb");
    let call = |value: Option<&'static str>| {
        let mut r = tonic::Request::new(req.clone());
        if let Some(v) = value {
            r.metadata_mut()
                .insert("x-api-key", MetadataValue::from_static(v));
        }
        r
    };
    let status = client.export(call(None)).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(
        status.message(),
        "missing or empty authorization header: x-api-key"
    );
    let status = client.export(call(Some("Token t3"))).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(!status.message().contains("t3"), "{}", status.message());
    assert_eq!(
        client
            .export(call(Some("Bearer t1")))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    server.assert_no_batch();
    client.export(call(Some("Token t2"))).await.expect("t2");
    server.next_batch().await;
    let s = server.stats.otlp_grpc.snapshot();
    assert_eq!((s.refused_requests, s.accepted_requests), (3, 1));
    server.stop().await;
}

#[tokio::test]
async fn http_auth_counts_refusals_and_cors_answers_preflights() {
    let (auth, authenticator) = authenticator(r#"{"token":"s3cret"}"#);
    let mut server = start_http(
        OtlpHttpConfig {
            auth,
            authenticator,
            cors: Some(CorsConfig {
                allowed_origins: vec!["http://*.localhost:3000".into()],
                allowed_headers: vec![],
                max_age: 0,
            }),
            ..Default::default()
        },
        4,
    )
    .await;
    let url = format!("http://{}/v1development/profiles", server.addr);
    let body = otlp_fixture("ebpf-profile.pb").encode_to_vec();
    let client = reqwest::Client::new();
    let post = |token: Option<&str>| {
        let mut r = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .header("origin", "http://ui.localhost:3000")
            .body(body.clone());
        if let Some(t) = token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r.send()
    };
    let r = post(None).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "http://ui.localhost:3000"
    );
    assert_eq!(post(Some("nope")).await.unwrap().status(), 401);
    server.assert_no_batch();
    let r = post(Some("s3cret")).await.unwrap();
    assert_eq!(r.status(), 200);
    server.next_batch().await;
    let s = server.stats.otlp_http.snapshot();
    assert_eq!((s.refused_requests, s.accepted_requests), (2, 1));

    // Preflight: answered without a token, not counted; default allowed headers.
    let r = client
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "http://ui.localhost:3000")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_lowercase();
    assert!(
        allowed.contains("content-type") && allowed.contains("x-requested-with"),
        "{allowed}"
    );
    assert!(!r.headers().contains_key("access-control-max-age"));
    let s = server.stats.otlp_http.snapshot();
    assert_eq!(s.refused_requests + s.accepted_requests, 3);
    server.stop().await;
}

#[tokio::test]
async fn without_cors_there_are_no_cors_headers() {
    let server = start_http(OtlpHttpConfig::default(), 4).await;
    let url = format!("http://{}/v1development/profiles", server.addr);
    let r = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, &url)
        .header("origin", "http://ui.localhost:3000")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    server.stop().await;
}

#[tokio::test]
async fn an_unresolved_authenticator_keeps_the_listener_from_starting() {
    let auth = Some(AuthSettings {
        authenticator: "bearertokenauth/missing".into(),
    });
    let (consumer, _batches) = profilink_consumer::ChannelConsumer::new(1);
    let consumer = Arc::new(consumer);
    let grpc = OtlpGrpcConfig {
        endpoint: "127.0.0.1:0".into(),
        auth: auth.clone(),
        ..Default::default()
    };
    let e = profilink_receiver::serve_otlp_grpc(
        &grpc,
        consumer.clone(),
        Arc::new(Stats::default()),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ReceiverError::Config(_)), "{e}");
    assert!(e.to_string().contains("bearertokenauth/missing"), "{e}");
    let http = OtlpHttpConfig {
        endpoint: "127.0.0.1:0".into(),
        auth,
        ..Default::default()
    };
    let e = profilink_receiver::serve_otlp_http(
        &http,
        consumer,
        Arc::new(Stats::default()),
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ReceiverError::Config(_)), "{e}");
}
