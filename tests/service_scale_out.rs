//! Scale-out behind nginx: three replicas of the real binary behind Debian's `nginx`, driven
//! through the shipped configuration `examples/scale-out/nginx.conf.template`.
//!
//! * OTLP -> Sentry, with affinity (`hash` on the agents' `x-agent-id` header) and without
//!   (round-robin): several agents send 5 s rounds of their processes' samples (20 Hz, two
//!   threads each) through nginx; one replica is SIGKILLed mid-run (frozen for half a second
//!   first, so requests are in flight at it) and started again on its data directory. Every chunk must be valid, chunk ids never name two different chunks,
//!   every session has one profiler id whichever replica translated it, every observation
//!   arrives (the killed replica's durable queue is replayed after its restart) and none twice,
//!   except observations of a request that was in flight at the kill (the client saw
//!   `UNAVAILABLE` and retried it: persisted by the killed replica but not answered, at least
//!   once). With affinity each agent's sessions come from one replica, or from its replica and
//!   one fallback when its replica was the one killed; round-robin spreads each session over
//!   the replicas.
//! * Sentry envelopes (SDKs cannot add headers): nginx keyed on the client address keeps every
//!   envelope of one SDK host (chunks and transactions) on one replica; keyed on the DSN's
//!   public key (header or `?sentry_key=`), every envelope of one key.
//!
//! The tests need `nginx` (Debian package `nginx`); without it they are skipped with a message,
//! unless `PROFILINK_REQUIRE_NGINX=1` (CI) makes that a failure.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit, Line, Location,
    Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles, Stack,
    ValueType, any_value,
};
use profilink_proto::sentry::ProfileChunk;
use service_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const REPLICAS: usize = 3;
/// Five, not a multiple of the replicas: agents sending in a steady order would otherwise each
/// meet the same replica under round-robin every time.
const AGENTS: usize = 5;
/// Processes (profiler sessions) per agent.
const SESSIONS: usize = 4;
/// 5 s rounds per agent: 3 minutes of profile time, three 60 s chunk windows.
const ROUNDS: usize = 36;
const ROUND_NS: u64 = 5_000_000_000;
/// 20 Hz.
const PERIOD_NS: u64 = 50_000_000;
/// Real time between an agent's rounds (the run lasts ~3 s).
const PACE: Duration = Duration::from_millis(80);
const T0: u64 = 1_780_000_000_000_000_000;

// ---------------------------------------------------------------------------------------
// nginx

/// The nginx binary, or `None` (test skipped) when it is not installed.
fn nginx_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var("PROFILINK_REQUIRE_NGINX").as_deref() != Ok("1"),
            "nginx is not installed (apt-get install nginx) and PROFILINK_REQUIRE_NGINX=1"
        );
        eprintln!("skipped: nginx is not installed (apt-get install nginx)");
    }
    found
}

/// How nginx spreads requests over the replicas.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Balance {
    /// `hash $otlp_affinity consistent` (the `x-agent-id` header, else the client address).
    AgentHeader,
    /// nginx's default round-robin.
    RoundRobin,
    /// Envelopes: `hash $remote_addr consistent`.
    ClientAddress,
    /// Envelopes: `hash $sentry_key consistent`.
    DsnKey,
}

/// An nginx process with a configuration made from the shipped template; killed on drop.
struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    otlp: String,
    sentry: String,
}

