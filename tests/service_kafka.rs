//! Kafka end to end, with the real binary and a real broker process (Tansu, started by the
//! test; see `profilink_kafka::testing`): unkeyed `otlp_proto` messages of real eBPF data on a
//! 6-partition `otlp_profiles` topic, produced as the Collector's kafka exporter does (one
//! request per message, no key), are consumed by a group of two profilink replicas writing
//! chunks to a Sentry stand-in. One replica is SIGKILLed mid-stream and started again on its
//! data directory. Every observation arrives (checked observation by observation against the
//! input), one chunk id never names two contents, and the group's committed offsets reach the
//! end of every partition. Duplicates (re-deliveries of messages the killed replica had not
//! committed) are counted and printed. The second test puts a message that does not decode in
//! the stream: it is skipped and counted, and blocks nothing. The third kills the broker under
//! a running profilink: it still stops within its drain deadline.
//!
//! Needs the broker binary (`scripts/setup-test-tools.sh`); skipped without it unless
//! `PROFILINK_REQUIRE_KAFKA=1`.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_kafka::testing::Broker;
use profilink_kafka::{KafkaExporter, KafkaExporterConfig};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use service_support::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const TOPIC: &str = "otlp_profiles";
const PARTITIONS: i32 = 6;
const GROUP: &str = "profilink-e2e";
/// Messages: the fixture's samples shifted by 2.5 s each (two minutes of profile time).
const MESSAGES: u64 = 48;
const STEP_NS: u64 = 2_500_000_000;

/// One observation: (profiler id, timestamp in µs). Thread ids are left out: the exporters
/// group sparse threads of a merged chunk, moving samples to another thread id.
type Obs = (String, i64);

fn chunk_obs(c: &ProfileChunk) -> impl Iterator<Item = Obs> + '_ {
    c.profile
        .samples
        .iter()
        .map(|s| (c.profiler_id.clone(), (s.timestamp * 1e6).round() as i64))
}

struct Replica {
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
    metrics: String,
    dsn: String,
    process: Option<Profilink>,
}

/// Writes `dir/profilink.yaml`: a `kafka` receiver reading from `broker` with `settings` (its
/// YAML lines after `brokers`, indented by 4), into the Sentry stand-in, metrics on `metrics`.
fn kafka_config(
    dir: &std::path::Path,
    broker: &Broker,
    settings: &str,
    metrics: &str,
) -> std::path::PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &to_sentry_config(
            &format!(
                "kafka:\n    brokers: [\"{}\"]\n    {settings}",
                broker.address
            ),
            "kafka",
            metrics,
        ),
    )
}

impl Replica {
    fn new(i: usize, broker: &Broker, standin: &SentryStandIn) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let metrics = free_addr();
        let config = kafka_config(
            dir.path(),
            broker,
            &format!(
                r#"client_id: replica-{i}
    group_id: {GROUP}
    initial_offset: earliest
    autocommit: {{ interval: 200ms }}
    session_timeout: 6s
    heartbeat_interval: 1s
    message_marking: {{ on_permanent_error: true }}"#
            ),
            &metrics,
        );
        // The project id says which replica sent a chunk.
        let dsn = standin.dsn().replace("/42", &format!("/{}", 100 + i));
        let mut r = Replica {
            dir,
            config,
            metrics,
            dsn,
            process: None,
        };
        r.start();
        r
    }

    fn start(&mut self) {
        let mut p = Profilink::start(
            self.dir.path(),
            &["run", "--config", self.config.to_str().unwrap()],
            &[("TEST_SENTRY_DSN", Some(&self.dsn))],
        );
        p.wait_port(&self.metrics, Duration::from_secs(20));
        self.process = Some(p);
    }

    fn kill(&mut self) {
        if let Some(p) = self.process.take() {
            p.signal("KILL");
            drop(p);
        }
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let (_, text) = get_text(&format!("http://{}/metrics", self.metrics)).await;
        scrape(&text, name, labels).unwrap_or(0) as f64
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("profilink.stderr")).unwrap_or_default()
    }
}

