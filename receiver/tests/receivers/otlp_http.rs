//! OTLP/HTTP with reqwest: protobuf and JSON bodies, gzip/zstd/deflate, and bad input.

use crate::common::*;
use crate::otlp_grpc::request_with_one_invalid_profile;
use profilink_consumer::{ReceiverKind, Transport};
use profilink_proto::otlp::ExportProfilesServiceResponse;
use profilink_proto::otlp_json;
use profilink_receiver::OtlpHttpConfig;
use prost::Message;
use reqwest::StatusCode;
use std::time::{Duration, Instant};

fn url(server: &Running) -> String {
    format!("http://{}/v1development/profiles", server.addr)
}

fn encode(encoding: Option<&str>, body: &[u8]) -> Vec<u8> {
    match encoding {
        None | Some("identity") => body.to_vec(),
        Some("gzip") => gzip(body),
        Some("zstd") => zstd(body),
        Some("deflate") => zlib(body),
        Some(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn http_delivers_protobuf_and_json_in_every_encoding() {
    let mut server = start_http(OtlpHttpConfig::default(), 64).await;
    let client = reqwest::Client::new();
    let url = url(&server);
    let mut requests = 0;
    for (name, proto_bytes, req) in otlp_fixtures() {
        let json_bytes = otlp_json::encode_request(&req);
        let cases = [
            ("application/x-protobuf", &proto_bytes, None),
            ("application/x-protobuf", &proto_bytes, Some("gzip")),
            ("application/x-protobuf", &proto_bytes, Some("zstd")),
            ("application/protobuf", &proto_bytes, Some("deflate")),
            ("application/json", &json_bytes, None),
            ("application/json; charset=utf-8", &json_bytes, Some("gzip")),
            ("application/json", &json_bytes, Some("zstd")),
        ];
        for (content_type, body, encoding) in cases {
            let response = post(
                &client,
                &url,
                content_type,
                encoding,
                encode(encoding, body),
            )
            .await;
            let what = format!("{name} {content_type} {encoding:?}");
            assert_eq!(response.status(), StatusCode::OK, "{what}");
            let response_type = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_string();
            let bytes = response.bytes().await.unwrap();
            if content_type.starts_with("application/json") {
                assert_eq!(response_type, "application/json", "{what}");
                assert_eq!(&bytes[..], b"{}", "{what}: full success is empty");
            } else {
                assert_eq!(response_type, content_type, "{what}");
                let decoded = ExportProfilesServiceResponse::decode(&bytes[..]).unwrap();
                assert_eq!(decoded.partial_success, None, "{what}");
            }
            let batch = server.next_batch().await;
            assert_eq!(
                (batch.receiver, batch.transport),
                (ReceiverKind::Otlp, Transport::Http)
            );
            assert_eq!(otlp_payload(batch), expected_data(&req), "{what}");
            requests += 1;
        }
    }
    let stats = server.stats.otlp_http.snapshot();
    assert_eq!(stats.accepted_requests, requests);
    assert_eq!(stats.refused_requests, 0);
    server.stop().await;
}

#[tokio::test]
async fn http_bad_bodies_are_400_with_a_status_in_the_request_format() {
    let mut server = start_http(OtlpHttpConfig::default(), 4).await;
    let client = reqwest::Client::new();
    let url = url(&server);

    // Garbage protobuf: a google.rpc.Status protobuf body.
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        None,
        b"\xff\xff garbage".to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.headers()["content-type"], "application/x-protobuf");
    let status = tonic_types::pb::Status::decode(r.bytes().await.unwrap()).unwrap();
    assert_eq!(status.code, 3);
    assert!(status.message.contains("decode"), "{}", status.message);

    // Truncated protobuf, gzip-compressed.
    let (_, bytes, _) = otlp_fixtures().remove(0);
    let truncated = gzip(&bytes[..bytes.len() / 2]);
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        Some("gzip"),
        truncated,
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Corrupt gzip.
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        Some("gzip"),
        b"not gzip".to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Invalid JSON: a JSON Status with the path of the problem.
    let r = post(
        &client,
        &url,
        "application/json",
        None,
        br#"{"resourceProfiles":[{"scopeProfiles":"nope"}]}"#.to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.headers()["content-type"], "application/json");
    let body: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(body["code"], 3);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("resourceProfiles[0].scopeProfiles"),
        "{message}"
    );

    // Unsupported encoding (the Collector answers 400).
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        Some("lz4"),
        bytes.clone(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    server.assert_no_batch();
    assert_eq!(server.stats.otlp_http.snapshot().refused_requests, 5);
    server.stop().await;
}

#[tokio::test]
async fn http_wrong_content_type_path_and_method() {
    let mut server = start_http(OtlpHttpConfig::default(), 4).await;
    let client = reqwest::Client::new();
    let (_, bytes, _) = otlp_fixtures().remove(0);
    let r = post(&client, &url(&server), "text/plain", None, bytes.clone()).await;
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let r = client
        .post(url(&server))
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let r = post(
        &client,
        &format!("http://{}/v1/traces", server.addr),
        "application/x-protobuf",
        None,
        bytes.clone(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client.get(url(&server)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "POST");
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn http_gzip_bomb_is_cut_off_with_413() {
    // 1 GiB of zeros in about 1 MiB of gzip; the limit is the default 64 MiB.
    let mut server = start_http(OtlpHttpConfig::default(), 4).await;
    let bomb = gzip_bomb(1 << 30);
    assert!(bomb.len() < 4 << 20, "{}", bomb.len());
    let client = reqwest::Client::new();
    let started = Instant::now();
    let r = post(
        &client,
        &url(&server),
        "application/x-protobuf",
        Some("gzip"),
        bomb,
    )
    .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let status = tonic_types::pb::Status::decode(r.bytes().await.unwrap()).unwrap();
    assert_eq!(status.code, tonic::Code::ResourceExhausted as i32);
    // Inflating all of it would take far longer (and 1 GiB of memory).
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn http_over_the_limit_is_413() {
    let config = OtlpHttpConfig {
        max_request_body_size_mib: 1,
        ..OtlpHttpConfig::default()
    };
    let mut server = start_http(config, 4).await;
    let client = reqwest::Client::new();
    let big = vec![7u8; (1 << 20) + 1];
    let r = post(
        &client,
        &url(&server),
        "application/x-protobuf",
        None,
        big.clone(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Compressed below the limit, above it once inflated.
    let r = post(
        &client,
        &url(&server),
        "application/json",
        Some("zstd"),
        zstd(&big),
    )
    .await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(body["code"], tonic::Code::ResourceExhausted as i32);
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn http_partial_success_in_protobuf_and_json() {
    let mut server = start_http(OtlpHttpConfig::default(), 4).await;
    let client = reqwest::Client::new();
    let (req, expected) = request_with_one_invalid_profile();

    let r = post(
        &client,
        &url(&server),
        "application/x-protobuf",
        None,
        req.encode_to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let response = ExportProfilesServiceResponse::decode(r.bytes().await.unwrap()).unwrap();
    let partial = response.partial_success.expect("partial success");
    assert_eq!(partial.rejected_profiles, 1);
    assert!(!partial.error_message.is_empty());
    assert_eq!(otlp_payload(server.next_batch().await), expected);

    let r = post(
        &client,
        &url(&server),
        "application/json",
        Some("gzip"),
        gzip(&otlp_json::encode_request(&req)),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let response = otlp_json::decode_response(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(
        response.partial_success.expect("partial").rejected_profiles,
        1
    );
    assert_eq!(otlp_payload(server.next_batch().await), expected);
    server.stop().await;
}

#[tokio::test]
async fn http_bearer_token() {
    let config = OtlpHttpConfig {
        bearer_token: Some("s3cret".into()),
        ..OtlpHttpConfig::default()
    };
    let mut server = start_http(config, 4).await;
    let client = reqwest::Client::new();
    let (_, bytes, _) = otlp_fixtures().remove(0);
    let r = post(
        &client,
        &url(&server),
        "application/x-protobuf",
        None,
        bytes.clone(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = client
        .post(url(&server))
        .header("content-type", "application/x-protobuf")
        .header("authorization", "Bearer wrong")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    server.assert_no_batch();
    let r = client
        .post(url(&server))
        .header("content-type", "application/x-protobuf")
        .header("authorization", "Bearer s3cret")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    server.next_batch().await;
    server.stop().await;
}
