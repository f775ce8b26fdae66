//! Fault soak of the real binary: steady OTLP/gRPC load and SDK envelopes (profile chunks, to
//! the `sentry` receiver) while the Sentry stand-in flaps
//! (503s, 429 with `X-Sentry-Rate-Limits`, connection resets, stalls longer than the
//! exporter's timeout), the process is SIGKILLed and restarted on a period, and (as root) the
//! queue's file system runs out of space for a while. A second OTLP/gRPC door feeds an `otlp`
//! exporter with a durable sending queue (profilink as a gateway stage) whose backend
//! disappears and comes back. A second `sentry` receiver feeds SDK envelopes (chunks, with a
//! transaction) through the `profile_linking` join buffer to that `otlp` exporter: the chunks
//! wait there for `join_window`, so every kill finds chunks held (the join-window fault,
//! counted when the join buffer reports held chunks just before the kill); its join log is on
//! the queues' file system. Afterwards every observation of every accepted request must
//! have reached Sentry, or the OTLP backend (at least once; more than once only for requests
//! whose answer was lost to a kill or that their client first abandoned), memory stays under a bound, and the process never exits
//! on its own. Prints one summary line.
//!
//! The suite runs a short soak (`PROFILINK_SOAK_SECONDS`, default 40 s: every fault at least
//! once); `scripts/soak.sh MINUTES` runs a long one.

mod service_support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use service_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Round `k` of a client is the fixture shifted by `k` times this (it spans 60.65 s).
const ROUND_NS: u64 = 61_000_000_000;
/// Peak RSS allowed: the 32 MiB queue, the accumulator and the runtime, with room.
const RSS_BOUND_MIB: u64 = 512;

/// What the Sentry stand-in does with the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Mode {
    Ok = 0,
    Unavailable = 1,
    RateLimited = 2,
    Reset = 3,
    Stall = 4,
}

impl Mode {
    fn from(v: u8) -> Mode {
        match v {
            1 => Mode::Unavailable,
            2 => Mode::RateLimited,
            3 => Mode::Reset,
            4 => Mode::Stall,
            _ => Mode::Ok,
        }
    }
}

#[derive(Default)]
struct Flapping {
    mode: AtomicU8,
    stall: Mutex<Duration>,
    chunks: Mutex<BTreeMap<String, ProfileChunk>>,
    changed_ids: AtomicU64,
    resends: AtomicU64,
}

async fn envelope(
    State(s): State<Arc<Flapping>>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let mode = Mode::from(s.mode.load(Ordering::SeqCst));
    match mode {
        Mode::Unavailable => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Mode::RateLimited => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("x-sentry-rate-limits", "2:profile_chunk:key")],
            )
                .into_response();
        }
        Mode::Stall => {
            let stall = *s.stall.lock().unwrap();
            tokio::time::sleep(stall).await;
        }
        Mode::Ok | Mode::Reset => {}
    }
    let encoding = headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let raw = decompress(&encoding, &body);
    let env = Envelope::parse(&raw).expect("profilink sent a valid envelope");
    let mut chunks = s.chunks.lock().unwrap();
    for item in &env.items {
        if item.item_type() != Some("profile_chunk") {
            continue;
        }
        let c = ProfileChunk::from_json(&item.payload).expect("a valid chunk");
        match chunks.get(&c.chunk_id) {
            Some(prev) if prev == &c => {
                s.resends.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {
                s.changed_ids.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                chunks.insert(c.chunk_id.clone(), c);
            }
        }
    }
    (StatusCode::OK, [("connection", "close")], "{}").into_response()
}

/// Accepts connections; in `Reset` mode closes each new one with a TCP reset at once.
struct ResettingListener {
    inner: tokio::net::TcpListener,
    state: Arc<Flapping>,
}

