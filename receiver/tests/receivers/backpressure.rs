//! A stalled pipeline (a channel of capacity 1 that nobody drains): every receiver pushes back
//! at once instead of buffering requests.

use crate::common::*;
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig};
use prost::Message;
use reqwest::StatusCode;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_types::StatusExt;

const CLIENTS: usize = 64;

#[tokio::test]
async fn stalled_consumer_gets_unavailable_and_503_quickly() {
    let req = otlp_fixture("ebpf-profile.pb");
    let proto = req.encode_to_vec();
    let (_, envelope) = envelope_fixtures().remove(0);

    let mut grpc = start_grpc(OtlpGrpcConfig::default(), 1).await;
    let mut http = start_http(OtlpHttpConfig::default(), 1).await;
    let mut sentry = start_sentry(SentryReceiverConfig::default(), 1).await;

    // One request each fills the channel.
    let channel = grpc_channel(grpc.addr).await;
    ProfilesServiceClient::new(channel.clone())
        .export(req.clone())
        .await
        .expect("first request fits");
    let client = reqwest::Client::new();
    let http_url = format!("http://{}/v1development/profiles", http.addr);
    let sentry_url = format!("http://{}/api/1/envelope/", sentry.addr);
    let r = client
        .post(&http_url)
        .header("content-type", "application/x-protobuf")
        .body(proto.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = client
        .post(&sentry_url)
        .header("x-sentry-auth", sdk_auth(KEY))
        .body(envelope.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CLIENTS {
        // gRPC: half on the shared connection, half on their own.
        let channel = if i % 2 == 0 {
            channel.clone()
        } else {
            grpc_channel(grpc.addr).await
        };
        let req = req.clone();
        tasks.spawn(async move {
            let status = ProfilesServiceClient::new(channel)
                .export(req)
                .await
                .expect_err("refused");
            assert_eq!(status.code(), Code::Unavailable, "{status:?}");
            let retry = status.get_details_retry_info().expect("RetryInfo");
            assert_eq!(retry.retry_delay, Some(Duration::from_secs(1)));
        });
        let (http_client, url, body) = (client.clone(), http_url.clone(), proto.clone());
        tasks.spawn(async move {
            let r = http_client
                .post(url)
                .header("content-type", "application/x-protobuf")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(r.headers()["retry-after"], "1");
        });
        let (client, url, body) = (client.clone(), sentry_url.clone(), envelope.clone());
        tasks.spawn(async move {
            let r = client
                .post(url)
                .header("x-sentry-auth", sdk_auth(KEY))
                .body(body)
                .send()
                .await
                .unwrap();
            // Relay's answer for a full pipeline: 503, never a category-less 429.
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(r.headers()["retry-after"], "1");
            assert!(r.headers().get("x-sentry-rate-limits").is_none());
        });
    }
    while let Some(result) = tasks.join_next().await {
        result.expect("client task");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    // Nothing was queued beyond the channel's one batch.
    for server in [&mut grpc, &mut http, &mut sentry] {
        assert_eq!(server.batches.len(), 1);
    }
    for counters in [
        &grpc.stats.otlp_grpc,
        &http.stats.otlp_http,
        &sentry.stats.sentry_http,
    ] {
        let s = counters.snapshot();
        assert_eq!(
            (s.accepted_requests, s.refused_requests),
            (1, CLIENTS as u64)
        );
    }
    // Drained, the pipeline takes requests again.
    grpc.next_batch().await;
    ProfilesServiceClient::new(channel)
        .export(req)
        .await
        .expect("accepted after draining");
    grpc.stop().await;
    http.stop().await;
    sentry.stop().await;
}
