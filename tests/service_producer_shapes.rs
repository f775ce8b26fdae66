//! Real producers' shapes through the real service (issue 43): one stray byte in a thread name
//! over OTLP/HTTP and OTLP/gRPC is accepted, every observation delivered, the name with U+FFFD,
//! the replacement counted; proto 1.9 requests (the eBPF fixture as Collectors up to v0.147
//! send it, async-profiler's own encoding) are read and counted by reason; async-profiler's
//! alloc profile is skipped, counted under its sample type.

#[path = "common/async_profiler.rs"]
mod async_profiler;
mod service_support;
#[path = "common/thread_name.rs"]
mod thread_name;

use async_profiler::Layout;
use profilink_proto::otlp::{
    EXPORT_PATH, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::wire::v1_9;
use prost::Message;
use service_support::raw_codec::RawCodec;
use service_support::*;
use std::collections::BTreeSet;
use std::time::Duration;
use thread_name::with_thread_name;
use tonic::Status;
use tonic::codegen::http::uri::PathAndQuery;

async fn grpc_raw(addr: &str, body: Vec<u8>) -> Result<ExportProfilesServiceResponse, Status> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(body),
        PathAndQuery::from_static(EXPORT_PATH),
        RawCodec,
    )
    .await
    .map(tonic::Response::into_inner)
}

async fn http_post(addr: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/v1development/profiles"))
        .header("content-type", "application/x-protobuf")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// The fixture from other processes (`tag`), its first thread name set to `name`.
fn named(tag: &str, name: &str) -> ExportProfilesServiceRequest {
    with_thread_name(&tagged(&otlp_fixture("ebpf-profile.pb"), tag), name)
}

/// [`named`] with `worker-X\xffZ-1` as the name: one invalid byte.
fn stray(tag: &str) -> Vec<u8> {
    let mut bytes = named(tag, "worker-XYZ-1").encode_to_vec();
    let pos = bytes
        .windows(12)
        .position(|w| w == b"worker-XYZ-1")
        .unwrap();
    bytes[pos + 8] = 0xff;
    bytes
}

/// Samples of the chunks whose profiler is one of `req`'s.
fn samples_of(chunks: &[ProfileChunk], req: &ExportProfilesServiceRequest) -> usize {
    let ids: BTreeSet<String> = expected_chunks(req)
        .into_iter()
        .map(|c| c.profiler_id)
        .collect();
    chunks
        .iter()
        .filter(|c| ids.contains(&c.profiler_id))
        .map(|c| c.profile.samples.len())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_as_they_send_are_accepted_over_grpc_and_http() {
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
    let receivers = format!(
        r#"otlp: {{ protocols: {{ grpc: {{ endpoint: "{grpc}" }}, http: {{ endpoint: "{http}" }} }} }}"#
    );
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &to_sentry_config(&receivers, "otlp", &metrics),
    );
    let dsn = standin.dsn();
    let mut process = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("TEST_SENTRY_DSN", Some(&dsn))],
    );
    process.wait_port(&grpc, Duration::from_secs(20));
    process.wait_port(&http, Duration::from_secs(20));
    process.wait_port(&metrics, Duration::from_secs(20));

    // The same content sent valid (the name already with U+FFFD) and with one stray byte.
    grpc_export(&grpc, named("clean", "worker-X\u{FFFD}Z-1")).await;
    let (status, body) = http_post(&http, stray("http")).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let response = grpc_raw(&grpc, stray("grpc"))
        .await
        .expect("gRPC accepts it");
    assert!(response.partial_success.is_none(), "{response:?}");

    // proto 1.9: the eBPF fixture as a Collector up to v0.147 sends it (decode error as
    // 1.10), and async-profiler's itimer and alloc profiles (inconsistent as 1.10).
    let old = tagged(&otlp_fixture("ebpf-profile.pb"), "v19");
    grpc_raw(&grpc, v1_9::encode(&old))
        .await
        .expect("1.9 over gRPC");
    let samples = async_profiler::aggregate(&otlp_fixture("ebpf-profile.pb"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let itimer = async_profiler::encode(
        &samples,
        "itimer",
        "count",
        now - 10_000_000_000,
        10_000_000_000,
        Layout::V1_9,
    );
    let ap_ids: BTreeSet<String> =
        profilink_translator::otlp_bytes_to_chunks(&itimer, &Default::default())
            .unwrap()
            .chunks
            .into_iter()
            .map(|c| c.profiler_id)
            .collect();
    assert_eq!(ap_ids.len(), 1);
    let (status, body) = http_post(&http, itimer).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let alloc = async_profiler::encode(
        &samples,
        "alloc_tracer",
        "bytes",
        now - 10_000_000_000,
        10_000_000_000,
        Layout::V1_9,
    );
    let (status, body) = http_post(&http, alloc).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    let clean = named("clean", "worker-X\u{FFFD}Z-1");
    let (http_req, grpc_req) = (named("http", "x"), named("grpc", "x"));
    let done = |chunks: &[ProfileChunk]| {
        let want = samples_of(chunks, &clean);
        want > 0
            && samples_of(chunks, &http_req) == want
            && samples_of(chunks, &grpc_req) == want
            && samples_of(chunks, &old) > 0
            && chunks
                .iter()
                .any(|c| ap_ids.contains(&c.profiler_id) && !c.profile.samples.is_empty())
    };
    let arrived = standin.wait_for(Duration::from_secs(30), done).await;
    assert!(
        arrived,
        "not everything arrived; stderr:\n{}",
        process.stderr()
    );
    // Nothing more comes for any of them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let chunks = standin.chunks();
    assert!(done(&chunks));
    let clean_samples = samples_of(&chunks, &clean);
    assert_eq!(samples_of(&chunks, &named("http", "x")), clean_samples);
    assert_eq!(samples_of(&chunks, &named("grpc", "x")), clean_samples);
    assert!(chunks.iter().any(|c| {
        c.profile
            .thread_metadata
            .values()
            .any(|t| t.name.as_deref() == Some("worker-X\u{FFFD}Z-1"))
    }));

    assert_eq!(
        metric(
            &metrics,
            "profilink_otlp_decode_utf8_replacements_total",
            &[]
        )
        .await,
        2
    );
    assert_eq!(
        metric(
            &metrics,
            "profilink_otlp_decode_layout_1_9_total",
            &[("reason", "decode_error")]
        )
        .await,
        1
    );
    assert_eq!(
        metric(
            &metrics,
            "profilink_otlp_decode_layout_1_9_total",
            &[("reason", "inconsistent")]
        )
        .await,
        2
    );
    assert_eq!(
        metric(
            &metrics,
            "profilink_translation_skipped_profiles_total",
            &[("sample_type", "alloc_tracer:bytes")]
        )
        .await,
        1
    );
    let stderr = process.stderr();
    assert!(stderr.contains("proto 1.9 Sample layout"), "{stderr}");
}