impl axum::serve::Listener for ResettingListener {
    type Io = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.inner.accept().await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            if Mode::from(self.state.mode.load(Ordering::SeqCst)) == Mode::Reset {
                // A zero linger sends a reset on drop without blocking (the deprecation warns
                // about non-zero lingers).
                #[allow(deprecated)]
                let _ = stream.set_linger(Some(Duration::ZERO));
                drop(stream);
                continue;
            }
            return (stream, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

async fn start_flapping() -> (Arc<Flapping>, String) {
    let state = Arc::new(Flapping::default());
    let app = Router::new()
        .route("/api/{project}/envelope/", post(envelope))
        .with_state(state.clone());
    let inner = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = inner.local_addr().unwrap();
    let listener = ResettingListener {
        inner,
        state: state.clone(),
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (state, format!("http://{KEY}@{addr}/42"))
}

/// The soak's schedule, scaled to its length.
struct Plan {
    seconds: u64,
    kill_every: Duration,
    stall: Duration,
    /// Sentry modes in turn, each for its duration, then `Ok` for `ok_gap`.
    faults: Vec<(Mode, Duration)>,
    ok_gap: Duration,
    disk_full_every: Duration,
    disk_full_for: Duration,
    backend_down_every: Duration,
    backend_down_for: Duration,
    /// `profile_linking.join_window` of the Sentry -> OTLP pipeline.
    join_window: Duration,
}

impl Plan {
    fn new(seconds: u64) -> Plan {
        let long = seconds >= 300;
        let stall = if long {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(8)
        };
        Plan {
            seconds,
            kill_every: Duration::from_secs(if long { 60 } else { 13 }),
            stall,
            faults: vec![
                (Mode::Unavailable, Duration::from_secs(3)),
                (Mode::RateLimited, Duration::from_secs(3)),
                (Mode::Reset, Duration::from_secs(3)),
                (Mode::Stall, stall + Duration::from_secs(1)),
            ],
            ok_gap: Duration::from_secs(if long { 20 } else { 3 }),
            disk_full_every: Duration::from_secs(if long { 300 } else { 20 }),
            disk_full_for: Duration::from_secs(if long { 20 } else { 5 }),
            backend_down_every: Duration::from_secs(if long { 120 } else { 9 }),
            backend_down_for: Duration::from_secs(if long { 40 } else { 6 }),
            // The default window in a long soak; a short one ends within the CI soak's drain.
            join_window: Duration::from_secs(if long { 30 } else { 5 }),
        }
    }
}

/// Counts of what was injected.
#[derive(Default)]
struct Injected {
    kills: AtomicU64,
    modes: [AtomicU64; 5],
    disk_full: AtomicU64,
    backend_down: AtomicU64,
    /// Kills while the join buffer held chunks.
    join_window_kills: AtomicU64,
}

/// The addresses of the soak: profilink's four doors, its metrics and the OTLP backend.
struct Doors {
    /// OTLP/gRPC to the `sentry` exporter.
    grpc: String,
    /// SDK envelopes to the `sentry` exporter.
    envelopes: String,
    /// OTLP/gRPC to the `otlp` exporter (the gateway stage).
    gateway: String,
    /// SDK envelopes through the join buffer to the `otlp` exporter.
    sdk_otlp: String,
    /// profilink's metrics (the join buffer's held chunks before a kill).
    metrics: String,
    /// Where the `otlp` exporter sends: the backend, when it is up.
    backend: String,
}

/// The OTLP backend behind the gateway: profilink_receiver's gRPC server on a fixed address,
/// stopped (gone: connections refused) and started again by the soak. Records the
/// observation keys of what it received, once per distinct request (the exporter's queue is
/// at-least-once: a request whose answer a kill or a shutdown cut off comes again,
/// identical).
#[derive(Default)]
struct Backend {
    keys: Mutex<Keys>,
    seen: Mutex<BTreeSet<u64>>,
    resends: AtomicU64,
}

impl Backend {
    fn take(&self, b: profilink_consumer::Batch) {
        use prost::Message;
        use std::hash::{Hash, Hasher};
        let profilink_consumer::Payload::Otlp(data) = b.payload else {
            return;
        };
        let req = profilink_proto::otlp::request_from_data(data);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        req.encode_to_vec().hash(&mut h);
        if !self.seen.lock().unwrap().insert(h.finish()) {
            self.resends.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let k = keys(&expected_chunks(&req));
        let mut all = self.keys.lock().unwrap();
        for (key, n) in k {
            *all.entry(key).or_default() += n;
        }
    }

    /// Serves on `addr` until `stop` fires; then the server ends (in-flight calls answered,
    /// connections closed) and the address refuses connections.
    async fn serve(self: &Arc<Self>, addr: &str, stop: tokio::sync::watch::Receiver<bool>) {
        let (consumer, mut batches) = profilink_consumer::ChannelConsumer::new(64);
        let server = loop {
            match profilink_receiver::serve_otlp_grpc(
                &profilink_receiver::OtlpGrpcConfig {
                    endpoint: addr.to_owned(),
                    ..Default::default()
                },
                Arc::new(consumer.clone()),
                Arc::new(profilink_receiver::Stats::default()),
                {
                    let mut stop = stop.clone();
                    async move {
                        let _ = stop.wait_for(|down| *down).await;
                    }
                },
            )
            .await
            {
                Ok(s) => break s,
                // The address may still be held by the last server's closing sockets.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        drop(consumer);
        let me = self.clone();
        let drain = tokio::spawn(async move {
            while let Some(b) = batches.recv().await {
                me.take(b);
            }
        });
        // Graceful: the exporter's calls in flight are answered (a hang here hangs the soak,
        // which is then visible).
        let _ = server.wait().await;
        let _ = tokio::time::timeout(Duration::from_secs(10), drain).await;
    }
}

fn config(
    dir: &Path,
    doors: &Doors,
    queue: &Path,
    otlp_queue: &Path,
    join_window: Duration,
) -> PathBuf {
    let Doors {
        grpc,
        envelopes,
        gateway,
        sdk_otlp,
        metrics,
        backend,
    } = doors;
    write_config(
        dir,
        "soak.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
  otlp/gateway:
    protocols:
      grpc: {{ endpoint: "{gateway}" }}
  sentry:
    endpoint: "{envelopes}"
  sentry/otlp:
    endpoint: "{sdk_otlp}"
processors:
  profile_linking: {{ join_window: {window}s }}
exporters:
  otlp:
    endpoint: "{backend}"
    tls: {{ insecure: true }}
    timeout: 3s
    retry_on_failure: {{ enabled: true, initial_interval: 100ms, max_interval: 1s, max_elapsed_time: 0s }}
    sending_queue: {{ storage: "{otlp_queue}", max_size_mib: 16 }}
  sentry:
    dsn: ${{env:TEST_SENTRY_DSN}}
    timeout: 3s
    chunk_idle_timeout: 2s
    default_rate_limit: 2s
    retry_on_failure: {{ enabled: true, initial_interval: 100ms, max_interval: 1s, max_elapsed_time: 0s }}
    sending_queue: {{ storage: "{queue}", max_size_mib: 32 }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
    profiles/sdk: {{ receivers: [sentry], exporters: [sentry] }}
    profiles/gateway: {{ receivers: [otlp/gateway], exporters: [otlp] }}
    profiles/sdk_otlp: {{ receivers: [sentry/otlp], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            queue = queue.display(),
            otlp_queue = otlp_queue.display(),
            window = join_window.as_secs(),
        ),
    )
}

fn round(base: &ExportProfilesServiceRequest, k: u64) -> ExportProfilesServiceRequest {
    shifted(base, k * ROUND_NS)
}

/// A client's own copy of the fixture: its resources tagged so its sessions are its own.
fn client_base(
    fixture: &ExportProfilesServiceRequest,
    client: usize,
) -> ExportProfilesServiceRequest {
    use profilink_proto::otlp::{AnyValue, KeyValue, any_value};
    let mut req = fixture.clone();
    for rp in &mut req.resource_profiles {
        rp.resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(KeyValue {
                key: "service.instance.id".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(format!("soak-{client}"))),
                }),
                ..Default::default()
            });
    }
    req
}

/// Observation keys: `(profiler_id, timestamp in µs)` with multiplicity. Grouping sparse
/// threads changes a sample's thread, never its session or time, so this is what must
/// arrive.
type Keys = BTreeMap<(String, i64), u64>;

fn keys(chunks: &[ProfileChunk]) -> Keys {
    let mut k = Keys::new();
    for c in chunks {
        for s in &c.profile.samples {
            *k.entry((c.profiler_id.clone(), (s.timestamp * 1e6).round() as i64))
                .or_default() += 1;
        }
    }
    k
}

#[derive(Default)]
struct Accepted {
    keys: Keys,
    /// Extra copies allowed: a request whose answer was lost (a kill mid-request) and that was
    /// sent again, or that its client first abandoned, may legitimately arrive once more for
    /// each of those causes.
    ambiguous: Keys,
    requests: u64,
    retries: u64,
    /// Of `requests`, envelopes to the `sentry` receiver.
    envelopes: u64,
    /// Requests first sent by a client that gave up on them after a few milliseconds (the
    /// abandoned-request fault), then sent again until accepted.
    abandoned: u64,
}

/// Every this many rounds an OTLP client first abandons its request (a gRPC deadline of
/// 1-40 ms: some are cut while the body is read, most while profilink translates and queues
/// them), then sends it again as usual. profilink finishes an abandoned request it has read
/// (delivered at least once), or takes nothing of it: never a part, never a request stuck in a
/// queue until the next start.
const ABANDON_EVERY: u64 = 5;

/// Sends `req` with a gRPC deadline of `deadline` and returns without caring for the answer.
async fn abandon(grpc: &str, req: &ExportProfilesServiceRequest, deadline: Duration) {
    let Ok(mut c) = profilink_proto::otlp::profiles_service_client::ProfilesServiceClient::connect(
        format!("http://{grpc}"),
    )
    .await
    else {
        return;
    };
    let mut call = tonic::Request::new(req.clone());
    call.set_timeout(deadline);
    let _ = c.export(call).await;
}

async fn send_until_accepted(
    grpc: &str,
    req: &ExportProfilesServiceRequest,
    stop: &AtomicBool,
) -> Option<(u64, bool)> {
    let mut retries = 0;
    let mut ambiguous = false;
    loop {
        if stop.load(Ordering::SeqCst) && retries > 0 {
            // Past the end of the load: give up on a request never accepted.
            if retries > 200 {
                return None;
            }
        }
        let attempt = async {
            let mut c =
                profilink_proto::otlp::profiles_service_client::ProfilesServiceClient::connect(
                    format!("http://{grpc}"),
                )
                .await
                .map_err(|_| false)?;
            c.export(req.clone()).await.map_err(|s| {
                // A status from the server is a clean refusal; anything else (a reset, the
                // process gone mid-request) may have been persisted before the answer was lost.
                !matches!(
                    s.code(),
                    tonic::Code::Unavailable | tonic::Code::ResourceExhausted
                ) || s.message().contains("transport")
                    || s.message().contains("connection")
            })
        };
        match tokio::time::timeout(Duration::from_secs(10), attempt).await {
            Ok(Ok(_)) => return Some((retries, ambiguous)),
            Ok(Err(maybe_persisted)) => ambiguous |= maybe_persisted,
            Err(_) => ambiguous = true,
        }
        retries += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One OTLP/gRPC client: a round of `base` every 250 ms, each retried until accepted, until
/// `stop`.
fn otlp_load(
    addr: &str,
    base: ExportProfilesServiceRequest,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Accepted> {
    let (addr, stop) = (addr.to_owned(), stop.clone());
    tokio::spawn(async move {
        let mut acc = Accepted::default();
        let mut k = 0;
        while !stop.load(Ordering::SeqCst) {
            let req = round(&base, k);
            let abandoned = k % ABANDON_EVERY == ABANDON_EVERY - 1;
            if abandoned {
                abandon(&addr, &req, Duration::from_millis(1 + (k * 7919) % 40)).await;
                acc.abandoned += 1;
            }
            if let Some((retries, ambiguous)) = send_until_accepted(&addr, &req, &stop).await {
                // An abandoned request may have been delivered too: one more copy allowed, on
                // top of the one a lost answer allows.
                let extra_copies = u64::from(ambiguous) + u64::from(abandoned);
                for (key, n) in keys(&expected_chunks(&req)) {
                    if extra_copies > 0 {
                        *acc.ambiguous.entry(key.clone()).or_default() += n * extra_copies;
                    }
                    *acc.keys.entry(key).or_default() += n;
                }
                acc.requests += 1;
                acc.retries += retries;
            }
            k += 1;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        acc
    })
}

/// What arrived, against what was accepted.
struct Diff {
    /// Accepted observations that did not arrive.
    lost: u64,
    /// Observations that arrived more often than accepted, beyond the resends allowed for
    /// requests whose answer was lost.
    duplicated: u64,
    /// Observations that arrived and were never sent.
    extra: u64,
}

fn compare(accepted: &Accepted, delivered: &Keys) -> Diff {
    let mut d = Diff {
        lost: 0,
        duplicated: 0,
        extra: 0,
    };
    let all: BTreeSet<_> = accepted.keys.keys().chain(delivered.keys()).collect();
    for k in all {
        let want = *accepted.keys.get(k).unwrap_or(&0);
        let got = *delivered.get(k).unwrap_or(&0);
        let allowed = *accepted.ambiguous.get(k).unwrap_or(&0);
        if got < want {
            d.lost += want - got;
        } else if got > want {
            if want == 0 {
                d.extra += got;
            } else if got - want > allowed {
                d.duplicated += got - want - allowed;
            }
        }
    }
    d
}

fn rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Mounts a small tmpfs for the queue (root only); None when that is not possible.
fn small_tmpfs(dir: &Path) -> Option<PathBuf> {
    let mount = dir.join("queue-fs");
    std::fs::create_dir_all(&mount).ok()?;
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&mount)
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then_some(mount)
}

/// Fills `fs` until it is full; returns the ballast file.
fn fill(fs: &Path) -> PathBuf {
    use std::io::Write;
    let path = fs.join("ballast");
    if let Ok(mut f) = std::fs::File::create(&path) {
        let block = vec![0u8; 1 << 20];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    path
}

/// One round of an SDK's chunk: the fixture's chunk with its own chunk id, the client's own
/// profiler id, and its samples `k` rounds of 7 s later (the chunk spans 6.3 s).
fn sdk_chunk(base: &ProfileChunk, client: usize, k: u64) -> ProfileChunk {
    let mut c = base.clone();
    c.chunk_id = format!("{:016x}{:016x}", 0x5d4b_0000 + client as u64, k);
    c.profiler_id = format!("{:016x}{:016x}", 0x5d4b_5e55_0000 + client as u64, 0u64);
    for sample in &mut c.profile.samples {
        sample.timestamp += 7.0 * k as f64;
    }
    c
}

/// An SDK's envelope of `c`, with a `transaction` item (its JSON) after the chunk if given.
fn sdk_envelope(c: &ProfileChunk, transaction: Option<&[u8]>) -> Vec<u8> {
    let payload = c.to_json();
    let mut body = format!(
        "{{}}\n{{\"type\":\"profile_chunk\",\"platform\":\"{}\",\"length\":{}}}\n",
        c.platform,
        payload.len()
    )
    .into_bytes();
    body.extend_from_slice(&payload);
    body.push(b'\n');
    if let Some(t) = transaction {
        body.extend_from_slice(
            format!("{{\"type\":\"transaction\",\"length\":{}}}\n", t.len()).as_bytes(),
        );
        body.extend_from_slice(t);
        body.push(b'\n');
    }
    body
}

/// Held chunks of the Sentry -> OTLP pipeline's join buffer, from profilink's metrics.
async fn held_chunks(metrics: &str) -> u64 {
    let url = format!("http://{metrics}/metrics");
    let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(2), reqwest::get(&url)).await else {
        return 0;
    };
    let text = r.text().await.unwrap_or_default();
    profilink::telemetry::metrics::scrape(
        &text,
        "profilink_join_held_chunks",
        &[("pipeline", "profiles/sdk_otlp")],
    )
    .unwrap_or(0)
}

/// One SDK: a chunk of its own session every 500 ms (with `transaction` in the envelope, if
/// given) to the `sentry` receiver at `addr`, each retried until accepted, until `stop`.
fn sdk_load(
    addr: &str,
    base: &ProfileChunk,
    client: usize,
    transaction: Option<Vec<u8>>,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Accepted> {
    let (addr, base, stop) = (addr.to_owned(), base.clone(), stop.clone());
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        let mut acc = Accepted::default();
        let mut k = 0;
        while !stop.load(Ordering::SeqCst) {
            let chunk = sdk_chunk(&base, client, k);
            let body = sdk_envelope(&chunk, transaction.as_deref());
            if let Some((retries, ambiguous)) =
                post_until_accepted(&http, &addr, &body, &stop).await
            {
                for (key, n) in keys(std::slice::from_ref(&chunk)) {
                    *acc.keys.entry(key.clone()).or_default() += n;
                    if ambiguous {
                        *acc.ambiguous.entry(key).or_default() += n;
                    }
                }
                acc.requests += 1;
                acc.retries += retries;
                acc.envelopes += 1;
            }
            k += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        acc
    })
}

/// Posts an envelope until it is answered 200; like `send_until_accepted`, says whether an
/// earlier attempt may have been taken in before its answer was lost.
async fn post_until_accepted(
    http: &reqwest::Client,
    addr: &str,
    body: &[u8],
    stop: &AtomicBool,
) -> Option<(u64, bool)> {
    let mut retries = 0;
    let mut ambiguous = false;
    loop {
        if stop.load(Ordering::SeqCst) && retries > 200 {
            return None;
        }
        let attempt = http
            .post(format!("http://{addr}/api/42/envelope/"))
            .header(
                "x-sentry-auth",
                format!("Sentry sentry_key={KEY}, sentry_version=7"),
            )
            .header("content-type", "application/x-sentry-envelope")
            .body(body.to_vec())
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match attempt {
            Ok(r) if r.status() == 200 => return Some((retries, ambiguous)),
            // An answer other than 200 (503: queue full) is a clean refusal.
            Ok(_) => {}
            // No answer: the request may have been persisted before the process died.
            Err(_) => ambiguous = true,
        }
        retries += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_faults_lose_nothing() {
    let seconds: u64 = std::env::var("PROFILINK_SOAK_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let plan = Plan::new(seconds);
    let dir = tempfile::tempdir().unwrap();
    let tmpfs = small_tmpfs(dir.path());
    let queue = tmpfs
        .clone()
        .map_or_else(|| dir.path().join("queue"), |fs| fs.join("queue"));
    let (sentry, dsn) = start_flapping().await;
    *sentry.stall.lock().unwrap() = plan.stall;
    let otlp_queue = tmpfs
        .clone()
        .map_or_else(|| dir.path().join("otlp-queue"), |fs| fs.join("otlp-queue"));
    let doors = Doors {
        grpc: free_addr(),
        envelopes: free_addr(),
        gateway: free_addr(),
        sdk_otlp: free_addr(),
        metrics: free_addr(),
        backend: free_addr(),
    };
    let (grpc, envelopes) = (doors.grpc.clone(), doors.envelopes.clone());
    let cfg = config(dir.path(), &doors, &queue, &otlp_queue, plan.join_window);
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let env = [("TEST_SENTRY_DSN", Some(dsn.as_str()))];
    let stderr_log = dir.path().join("profilink.stderr");
    let start = || Profilink::start_logging_to(dir.path(), &args, &env, &stderr_log);
    let process = Arc::new(Mutex::new(start()));
    process
        .lock()
        .unwrap()
        .wait_port(&grpc, Duration::from_secs(30));

    let fixture = otlp_fixture("ebpf-profile.pb");
    let injected = Arc::new(Injected::default());
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let until = began + Duration::from_secs(plan.seconds);

    // The OTLP backend behind the gateway, up until the soak takes it down.
    let backend = Arc::new(Backend::default());
    let (backend_down, down_rx) = tokio::sync::watch::channel(false);
    {
        let backend = backend.clone();
        let addr = doors.backend.clone();
        let mut down_rx = down_rx;
        tokio::spawn(async move {
            loop {
                backend.serve(&addr, down_rx.clone()).await;
                if down_rx.wait_for(|down| !*down).await.is_err() {
                    break;
                }
            }
        });
    }

    // Load: 3 clients to Sentry and one to the gateway, one round each every 250 ms, each
    // retried until accepted.
    let mut clients = Vec::new();
    for client in 0..3 {
        clients.push(otlp_load(&grpc, client_base(&fixture, client), &stop));
    }
    let gateway_client = otlp_load(&doors.gateway, client_base(&fixture, 3), &stop);

    // Load over the envelope endpoint: an SDK's chunks, one envelope every 500 ms.
    let sdk_base = {
        let raw = std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
        let env = Envelope::parse(&raw).unwrap();
        let item = env
            .profile_chunks()
            .next()
            .expect("the fixture has a chunk");
        ProfileChunk::from_json(&item.payload).unwrap()
    };
    clients.push(sdk_load(&envelopes, &sdk_base, 0, None, &stop));
    // And through the join buffer to the OTLP backend, each chunk with a transaction (of
    // another session: its spans are logged and kept, the chunk waits for its window).
    let transaction = {
        let raw = std::fs::read(fixtures().join("sentry/python/trace-transaction-0001.envelope"))
            .unwrap();
        let env = Envelope::parse(&raw).unwrap();
        let item = env
            .items
            .iter()
            .find(|i| i.item_type() == Some("transaction"))
            .expect("the fixture has a transaction");
        item.payload.to_vec()
    };
    let sdk_otlp_client = sdk_load(&doors.sdk_otlp, &sdk_base, 1, Some(transaction), &stop);

    // Sentry flapping.
    let flap = {
        let sentry = sentry.clone();
        let injected = injected.clone();
        let faults = plan.faults.clone();
        let ok_gap = plan.ok_gap;
        tokio::spawn(async move {
            'outer: loop {
                for (mode, d) in &faults {
                    tokio::time::sleep(ok_gap).await;
                    if Instant::now() + *d > until {
                        break 'outer;
                    }
                    sentry.mode.store(*mode as u8, Ordering::SeqCst);
                    injected.modes[*mode as usize].fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(*d).await;
                    sentry.mode.store(Mode::Ok as u8, Ordering::SeqCst);
                }
            }
            sentry.mode.store(Mode::Ok as u8, Ordering::SeqCst);
        })
    };

    // Disk full, as root.
    let disk = tmpfs.clone().map(|fs| {
        let injected = injected.clone();
        let (every, hold) = (plan.disk_full_every, plan.disk_full_for);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if Instant::now() + hold > until {
                    break;
                }
                let fs = fs.clone();
                let ballast = tokio::task::spawn_blocking(move || fill(&fs))
                    .await
                    .unwrap();
                injected.disk_full.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(hold).await;
                let _ = std::fs::remove_file(&ballast);
            }
        })
    });

    // The OTLP backend disappears for a while, and comes back.
    let backend_flap = {
        let injected = injected.clone();
        let (every, hold) = (plan.backend_down_every, plan.backend_down_for);
        let backend_down = backend_down.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if Instant::now() + hold > until {
                    break;
                }
                let _ = backend_down.send(true);
                injected.backend_down.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(hold).await;
                let _ = backend_down.send(false);
            }
        })
    };

    // Kills, RSS and unexpected exits, until the end of the load.
    let mut peak_rss = 0;
    let mut unexpected_exits = 0;
    let mut next_kill = Instant::now() + plan.kill_every;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let kill = Instant::now() >= next_kill;
        // What the join buffer holds right before the kill.
        let held = if kill {
            held_chunks(&doors.metrics).await
        } else {
            0
        };
        let mut p = process.lock().unwrap();
        if !p.running() {
            unexpected_exits += 1;
            eprintln!("soak: profilink exited on its own:\n{}", p.stderr());
            *p = start();
            continue;
        }
        peak_rss = peak_rss.max(rss_mib(p.pid()).unwrap_or(0));
        if kill {
            if held > 0 {
                injected.join_window_kills.fetch_add(1, Ordering::Relaxed);
            }
            p.signal("KILL");
            let _ = p.wait_exit(Duration::from_secs(10));
            injected.kills.fetch_add(1, Ordering::Relaxed);
            *p = start();
            next_kill = Instant::now() + plan.kill_every;
        }
    }
    stop.store(true, Ordering::SeqCst);
    flap.await.unwrap();
    backend_flap.await.unwrap();
    let _ = backend_down.send(false);
    if let Some(d) = disk {
        d.abort();
        let _ = std::fs::remove_file(tmpfs.as_ref().unwrap().join("ballast"));
    }
    let mut accepted = Accepted::default();
    for c in clients {
        let a = c.await.unwrap();
        for (k, n) in a.keys {
            *accepted.keys.entry(k).or_default() += n;
        }
        for (k, n) in a.ambiguous {
            *accepted.ambiguous.entry(k).or_default() += n;
        }
        accepted.requests += a.requests;
        accepted.retries += a.retries;
        accepted.envelopes += a.envelopes;
        accepted.abandoned += a.abandoned;
    }
    // What the OTLP backend must get: the gateway's requests and the Sentry -> OTLP
    // envelopes' chunks (their own profiler sessions).
    let mut gateway = gateway_client.await.unwrap();
    let sdk_otlp = sdk_otlp_client.await.unwrap();
    for (k, n) in sdk_otlp.keys {
        *gateway.keys.entry(k).or_default() += n;
    }
    for (k, n) in sdk_otlp.ambiguous {
        *gateway.ambiguous.entry(k).or_default() += n;
    }

    // Drain: Sentry answers, windows go idle, everything queued is delivered.
    sentry.mode.store(Mode::Ok as u8, Ordering::SeqCst);
    let drain_start = Instant::now();
    let mut last = (0, Instant::now());
    loop {
        let delivered = keys(
            &sentry
                .chunks
                .lock()
                .unwrap()
                .values()
                .cloned()
                .collect::<Vec<_>>(),
        );
        let at_backend = backend.keys.lock().unwrap().clone();
        let missing = compare(&accepted, &delivered).lost + compare(&gateway, &at_backend).lost;
        if missing == 0 {
            break;
        }
        if missing != last.0 {
            last = (missing, Instant::now());
        }
        if last.1.elapsed() > Duration::from_secs(45)
            || drain_start.elapsed() > Duration::from_secs(300)
        {
            break;
        }
        {
            let mut p = process.lock().unwrap();
            if !p.running() {
                unexpected_exits += 1;
                *p = start();
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    {
        let mut p = process.lock().unwrap();
        p.signal("TERM");
        let status = p.wait_exit(Duration::from_secs(30));
        if !status.success() {
            unexpected_exits += 1;
        }
    }
    let stderr = std::fs::read_to_string(&stderr_log).unwrap_or_default();
    if let Some(fs) = &tmpfs {
        let _ = std::process::Command::new("umount").arg(fs).status();
    }

    let chunks: Vec<ProfileChunk> = sentry.chunks.lock().unwrap().values().cloned().collect();
    let delivered = keys(&chunks);
    let Diff {
        lost,
        duplicated,
        extra,
    } = compare(&accepted, &delivered);
    let at_backend = backend.keys.lock().unwrap().clone();
    let gw = compare(&gateway, &at_backend);
    let sparse_dropped: u64 = stderr
        .lines()
        .filter(|l| l.contains("run summary"))
        .filter_map(|l| {
            let i = l.find("sparse_dropped=")?;
            l[i + 15..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let m = |mode: Mode| injected.modes[mode as usize].load(Ordering::Relaxed);
    println!(
        "soak: {}s, {} requests accepted ({} of them envelopes; {} retries), faults: sigkill={} sentry_503={} sentry_429={} \
         sentry_reset={} sentry_stall={} disk_full={}{} otlp_backend_down={} join_window_kills={} abandoned_requests={}; observations accepted={} delivered={} \
         lost={} duplicated={} unexpected={} changed_chunk_ids={} identical_resends={} \
         sparse_dropped_in_last_summary={}; gateway and Sentry -> OTLP (join window {}s) to the OTLP backend: {} requests accepted \
         ({} of them envelopes; {} retries), observations accepted={} delivered={} lost={} duplicated={} unexpected={} identical_resends={}; \
         peak_rss={}MiB (bound {}MiB); unexpected_exits={}",
        plan.seconds,
        accepted.requests,
        accepted.envelopes,
        accepted.retries,
        injected.kills.load(Ordering::Relaxed),
        m(Mode::Unavailable),
        m(Mode::RateLimited),
        m(Mode::Reset),
        m(Mode::Stall),
        injected.disk_full.load(Ordering::Relaxed),
        if tmpfs.is_none() {
            " (not root: no tmpfs)"
        } else {
            ""
        },
        injected.backend_down.load(Ordering::Relaxed),
        injected.join_window_kills.load(Ordering::Relaxed),
        accepted.abandoned + gateway.abandoned,
        accepted.keys.values().sum::<u64>(),
        delivered.values().sum::<u64>(),
        lost,
        duplicated,
        extra,
        sentry.changed_ids.load(Ordering::Relaxed),
        sentry.resends.load(Ordering::Relaxed),
        sparse_dropped,
        plan.join_window.as_secs(),
        gateway.requests + sdk_otlp.requests,
        sdk_otlp.envelopes,
        gateway.retries + sdk_otlp.retries,
        gateway.keys.values().sum::<u64>(),
        at_backend.values().sum::<u64>(),
        gw.lost,
        gw.duplicated,
        gw.extra,
        backend.resends.load(Ordering::Relaxed),
        peak_rss,
        RSS_BOUND_MIB,
        unexpected_exits,
    );
    if lost > 0 {
        let lost_keys: Vec<_> = accepted
            .keys
            .iter()
            .filter(|(k, n)| delivered.get(*k).copied().unwrap_or(0) < **n)
            .take(20)
            .collect();
        eprintln!("lost observations (profiler id, µs: accepted count), first 20: {lost_keys:?}");
    }
    if lost + duplicated + extra + gw.lost + gw.duplicated + gw.extra > 0 {
        // What profilink said about it: drops, refusals and queue trouble are logged.
        for l in stderr
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        {
            eprintln!("profilink: {l}");
        }
    }
    assert!(accepted.requests > 0, "no request was accepted");
    assert!(accepted.envelopes > 0, "no envelope was accepted");
    assert!(
        injected.kills.load(Ordering::Relaxed) > 0,
        "the soak never killed profilink"
    );
    assert_eq!(
        lost, 0,
        "observations of accepted requests never reached Sentry"
    );
    assert_eq!(duplicated, 0, "observations delivered twice");
    assert_eq!(extra, 0, "observations nobody sent");
    assert_eq!(
        sentry.changed_ids.load(Ordering::Relaxed),
        0,
        "a chunk id was reused for other content"
    );
    assert!(
        gateway.requests > 0,
        "no request to the gateway was accepted"
    );
    assert!(
        injected.backend_down.load(Ordering::Relaxed) > 0,
        "the OTLP backend never went down"
    );
    assert!(
        sdk_otlp.envelopes > 0,
        "no envelope to the Sentry -> OTLP pipeline was accepted"
    );
    assert!(
        injected.join_window_kills.load(Ordering::Relaxed) > 0,
        "no kill found chunks held in the join buffer"
    );
    assert!(
        accepted.abandoned > 0 && gateway.abandoned > 0,
        "no request was abandoned by its client"
    );
    assert_eq!(
        gw.lost, 0,
        "observations accepted by the gateway or the Sentry -> OTLP pipeline never reached the OTLP backend"
    );
    assert_eq!(
        gw.duplicated, 0,
        "observations delivered twice to the backend"
    );
    assert_eq!(gw.extra, 0, "observations nobody sent reached the backend");
    assert_eq!(unexpected_exits, 0, "profilink exited on its own");
    assert!(
        peak_rss <= RSS_BOUND_MIB,
        "peak RSS {peak_rss} MiB over {RSS_BOUND_MIB} MiB"
    );
}
