use super::*;
use crate::config::{AccumulateConfig, RetryConfig};
use crate::queue::ReadyMeta;
use crate::queue::input::encode_legacy;
use crate::queue_config::QueueConfig;
use profilink_proto::sentry::{ClientSdk, Frame, Sample};
use std::sync::Mutex;
use std::time::Instant;

/// Records what it is given.
#[derive(Default)]
struct Recorder(Mutex<Vec<ProfileChunk>>);

impl Sink for Recorder {
    fn blocked_until(&self, _route: &str, _category: &str, _now: Instant) -> Option<Instant> {
        None
    }
    async fn deliver(&self, _meta: ReadyMeta, json: Vec<u8>) -> Delivery {
        match ProfileChunk::from_json(&json) {
            Ok(c) => {
                self.0.lock().unwrap().push(c);
                Delivery::Delivered
            }
            Err(e) => Delivery::Permanent {
                message: e.to_string(),
            },
        }
    }
    fn discarded(&self, _meta: &ReadyMeta, _reason: DiscardReason, _n: u64) {}
}

fn chunk(profiler: char, start: f64, n: usize) -> ProfileChunk {
    let mut c = ProfileChunk {
        chunk_id: "1".repeat(32),
        profiler_id: profiler.to_string().repeat(32),
        platform: "rust".into(),
        version: "2".into(),
        client_sdk: Some(ClientSdk {
            name: "sentry.rust".into(),
            version: "0.1.0".into(),
        }),
        ..Default::default()
    };
    c.profile.frames = vec![std::sync::Arc::new(Frame {
        function: Some("main".into()),
        ..Default::default()
    })];
    c.profile.stacks = vec![vec![0]];
    c.profile.samples = (0..n)
        .map(|i| Sample {
            timestamp: start + i as f64 * 0.05,
            stack_id: 0,
            thread_id: "1".into(),
        })
        .collect();
    c
}

/// An engine whose sessions go idle after 200 ms.
fn start(queue: Arc<Queue>, recovery: Recovery, sink: Arc<Recorder>) -> Engine<Recorder> {
    start_idle(queue, recovery, sink, Duration::from_millis(200))
}

fn start_idle(
    queue: Arc<Queue>,
    recovery: Recovery,
    sink: Arc<Recorder>,
    idle: Duration,
) -> Engine<Recorder> {
    let cfg = EngineConfig {
        accumulate: AccumulateConfig {
            chunk_idle_timeout: idle,
            ..AccumulateConfig::default()
        },
        retry: RetryConfig::default(),
        num_consumers: 2,
        tick: Duration::from_millis(20),
        observer: Default::default(),
        flush_on_shutdown: false,
    };
    let metrics = Arc::new(ExporterMetrics::default());
    Engine::start(
        queue,
        recovery,
        sink,
        cfg,
        crate::clock::system_clock(),
        metrics,
    )
    .unwrap()
}

/// Waits until `sink` holds `n` chunks (at most 10 s), then stops `p`.
async fn deliver(p: Engine<Recorder>, sink: &Recorder, n: usize) {
    let start = std::time::Instant::now();
    while sink.0.lock().unwrap().len() < n && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    p.shutdown(Duration::from_secs(5)).await;
}

fn open(dir: &std::path::Path) -> (Arc<Queue>, Recovery) {
    let (q, r) = Queue::open_when_free(
        &QueueConfig::default(),
        dir,
        Arc::new(ExporterMetrics::default()),
    )
    .unwrap();
    (Arc::new(q), r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_and_batch_records_are_replayed_and_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    {
        // A queue left by an older version (one JSON record per chunk) plus a batch record
        // holding two sessions and an empty chunk.
        let (q, _) = open(dir.path());
        let mut empty = chunk('c', 0.0, 0);
        empty.profile.samples.clear();
        let (batch, _) = input::encode_batch(&[
            (String::new(), chunk('a', 1005.0, 30)),
            (String::new(), empty),
            (String::new(), chunk('b', 1000.0, 20)),
        ]);
        let mut bodies = vec![encode_legacy("", &chunk('a', 1000.0, 10))];
        bodies.extend(batch.into_iter().map(|r| r.body));
        q.append_inputs(&bodies).unwrap();
    }
    let (q, rec) = open(dir.path());
    assert_eq!(rec.inputs.len(), 2);
    let sink = Arc::new(Recorder::default());
    deliver(start(q, rec, sink.clone()), &sink, 2).await;
    let got = sink.0.lock().unwrap().clone();
    let samples = |p: char| -> usize {
        got.iter()
            .filter(|c| c.profiler_id.starts_with(p))
            .map(|c| c.profile.samples.len())
            .sum()
    };
    assert_eq!((samples('a'), samples('b'), samples('c')), (40, 20, 0));
    // Session a: the legacy and the batch record merged into one chunk.
    assert_eq!(got.len(), 2);
    // Everything is acknowledged: nothing is replayed on the next start.
    let (_, rec) = open(dir.path());
    assert!(rec.inputs.is_empty() && rec.ready.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_export_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (q, rec) = open(dir.path());
    let sink = Arc::new(Recorder::default());
    let p = start(q.clone(), rec, sink.clone());
    for i in 0..3 {
        let t = 2000.0 + 5.0 * f64::from(i);
        p.export_linked(
            vec![
                (String::new(), chunk('a', t, 100)),
                (String::new(), chunk('b', t, 100)),
            ],
            Vec::new(),
        )
        .await
        .unwrap();
    }
    // A crash: the engine stops without flushing its open sessions.
    drop(p);
    drop(q);
    let (q, rec) = open(dir.path());
    assert_eq!(rec.inputs.len(), 3);
    deliver(start(q, rec, sink.clone()), &sink, 2).await;
    let got = sink.0.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|c| c.profile.samples.len() == 300));
}