fn fixture(name: &str) -> ExportProfilesServiceRequest {
    otlp_fixture(name)
}

async fn group_of_two(bad_message: bool) {
    let Some(broker) = Broker::start() else {
        return;
    };
    let started = Instant::now();
    broker.create_topic(TOPIC, PARTITIONS as u32);
    let standin = SentryStandIn::start(None).await;
    let base = fixture("ebpf-k8s-1.pb");
    let requests: Vec<_> = (0..MESSAGES).map(|i| shifted(&base, i * STEP_NS)).collect();
    // Observations of threads Relay keeps (2 or more samples with a stack in the message
    // alone) must arrive whichever messages a merged chunk holds; those of sparser threads may
    // be grouped into other threads or dropped, as the exporter's `sparse_threads` says.
    let mut want: BTreeMap<Obs, u32> = BTreeMap::new();
    let mut optional: std::collections::BTreeSet<Obs> = Default::default();
    let mut message_of: BTreeMap<Obs, usize> = BTreeMap::new();
    for (index, r) in requests.iter().enumerate() {
        for c in expected_chunks(r) {
            let mut active: BTreeMap<String, usize> = BTreeMap::new();
            for s in &c.profile.samples {
                let non_empty = c
                    .profile
                    .stacks
                    .get(s.stack_id)
                    .is_some_and(|st| !st.is_empty());
                *active.entry(s.thread_id.to_string()).or_default() += usize::from(non_empty);
            }
            for s in &c.profile.samples {
                let o = (c.profiler_id.clone(), (s.timestamp * 1e6).round() as i64);
                message_of.insert(o.clone(), index);
                if active[&s.thread_id.to_string()] >= 2 {
                    *want.entry(o).or_default() += 1;
                } else {
                    optional.insert(o);
                }
            }
        }
    }
    let sparse = optional.len();
    let duplicated_input = want.values().filter(|n| **n > 1).count();
    assert_eq!(duplicated_input, 0, "test data repeats an observation");

    let mut replicas: Vec<Replica> = (0..2).map(|i| Replica::new(i, &broker, &standin)).collect();
    // Both members in the group before the stream starts.
    for r in &replicas {
        wait_until("partitions assigned", Duration::from_secs(30), async || {
            r.stderr().contains("Kafka partitions assigned")
        })
        .await;
    }
    // The Collector's kafka exporter: one unkeyed message per request.
    let producer_cfg: KafkaExporterConfig = serde_json::from_value(serde_json::json!({
        "brokers": [broker.address],
        "partition_profiles_by_session": false,
    }))
    .unwrap();
    let producer = KafkaExporter::start(producer_cfg, "profiles")
        .await
        .unwrap();
    let mut killed_after = 0.0;
    for (i, r) in requests.into_iter().enumerate() {
        producer.export_profiles(r).await.unwrap();
        if bad_message && i == (MESSAGES as usize) * 8 / 10 {
            broker.produce_raw(TOPIC, b"\x0a\xff\xff\xff\xff not an export request");
        }
        if i == (MESSAGES as usize) * 4 / 10 {
            // Kill one replica mid-stream, once it took some.
            wait_until("replica 0 consuming", Duration::from_secs(30), async || {
                replicas[0]
                    .metric(
                        "profilink_receiver_accepted_samples_total",
                        &[("receiver", "kafka")],
                    )
                    .await
                    > 0.0
            })
            .await;
            killed_after = replicas[0]
                .metric(
                    "profilink_receiver_accepted_samples_total",
                    &[("receiver", "kafka")],
                )
                .await;
            replicas[0].kill();
        }
        if i == (MESSAGES as usize) * 7 / 10 {
            replicas[0].start();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    producer.shutdown(Duration::from_secs(20)).await;
    let produced_at = started.elapsed();

    // Every observation arrives, then nothing more for a while.
    // A merged chunk is cut at 60 s windows, so even a thread with 2 samples in its message
    // may end up sparse in one chunk, grouped, and dropped when still sparse: those drops
    // are counted (profilink_exporter_sparse_samples_dropped_total) and bound what may be
    // missing; anything beyond them is lost.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut missing_keys: Vec<Obs>;
    let mut sparse_dropped = 0.0;
    loop {
        let got: std::collections::BTreeSet<Obs> =
            standin.chunks().iter().flat_map(chunk_obs).collect();
        missing_keys = want.keys().filter(|k| !got.contains(*k)).cloned().collect();
        if missing_keys.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            sparse_dropped = 0.0;
            for r in &replicas {
                sparse_dropped += r
                    .metric("profilink_exporter_sparse_samples_dropped_total", &[])
                    .await;
            }
            let messages: std::collections::BTreeSet<usize> =
                missing_keys.iter().map(|k| message_of[k]).collect();
            assert!(
                missing_keys.len() as f64 <= sparse_dropped,
                "{} of {} observations missing after 60 s, more than the {sparse_dropped} \
                 sparse samples the exporters dropped; from messages {messages:?}\nreplica \
                 0:\n{}\nreplica 1:\n{}",
                missing_keys.len(),
                want.len(),
                replicas[0].stderr(),
                replicas[1].stderr()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let arrived_at = started.elapsed();
    let mut last = (standin.requests(), Instant::now());
    wait_until("quiet", Duration::from_secs(30), async || {
        let n = standin.requests();
        if n != last.0 {
            last = (n, Instant::now());
        }
        last.1.elapsed() > Duration::from_millis(2500)
    })
    .await;

    // One chunk id never names two contents; observations as Sentry stores them (by id).
    let mut by_id: BTreeMap<String, ProfileChunk> = BTreeMap::new();
    let mut resent = 0;
    for c in standin.chunks() {
        if let Some(prev) = by_id.get(&c.chunk_id) {
            assert_eq!(prev, &c, "two different chunks under id {}", c.chunk_id);
            resent += 1;
        } else {
            by_id.insert(c.chunk_id.clone(), c);
        }
    }
    let mut got: BTreeMap<Obs, u32> = BTreeMap::new();
    for c in by_id.values() {
        for o in chunk_obs(c) {
            *got.entry(o).or_default() += 1;
        }
    }
    let missing = want.keys().filter(|k| !got.contains_key(*k)).count();
    assert_eq!(
        missing,
        missing_keys.len(),
        "observations lost while waiting for quiet"
    );
    let unknown = got
        .keys()
        .filter(|k| !want.contains_key(*k) && !optional.contains(*k))
        .count();
    assert_eq!(unknown, 0, "observations nobody sent");
    let duplicated: u32 = got.values().map(|n| n - 1).sum();
    let sparse_arrived = optional.iter().filter(|k| got.contains_key(*k)).count();

    // The group's committed offsets reach the end of every partition.
    let all = broker.read_all(TOPIC, PARTITIONS, Duration::from_secs(2));
    let expected_messages = MESSAGES as usize + usize::from(bad_message);
    assert_eq!(all.len(), expected_messages);
    let mut ends = vec![0i64; PARTITIONS as usize];
    for m in &all {
        ends[m.0 as usize] = ends[m.0 as usize].max(m.1 + 1);
    }
    let mut committed = Vec::new();
    wait_until(
        "committed offsets at the end",
        Duration::from_secs(30),
        async || {
            committed = broker.committed(GROUP, TOPIC, PARTITIONS);
            committed == ends
        },
    )
    .await;

    let mut skipped = 0.0;
    let mut accepted = Vec::new();
    let mut cpu = Vec::new();
    for r in &replicas {
        let (_, text) = get_text(&format!("http://{}/metrics", r.metrics)).await;
        cpu.push(
            profilink::telemetry::metrics::scrape_f64(
                &text,
                "otelcol_process_cpu_seconds_total",
                &[],
            )
            .unwrap_or(0.0),
        );
    }
    for r in &replicas {
        skipped += r
            .metric(
                "profilink_receiver_refused_requests_total",
                &[("receiver", "kafka")],
            )
            .await;
        accepted.push(
            r.metric(
                "profilink_receiver_accepted_samples_total",
                &[("receiver", "kafka")],
            )
            .await,
        );
    }
    let mut unmarshal_failed = 0.0;
    for r in &replicas {
        unmarshal_failed += r
            .metric(
                "otelcol_kafka_receiver_unmarshal_failed_profiles_total",
                &[("receiver", "kafka")],
            )
            .await;
    }
    assert_eq!(unmarshal_failed, skipped);
    if bad_message {
        assert_eq!(skipped, 1.0, "the bad message is counted once");
    } else {
        assert_eq!(skipped, 0.0);
    }
    assert!(
        replicas[0].stderr().contains("Kafka partitions assigned"),
        "{}",
        replicas[0].stderr()
    );
    eprintln!(
        "kafka group of two (bad message: {bad_message}): {MESSAGES} messages ({} observations) \
         (+{sparse} of sparse threads, {sparse_arrived} of them arrived) produced in {produced_at:.1?}, all but {} (sparse drops counted: {sparse_dropped}) arrived after {arrived_at:.1?}; replica 0 killed \
         after accepting {killed_after} observations, restarted; observations accepted per \
         replica since (re)start {accepted:?} for CPU seconds {cpu:.2?} (the whole replica: \
         Kafka, translation, chunk merging, the Sentry exporter); {} distinct chunks, {resent} resent; {duplicated} \
         observations delivered twice (re-deliveries of uncommitted messages); committed \
         {committed:?}",
        want.len(),
        missing_keys.len(),
        by_id.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_two_replicas_loses_nothing_when_one_is_killed() {
    group_of_two(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_does_not_decode_is_skipped_and_counted() {
    group_of_two(true).await;
}

/// The broker vanishes under a running profilink holding marked, uncommitted offsets: on
/// SIGTERM it still drains and exits within its drain deadline (`PROFILINK_SHUTDOWN_TIMEOUT`,
/// 3 s here), logging how the Kafka close ended (the final commit and the consumer's close
/// both wait for a broker; usually they are abandoned at the deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profilink_stops_in_time_when_its_broker_is_gone() {
    let Some(broker) = Broker::start() else {
        return;
    };
    broker.create_topic(TOPIC, 2);
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let metrics = free_addr();
    let config = kafka_config(
        dir.path(),
        &broker,
        r#"group_id: vanishing
    initial_offset: earliest
    autocommit: { interval: 1h }"#,
        &metrics,
    );
    let dsn = standin.dsn();
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[
            ("TEST_SENTRY_DSN", Some(&dsn)),
            ("PROFILINK_SHUTDOWN_TIMEOUT", Some("3s")),
        ],
    );
    p.wait_port(&metrics, Duration::from_secs(20));
    let payload = prost::Message::encode_to_vec(&fixture("ebpf-k8s-1.pb"));
    for _ in 0..3 {
        broker.produce_raw(TOPIC, &payload);
    }
    wait_until("the messages taken", Duration::from_secs(60), async || {
        service_support::metric(
            &metrics,
            "profilink_receiver_accepted_samples_total",
            &[("receiver", "kafka")],
        )
        .await
            > 0
    })
    .await;
    drop(broker);
    let started = Instant::now();
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(30));
    let took = started.elapsed();
    let stderr = p.stderr();
    assert!(status.success(), "{status:?}\n{stderr}");
    assert!(
        took < Duration::from_secs(8),
        "exit took {took:?}\n{stderr}"
    );
    // Without a broker the close usually cannot complete and is abandoned; when librdkafka
    // does give up on the broker within the deadline it completes. Either way it is logged.
    assert!(
        stderr.contains("did not end within the shutdown deadline")
            || stderr.contains("Kafka receiver stopped"),
        "how the Kafka close ended is logged:\n{stderr}"
    );
}
