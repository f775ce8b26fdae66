//! Time-aligned consumption against a real broker (Tansu): a backlog whose partitions were
//! written one after the other reaches the pipeline in timestamp order across partitions,
//! and a partition running ahead is paused and resumed without losing or repeating a message.

use profilink_consumer::{Batch, ConsumeError, Consumer, Payload};
use profilink_kafka::testing::Broker;
use profilink_kafka::{KafkaReceiver, KafkaReceiverConfig, KafkaReceiverMetrics};
use profilink_proto::otlp::{AnyValue, ExportProfilesServiceRequest, KeyValue, any_value};
use profilink_receiver::Stats;
use prost::Message;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TAG: &str = "test.ts";
const PARTITIONS: i32 = 3;
const PER_PARTITION: i64 = 12;

/// The fixture with the message's timestamp as a resource attribute.
fn message(ts: i64) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/otlp/ebpf-k8s-0.pb");
    let mut req =
        ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap();
    req.resource_profiles.truncate(1);
    req.resource_profiles[0]
        .resource
        .get_or_insert_with(Default::default)
        .attributes
        .push(KeyValue {
            key: TAG.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(ts)),
            }),
            ..Default::default()
        });
    req.encode_to_vec()
}

/// The timestamps of what it took, in the order it took them.
#[derive(Default)]
struct Order(Mutex<Vec<i64>>);

impl Consumer for Order {
    fn consume(&self, batch: Batch) -> impl Future<Output = Result<(), ConsumeError>> + Send {
        let Payload::Otlp(data) = &batch.payload else {
            panic!("profiles expected")
        };
        let ts = data
            .resource_profiles
            .iter()
            .flat_map(|rp| rp.resource.iter().flat_map(|r| r.attributes.iter()))
            .find(|kv| kv.key == TAG)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::IntValue(v) => Some(*v),
                _ => None,
            })
            .expect("tagged");
        self.0.lock().unwrap().push(ts);
        std::future::ready(Ok(()))
    }
}

/// Message `j` of partition `p` has timestamp `T0 + (j * PARTITIONS + p) * 1000` ms: read in
/// time order, the partitions interleave. Partition 0 is written first, whole, then 1, then 2.
async fn produce_partition_by_partition(broker: &Broker, topic: &str) -> (Vec<i64>, usize) {
    const T0: i64 = 1_780_000_000_000;
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .set("message.max.bytes", "16000000")
        .create()
        .unwrap();
    let mut all = Vec::new();
    let mut size = 0;
    for partition in 0..PARTITIONS {
        for j in 0..PER_PARTITION {
            let ts = T0 + (j * PARTITIONS as i64 + partition as i64) * 1000;
            let payload = message(ts);
            size = payload.len();
            p.send(
                FutureRecord::<(), _>::to(topic)
                    .partition(partition)
                    .timestamp(ts)
                    .payload(payload.as_slice()),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
            all.push(ts);
        }
    }
    all.sort_unstable();
    (all, size)
}

fn config(broker: &Broker, topic: &str, alignment: serde_json::Value) -> KafkaReceiverConfig {
    serde_json::from_value(serde_json::json!({
        "brokers": [broker.address],
        "group_id": format!("g-{topic}"),
        "initial_offset": "earliest",
        "profiles": {"topics": [topic]},
        "autocommit": {"interval": "200ms"},
        "alignment": alignment,
    }))
    .unwrap()
}

/// Reads `topic` with `cfg` until `n` messages were taken; their timestamps in order.
async fn read(cfg: KafkaReceiverConfig, n: usize) -> (Vec<i64>, Arc<KafkaReceiverMetrics>) {
    let order = Arc::new(Order::default());
    let metrics = Arc::new(KafkaReceiverMetrics::default());
    let r = KafkaReceiver::start(
        cfg,
        order.clone(),
        Arc::new(Stats::default()),
        metrics.clone(),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while order.0.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "timed out: {:?}", order.0.lock());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Nothing more arrives (no message twice).
    tokio::time::sleep(Duration::from_millis(500)).await;
    r.shutdown(Duration::from_secs(10)).await;
    let got = order.0.lock().unwrap().clone();
    (got, metrics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_written_partition_by_partition_is_read_in_time_order() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let topic = "aligned";
    broker.create_topic(topic, PARTITIONS as u32);
    let (want, size) = produce_partition_by_partition(&broker, topic).await;
    // Each lane may hold about two messages before its partition is paused.
    let max = (size * 2 * PARTITIONS as usize) as u64;
    let cfg = config(
        &broker,
        topic,
        serde_json::json!({"max_wait": "5s", "max_buffered_bytes": max}),
    );
    let (got, metrics) = read(cfg, want.len()).await;
    assert_eq!(got, want, "every message once, in timestamp order");
    assert!(
        KafkaReceiverMetrics::get(&metrics.alignment_holds) > 0,
        "a partition ran ahead and was paused"
    );

    // The same backlog unaligned comes in partition runs: the order above is alignment's.
    let unaligned = config(&broker, topic, serde_json::json!({"enabled": false}));
    let unaligned = KafkaReceiverConfig {
        group_id: "g-unaligned".into(),
        ..unaligned
    };
    let (got, _) = read(unaligned, want.len()).await;
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, want, "every message once");
    assert_ne!(got, want, "unaligned, the partitions do not interleave");
}
