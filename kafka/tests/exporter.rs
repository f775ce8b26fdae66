//! The kafka exporter against a real broker (Tansu, see `profilink_kafka::testing`): real eBPF
//! requests produced keyed per profiler session decode back as `ExportProfilesServiceRequest`s
//! holding exactly the input's resources and observations, every process under one non-empty
//! key (its profiler id) on one partition; unkeyed, one message per request as the Collector.

use profilink_kafka::testing::Broker;
use profilink_kafka::{KafkaExporter, KafkaExporterConfig};
use profilink_proto::otlp::{ExportProfilesServiceRequest, PROFILES_VERSION_HEADER};
use profilink_proto::signal::profile_counts;
use profilink_translator::otlp_to_sentry::resource_profiler_id;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

fn fixture(name: &str) -> ExportProfilesServiceRequest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/otlp")
        .join(name);
    ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

fn inputs() -> Vec<ExportProfilesServiceRequest> {
    ["ebpf-k8s-0.pb", "ebpf-k8s-1.pb", "ebpf-profile.pb"]
        .into_iter()
        .map(fixture)
        .collect()
}

async fn produce(broker: &Broker, topic: &str, keyed: bool) {
    produce_encoded(broker, topic, keyed, "otlp_proto").await
}

async fn produce_encoded(broker: &Broker, topic: &str, keyed: bool, encoding: &str) {
    let cfg: KafkaExporterConfig = serde_json::from_value(serde_json::json!({
        "brokers": [broker.address],
        "profiles": {"topic": topic, "encoding": encoding},
        "partition_profiles_by_session": keyed,
    }))
    .unwrap();
    let exporter = KafkaExporter::start(cfg, "profiles").await.unwrap();
    for req in inputs() {
        exporter.export_profiles(req).await.unwrap();
    }
    let m = exporter.metrics();
    exporter.shutdown(Duration::from_secs(30)).await;
    let s = m.snapshot();
    assert_eq!(s.dropped.iter().map(|(_, n)| n).sum::<u64>(), 0, "{s:?}");
}

/// (profiler id, encoded resource) of every resource of `reqs`, with its request's
/// dictionary encoded.
fn resources(reqs: &[ExportProfilesServiceRequest]) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out: Vec<_> = reqs
        .iter()
        .flat_map(|r| {
            r.resource_profiles.iter().map(|rp| {
                (
                    resource_profiler_id(r.dictionary.as_ref(), rp),
                    rp.encode_to_vec(),
                    r.dictionary
                        .as_ref()
                        .map(Message::encode_to_vec)
                        .unwrap_or_default(),
                )
            })
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_are_produced_keyed_per_session() {
    let Some(broker) = Broker::start() else {
        return;
    };
    broker.create_topic("otlp_profiles", 6);
    produce(&broker, "otlp_profiles", true).await;
    let messages = broker.read_all("otlp_profiles", 6, Duration::from_secs(3));
    assert!(!messages.is_empty());
    let mut got = Vec::new();
    let mut key_partitions: BTreeMap<Vec<u8>, BTreeSet<i32>> = BTreeMap::new();
    for (partition, _offset, key, headers, payload) in &messages {
        let req = ExportProfilesServiceRequest::decode(payload.as_slice())
            .expect("every message is an ExportProfilesServiceRequest");
        let key = key.clone().expect("every message is keyed");
        assert!(!key.is_empty());
        let version: Vec<_> = headers
            .iter()
            .filter(|(k, _)| k == PROFILES_VERSION_HEADER)
            .map(|(_, v)| v.as_slice())
            .collect();
        assert_eq!(version, [b"1".as_slice()], "the profiles version header");
        for rp in &req.resource_profiles {
            assert_eq!(
                resource_profiler_id(req.dictionary.as_ref(), rp).as_bytes(),
                key.as_slice(),
                "a process travels under its profiler id"
            );
        }
        key_partitions.entry(key).or_default().insert(*partition);
        got.push(req);
    }
    for (key, partitions) in &key_partitions {
        assert_eq!(
            partitions.len(),
            1,
            "key {key:?} on partitions {partitions:?}"
        );
    }
    let want = inputs();
    assert_eq!(
        resources(&got),
        resources(&want),
        "exactly the input's resources"
    );
    let samples = |r: &[ExportProfilesServiceRequest]| -> u64 {
        r.iter()
            .map(|x| profile_counts(&x.resource_profiles).samples)
            .sum()
    };
    assert_eq!(samples(&got), samples(&want));
    assert!(samples(&want) > 0);
    let sessions: BTreeSet<_> = resources(&want).into_iter().map(|r| r.0).collect();
    assert_eq!(key_partitions.len(), sessions.len(), "one key per session");
    assert!(sessions.len() > 1, "the fixtures hold several processes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_sends_one_message_per_request() {
    let Some(broker) = Broker::start() else {
        return;
    };
    broker.create_topic("unkeyed", 3);
    produce(&broker, "unkeyed", false).await;
    let messages = broker.read_all("unkeyed", 3, Duration::from_secs(3));
    assert_eq!(messages.len(), 3);
    let mut got: Vec<Vec<u8>> = messages.iter().map(|m| m.4.clone()).collect();
    assert!(messages.iter().all(|m| m.2.is_none()), "no key");
    let mut want: Vec<Vec<u8>> = inputs().iter().map(Message::encode_to_vec).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "each request as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_json_messages_decode_as_the_requests() {
    let Some(broker) = Broker::start() else {
        return;
    };
    broker.create_topic("json", 3);
    produce_encoded(&broker, "json", false, "otlp_json").await;
    let messages = broker.read_all("json", 3, Duration::from_secs(3));
    assert_eq!(messages.len(), 3);
    let mut got: Vec<Vec<u8>> = messages
        .iter()
        .map(|m| {
            assert_eq!(m.4.first(), Some(&b'{'), "an OTLP/JSON object");
            profilink_proto::otlp_json::decode_request(&m.4)
                .expect("OTLP/JSON request")
                .encode_to_vec()
        })
        .collect();
    let mut want: Vec<Vec<u8>> = inputs().iter().map(Message::encode_to_vec).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "each request as it was, through OTLP/JSON");
}