/// Sends `inputs` (one export each) through an engine, stopping and restarting it after
/// the inputs listed in `stops` (a crash when `crash`, else a shutdown), and returns what
/// was delivered once everything went idle.
async fn run_with_stops(
    inputs: &[Vec<ProfileChunk>],
    stops: &[usize],
    crash: bool,
) -> Vec<ProfileChunk> {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(Recorder::default());
    // Long idle timeout: only window ends (and the final idle flush below) cut chunks.
    let idle = Duration::from_secs(3600);
    let (q, rec) = open(dir.path());
    let mut p = start_idle(q, rec, sink.clone(), idle);
    for (i, batch) in inputs.iter().enumerate() {
        let items = batch.iter().map(|c| (String::new(), c.clone())).collect();
        p.export_linked(items, Vec::new()).await.unwrap();
        if stops.contains(&i) {
            // Let merged chunks of closed windows be persisted and delivered first.
            tokio::time::sleep(Duration::from_millis(150)).await;
            if crash {
                drop(p);
            } else {
                p.shutdown(Duration::from_secs(5)).await;
            }
            let (q, rec) = open(dir.path());
            p = start_idle(q, rec, sink.clone(), idle);
        }
    }
    p.shutdown(Duration::from_secs(5)).await;
    // The last start flushes the open windows by going idle.
    let (q, rec) = open(dir.path());
    let before = sink.0.lock().unwrap().len();
    let p = start_idle(q, rec, sink.clone(), Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let n = before + 2;
    deliver(p, &sink, n).await;
    let mut got = sink.0.lock().unwrap().clone();
    got.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
    // A crash between a delivery and its acknowledgement sends that chunk again: the same
    // id with the same content (at least once), never other content under an id.
    for w in got.windows(2) {
        if w[0].chunk_id == w[1].chunk_id {
            assert_eq!(w[0], w[1], "two chunks with one id");
        }
    }
    got.dedup_by(|a, b| a.chunk_id == b.chunk_id);
    got
}

/// 5 s inputs of two sessions over 150 s. The sessions start within the first input
/// (a at +2.5 s, b at +4 s), so their 60 s windows end inside later inputs.
fn steady_stream() -> Vec<Vec<ProfileChunk>> {
    let mut v = vec![vec![chunk('a', 3002.5, 50), chunk('b', 3004.0, 20)]];
    v.extend((1..30).map(|i| {
        let t = 3000.0 + 5.0 * f64::from(i);
        vec![chunk('a', t, 100), chunk('b', t, 100)]
    }));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_and_crashes_deliver_exactly_the_uninterrupted_chunks() {
    let inputs = steady_stream();
    let reference = run_with_stops(&inputs, &[], false).await;
    let total: usize = reference.iter().map(|c| c.profile.samples.len()).sum();
    assert_eq!(total, 29 * 2 * 100 + 70);
    let ids = |v: &[ProfileChunk]| v.iter().map(|c| c.chunk_id.clone()).collect::<Vec<_>>();
    // Stops right after a window closed (inputs straddling it half persisted), inside a
    // window, and twice in a row.
    for (stops, crash) in [
        (vec![11], true),
        (vec![11], false),
        (vec![4, 12, 13, 25], true),
        (vec![4, 12, 13, 25], false),
    ] {
        let got = run_with_stops(&inputs, &stops, crash).await;
        assert_eq!(
            ids(&got),
            ids(&reference),
            "stops {stops:?} (crash: {crash}): different chunks"
        );
        assert_eq!(got, reference, "stops {stops:?} (crash: {crash})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linked_threads_survive_a_crash_and_are_not_grouped_on_replay() {
    // Threads 5, 6 and 7 are seen once each, in two inputs; 7 is linked (spans reference
    // it). Merged after a replay, 5 and 6 are grouped and 7 keeps its id (and, being
    // alone, is dropped as Relay would): the queue remembered that 7 is linked.
    let with_one = |start: f64, tids: &[&str]| {
        let mut c = chunk('a', start, 20);
        for (i, t) in tids.iter().enumerate() {
            c.profile.samples.push(Sample {
                timestamp: start + 0.01 + i as f64 * 0.05,
                stack_id: 0,
                thread_id: (*t).into(),
            });
        }
        c
    };
    let dir = tempfile::tempdir().unwrap();
    let (q, rec) = open(dir.path());
    let sink = Arc::new(Recorder::default());
    let p = start_idle(q.clone(), rec, sink.clone(), Duration::from_secs(3600));
    p.export_linked(vec![(String::new(), with_one(3000.0, &["5"]))], vec![])
        .await
        .unwrap();
    p.export_linked(
        vec![(String::new(), with_one(3005.0, &["6", "7"]))],
        vec![vec!["7".into()]],
    )
    .await
    .unwrap();
    drop(p);
    drop(q);
    let (q, rec) = open(dir.path());
    assert_eq!(rec.inputs.len(), 2);
    deliver(start(q, rec, sink.clone()), &sink, 1).await;
    let got = sink.0.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    let mut threads: Vec<&str> = got[0]
        .profile
        .samples
        .iter()
        .map(|s| s.thread_id.as_str())
        .collect();
    threads.sort();
    threads.dedup();
    let group = profilink_proto::sentry::group_id(b"other").to_string();
    assert_eq!(threads, vec!["1", group.as_str()]);
    assert_eq!(got[0].profile.samples.len(), 42);
}

/// Takes every delivery and never answers (a server that hangs).
#[derive(Default)]
struct Hanging(std::sync::atomic::AtomicUsize);

impl Sink for Hanging {
    fn blocked_until(&self, _route: &str, _category: &str, _now: Instant) -> Option<Instant> {
        None
    }
    async fn deliver(&self, _meta: ReadyMeta, _json: Vec<u8>) -> Delivery {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::pending().await
    }
    fn discarded(&self, _meta: &ReadyMeta, _reason: DiscardReason, _n: u64) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_drain_stops_at_its_deadline_and_keeps_what_was_not_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let (q, rec) = open(dir.path());
    let sink = Arc::new(Hanging::default());
    let cfg = EngineConfig {
        accumulate: AccumulateConfig {
            chunk_idle_timeout: Duration::from_millis(50),
            ..AccumulateConfig::default()
        },
        retry: RetryConfig::default(),
        num_consumers: 2,
        tick: Duration::from_millis(20),
        observer: Default::default(),
        flush_on_shutdown: false,
    };
    let metrics = Arc::new(ExporterMetrics::default());
    let engine = Engine::start(
        q,
        rec,
        sink.clone(),
        cfg,
        crate::clock::system_clock(),
        metrics,
    )
    .unwrap();
    engine
        .export_linked(vec![(String::new(), chunk('a', 1000.0, 20))], Vec::new())
        .await
        .unwrap();
    let waited = std::time::Instant::now();
    while sink.0.load(std::sync::atomic::Ordering::SeqCst) == 0
        && waited.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sink.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The delivery hangs: the drain must give up at its deadline, not wait for it.
    let stopping = std::time::Instant::now();
    engine.shutdown(Duration::from_millis(300)).await;
    let took = stopping.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    // The merged chunk stays queued for the next start; its input is acknowledged.
    let (_, rec) = open(dir.path());
    assert_eq!((rec.inputs.len(), rec.ready.len()), (0, 1));
    assert_eq!(rec.ready[0].samples, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_right_after_export_delivers_it_from_a_memory_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (q, rec) = Queue::open(
        &QueueConfig {
            enabled: false,
            ..QueueConfig::default()
        },
        dir.path(),
        Arc::new(ExporterMetrics::default()),
    )
    .unwrap();
    let sink = Arc::new(Recorder::default());
    // Sessions never go idle by themselves: only the shutdown flush cuts them.
    let p = start_idle(Arc::new(q), rec, sink.clone(), Duration::from_secs(3600));
    for i in 0..3 {
        let t = 1000.0 + 5.0 * f64::from(i);
        p.export_linked(
            vec![
                (String::new(), chunk('a', t, 100)),
                (String::new(), chunk('b', t, 100)),
            ],
            Vec::new(),
        )
        .await
        .unwrap();
    }
    p.shutdown(Duration::from_secs(5)).await;
    let got = sink.0.lock().unwrap().clone();
    let samples: usize = got.iter().map(|c| c.profile.samples.len()).sum();
    assert_eq!((got.len(), samples), (2, 600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merged_chunk_relay_would_refuse_is_counted_and_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (q, rec) = open(dir.path());
    let sink = Arc::new(Recorder::default());
    let p = start(q, rec, sink.clone());
    let metrics = p.metrics.clone();
    // Profiler ids must be UUIDs: session z's merged chunk fails the validator.
    p.export_linked(
        vec![
            (String::new(), chunk('a', 3000.0, 40)),
            (String::new(), chunk('z', 3000.0, 30)),
        ],
        Vec::new(),
    )
    .await
    .unwrap();
    let start_t = std::time::Instant::now();
    while metrics.snapshot().invalid_chunks == 0 && start_t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    deliver(p, &sink, 1).await;
    let got = sink.0.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert!(got[0].profiler_id.starts_with('a'));
    let m = metrics.snapshot();
    assert_eq!((m.invalid_chunks, m.invalid_samples), (1, 30));
    // Its input is acknowledged: the refusal is final, not replayed at the next start.
    let (_, rec) = open(dir.path());
    assert!(rec.inputs.is_empty() && rec.ready.is_empty());
}
