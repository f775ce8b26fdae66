//! `--kafka`: the `kafka` receiver's consumer throughput against the OTLP/gRPC receiver's, in
//! one run, on the same requests and the same exporter.
//!
//! The requests are the load test's (`--clients` templates of `--sessions` copies of the eBPF
//! fixture, in consecutive 5 s rounds), `--messages` of them in all. First a Tansu broker is
//! started on loopback (`profilink_kafka::testing::Broker`) and every request is produced as
//! one unkeyed `otlp_proto` message (as the Collector's kafka exporter sends them), before any
//! profilink starts, so the consumer measures consuming, not waiting for a producer, to two
//! 6-partition topics:
//! * `otlp_profiles`: spread round-robin over the partitions in the order agents send (round
//!   `r` of every client before round `r + 1`), as unkeyed messages land;
//! * `otlp_profiles_by_client`: every message of a client on one partition (what a topic keyed
//!   by agent gets), so each session's rounds are read in order.
//!
//! Three phases, each a fresh profilink with the load test's `sentry` exporter to a fresh
//! stand-in:
//! 1. a `kafka` receiver (group `profilink-<topic>`, `initial_offset: earliest`) on
//!    `otlp_profiles`;
//! 2. the same on `otlp_profiles_by_client`;
//! 3. the `otlp` receiver, the same requests sent over OTLP/gRPC (gzip) by `--clients`
//!    connections.
//!
//! A Kafka phase's span runs from the first message received
//! (`otelcol_kafka_receiver_messages_total`) until every message was received and every sample
//! accepted (`profilink_receiver_accepted_samples_total`), polled every 10 ms; the OTLP
//! phase's from the clients' start until every sample was accepted, polled the same way.
//! profilink's CPU seconds (`/proc/<pid>/stat`) are counted over the span; the group join
//! before it is reported apart. Each phase then lets the exporter's queue drain and stops
//! profilink (SIGTERM, which flushes the open chunks).
//!
//! Reading a backlog, the consumer advances each partition in runs (Tansu answers a fetch with
//! up to 64 messages of a partition; the report prints how far apart the partitions' offsets
//! got), so on the round-robin topic a session's 5 s rounds arrive far out of order: the
//! exporter emits every round older than the session's open window as a chunk of its own (see
//! `profilink_exporter::accumulate`), about 8 times the chunks of the in-order runs, which
//! costs CPU downstream of the receiver. Phase 2 measures the receiver without that effect.

