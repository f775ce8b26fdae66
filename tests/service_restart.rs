//! Restarts of the real binary do not change what reaches Sentry: one agent's steady stream
//! (the real eBPF request `ebpf-k8s-1.pb` as 8 consecutive rounds, 8 sessions, windows ending
//! inside requests) is sent through the service, which is stopped once (SIGKILL or SIGTERM) at
//! a seeded random point and started again, and the Sentry stand-in must receive exactly the
//! chunks (ids and observations) of an uninterrupted run.
//!
//! Points of a run: right after a request was accepted (windows open), while merged chunks are
//! being sent, and while Sentry is down (answering 503 until after the restart).

mod service_support;

use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use service_support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const ROUNDS: u64 = 8;
/// Round `k` is the fixture shifted by `k` times this (the request spans 60.65 s).
const ROUND_NS: u64 = 61_000_000_000;

fn config(dir: &Path, grpc: &str) -> std::path::PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
exporters:
  sentry:
    dsn: ${{env:TEST_SENTRY_DSN}}
    chunk_idle_timeout: 2s
    tick: 20ms
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0s }}
    sending_queue: {{ storage: ./data/queue, max_size_mib: 64 }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: none }}
"#
        ),
    )
}

/// The fixture shifted `k` rounds later.
fn round(base: &ExportProfilesServiceRequest, k: u64) -> ExportProfilesServiceRequest {
    shifted(base, k * ROUND_NS)
}

/// Where the single stop of a run happens.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Right after round `after` was accepted.
    Accepting,
    /// Once merged chunks are being delivered after round `after`.
    Sending,
    /// After round `after` with Sentry answering 503 (until after the restart).
    SentryDown,
}

#[derive(Debug, Clone, Copy)]
struct Stop {
    signal: &'static str,
    after: u64,
    phase: Phase,
}

/// A tiny deterministic generator (xorshift64*), so the points are random but repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn stops(signal: &'static str, seed: u64, n: usize) -> Vec<Stop> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| Stop {
            signal,
            after: rng.next() % (ROUNDS - 1),
            phase: match i % 3 {
                0 => Phase::Accepting,
                1 => Phase::Sending,
                _ => Phase::SentryDown,
            },
        })
        .collect()
}

/// Distinct chunks by id: a resend (a crash between a delivery and its acknowledgement) must
/// carry the same content under the same id.
fn distinct(chunks: Vec<ProfileChunk>) -> BTreeMap<String, ProfileChunk> {
    let mut out: BTreeMap<String, ProfileChunk> = BTreeMap::new();
    for c in chunks {
        if let Some(prev) = out.get(&c.chunk_id) {
            assert_eq!(prev, &c, "two different chunks with id {}", c.chunk_id);
        } else {
            out.insert(c.chunk_id.clone(), c);
        }
    }
    out
}

