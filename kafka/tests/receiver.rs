//! The kafka receiver against a real broker (Tansu): a consumer group member hands every
//! message to the pipeline once, waits out a full pipeline without dropping anything, skips
//! (and counts) a message that does not decode without blocking its partition, and commits
//! offsets up to the end of every partition.

use profilink_consumer::{Batch, ConsumeError, Consumer, Payload};
use profilink_kafka::testing::Broker;
use profilink_kafka::{KafkaReceiver, KafkaReceiverConfig, KafkaReceiverMetrics};
use profilink_proto::otlp::{AnyValue, ExportProfilesServiceRequest, KeyValue, any_value};
use profilink_receiver::Stats;
use prost::Message;
use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TAG: &str = "test.message";

fn fixture(name: &str) -> ExportProfilesServiceRequest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/otlp")
        .join(name);
    ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

fn tagged(req: &ExportProfilesServiceRequest, tag: &str) -> ExportProfilesServiceRequest {
    let mut req = req.clone();
    for rp in &mut req.resource_profiles {
        rp.resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(KeyValue {
                key: TAG.into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(tag.into())),
                }),
                ..Default::default()
            });
    }
    req
}

/// Records what it takes (observations per message tag); answers `Full` to the first
/// `full_first` batches.
#[derive(Default)]
struct Recorder {
    samples: Mutex<BTreeMap<String, u64>>,
    batches: AtomicU64,
    full_first: AtomicU64,
    refused: AtomicU64,
}