use crate::args::Args;
use crate::clients::{self, ClientStats, Plan};
use crate::service::{Door, Service, closed_by_reason, scrape};
use crate::standin::StandIn;
use crate::{ROUND_NS, load_request, process, report};
use bytes::Bytes;
use profilink::telemetry::metrics::scrape_f64;
use profilink_kafka::testing::Broker;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use prost::Message;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The Collector's profiles topic (round-robin) and the topic partitioned by client.
const ROUND_ROBIN: &str = "otlp_profiles";
const BY_CLIENT: &str = "otlp_profiles_by_client";
/// Partitions of each topic.
pub const PARTITIONS: i32 = 6;
/// The longest a phase may take to accept everything.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// What one phase measured.
pub struct Phase {
    /// Samples accepted by the receiver.
    pub samples: u64,
    /// Seconds from the first message or request to the last sample accepted.
    pub wall: f64,
    /// profilink's CPU seconds over the span.
    pub cpu: f64,
    /// Share of the machine's CPU that was busy over the span.
    pub machine_busy: f64,
    /// profilink's VmHWM at the end, kB.
    pub hwm: u64,
    /// Kafka: seconds from the process being up to the first message (the group join) and
    /// profilink's CPU seconds meanwhile.
    pub join: (f64, f64),
    /// Kafka: the most the partitions' current offsets were apart while it consumed.
    pub spread: i64,
    /// Envelopes the stand-in received (the flush at the stop included).
    pub envelopes: u64,
    /// Kafka: the receiver's backpressure pauses; OTLP: requests refused and retried.
    pub refused: u64,
    /// Seconds the exporter's queue took to drain after the span.
    pub drain_s: f64,
    /// Chunks the exporter emitted before the stop, by why
    /// (`profilink_exporter_chunks_closed_total`); the stop's flush makes the rest.
    pub closed: Vec<(&'static str, u64)>,
}

/// The requests, what was produced and the phases, for the report.
pub struct Comparison {
    pub messages: usize,
    pub samples_per_request: u64,
    pub resources: usize,
    pub protobuf_bytes: usize,
    pub gzip_bytes: usize,
    /// Seconds producing each topic.
    pub produce_s: (f64, f64),
    /// Phase 1 (round-robin topic), phase 2 (by client), phase 3 (OTLP/gRPC).
    pub round_robin: Phase,
    pub by_client: Phase,
    pub otlp: Phase,
}

/// Runs the phases and prints the comparison.
pub async fn run(a: &Args, fixture: &ExportProfilesServiceRequest) {
    let Some(broker) = Broker::start() else {
        eprintln!("--kafka needs the Tansu broker: scripts/setup-test-tools.sh");
        std::process::exit(2);
    };
    let templates: Vec<_> = (0..a.clients)
        .map(|c| load_request::replicated(fixture, &format!("load-{c}"), a.sessions))
        .collect();
    let samples_per_request =
        profilink_proto::signal::profile_counts(&templates[0].resource_profiles).samples;
    let rounds = a.messages.div_ceil(a.clients);
    let messages = rounds * a.clients;
    let raw = encode_rounds(&templates, rounds);
    let protobuf_bytes = raw[0][0].len();
    let gzip_bytes = clients::frame_encoded(&raw[0][0]).len() - 5;
    eprintln!(
        "{messages} requests ({rounds} rounds x {} clients), {samples_per_request} observations and {protobuf_bytes} B protobuf each; producing…",
        a.clients
    );
    // Round-major: round r of every client before round r + 1, as agents send.
    let sent_order = || {
        (0..rounds).flat_map(|r| {
            raw.iter()
                .enumerate()
                .map(move |(c, m)| (c, m[r].as_slice()))
        })
    };
    let produce = |topic: &str, partition_of: &dyn Fn(usize, usize) -> usize| {
        broker.create_topic(topic, PARTITIONS as u32);
        let t = Instant::now();
        let n = broker.produce_unkeyed(
            topic,
            sent_order()
                .enumerate()
                .map(|(i, (c, m))| (partition_of(i, c) as i32 % PARTITIONS, m)),
        );
        assert_eq!(n, messages);
        t.elapsed().as_secs_f64()
    };
    let produce_s = (
        produce(ROUND_ROBIN, &|i, _| i),
        produce(BY_CLIENT, &|_, c| c),
    );
    let want = messages as u64 * samples_per_request;
    eprintln!("produced; phase 1: kafka receiver on {ROUND_ROBIN}…");
    let round_robin = kafka_phase(a, &broker, ROUND_ROBIN, messages as u64, want).await;
    eprintln!("phase 2: kafka receiver on {BY_CLIENT}…");
    let by_client = kafka_phase(a, &broker, BY_CLIENT, messages as u64, want).await;
    drop(broker);
    eprintln!("phase 3: otlp receiver, {} clients…", a.clients);
    let bodies = frames(&raw);
    drop(raw);
    let otlp = otlp_phase(a, bodies, samples_per_request, want).await;
    report::print_kafka(
        a,
        &Comparison {
            messages,
            samples_per_request,
            resources: templates[0].resource_profiles.len(),
            protobuf_bytes,
            gzip_bytes,
            produce_s,
            round_robin,
            by_client,
            otlp,
        },
    );
}

/// Each client's requests, `rounds` consecutive 5 s rounds of its template, as protobuf.
fn encode_rounds(templates: &[ExportProfilesServiceRequest], rounds: usize) -> Vec<Vec<Vec<u8>>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = templates
            .iter()
            .map(|t| {
                s.spawn(move || {
                    (0..rounds)
                        .map(|r| {
                            let mut req = t.clone();
                            load_request::shift(&mut req, r as u64 * ROUND_NS);
                            req.encode_to_vec()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The same requests as gRPC bodies (gzip), one list per client.
fn frames(raw: &[Vec<Vec<u8>>]) -> Vec<Vec<Bytes>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = raw
            .iter()
            .map(|c| s.spawn(move || c.iter().map(|r| clients::frame_encoded(r)).collect()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A Kafka receiver family summed over its partitions (0 when absent).
fn kafka_sum(metrics: &str, name: &str) -> f64 {
    scrape_f64(metrics, name, &[]).unwrap_or(0.0)
}

/// When the polling saw something.
struct Watched {
    /// The first Kafka message received, profilink's CPU seconds and the machine's CPU
    /// (`process::machine_cpu`) then.
    first: Option<(Instant, f64, (f64, f64))>,
    /// The last sample accepted.
    done: Instant,
    /// The last scrape.
    metrics: String,
    /// Kafka: the most the partitions' current offsets were apart.
    spread: i64,
}

/// How far apart the partitions' current offsets are (messages; the partitions hold equally
/// many), among those that received a message.
fn offset_spread(metrics: &str) -> i64 {
    let offsets: Vec<i64> = (0..PARTITIONS)
        .filter_map(|p| {
            scrape_f64(
                metrics,
                "otelcol_kafka_receiver_current_offset",
                &[("partition", &p.to_string())],
            )
        })
        .map(|o| o as i64)
        .filter(|o| *o >= 0)
        .collect();
    match (offsets.iter().max(), offsets.iter().min()) {
        (Some(max), Some(min)) => max - min,
        _ => 0,
    }
}

/// Polls `/metrics` every 10 ms until `want` samples were accepted and, with Kafka, all
/// `messages` were received.
async fn watch(service: &Service, want: u64, messages: u64) -> Watched {
    let start = Instant::now();
    let mut first = None;
    let mut spread = 0;
    loop {
        let m = service.metrics().await;
        let now = Instant::now();
        let received = kafka_sum(&m, "otelcol_kafka_receiver_messages_total") as u64;
        if first.is_none() && received > 0 {
            first = Some((
                now,
                process::cpu_seconds(service.pid),
                process::machine_cpu(),
            ));
        }
        let accepted = scrape(&m, "profilink_receiver_accepted_samples_total");
        spread = spread.max(offset_spread(&m));
        if accepted >= want && (first.is_none() || received >= messages) {
            return Watched {
                first,
                done: now,
                metrics: m,
                spread,
            };
        }
        assert!(
            start.elapsed() < PHASE_LIMIT,
            "{accepted} of {want} samples accepted after {PHASE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A Kafka phase: profilink consuming `topic`.
async fn kafka_phase(a: &Args, broker: &Broker, topic: &str, messages: u64, want: u64) -> Phase {
    let (st, sentry) = StandIn::start(Duration::ZERO, Instant::now()).await;
    let door = Door::Kafka {
        brokers: broker.address.clone(),
        topic: topic.to_string(),
    };
    let service = Service::start(a, &door, sentry, None, false).await;
    let up = Instant::now();
    let cpu_up = process::cpu_seconds(service.pid);
    let machine_up = process::machine_cpu();
    let w = watch(&service, want, messages).await;
    let cpu_done = process::cpu_seconds(service.pid);
    let (first, cpu_first, machine_first) = w.first.unwrap_or((up, cpu_up, machine_up));
    let machine_busy = busy_since(machine_first);
    let m = &w.metrics;
    let received = kafka_sum(m, "otelcol_kafka_receiver_messages_total") as u64;
    // librdkafka's statistics, every 5 s: the lag when it last looked.
    let lag = kafka_sum(m, "otelcol_kafka_receiver_offset_lag") as i64;
    eprintln!(
        "{topic}: {received} messages received; group lag in the last statistics (every 5 s) {lag}"
    );
    let phase = Phase {
        samples: scrape(m, "profilink_receiver_accepted_samples_total"),
        wall: (w.done - first).as_secs_f64(),
        cpu: cpu_done - cpu_first,
        machine_busy,
        hwm: 0,
        join: ((first - up).as_secs_f64(), cpu_first - cpu_up),
        spread: w.spread,
        envelopes: 0,
        refused: scrape(m, "profilink_kafka_receiver_pauses_total"),
        drain_s: 0.0,
        closed: Vec::new(),
    };
    finish(service, &st, phase).await
}

/// The OTLP phase: the same requests over OTLP/gRPC.
async fn otlp_phase(
    a: &Args,
    bodies: Vec<Vec<Bytes>>,
    samples_per_request: u64,
    want: u64,
) -> Phase {
    let (st, sentry) = StandIn::start(Duration::ZERO, Instant::now()).await;
    let service = Service::start(a, &Door::Otlp, sentry, None, false).await;
    let cpu0 = process::cpu_seconds(service.pid);
    let machine0 = process::machine_cpu();
    let t0 = Instant::now();
    let plan = Plan {
        addr: service.grpc.clone(),
        samples_per_request,
        deadline: t0 + PHASE_LIMIT,
        start: t0,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let (stats, w): (ClientStats, Watched) =
        tokio::join!(clients::run(&plan, bodies, &[]), watch(&service, want, 0));
    let cpu = process::cpu_seconds(service.pid) - cpu0;
    let machine_busy = busy_since(machine0);
    assert_eq!(stats.errors, 0, "OTLP requests failed");
    let phase = Phase {
        samples: scrape(&w.metrics, "profilink_receiver_accepted_samples_total"),
        wall: (w.done - t0).as_secs_f64(),
        cpu,
        machine_busy,
        hwm: 0,
        join: (0.0, 0.0),
        spread: 0,
        envelopes: 0,
        refused: stats.refused,
        drain_s: 0.0,
        closed: Vec::new(),
    };
    finish(service, &st, phase).await
}

/// The machine's busy share since `machine0` (`process::machine_cpu`).
fn busy_since(machine0: (f64, f64)) -> f64 {
    let machine1 = process::machine_cpu();
    (machine1.0 - machine0.0) / (machine1.1 - machine0.1).max(1e-9)
}

/// Lets the exporter's queue drain (bounded), reads the peak RSS, stops profilink (which
/// flushes the chunks still open) and counts the envelopes the stand-in received.
async fn finish(service: Service, st: &StandIn, mut phase: Phase) -> Phase {
    let t_drain = Instant::now();
    while t_drain.elapsed() < Duration::from_secs(60) {
        if scrape(&service.metrics().await, "profilink_queue_size_bytes") == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phase.drain_s = t_drain.elapsed().as_secs_f64();
    phase.hwm = process::proc_status(service.pid, "VmHWM:").unwrap_or(0);
    let m = service.metrics().await;
    phase.closed = closed_by_reason(&m);
    let status = service.stop();
    assert!(status.success(), "profilink exited with {status}");
    phase.envelopes = st.envelopes.load(Ordering::Relaxed);
    phase
}