/// Runs the stream with at most one stop; returns the distinct chunks delivered once the
/// stream went idle (waiting for `expect` chunks when given).
async fn run(stop: Option<Stop>, expect: Option<usize>) -> BTreeMap<String, ProfileChunk> {
    let base = otlp_fixture("ebpf-k8s-1.pb");
    let dir = tempfile::tempdir().unwrap();
    let sentry = SentryStandIn::start(None).await;
    let grpc = free_addr();
    let cfg = config(dir.path(), &grpc);
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let dsn = sentry.dsn();
    let env = [("TEST_SENTRY_DSN", Some(dsn.as_str()))];
    let log = |n: u32| dir.path().join(format!("profilink-{n}.stderr"));
    let mut p = Profilink::start_logging_to(dir.path(), &args, &env, &log(0));
    p.wait_port(&grpc, Duration::from_secs(10));
    if matches!(stop.map(|s| s.phase), Some(Phase::SentryDown)) {
        sentry.set_status(503);
    }
    for k in 0..ROUNDS {
        grpc_export(&grpc, round(&base, k)).await;
        let Some(s) = stop.filter(|s| s.after == k) else {
            continue;
        };
        match s.phase {
            Phase::Accepting => {}
            Phase::Sending | Phase::SentryDown => {
                // Let the windows this round closed be merged and (tried to be) sent.
                let before = sentry.requests();
                let start = std::time::Instant::now();
                while sentry.requests() == before && start.elapsed() < Duration::from_secs(2) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
        p.signal(s.signal);
        let status = p.wait_exit(Duration::from_secs(15));
        if s.signal == "TERM" {
            assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
        }
        sentry.set_status(200);
        p = Profilink::start_logging_to(dir.path(), &args, &env, &log(1));
        p.wait_port(&grpc, Duration::from_secs(10));
    }
    // The last windows go idle after 2 s; wait for everything (or for what the reference
    // delivered).
    let enough = |c: &[ProfileChunk]| {
        let n = c
            .iter()
            .map(|c| c.chunk_id.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        expect.is_some_and(|e| n >= e)
    };
    let waited = sentry.wait_for(Duration::from_secs(20), enough).await;
    if expect.is_none() {
        // The reference: wait until nothing new arrives for a while.
        let mut last = sentry.requests();
        loop {
            tokio::time::sleep(Duration::from_millis(3000)).await;
            let now = sentry.requests();
            if now == last {
                break;
            }
            last = now;
        }
    } else {
        assert!(
            waited,
            "{stop:?}: not every chunk arrived; stderr:\n{}",
            p.stderr()
        );
        // Nothing more may come.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    p.signal("TERM");
    p.wait_exit(Duration::from_secs(15));
    // Every process that stopped by a signal it could handle accounted for every sample.
    let last = if stop.is_some() { 1 } else { 0 };
    for n in 0..=last {
        let stderr = std::fs::read_to_string(log(n)).unwrap_or_default();
        if n == 0 && stop.is_some_and(|s| s.signal == "KILL") {
            continue;
        }
        check_summary(&stderr, &format!("{stop:?}, process {n}"));
    }
    distinct(sentry.chunks())
}

/// The value of `key=` on `line`.
fn field(line: &str, key: &str) -> u64 {
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    line[at + key.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} is not a number in {line}"))
}

/// Checks the exporter's exit line: accepted + replayed = delivered + queued + sparse_dropped
/// (nothing is dropped for other reasons in these runs).
fn check_summary(stderr: &str, what: &str) {
    let line = stderr
        .lines()
        .find(|l| l.contains("exporter run summary (samples)"))
        .unwrap_or_else(|| panic!("{what}: no exporter run summary; stderr:\n{stderr}"));
    let taken = field(line, "accepted") + field(line, "replayed");
    let gone = field(line, "delivered") + field(line, "queued") + field(line, "sparse_dropped");
    assert!(line.contains("dropped=none"), "{what}: {line}");
    assert_eq!(taken, gone, "{what}: samples unaccounted for: {line}");
    assert!(
        stderr.contains("run summary: receivers"),
        "{what}: no receivers summary"
    );
}

async fn matrix(signal: &'static str, seed: u64) {
    let reference = run(None, None).await;
    let want = observations(&reference.values().cloned().collect::<Vec<_>>());
    let (_, sent) = otlp_counts(&otlp_fixture("ebpf-k8s-1.pb"));
    eprintln!(
        "{signal} matrix: the uninterrupted run delivered {} of {} observations in {} chunks",
        observation_count(&want),
        sent * ROUNDS,
        reference.len()
    );
    assert!(observation_count(&want) > 0);
    for stop in stops(signal, seed, 10) {
        let got = run(Some(stop), Some(reference.len())).await;
        let ids = |m: &BTreeMap<String, ProfileChunk>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            ids(&got),
            ids(&reference),
            "{stop:?}: other chunks than the reference"
        );
        let got_obs = observations(&got.values().cloned().collect::<Vec<_>>());
        assert_same_observations(&want, &got_obs, &format!("{stop:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_ten_points_delivers_what_an_uninterrupted_run_delivers() {
    matrix("KILL", 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_at_ten_points_delivers_what_an_uninterrupted_run_delivers() {
    matrix("TERM", 0x5eed_0002).await;
}
