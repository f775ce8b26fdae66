//! OTLP/gRPC with tonic's generated client and a raw-bytes client.

use crate::common::*;
use profilink_consumer::{ReceiverKind, Transport};
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesData, data_from_request};
use profilink_receiver::OtlpGrpcConfig;
use prost::Message;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::metadata::MetadataValue;

#[tokio::test]
async fn grpc_delivers_every_fixture_plain_gzip_and_zstd() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 16).await;
    let channel = grpc_channel(server.addr).await;
    let encodings = [
        None,
        Some(CompressionEncoding::Gzip),
        Some(CompressionEncoding::Zstd),
    ];
    let mut sent_profiles = 0;
    for (name, _, req) in otlp_fixtures() {
        for encoding in encodings {
            let mut client = ProfilesServiceClient::new(channel.clone());
            if let Some(e) = encoding {
                client = client.send_compressed(e).accept_compressed(e);
            }
            let response = client
                .export(req.clone())
                .await
                .unwrap_or_else(|s| panic!("{name} {encoding:?}: {s:?}"))
                .into_inner();
            assert_eq!(response.partial_success, None, "{name}: full success");
            let batch = server.next_batch().await;
            assert_eq!(
                (batch.receiver, batch.transport),
                (ReceiverKind::Otlp, Transport::Grpc)
            );
            let expected = expected_data(&req);
            let counts = profilink_proto::signal::profile_counts(&expected.resource_profiles);
            let (profiles, samples) = (counts.items, counts.samples);
            assert!(profiles > 0 && samples > 0, "{name}");
            assert_eq!(
                (batch.profiles, batch.samples),
                (profiles, samples),
                "{name}"
            );
            sent_profiles += profiles;
            assert_eq!(otlp_payload(batch), expected, "{name} {encoding:?}");
        }
    }
    let stats = server.stats.otlp_grpc.snapshot();
    assert_eq!(stats.accepted_profiles, sent_profiles);
    assert_eq!(stats.accepted_requests, 12);
    assert_eq!(stats.refused_requests, 0);
    server.stop().await;
}

#[tokio::test]
async fn grpc_accepts_a_40_mib_request() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 1).await;
    // Replicate the fixture's samples: every timestamp list repeated until the request is over
    // 40 MiB (packed fixed64, cheap to decode even in an unoptimized test build).
    let mut req = otlp_fixture("ebpf-profile.pb");
    let timestamps: usize = req
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .flat_map(|p| &p.samples)
        .map(|s| s.timestamps_unix_nano.len())
        .sum();
    let factor = (40 * 1024 * 1024) / (8 * timestamps) + 1;
    for sample in req
        .resource_profiles
        .iter_mut()
        .flat_map(|rp| &mut rp.scope_profiles)
        .flat_map(|sp| &mut sp.profiles)
        .flat_map(|p| &mut p.samples)
    {
        assert!(sample.values.is_empty());
        sample.timestamps_unix_nano = sample.timestamps_unix_nano.repeat(factor);
    }
    let size = req.encoded_len();
    assert!((40 << 20..64 << 20).contains(&size), "{size}");
    let mut client = ProfilesServiceClient::new(grpc_channel(server.addr).await);
    let response = client.export(req.clone()).await.expect("accepted");
    assert_eq!(response.into_inner().partial_success, None);
    let batch = server.next_batch().await;
    assert_eq!(batch.samples, (timestamps * factor) as u64);
    assert_eq!(otlp_payload(batch), data_from_request(req));
    server.stop().await;
}

