//! OTLP traces on the profiles listeners: tonic's generated `TraceServiceClient` (gzip) and
//! reqwest (protobuf and OTLP/JSON), refusal when the consumer takes no traces, partial
//! success for spans with bad ids.

use crate::common::*;
use profilink_proto::otlp::trace_service_client::TraceServiceClient;
use profilink_proto::otlp::{
    AnyValue, ExportTraceServiceRequest, ExportTraceServiceResponse, KeyValue, Resource,
    ResourceSpans, ScopeSpans, Span, any_value, span,
};
use profilink_proto::otlp_json;
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig};
use prost::Message;
use reqwest::StatusCode;
use std::sync::atomic::Ordering;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::metadata::MetadataValue;

fn span(seed: u8, name: &str) -> Span {
    Span {
        trace_id: vec![seed; 16],
        span_id: vec![seed.wrapping_add(1); 8],
        parent_span_id: vec![seed.wrapping_add(2); 8],
        name: name.into(),
        kind: span::SpanKind::Server as i32,
        start_time_unix_nano: 1_795_317_063_000_000_000,
        end_time_unix_nano: 1_795_317_063_250_000_000,
        attributes: vec![KeyValue {
            key: "thread.id".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(140_234)),
            }),
            key_strindex: 0,
        }],
        ..Span::default()
    }
}

/// Two resources, three valid spans.
fn request() -> ExportTraceServiceRequest {
    let resource = |name: &str| Resource {
        attributes: vec![KeyValue {
            key: "service.name".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(name.into())),
            }),
            key_strindex: 0,
        }],
        ..Resource::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![
            ResourceSpans {
                resource: Some(resource("api")),
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(1, "GET /users"), span(2, "SELECT")],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            },
            ResourceSpans {
                resource: Some(resource("worker")),
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(3, "job")],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            },
        ],
    }
}

/// The request with two invalid spans added (short trace id; long span id in a scope of its
/// own), and what the consumer should get: the original request.
fn request_with_bad_ids() -> (ExportTraceServiceRequest, ExportTraceServiceRequest) {
    let valid = request();
    let mut bad = valid.clone();
    let mut short_trace = span(4, "short trace id");
    short_trace.trace_id.truncate(15);
    bad.resource_spans[0].scope_spans[0]
        .spans
        .insert(1, short_trace);
    let mut long_span = span(5, "long span id");
    long_span.span_id.push(0);
    bad.resource_spans[1].scope_spans.push(ScopeSpans {
        spans: vec![long_span],
        ..ScopeSpans::default()
    });
    (bad, valid)
}

fn bearer<T>(message: T, token: &'static str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static(token));
    request
}

#[tokio::test]
async fn grpc_traces_reach_a_consumer_that_takes_them() {
    let mut server = start_grpc_with(OtlpGrpcConfig::default(), 8, true).await;
    let channel = grpc_channel(server.addr).await;
    let mut client = TraceServiceClient::new(channel)
        .send_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Gzip);
    let response = client
        .export(request())
        .await
        .expect("accepted")
        .into_inner();
    assert_eq!(response, ExportTraceServiceResponse::default());
    assert_eq!(traces_payload(server.next_batch().await), request());

    let (bad, valid) = request_with_bad_ids();
    let response = client
        .export(bad)
        .await
        .expect("partial success")
        .into_inner();
    let partial = response.partial_success.expect("partial success");
    assert_eq!(partial.rejected_spans, 2);
    assert!(
        partial
            .error_message
            .contains("resource_spans[0].scope_spans[0].spans[1]: trace_id is 15 bytes"),
        "{}",
        partial.error_message
    );
    assert!(
        partial
            .error_message
            .contains("resource_spans[1].scope_spans[1].spans[0]: span_id is 9 bytes"),
        "{}",
        partial.error_message
    );
    assert_eq!(traces_payload(server.next_batch().await), valid);

    // Only invalid spans: a partial success, nothing for the consumer.
    let mut only_bad = request();
    for rs in &mut only_bad.resource_spans {
        for ss in &mut rs.scope_spans {
            for s in &mut ss.spans {
                s.span_id.clear();
            }
        }
    }
    let response = client
        .export(only_bad)
        .await
        .expect("answered")
        .into_inner();
    assert_eq!(response.partial_success.unwrap().rejected_spans, 3);
    server.assert_no_batch();

    // Garbage is INVALID_ARGUMENT naming the message type.
    let status = grpc_raw_call(
        grpc_channel(server.addr).await,
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        b"\xff\xff\xff".to_vec(),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(
        status.message().contains("ExportTraceServiceRequest"),
        "{status:?}"
    );

    let c = &server.stats.otlp_grpc;
    assert_eq!(c.accepted_spans.load(Ordering::Relaxed), 6);
    assert_eq!(c.refused_spans.load(Ordering::Relaxed), 5);
    assert_eq!(c.accepted_requests.load(Ordering::Relaxed), 3);
    assert_eq!(c.refused_requests.load(Ordering::Relaxed), 1);
    assert_eq!(c.accepted_profiles.load(Ordering::Relaxed), 0);
    server.stop().await;
}

#[tokio::test]
async fn grpc_traces_are_unimplemented_without_a_traces_consumer() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 8).await;
    let channel = grpc_channel(server.addr).await;
    let mut client = TraceServiceClient::new(channel.clone());
    let status = client.export(request()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().contains("TraceService"), "{status:?}");
    server.assert_no_batch();
    // Not counted, like any unknown service.
    assert_eq!(
        server.stats.otlp_grpc.snapshot(),
        profilink_receiver::CountersSnapshot::default()
    );
    // Profiles still flow on the same server.
    let mut profiles =
        profilink_proto::otlp::profiles_service_client::ProfilesServiceClient::new(channel);
    profiles
        .export(otlp_fixture("ebpf-profile.pb"))
        .await
        .expect("profiles accepted");
    otlp_payload(server.next_batch().await);
    server.stop().await;
}