impl Consumer for Recorder {
    fn consume(&self, batch: Batch) -> impl Future<Output = Result<(), ConsumeError>> + Send {
        let full = self
            .full_first
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if full {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return std::future::ready(Err(ConsumeError::Full {
                retry_after: Duration::from_millis(50),
            }));
        }
        let Payload::Otlp(data) = &batch.payload else {
            panic!("profiles expected")
        };
        let tag = data
            .resource_profiles
            .iter()
            .flat_map(|rp| rp.resource.iter().flat_map(|r| r.attributes.iter()))
            .find(|kv| kv.key == TAG)
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        *self.samples.lock().unwrap().entry(tag).or_default() += batch.samples;
        self.batches.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

async fn produce(broker: &Broker, topic: &str, messages: &[(String, Vec<u8>)]) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .create()
        .unwrap();
    for (key, payload) in messages {
        p.send(
            FutureRecord::to(topic)
                .key(key.as_str())
                .payload(payload.as_slice()),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    }
}

fn receiver_config(broker: &Broker, topic: &str, group: &str) -> KafkaReceiverConfig {
    serde_json::from_value(serde_json::json!({
        "brokers": [broker.address],
        "group_id": group,
        "initial_offset": "earliest",
        "profiles": {"topics": [topic]},
        "autocommit": {"interval": "200ms"},
        "message_marking": {"on_permanent_error": true},
    }))
    .unwrap()
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_once_through_backpressure_and_a_bad_message() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let topic = "otlp_profiles";
    broker.create_topic(topic, 3);
    let base = fixture("ebpf-k8s-0.pb");
    let per_message = profilink_proto::signal::profile_counts(&base.resource_profiles).samples;
    assert!(per_message > 0);
    let mut messages: Vec<(String, Vec<u8>)> = (0..30)
        .map(|i| {
            (
                format!("k{}", i % 7),
                tagged(&base, &format!("m{i}")).encode_to_vec(),
            )
        })
        .collect();
    // Not a protobuf request: skipped and counted, never blocking its partition.
    messages.insert(10, ("k3".into(), b"\xff\xff\xff not protobuf".to_vec()));
    produce(&broker, topic, &messages).await;

    let recorder = Arc::new(Recorder {
        full_first: AtomicU64::new(5),
        ..Default::default()
    });
    let stats = Arc::new(Stats::default());
    let metrics = Arc::new(KafkaReceiverMetrics::default());
    let receiver = KafkaReceiver::start(
        receiver_config(&broker, topic, "g1"),
        recorder.clone(),
        stats.clone(),
        metrics.clone(),
    )
    .unwrap();
    wait_for("every message", Duration::from_secs(60), || {
        recorder.batches.load(Ordering::SeqCst) >= 30
    })
    .await;
    // Committed offsets reach the end of every partition (ends from the topic itself).
    let ends = {
        let all = broker.read_all(topic, 3, Duration::from_secs(2));
        assert_eq!(all.len(), 31);
        let mut ends = vec![0i64; 3];
        for m in &all {
            ends[m.0 as usize] = ends[m.0 as usize].max(m.1 + 1);
        }
        ends
    };
    let mut committed = Vec::new();
    wait_for(
        "offsets committed to the end",
        Duration::from_secs(20),
        || {
            committed = broker.committed("g1", topic, 3);
            committed == ends
        },
    )
    .await;
    assert_eq!(committed, ends);
    receiver.shutdown(Duration::from_secs(10)).await;

    let got = recorder.samples.lock().unwrap().clone();
    assert_eq!(got.len(), 30, "{got:?}");
    for i in 0..30 {
        assert_eq!(
            got.get(&format!("m{i}")),
            Some(&per_message),
            "message m{i} once"
        );
    }
    assert_eq!(recorder.refused.load(Ordering::SeqCst), 5);
    assert!(KafkaReceiverMetrics::get(&metrics.pauses) >= 1);
    assert_eq!(
        KafkaReceiverMetrics::get(&metrics.unmarshal_failed_profiles),
        1
    );
    assert_eq!(KafkaReceiverMetrics::get(&metrics.skipped), 1);
    let s = stats.kafka.snapshot();
    assert_eq!(s.accepted_samples, 30 * per_message);
    assert_eq!(s.refused_requests, 1, "the bad message");
    let partitions = metrics.partitions();
    assert_eq!(partitions.values().map(|p| p.messages).sum::<u64>(), 31);
}

/// The brokers vanish under a running receiver holding marked, uncommitted offsets: its
/// shutdown still ends within the deadline, and so does the runtime it ran on. The final
/// commit and the close wait for a broker (the commit for about 20 s; the close, polling
/// librdkafka's close queue in the consumer's drop, possibly forever), and on a runtime worker
/// they held the shutdown past its deadline. The runtime runs on a thread of its own so that
/// a hang fails this test instead of hanging the suite.
#[test]
fn a_receiver_whose_broker_vanished_still_stops() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let topic = "vanishing";
    broker.create_topic(topic, 2);
    let mut cfg = receiver_config(&broker, topic, "g-vanish");
    cfg.autocommit.interval = Duration::from_secs(3600);
    let payload = fixture("ebpf-k8s-0.pb").encode_to_vec();
    for _ in 0..4 {
        broker.produce_raw(topic, &payload);
    }
    let recorder = Arc::new(Recorder::default());
    let rec = recorder.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (assigned_tx, assigned_rx) = std::sync::mpsc::channel();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let took = rt.block_on(async move {
            let metrics = Arc::new(KafkaReceiverMetrics::default());
            let r = KafkaReceiver::start(
                cfg,
                rec.clone(),
                Arc::new(Stats::default()),
                metrics.clone(),
            )
            .unwrap();
            wait_for("the messages taken", Duration::from_secs(30), || {
                rec.batches.load(Ordering::SeqCst) >= 4
            })
            .await;
            assigned_tx.send(()).unwrap();
            // The broker is killed now.
            tokio::task::spawn_blocking(move || kill_rx.recv())
                .await
                .unwrap()
                .unwrap();
            let started = Instant::now();
            let stopping = tokio::spawn(r.shutdown(Duration::from_secs(3)));
            // The pipeline is let go at once, while the close still waits for a broker (the
            // service flushes the exporters behind it only once nothing else holds it).
            let released_at = {
                let deadline = Instant::now() + Duration::from_secs(2);
                loop {
                    // This thread's `rec` and the test's `recorder` are the only others.
                    if Arc::strong_count(&rec) == 2 || Instant::now() > deadline {
                        break started.elapsed();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            stopping.await.unwrap();
            (started.elapsed(), released_at, Arc::strong_count(&rec))
        });
        drop(rt);
        let _ = done_tx.send(took);
    });
    assigned_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("assigned");
    drop(broker);
    kill_tx.send(()).unwrap();
    let (took, released_at, holders) = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the receiver and its runtime ended after the broker vanished");
    assert!(took < Duration::from_secs(10), "shutdown took {took:?}");
    assert!(
        released_at < Duration::from_secs(2) && holders == 2,
        "the pipeline was held {released_at:?} into the shutdown ({holders} holders)"
    );
    drop(recorder);
}

/// A third member joins mid-stream: the group rebalances (cooperative-sticky: only the moving
/// partitions stop), nothing is lost, and the only messages delivered twice are re-deliveries
/// of messages not yet committed when their partition moved (counted and printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_member_joins_mid_stream_nothing_lost() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let topic = "rebalanced";
    broker.create_topic(topic, 6);
    let base = fixture("ebpf-profile.pb");
    let start_member = |recorder: &Arc<Recorder>| {
        let metrics = Arc::new(KafkaReceiverMetrics::default());
        let r = KafkaReceiver::start(
            receiver_config(&broker, topic, "g3"),
            recorder.clone(),
            Arc::new(Stats::default()),
            metrics.clone(),
        )
        .unwrap();
        (r, metrics)
    };
    let recorders: Vec<Arc<Recorder>> = (0..3).map(|_| Arc::new(Recorder::default())).collect();
    let mut members = vec![start_member(&recorders[0]), start_member(&recorders[1])];
    wait_for("two members assigned", Duration::from_secs(30), || {
        members
            .iter()
            .all(|(_, m)| KafkaReceiverMetrics::get(&m.partition_start) > 0)
    })
    .await;
    // Messages go on until the third member has had partitions for 30 more messages (at
    // least 60 in all): the group takes ~20 s to settle with Tansu, and a fixed count ended
    // before that, leaving the newcomer nothing to take.
    let mut total = 0;
    let mut joined_at = None;
    let mut rebalance_time = None;
    let mut assigned_at_message = None;
    loop {
        let i = total;
        let payload = tagged(&base, &format!("m{i}")).encode_to_vec();
        produce(&broker, topic, &[(format!("k{i}"), payload)]).await;
        total += 1;
        if i == 20 {
            members.push(start_member(&recorders[2]));
            joined_at = Some(Instant::now());
        }
        if rebalance_time.is_none()
            && let (Some(at), Some((_, m))) = (joined_at, members.get(2))
            && KafkaReceiverMetrics::get(&m.partition_start) > 0
        {
            rebalance_time = Some(at.elapsed());
            assigned_at_message = Some(total);
        }
        if total >= 60 && assigned_at_message.is_some_and(|a| total >= a + 30) {
            break;
        }
        assert!(
            total < 1200,
            "the third member got no partitions in 2 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = || -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        for r in &recorders {
            for (tag, n) in r.samples.lock().unwrap().iter() {
                *all.entry(tag.clone()).or_default() += n;
            }
        }
        all
    };
    wait_for("every message", Duration::from_secs(60), || {
        seen().len() == total
    })
    .await;
    wait_for("the third member assigned", Duration::from_secs(30), || {
        KafkaReceiverMetrics::get(&members[2].1.partition_start) > 0
    })
    .await;
    let rebalance_time = rebalance_time.unwrap_or_else(|| joined_at.unwrap().elapsed());
    let all = broker.read_all(topic, 6, Duration::from_secs(2));
    let mut ends = vec![0i64; 6];
    for m in &all {
        ends[m.0 as usize] = ends[m.0 as usize].max(m.1 + 1);
    }
    wait_for(
        "offsets committed to the end",
        Duration::from_secs(20),
        || broker.committed("g3", topic, 6) == ends,
    )
    .await;
    let per_message = profilink_proto::signal::profile_counts(&base.resource_profiles).samples;
    let seen = seen();
    let mut redelivered = 0;
    for i in 0..total {
        let n = seen.get(&format!("m{i}")).copied().unwrap_or(0);
        assert!(n >= per_message, "message m{i} lost");
        assert_eq!(n % per_message, 0);
        redelivered += n / per_message - 1;
    }
    let took: Vec<u64> = recorders
        .iter()
        .map(|r| r.batches.load(Ordering::SeqCst))
        .collect();
    assert!(took[2] > 0, "the third member took nothing: {took:?}");
    let released: u64 = members
        .iter()
        .map(|(_, m)| KafkaReceiverMetrics::get(&m.released))
        .sum();
    let rebalances: u64 = members
        .iter()
        .map(|(_, m)| KafkaReceiverMetrics::get(&m.rebalances))
        .sum();
    eprintln!(
        "rebalance: {total} messages on 6 partitions, a third member joined after message 20 \
         and had partitions {rebalance_time:.1?} later; messages per member {took:?}; \
         {redelivered} re-delivered, {released} released uncommitted at revokes, {rebalances} \
         rebalance callbacks"
    );
    for (r, _) in members {
        r.shutdown(Duration::from_secs(10)).await;
    }
}