#[tokio::test]
async fn grpc_garbage_and_truncated_messages_are_invalid_argument() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 4).await;
    let channel = grpc_channel(server.addr).await;
    let garbage = b"\xff\xff\xff\xff this is not protobuf".to_vec();
    let status = grpc_raw_export(channel.clone(), garbage, None)
        .await
        .expect_err("garbage refused");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("decode"), "{status:?}");

    let (_, bytes, _) = otlp_fixtures().remove(0);
    let truncated = bytes[..bytes.len() / 2].to_vec();
    for compression in [None, Some(CompressionEncoding::Gzip)] {
        let status = grpc_raw_export(channel.clone(), truncated.clone(), compression)
            .await
            .expect_err("truncated refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    }
    // The same bytes whole are fine through the raw client.
    grpc_raw_export(channel, bytes, None).await.expect("valid");
    server.next_batch().await;
    server.assert_no_batch();
    let stats = server.stats.otlp_grpc.snapshot();
    assert_eq!((stats.refused_requests, stats.accepted_requests), (3, 1));
    server.stop().await;
}

#[tokio::test]
async fn grpc_over_the_limit_is_resource_exhausted() {
    let config = OtlpGrpcConfig {
        max_recv_msg_size_mib: 1,
        ..OtlpGrpcConfig::default()
    };
    let mut server = start_grpc(config, 4).await;
    let channel = grpc_channel(server.addr).await;
    // Uncompressed: refused from the frame header.
    let big = vec![0u8; 2 << 20];
    let status = grpc_raw_export(channel.clone(), big, None)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    // Compressed: small on the wire, cut off while inflating.
    let bomb = vec![0u8; 16 << 20];
    let status = grpc_raw_export(channel, bomb, Some(CompressionEncoding::Gzip))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    server.assert_no_batch();
    server.stop().await;
}

/// Removes `resource_profiles[r].scope_profiles[s].profiles[p]` and what it leaves empty.
pub fn without_profile(data: &ProfilesData, r: usize, s: usize, p: usize) -> ProfilesData {
    let mut out = data.clone();
    out.resource_profiles[r].scope_profiles[s]
        .profiles
        .remove(p);
    out.resource_profiles[r]
        .scope_profiles
        .retain(|sp| !sp.profiles.is_empty());
    out.resource_profiles
        .retain(|rp| !rp.scope_profiles.is_empty());
    out
}

/// A fixture with one profile broken (a sample's stack index past the stack table).
pub fn request_with_one_invalid_profile() -> (ExportProfilesServiceRequest, ProfilesData) {
    let mut req = otlp_fixture("ebpf-k8s-0.pb");
    let total: usize = req
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .map(|sp| sp.profiles.len())
        .sum();
    assert!(total >= 2, "needs several profiles");
    let profile = &mut req.resource_profiles[0].scope_profiles[0].profiles[0];
    profile.samples[0].stack_index = 1_000_000;
    let expected = without_profile(&data_from_request(req.clone()), 0, 0, 0);
    (req, expected)
}

#[tokio::test]
async fn grpc_partial_success_rejects_only_the_invalid_profile() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 4).await;
    let (req, expected) = request_with_one_invalid_profile();
    let mut client = ProfilesServiceClient::new(grpc_channel(server.addr).await);
    let response = client.export(req).await.expect("accepted").into_inner();
    let partial = response.partial_success.expect("partial success");
    assert_eq!(partial.rejected_profiles, 1);
    assert!(
        partial.error_message.contains("stack_index"),
        "{}",
        partial.error_message
    );
    assert_eq!(otlp_payload(server.next_batch().await), expected);
    let stats = server.stats.otlp_grpc.snapshot();
    assert_eq!(stats.refused_profiles, 1);
    server.stop().await;
}

#[tokio::test]
async fn grpc_broken_dictionary_refuses_the_request() {
    let mut server = start_grpc(OtlpGrpcConfig::default(), 4).await;
    let mut req = otlp_fixture("ebpf-profile.pb");
    if let Some(d) = req.dictionary.as_mut() {
        // A location's mapping outside the mapping table: nothing can be read.
        let n = d.mapping_table.len() as i32;
        d.location_table[1].mapping_index = n + 7;
    }
    let mut client = ProfilesServiceClient::new(grpc_channel(server.addr).await);
    let status = client.export(req).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("dictionary"), "{status:?}");
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn grpc_bearer_token_and_unknown_method() {
    let config = OtlpGrpcConfig {
        bearer_token: Some("s3cret".into()),
        ..OtlpGrpcConfig::default()
    };
    let mut server = start_grpc(config, 4).await;
    let channel = grpc_channel(server.addr).await;
    let req = otlp_fixture("ebpf-profile.pb");
    let mut client = ProfilesServiceClient::new(channel.clone());
    let status = client.export(req.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    let mut wrong = tonic::Request::new(req.clone());
    wrong
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer nope"));
    assert_eq!(
        client.export(wrong).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    server.assert_no_batch();
    let mut right = tonic::Request::new(req);
    right
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer s3cret"));
    client.export(right).await.expect("authorized");
    server.next_batch().await;

    let status = grpc_raw_call(
        channel,
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Nope",
        Vec::new(),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    server.stop().await;
}