#[tokio::test]
async fn grpc_traces_need_the_bearer_token() {
    let config = OtlpGrpcConfig {
        bearer_token: Some("s3cret".into()),
        ..OtlpGrpcConfig::default()
    };
    let mut server = start_grpc_with(config, 8, true).await;
    let mut client = TraceServiceClient::new(grpc_channel(server.addr).await);
    let status = client.export(request()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let status = client
        .export(bearer(request(), "Bearer nope"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    server.assert_no_batch();
    client
        .export(bearer(request(), "Bearer s3cret"))
        .await
        .expect("authorized");
    assert_eq!(traces_payload(server.next_batch().await), request());
    assert_eq!(
        server
            .stats
            .otlp_grpc
            .refused_requests
            .load(Ordering::Relaxed),
        2
    );
    server.stop().await;
}

fn traces_url(server: &Running) -> String {
    format!("http://{}/v1/traces", server.addr)
}

#[tokio::test]
async fn http_traces_in_protobuf_and_json() {
    let mut server = start_http_with(OtlpHttpConfig::default(), 16, true).await;
    let client = reqwest::Client::new();
    let url = traces_url(&server);
    let proto = request().encode_to_vec();
    let json = otlp_json::encode_traces_request(&request());
    let cases = [
        ("application/x-protobuf", proto.clone(), None),
        ("application/x-protobuf", gzip(&proto), Some("gzip")),
        ("application/protobuf", zstd(&proto), Some("zstd")),
        ("application/json", json.clone(), None),
        ("application/json; charset=utf-8", gzip(&json), Some("gzip")),
    ];
    for (content_type, body, encoding) in cases {
        let r = post(&client, &url, content_type, encoding, body).await;
        assert_eq!(r.status(), StatusCode::OK, "{content_type} {encoding:?}");
        let media = content_type.split(';').next().unwrap();
        assert_eq!(r.headers()["content-type"], media);
        let body = r.bytes().await.unwrap();
        let response = if media == "application/json" {
            assert_eq!(&body[..], b"{}");
            otlp_json::decode_traces_response(&body).unwrap()
        } else {
            ExportTraceServiceResponse::decode(body).unwrap()
        };
        assert_eq!(response, ExportTraceServiceResponse::default());
        assert_eq!(traces_payload(server.next_batch().await), request());
    }

    // Partial success, answered in the request's format.
    let (bad, valid) = request_with_bad_ids();
    let r = post(
        &client,
        &url,
        "application/json",
        None,
        otlp_json::encode_traces_request(&bad),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(body["partialSuccess"]["rejectedSpans"], "2");
    assert!(
        body["partialSuccess"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("trace_id is 15 bytes"),
        "{body}"
    );
    assert_eq!(traces_payload(server.next_batch().await), valid);
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        None,
        bad.encode_to_vec(),
    )
    .await;
    let response = ExportTraceServiceResponse::decode(r.bytes().await.unwrap()).unwrap();
    assert_eq!(response.partial_success.unwrap().rejected_spans, 2);
    assert_eq!(traces_payload(server.next_batch().await), valid);

    // Invalid OTLP/JSON: 400 with a JSON google.rpc.Status naming the path.
    let r = post(
        &client,
        &url,
        "application/json",
        None,
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}"#.to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(body["code"], 3);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("resourceSpans[0].scopeSpans[0].spans[0].traceId"),
        "{body}"
    );
    // Other methods on the path: 405.
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "POST");
    server.assert_no_batch();

    let c = &server.stats.otlp_http;
    assert_eq!(c.accepted_spans.load(Ordering::Relaxed), 5 * 3 + 2 * 3);
    assert_eq!(c.refused_spans.load(Ordering::Relaxed), 4);
    assert_eq!(c.accepted_requests.load(Ordering::Relaxed), 7);
    assert_eq!(c.refused_requests.load(Ordering::Relaxed), 1);
    server.stop().await;
}

#[tokio::test]
async fn http_traces_are_404_without_a_traces_consumer() {
    let config = OtlpHttpConfig {
        bearer_token: Some("s3cret".into()),
        ..OtlpHttpConfig::default()
    };
    let mut server = start_http_with(config, 4, false).await;
    let client = reqwest::Client::new();
    let url = traces_url(&server);
    // 404 whatever the auth, method or body, as for a path that is not served.
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        None,
        request().encode_to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    server.assert_no_batch();
    assert_eq!(
        server.stats.otlp_http.snapshot(),
        profilink_receiver::CountersSnapshot::default()
    );
    server.stop().await;
}

#[tokio::test]
async fn http_traces_need_the_bearer_token() {
    let config = OtlpHttpConfig {
        bearer_token: Some("s3cret".into()),
        ..OtlpHttpConfig::default()
    };
    let mut server = start_http_with(config, 4, true).await;
    let client = reqwest::Client::new();
    let url = traces_url(&server);
    let r = post(
        &client,
        &url,
        "application/x-protobuf",
        None,
        request().encode_to_vec(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    server.assert_no_batch();
    let r = client
        .post(&url)
        .header("content-type", "application/x-protobuf")
        .header("authorization", "Bearer s3cret")
        .body(request().encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(traces_payload(server.next_batch().await), request());
    server.stop().await;
}