impl Nginx {
    fn start(binary: &Path, replicas: &[Replica], otlp: Balance, sentry: Balance) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        // Workers run as an unprivileged user when started by root: they must reach the
        // temporary directories nginx creates (and chowns to them) inside.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        let template = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scale-out/nginx.conf.template"),
        )
        .unwrap();
        let servers = |addr: fn(&Replica) -> &str| {
            replicas
                .iter()
                .map(|r| format!("server {} max_fails=1 fail_timeout=1s;", addr(r)))
                .collect::<Vec<_>>()
                .join("\n        ")
        };
        let balance = |b: Balance| match b {
            Balance::AgentHeader => "hash $otlp_affinity consistent;",
            Balance::RoundRobin => "",
            Balance::ClientAddress => "hash $remote_addr consistent;",
            Balance::DsnKey => "hash $sentry_key consistent;",
        };
        let (otlp_addr, sentry_addr) = (free_addr(), free_addr());
        let conf = template
            .replace("@PREFIX@", dir.path().to_str().unwrap())
            .replace("@OTLP_LISTEN@", &otlp_addr)
            .replace("@SENTRY_LISTEN@", &sentry_addr)
            .replace("@OTLP_SERVERS@", &servers(|r| &r.grpc))
            .replace("@SENTRY_SERVERS@", &servers(|r| &r.envelopes))
            .replace("@OTLP_BALANCE@", balance(otlp))
            .replace("@SENTRY_BALANCE@", balance(sentry))
            .replace("worker_processes auto;", "worker_processes 1;");
        // A piece between two `@` made of capitals and `_` is a placeholder left unfilled.
        let pieces: Vec<&str> = conf.split('@').collect();
        let inner = &pieces[1..pieces.len().saturating_sub(1).max(1)];
        let unfilled = inner.iter().any(|name| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        });
        assert!(!unfilled, "unfilled placeholder in the template");
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let error_log = dir.path().join("error.log");
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(&error_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let nginx = Nginx {
            child,
            dir,
            otlp: otlp_addr,
            sentry: sentry_addr,
        };
        nginx.wait_listening();
        nginx
    }

    fn wait_listening(&self) {
        let start = Instant::now();
        for addr in [&self.otlp, &self.sentry] {
            let sa: std::net::SocketAddr = addr.parse().unwrap();
            while std::net::TcpStream::connect_timeout(&sa, Duration::from_millis(100)).is_err() {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "nginx not listening on {addr}: {}",
                    self.error_log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// replicas

/// One replica: the real binary with an `otlp` receiver -> `sentry` exporter pipeline (DSN
/// project `100 + index`, so the Sentry stand-in knows which replica sent a chunk) and a
/// `sentry` receiver -> `file` exporter pipeline (for the envelope routing test).
struct Replica {
    process: Option<Profilink>,
    dir: tempfile::TempDir,
    grpc: String,
    envelopes: String,
    metrics: String,
    starts: u32,
}

impl Replica {
    fn new(index: usize, standin: &SentryStandIn) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let (grpc, envelopes, metrics) = (free_addr(), free_addr(), free_addr());
        let project = 100 + index;
        write_config(
            dir.path(),
            "profilink.yaml",
            &format!(
                r#"
receivers:
  otlp: {{ protocols: {{ grpc: {{ endpoint: "{grpc}" }} }} }}
  sentry: {{ endpoint: "{envelopes}" }}
exporters:
  sentry:
    dsn: "http://{KEY}@{standin}/{project}"
    chunk_idle_timeout: 3s
    tick: 20ms
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0s }}
    sending_queue: {{ storage: ./data/queue, max_size_mib: 64 }}
  file: {{ path: ./data/envelopes }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
    profiles/sdk: {{ receivers: [sentry], exporters: [file] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
                standin = standin.addr
            ),
        );
        let mut r = Replica {
            process: None,
            dir,
            grpc,
            envelopes,
            metrics,
            starts: 0,
        };
        r.start();
        r
    }

    fn start(&mut self) {
        let log = self
            .dir
            .path()
            .join(format!("profilink-{}.stderr", self.starts));
        self.starts += 1;
        let mut p = Profilink::start_logging_to(
            self.dir.path(),
            &["run", "--config", "profilink.yaml"],
            &[],
            &log,
        );
        for addr in [&self.grpc, &self.envelopes, &self.metrics] {
            p.wait_port(addr, Duration::from_secs(15));
        }
        self.process = Some(p);
    }

    /// SIGKILL, after freezing the process for `frozen` (SIGSTOP): the requests routed to it
    /// meanwhile are in flight when it dies, so their clients see the failure.
    async fn kill(&mut self, frozen: Duration) {
        if let Some(p) = &mut self.process {
            p.signal("STOP");
            tokio::time::sleep(frozen).await;
            p.signal("KILL");
            p.wait_exit(Duration::from_secs(10));
        }
        self.process = None;
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let (_, text) = get_text(&format!("http://{}/metrics", self.metrics)).await;
        scrape(&text, name, labels).unwrap_or(0)
    }

    async fn accepted_requests(&self, receiver: &str) -> u64 {
        self.metric(
            "profilink_receiver_accepted_requests_total",
            &[("receiver", receiver)],
        )
        .await
    }

    fn stderr(&self) -> String {
        self.process
            .as_ref()
            .map(Profilink::stderr)
            .unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------
// agents' requests

fn text(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    }
}

fn int(i: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(i)),
    }
}

/// Round `round` of agent `agent`: `SESSIONS` Python processes on host `agent-<agent>`, each
/// with two threads sampled at 20 Hz over the round's 5 s (two stacks per thread).
fn agent_request(agent: usize, round: usize) -> ExportProfilesServiceRequest {
    let strings: Vec<String> = [
        "",
        "samples",
        "count",
        "cpu",
        "nanoseconds",
        "thread.id",
        "thread.name",
        "MainThread",
        "worker",
        "main",
        "/app/main.py",
        "handle",
        "/app/handler.py",
        "compute",
        "/app/compute.py",
        "profile.frame.type",
        "cpython",
    ]
    .map(String::from)
    .to_vec();
    let s = |x: &str| strings.iter().position(|y| y == x).unwrap() as i32;
    let attr = |k: &str, v: AnyValue| KeyValueAndUnit {
        key_strindex: s(k),
        value: Some(v),
        unit_strindex: 0,
    };
    let func = |name: &str, file: &str| Function {
        name_strindex: s(name),
        system_name_strindex: 0,
        filename_strindex: s(file),
        start_line: 0,
    };
    let loc = |f: i32, line: i64| Location {
        mapping_index: 0,
        address: 0,
        lines: vec![Line {
            function_index: f,
            line,
            column: 0,
        }],
        attribute_indices: vec![5],
    };
    let dictionary = ProfilesDictionary {
        mapping_table: vec![Mapping::default()],
        location_table: vec![Location::default(), loc(1, 10), loc(2, 20), loc(3, 30)],
        function_table: vec![
            Function::default(),
            func("main", "/app/main.py"),
            func("handle", "/app/handler.py"),
            func("compute", "/app/compute.py"),
        ],
        link_table: vec![Default::default()],
        string_table: strings.clone(),
        attribute_table: vec![
            KeyValueAndUnit::default(),
            attr("thread.id", int(7)),
            attr("thread.name", text("MainThread")),
            attr("thread.id", int(8)),
            attr("thread.name", text("worker")),
            attr("profile.frame.type", text("cpython")),
        ],
        stack_table: vec![
            Stack::default(),
            Stack {
                location_indices: vec![2, 1],
            },
            Stack {
                location_indices: vec![3, 2, 1],
            },
        ],
    };
    let t0 = T0 + round as u64 * ROUND_NS;
    let ticks = ROUND_NS / PERIOD_NS;
    // Thread `attrs` at `offset`, stack 1 on even ticks and stack 2 on odd ones.
    let thread = |attrs: Vec<i32>, offset: u64| {
        (1..=2)
            .map(|stack: u64| Sample {
                stack_index: stack as i32,
                attribute_indices: attrs.clone(),
                link_index: 0,
                values: vec![],
                timestamps_unix_nano: (0..ticks)
                    .filter(|i| i % 2 == stack - 1)
                    .map(|i| t0 + offset + i * PERIOD_NS)
                    .collect(),
            })
            .collect::<Vec<_>>()
    };
    let kv = |k: &str, v: AnyValue| KeyValue {
        key: k.into(),
        value: Some(v),
        key_strindex: 0,
    };
    let resource_profiles = (0..SESSIONS)
        .map(|session| {
            let mut samples = thread(vec![1, 2], 0);
            samples.extend(thread(vec![3, 4], PERIOD_NS / 2));
            ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", text("checkout")),
                        kv("host.name", text(&format!("agent-{agent}"))),
                        kv("telemetry.sdk.language", text("python")),
                        kv("process.pid", int(1000 + session as i64)),
                    ],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: None,
                    profiles: vec![Profile {
                        sample_type: Some(ValueType {
                            type_strindex: s("samples"),
                            unit_strindex: s("count"),
                        }),
                        samples,
                        time_unix_nano: t0,
                        duration_nano: ROUND_NS,
                        period_type: Some(ValueType {
                            type_strindex: s("cpu"),
                            unit_strindex: s("nanoseconds"),
                        }),
                        period: PERIOD_NS as i64,
                        ..Default::default()
                    }],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(dictionary),
    }
}

/// One observation: (profiler id, thread id, timestamp in µs).
type Obs = (String, String, i64);

fn micros(ts: f64) -> i64 {
    (ts * 1e6).round() as i64
}

fn chunk_observations(c: &ProfileChunk) -> impl Iterator<Item = Obs> + '_ {
    c.profile.samples.iter().map(|s| {
        (
            c.profiler_id.clone(),
            s.thread_id.to_string(),
            micros(s.timestamp),
        )
    })
}

/// What one agent's client saw.
#[derive(Default)]
struct Sent {
    /// Rounds that failed at least once before they were accepted (their outcome at the
    /// failed attempt is unknown to the client).
    retried: BTreeSet<usize>,
    /// gRPC codes of the failed attempts.
    codes: Vec<tonic::Code>,
}

/// Sends the agent's rounds through nginx (header `x-agent-id: agent-<agent>`), retrying
/// each until it is accepted, as an OTLP exporter does (bounded: 20 s per round).
async fn run_agent(agent: usize, nginx: String, done: Arc<AtomicU64>) -> Sent {
    let mut client = grpc_client(&nginx).await;
    let mut sent = Sent::default();
    for round in 0..ROUNDS {
        let req = agent_request(agent, round);
        let start = Instant::now();
        loop {
            let mut r = tonic::Request::new(req.clone());
            r.metadata_mut()
                .insert("x-agent-id", format!("agent-{agent}").parse().unwrap());
            match client.export(r).await {
                Ok(resp) => {
                    let rejected = resp
                        .into_inner()
                        .partial_success
                        .map_or(0, |p| p.rejected_profiles);
                    assert_eq!(
                        rejected, 0,
                        "agent {agent} round {round}: rejected profiles"
                    );
                    break;
                }
                Err(status) => {
                    sent.retried.insert(round);
                    if status.code() != tonic::Code::Unavailable {
                        eprintln!("agent {agent} round {round}: {status:?}");
                    }
                    sent.codes.push(status.code());
                    assert!(
                        start.elapsed() < Duration::from_secs(20),
                        "agent {agent} round {round} still failing: {status}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        done.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(PACE).await;
    }
    sent
}

/// The scale-out run: agents through nginx, one replica SIGKILLed at ~30% of the requests and
/// started again at ~55%; then the checks of the module docs.
async fn scale_out(balance: Balance) {
    let Some(nginx_bin) = nginx_binary() else {
        return;
    };
    let started = Instant::now();
    let standin = SentryStandIn::start(None).await;
    let mut replicas: Vec<Replica> = (0..REPLICAS).map(|i| Replica::new(i, &standin)).collect();
    let nginx = Nginx::start(&nginx_bin, &replicas, balance, Balance::ClientAddress);

    // The expected observations, each with the (agent, round) that carries it.
    let mut want: BTreeMap<Obs, (usize, usize)> = BTreeMap::new();
    let mut session_of: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for agent in 0..AGENTS {
        for round in 0..ROUNDS {
            for c in expected_chunks(&agent_request(agent, round)) {
                session_of
                    .entry(c.profiler_id.clone())
                    .or_insert((agent, c.profiler_id.clone()));
                for o in chunk_observations(&c) {
                    assert!(
                        want.insert(o, (agent, round)).is_none(),
                        "test data repeats"
                    );
                }
            }
        }
    }
    assert_eq!(session_of.len(), AGENTS * SESSIONS);

    let done = Arc::new(AtomicU64::new(0));
    let agents: Vec<_> = (0..AGENTS)
        .map(|a| tokio::spawn(run_agent(a, nginx.otlp.clone(), done.clone())))
        .collect();
    let total = (AGENTS * ROUNDS) as u64;
    let d = done.clone();
    wait_until("30% of the requests", Duration::from_secs(30), async || {
        d.load(Ordering::SeqCst) >= total * 3 / 10
    })
    .await;
    // With affinity, kill the replica that took the most requests so far (it is some agents'
    // home); round-robin spreads evenly, any will do.
    let mut victim = 0;
    if balance == Balance::AgentHeader {
        let mut most = 0;
        for (i, r) in replicas.iter().enumerate() {
            let n = r.accepted_requests("otlp").await;
            if n > most {
                (most, victim) = (n, i);
            }
        }
    }
    let before_kill = replicas[victim].accepted_requests("otlp").await;
    assert!(before_kill > 0, "the victim took no requests");
    replicas[victim].kill(Duration::from_millis(500)).await;
    let killed_at = done.load(Ordering::SeqCst);
    wait_until("55% of the requests", Duration::from_secs(30), async || {
        d.load(Ordering::SeqCst) >= total * 55 / 100
    })
    .await;
    replicas[victim].start();
    let restarted_at = done.load(Ordering::SeqCst);
    let mut sent = Vec::new();
    for a in agents {
        sent.push(a.await.unwrap());
    }
    let send_time = started.elapsed();

    // Everything arrives: every expected observation (bounded wait), then no new chunk for
    // longer than the idle timeout (late copies would show up now).
    let want_keys: BTreeSet<&Obs> = want.keys().collect();
    wait_until("every observation", Duration::from_secs(60), async || {
        let got: BTreeSet<Obs> = standin
            .chunks()
            .iter()
            .flat_map(chunk_observations)
            .collect();
        want_keys.iter().all(|k| got.contains(*k))
    })
    .await;
    let mut last = (standin.requests(), Instant::now());
    wait_until("quiet", Duration::from_secs(30), async || {
        let n = standin.requests();
        if n != last.0 {
            last = (n, Instant::now());
        }
        last.1.elapsed() > Duration::from_millis(2500)
    })
    .await;

    // The killed replica replayed its durable queue after the restart.
    let replayed = replicas[victim]
        .metric(
            "profilink_exporter_replayed_samples_total",
            &[("exporter", "sentry")],
        )
        .await;
    assert!(
        replayed > 0,
        "the restarted replica replayed nothing; stderr:\n{}",
        replicas[victim].stderr()
    );

    // Chunks by id, as Sentry stores them: one id never names two different chunks (a resend
    // is the same chunk), every chunk is valid.
    let mut by_id: BTreeMap<String, (usize, ProfileChunk)> = BTreeMap::new();
    let mut resent = 0;
    for rec in standin.received() {
        let replica = rec.project.parse::<usize>().unwrap() - 100;
        for c in rec.chunks() {
            let errors: Vec<_> = profilink_proto::validate::validate_chunk(&c)
                .into_iter()
                .filter(|f| f.is_error())
                .collect();
            assert!(
                errors.is_empty(),
                "invalid chunk {}: {errors:?}",
                c.chunk_id
            );
            if let Some((_, prev)) = by_id.get(&c.chunk_id) {
                assert_eq!(prev, &c, "two different chunks under id {}", c.chunk_id);
                resent += 1;
            } else {
                by_id.insert(c.chunk_id.clone(), (replica, c));
            }
        }
    }

    // Every observation exactly once, except those of requests that were in flight at the
    // kill (retried by the client: at least once).
    let retried: BTreeSet<(usize, usize)> = sent
        .iter()
        .enumerate()
        .flat_map(|(a, s)| s.retried.iter().map(move |&r| (a, r)))
        .collect();
    let mut got: BTreeMap<Obs, u32> = BTreeMap::new();
    let mut replicas_of_session: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    let mut chunks_per_replica = [0usize; REPLICAS];
    for (replica, c) in by_id.values() {
        assert!(
            session_of.contains_key(&c.profiler_id),
            "unknown profiler id {}",
            c.profiler_id
        );
        chunks_per_replica[*replica] += 1;
        replicas_of_session
            .entry(c.profiler_id.clone())
            .or_default()
            .insert(*replica);
        for o in chunk_observations(c) {
            *got.entry(o).or_default() += 1;
        }
    }
    // Chunks holding samples of each session's time-aligned minute (the exporter's default
    // `chunk_duration`): one per replica that took some of that minute, at most.
    let mut chunks_of_minute: BTreeMap<(String, i64), BTreeSet<&str>> = BTreeMap::new();
    for (_, c) in by_id.values() {
        for s in &c.profile.samples {
            let minute = (s.timestamp / 60.0).floor() as i64;
            chunks_of_minute
                .entry((c.profiler_id.clone(), minute))
                .or_default()
                .insert(&c.chunk_id);
        }
    }
    let most_per_minute = chunks_of_minute
        .values()
        .map(BTreeSet::len)
        .max()
        .unwrap_or(0);
    let per_minute = chunks_of_minute.values().map(BTreeSet::len).sum::<usize>() as f64
        / chunks_of_minute.len().max(1) as f64;
    for ((pid, minute), ids) in &chunks_of_minute {
        if ids.len() > REPLICAS {
            for id in ids {
                let (r, c) = &by_id[*id];
                let ts: Vec<f64> = c.profile.samples.iter().map(|s| s.timestamp).collect();
                let lo = ts.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = ts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                eprintln!(
                    "session {pid}, minute {minute}: replica {r} chunk {id} {} samples {lo:.2}..{hi:.2}",
                    ts.len()
                );
            }
        }
    }
    assert!(
        most_per_minute <= REPLICAS,
        "a session's minute in {most_per_minute} chunks, more than the {REPLICAS} replicas"
    );
    let missing = want.keys().filter(|k| !got.contains_key(*k)).count();
    assert_eq!(missing, 0, "observations lost");
    let unknown = got.keys().filter(|k| !want.contains_key(*k)).count();
    assert_eq!(unknown, 0, "observations nobody sent");
    let mut duplicated = 0;
    for (k, n) in &got {
        if *n > 1 {
            duplicated += 1;
            assert!(
                retried.contains(&want[k]),
                "observation {k:?} of request {:?} arrived {n} times but that request was \
                 accepted at its first attempt",
                want[k]
            );
        }
    }
    let retried_total: usize = sent.iter().map(|s| s.retried.len()).sum();
    assert!(retried_total > 0, "no request was in flight at the kill");
    let codes: BTreeSet<String> = sent
        .iter()
        .flat_map(|s| s.codes.iter().map(|c| format!("{c:?}")))
        .collect();
    assert!(
        codes.iter().all(|c| c == "Unavailable"),
        "clients saw other errors than UNAVAILABLE: {codes:?}"
    );

    // Affinity: an agent's sessions share one replica set: one replica, or its replica and one
    // fallback while that one was down. Round-robin: sessions spread over the replicas.
    let mut sets_of_agent: BTreeMap<usize, BTreeSet<BTreeSet<usize>>> = BTreeMap::new();
    for (pid, set) in &replicas_of_session {
        sets_of_agent
            .entry(session_of[pid].0)
            .or_default()
            .insert(set.clone());
    }
    match balance {
        Balance::AgentHeader => {
            let mut homed_on_victim = 0;
            for (agent, sets) in &sets_of_agent {
                assert_eq!(sets.len(), 1, "agent {agent}: sessions on {sets:?}");
                let set = sets.iter().next().unwrap();
                if set.contains(&victim) {
                    homed_on_victim += 1;
                    assert!(set.len() <= 2, "agent {agent} on {set:?}");
                } else {
                    assert_eq!(set.len(), 1, "agent {agent} on {set:?}");
                }
            }
            assert!(homed_on_victim > 0);
        }
        _ => {
            let spread = replicas_of_session.values().filter(|s| s.len() > 1).count();
            assert_eq!(spread, replicas_of_session.len(), "{replicas_of_session:?}");
        }
    }
    eprintln!(
        "{balance:?}: {} requests ({} observations) sent in {send_time:.1?}; replica {victim} \
         killed after {killed_at} and restarted after {restarted_at} answered requests \
         ({before_kill} accepted before the kill), {replayed} samples replayed; {retried_total} \
         requests retried by clients; {} distinct chunks per replica {chunks_per_replica:?} \
         ({:.1} per session; a session's minute in {per_minute:.2} chunks, at most \
         {most_per_minute}), {resent} resent; {duplicated} observations delivered twice; \
         whole test {:.1?}",
        total,
        want.len(),
        by_id.len(),
        by_id.len() as f64 / session_of.len() as f64,
        started.elapsed()
    );
    drop(nginx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn affinity_by_agent_header_survives_a_replica_kill() {
    scale_out(Balance::AgentHeader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_without_affinity_survives_a_replica_kill() {
    scale_out(Balance::RoundRobin).await;
}

// ---------------------------------------------------------------------------------------
// Sentry envelopes

fn fixture_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("sentry/python").join(name)).unwrap()
}

/// Accepted envelope requests per replica.
async fn envelope_counts(replicas: &[Replica]) -> Vec<u64> {
    let mut out = Vec::new();
    for r in replicas {
        out.push(r.accepted_requests("sentry").await);
    }
    out
}

/// The replica whose count rose by `n` while the others stayed (panics otherwise).
fn the_one_that_rose(before: &[u64], after: &[u64], n: u64, what: &str) -> usize {
    let rose: Vec<(usize, u64)> = before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| a != b)
        .map(|(i, (b, a))| (i, a - b))
        .collect();
    assert_eq!(rose.len(), 1, "{what}: envelopes spread over {rose:?}");
    assert_eq!(rose[0].1, n, "{what}: {rose:?}");
    rose[0].0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_keep_affinity_by_client_address_or_dsn_key() {
    let Some(nginx_bin) = nginx_binary() else {
        return;
    };
    let standin = SentryStandIn::start(None).await;
    let replicas: Vec<Replica> = (0..REPLICAS).map(|i| Replica::new(i, &standin)).collect();
    // One SDK process's traffic: its chunks and its transactions in separate envelopes.
    let envelopes = [
        fixture_bytes("trace-chunk-00.envelope"),
        fixture_bytes("trace-transaction-0001.envelope"),
        fixture_bytes("trace-chunk-01.envelope"),
        fixture_bytes("trace-transaction-0002.envelope"),
    ];
    let n = envelopes.len() as u64;
    let post = async |client: &reqwest::Client, url: String, key: Option<&str>, body: &[u8]| {
        let mut req = client.post(url).body(body.to_vec());
        if let Some(key) = key {
            req = req.header(
                "x-sentry-auth",
                format!("Sentry sentry_key={key}, sentry_version=7"),
            );
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
    };

    // Keyed on the client address: SDK hosts 127.0.0.2..9 (loopback source addresses).
    let nginx = Nginx::start(
        &nginx_bin,
        &replicas,
        Balance::AgentHeader,
        Balance::ClientAddress,
    );
    let mut used = BTreeSet::new();
    for host in 2..10u8 {
        let client = reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, host]))
            .build()
            .unwrap();
        let before = envelope_counts(&replicas).await;
        for body in &envelopes {
            let url = format!("http://{}/api/7/envelope/", nginx.sentry);
            post(&client, url, Some(KEY), body).await;
        }
        let after = envelope_counts(&replicas).await;
        used.insert(the_one_that_rose(
            &before,
            &after,
            n,
            &format!("127.0.0.{host}"),
        ));
    }
    assert!(used.len() > 1, "8 hosts all on one replica: {used:?}");
    drop(nginx);

    // Keyed on the DSN key, sent in the header or the query: one replica per key.
    let nginx = Nginx::start(&nginx_bin, &replicas, Balance::AgentHeader, Balance::DsnKey);
    let client = reqwest::Client::new();
    let mut used = BTreeSet::new();
    for k in 0..8u8 {
        let key = format!(
            "{:032x}",
            u128::from(k) * 0x1111_1111_1111_1111_1111_1111 + 7
        );
        let before = envelope_counts(&replicas).await;
        for (i, body) in envelopes.iter().enumerate() {
            let base = format!("http://{}/api/7/envelope/", nginx.sentry);
            if i % 2 == 0 {
                post(&client, base, Some(&key), body).await;
            } else {
                let url = format!("{base}?sentry_key={key}&sentry_version=7");
                post(&client, url, None, body).await;
            }
        }
        let after = envelope_counts(&replicas).await;
        used.insert(the_one_that_rose(&before, &after, n, &format!("key {key}")));
    }
    assert!(used.len() > 1, "8 keys all on one replica: {used:?}");
}
