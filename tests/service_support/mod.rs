//! Helpers for the service tests: run the real `profilink` binary as a process (killed on
//! drop), free ports, waiting for ports and health, a loopback Sentry stand-in, an OTLP gRPC
//! client and fixture readers.
#![allow(dead_code)]

pub mod raw_codec;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp::profiles_service_client::ProfilesServiceClient;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use prost::Message;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A 32-character Sentry public key for test DSNs.
pub const KEY: &str = "0123456789abcdef0123456789abcdef";

/// The shared fixtures directory.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A free loopback port (bound, then released), never one handed out before in this process.
///
/// The port is free when returned but taken only later, by the process a test starts; the
/// tests of one file run in parallel, and the kernel may offer a released port again. Two
/// tests given the same port would then talk to each other's servers (seen as a connection
/// reset when the other test killed its replica), so each port is handed out once.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// `127.0.0.1:<free port>`.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// The running binary; killed (SIGKILL) when dropped.
pub struct Profilink {
    child: Option<Child>,
    stderr_path: PathBuf,
}

impl Profilink {
    /// Starts `profilink ARGS` in `cwd` with `env` (`None` removes a variable). Standard error
    /// goes to `cwd/profilink.stderr`.
    pub fn start(cwd: &Path, args: &[&str], env: &[(&str, Option<&str>)]) -> Profilink {
        Self::start_logging_to(cwd, args, env, &cwd.join("profilink.stderr"))
    }

    /// [`Profilink::start`] with standard error in `stderr_path` (appended).
    pub fn start_logging_to(
        cwd: &Path,
        args: &[&str],
        env: &[(&str, Option<&str>)],
        stderr_path: &Path,
    ) -> Profilink {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr_path)
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_profilink"));
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .env_remove("RUST_LOG")
            .env("PROFILINK_SHUTDOWN_TIMEOUT", "10s");
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let child = cmd.spawn().expect("start profilink");
        Profilink {
            child: Some(child),
            stderr_path: stderr_path.to_path_buf(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// What the process wrote to standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends a signal (`TERM`, `KILL`, `INT`).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} failed");
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => c.try_wait().unwrap().is_none(),
            None => false,
        }
    }

    /// Waits for the process to exit (panics after `timeout`, printing its stderr).
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(c) = &mut self.child
                && let Some(status) = c.try_wait().unwrap()
            {
                self.child = None;
                return status;
            }
            if start.elapsed() > timeout {
                panic!(
                    "profilink did not exit within {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `addr` accepts TCP connections (panics after `timeout` or if the process
    /// exits).
    pub fn wait_port(&mut self, addr: &str, timeout: Duration) {
        let start = Instant::now();
        let sa: SocketAddr = addr.parse().unwrap();
        loop {
            if TcpStream::connect_timeout(&sa, Duration::from_millis(100)).is_ok() {
                return;
            }
            if !self.running() {
                panic!("profilink exited early; stderr:\n{}", self.stderr());
            }
            if start.elapsed() > timeout {
                panic!(
                    "{addr} not listening after {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `GET url` answers 200.
    pub async fn wait_healthy(&mut self, url: &str, timeout: Duration) {
        let start = Instant::now();
        let client = reqwest::Client::new();
        loop {
            if let Ok(r) = client.get(url).send().await
                && r.status() == 200
            {
                return;
            }
            if !self.running() {
                panic!("profilink exited early; stderr:\n{}", self.stderr());
            }
            if start.elapsed() > timeout {
                panic!(
                    "{url} not healthy after {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Profilink {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads an OTLP fixture (`fixtures()/otlp/<name>`).
pub fn otlp_fixture(name: &str) -> ExportProfilesServiceRequest {
    let bytes = std::fs::read(fixtures().join("otlp").join(name)).unwrap();
    ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap()
}

/// `req` as if from other processes: every resource gets `service.instance.id = tag` (new
/// profiler sessions, same samples).
pub fn tagged(req: &ExportProfilesServiceRequest, tag: &str) -> ExportProfilesServiceRequest {
    use profilink_proto::otlp::{AnyValue, KeyValue, any_value};
    let mut req = req.clone();
    for rp in &mut req.resource_profiles {
        rp.resource
            .get_or_insert_with(Default::default)
            .attributes
            .push(KeyValue {
                key: "service.instance.id".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(tag.into())),
                }),
                ..Default::default()
            });
    }
    req
}

/// (profiles, observations) of a request, as the receivers count them.
pub fn otlp_counts(req: &ExportProfilesServiceRequest) -> (u64, u64) {
    let counts = profilink_proto::signal::profile_counts(&req.resource_profiles);
    (counts.items, counts.samples)
}

/// An OTLP gRPC client with gzip.
pub async fn grpc_client(addr: &str) -> ProfilesServiceClient<tonic::transport::Channel> {
    ProfilesServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .max_decoding_message_size(64 << 20)
}

/// Sends `req` over gRPC; panics unless the answer is OK without rejected profiles.
pub async fn grpc_export(addr: &str, req: ExportProfilesServiceRequest) {
    let mut c = grpc_client(addr).await;
    let resp = c.export(req).await.expect("export");
    if let Some(p) = resp.into_inner().partial_success {
        assert_eq!(p.rejected_profiles, 0, "{}", p.error_message);
    }
}

/// `GET url` as text.
pub async fn get_text(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// One envelope received by the stand-in.
#[derive(Debug, Clone)]
pub struct Received {
    /// `/api/<project>/envelope/` project id.
    pub project: String,
    /// The `X-Sentry-Auth` header.
    pub auth: String,
    /// The `Content-Encoding` header.
    pub encoding: String,
    /// The parsed envelope.
    pub envelope: Envelope,
}

impl Received {
    /// The chunks of `profile_chunk` items.
    pub fn chunks(&self) -> Vec<ProfileChunk> {
        self.envelope
            .profile_chunks()
            .map(|i| ProfileChunk::from_json(&i.payload).unwrap())
            .collect()
    }
}

/// One OTLP traces request received by the stand-in's OTLP endpoint.
#[derive(Debug, Clone)]
pub struct ReceivedTraces {
    /// `/api/<project>/integration/otlp/v1/traces` project id.
    pub project: String,
    /// The `X-Sentry-Auth` header.
    pub auth: String,
    /// The `Content-Type` header.
    pub content_type: String,
    /// The decoded request.
    pub request: profilink_proto::otlp::ExportTraceServiceRequest,
}

#[derive(Default)]
struct StandInState {
    received: Mutex<Vec<Received>>,
    traces: Mutex<Vec<ReceivedTraces>>,
    status: AtomicU16,
    delay_ms: AtomicU64,
    requests: AtomicU64,
}

/// A loopback Sentry stand-in: `POST /api/<project>/envelope/` records the envelope
/// (decompressing gzip/zstd) and answers the configured status.
#[derive(Clone)]
pub struct SentryStandIn {
    state: Arc<StandInState>,
    /// Bound address.
    pub addr: SocketAddr,
}

/// A request body as received: gzip or zstd decoded by its `Content-Encoding`.
pub fn decompress(encoding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match encoding {
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap();
        }
        "zstd" => out = zstd::decode_all(body).unwrap(),
        _ => out = body.to_vec(),
    }
    out
}

async fn envelope_handler(
    State(state): State<Arc<StandInState>>,
    UrlPath(project): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let status = state.status.load(Ordering::SeqCst);
    if status != 200 {
        return (StatusCode::from_u16(status).unwrap(), "{}");
    }
    let h = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let encoding = h("content-encoding");
    let raw = decompress(&encoding, &body);
    let envelope = Envelope::parse(&raw).expect("a valid envelope");
    state.received.lock().unwrap().push(Received {
        project,
        auth: h("x-sentry-auth"),
        encoding,
        envelope,
    });
    (StatusCode::OK, "{}")
}

async fn traces_handler(
    State(state): State<Arc<StandInState>>,
    UrlPath(project): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    use prost::Message;
    let h = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let raw = decompress(&h("content-encoding"), &body);
    let Ok(request) = profilink_proto::otlp::ExportTraceServiceRequest::decode(raw.as_slice())
    else {
        return (StatusCode::BAD_REQUEST, "{}");
    };
    state.traces.lock().unwrap().push(ReceivedTraces {
        project,
        auth: h("x-sentry-auth"),
        content_type: h("content-type"),
        request,
    });
    (StatusCode::OK, "{}")
}

impl SentryStandIn {
    /// Starts the stand-in on a free port (or on `addr`), answering 200.
    pub async fn start(addr: Option<&str>) -> SentryStandIn {
        let state = Arc::new(StandInState {
            status: AtomicU16::new(200),
            ..Default::default()
        });
        let app = Router::new()
            .route("/api/{project}/envelope/", post(envelope_handler))
            .route(
                "/api/{project}/integration/otlp/v1/traces",
                post(traces_handler),
            )
            .route(
                "/api/{project}/integration/otlp/v1/traces/",
                post(traces_handler),
            )
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(addr.unwrap_or("127.0.0.1:0"))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SentryStandIn { state, addr }
    }

    /// A DSN pointing at the stand-in, project 42.
    pub fn dsn(&self) -> String {
        format!("http://{KEY}@{}/42", self.addr)
    }

    /// Answer every request with `status` (200 records the envelope).
    pub fn set_status(&self, status: u16) {
        self.state.status.store(status, Ordering::SeqCst);
    }

    /// Delays every answer.
    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Requests seen (any status).
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Envelopes recorded so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// OTLP traces requests recorded so far.
    pub fn traces(&self) -> Vec<ReceivedTraces> {
        self.state.traces.lock().unwrap().clone()
    }

    /// Profile chunks recorded so far (client reports excluded).
    pub fn chunks(&self) -> Vec<ProfileChunk> {
        self.received().iter().flat_map(Received::chunks).collect()
    }

    /// Samples in the chunks recorded so far.
    pub fn sample_count(&self) -> usize {
        self.chunks().iter().map(|c| c.profile.samples.len()).sum()
    }

    /// Waits until `pred` holds for the recorded chunks.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&[ProfileChunk]) -> bool,
    ) -> bool {
        let start = Instant::now();
        loop {
            if pred(&self.chunks()) {
                return true;
            }
            if start.elapsed() > timeout {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Observations of chunks: `(profiler_id, thread_id)` → sorted timestamps (float seconds).
pub type Observations = BTreeMap<(String, String), Vec<f64>>;

/// The observations of chunks.
pub fn observations(chunks: &[ProfileChunk]) -> Observations {
    let mut m: Observations = BTreeMap::new();
    for c in chunks {
        for s in &c.profile.samples {
            m.entry((c.profiler_id.clone(), s.thread_id.to_string()))
                .or_default()
                .push(s.timestamp);
        }
    }
    for v in m.values_mut() {
        v.sort_by(f64::total_cmp);
    }
    m
}

/// The observations of chunks that reach Sentry with the exporters' default
/// (`sparse_threads: group`): per session, threads with fewer than 2 samples with a non-empty
/// stack are grouped as the exporter groups them (the library's rule, tested on its own in
/// `profilink_proto::sentry::ThreadGroups`; no thread of these inputs is linked and sparse),
/// and what is still sparse is left out. Assumes each session of `chunks` ends up in one
/// merged chunk.
pub fn expected_observations(chunks: &[ProfileChunk]) -> Observations {
    use profilink_proto::sentry::{ProfileData, Sample};
    let mut sessions: BTreeMap<String, ProfileData> = BTreeMap::new();
    for c in chunks {
        let p = sessions
            .entry(c.profiler_id.clone())
            .or_insert_with(|| ProfileData {
                stacks: vec![vec![], vec![0]],
                ..Default::default()
            });
        for s in &c.profile.samples {
            let non_empty = c
                .profile
                .stacks
                .get(s.stack_id)
                .is_some_and(|st| !st.is_empty());
            p.samples.push(Sample {
                timestamp: s.timestamp,
                stack_id: usize::from(non_empty),
                thread_id: s.thread_id.clone(),
            });
        }
        for (k, m) in &c.profile.thread_metadata {
            p.thread_metadata
                .entry(k.clone())
                .or_insert_with(|| m.clone());
        }
    }
    let mut m: Observations = BTreeMap::new();
    for (profiler_id, mut p) in sessions {
        p.group_sparse_threads(|_| false);
        p.drop_sparse_threads();
        for s in &p.samples {
            m.entry((profiler_id.clone(), s.thread_id.to_string()))
                .or_default()
                .push(s.timestamp);
        }
    }
    for v in m.values_mut() {
        v.sort_by(f64::total_cmp);
    }
    m
}

/// The observations of chunks that reach Sentry with `sparse_threads: drop`: threads with
/// fewer than 2 samples with a non-empty stack in their session are left out (Relay would
/// drop them). Assumes each session of `chunks` ends up in one merged chunk.
pub fn expected_observations_dropped(chunks: &[ProfileChunk]) -> Observations {
    let mut active: BTreeMap<(String, String), usize> = BTreeMap::new();
    for c in chunks {
        for s in &c.profile.samples {
            let non_empty = c
                .profile
                .stacks
                .get(s.stack_id)
                .is_some_and(|st| !st.is_empty());
            *active
                .entry((c.profiler_id.clone(), s.thread_id.to_string()))
                .or_default() += usize::from(non_empty);
        }
    }
    let mut all = observations(chunks);
    all.retain(|k, _| active.get(k).is_some_and(|n| *n >= 2));
    all
}

/// Two timestamps are the same observation when within 1 µs (a chunk's JSON round trip may
/// move a float-seconds timestamp by an ulp, about 0.24 µs today).
const SAME_TS: f64 = 1e-6;

/// `(missing, extra)`: observations of `want` not in `got` (with multiplicity) and the reverse.
pub fn diff_observations(want: &Observations, got: &Observations) -> (usize, usize) {
    let (mut missing, mut extra) = (0, 0);
    let empty = Vec::new();
    let keys: std::collections::BTreeSet<_> = want.keys().chain(got.keys()).collect();
    for k in keys {
        let a = want.get(k).unwrap_or(&empty);
        let b = got.get(k).unwrap_or(&empty);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if (a[i] - b[j]).abs() <= SAME_TS {
                i += 1;
                j += 1;
            } else if a[i] < b[j] {
                missing += 1;
                i += 1;
            } else {
                extra += 1;
                j += 1;
            }
        }
        missing += a.len() - i;
        extra += b.len() - j;
    }
    (missing, extra)
}

/// Number of observations.
pub fn observation_count(o: &Observations) -> usize {
    o.values().map(Vec::len).sum()
}

/// Panics unless both multisets are equal, with a short summary.
pub fn assert_same_observations(want: &Observations, got: &Observations, what: &str) {
    let (missing, extra) = diff_observations(want, got);
    let total = observation_count(want);
    assert!(
        missing == 0 && extra == 0,
        "{what}: {missing} of {total} observations missing, {extra} extra"
    );
}

/// The chunks the service makes of `req` (sparse threads kept as they are, one translation
/// per resource; the exporters group or drop them once merged).
pub fn expected_chunks(req: &ExportProfilesServiceRequest) -> Vec<ProfileChunk> {
    use profilink_translator::otlp_to_sentry::{
        ChunkOptions, SparseThreadGrouping, SparseThreadPolicy, to_chunks,
    };
    let opts = ChunkOptions {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..Default::default()
    };
    req.resource_profiles
        .iter()
        .flat_map(|rp| to_chunks(req.dictionary.as_ref(), std::slice::from_ref(rp), &opts).chunks)
        .collect()
}

/// `base` with every profile and sample timestamp `shift_ns` later (unset profile times stay
/// unset): one more round of the same agent.
pub fn shifted(base: &ExportProfilesServiceRequest, shift_ns: u64) -> ExportProfilesServiceRequest {
    let mut req = base.clone();
    for rp in &mut req.resource_profiles {
        for sp in &mut rp.scope_profiles {
            for p in &mut sp.profiles {
                if p.time_unix_nano > 0 {
                    p.time_unix_nano += shift_ns;
                }
                for s in &mut p.samples {
                    for t in &mut s.timestamps_unix_nano {
                        *t += shift_ns;
                    }
                }
            }
        }
    }
    req
}

/// POSTs OTLP/JSON traces to the HTTP receiver at `http` (`host:port`).
pub async fn post_json_traces(http: &str, body: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("http://{http}/v1/traces"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// Writes a config file into `dir`.
pub fn write_config(dir: &Path, name: &str, yaml: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, yaml).unwrap();
    p
}

/// Starts `profilink run --config profilink.yaml` in `dir`, the file written from `yaml`, and
/// waits until every address of `listening` accepts connections.
pub fn start_with_config(dir: &Path, yaml: &str, listening: &[&str]) -> Profilink {
    let config = write_config(dir, "profilink.yaml", yaml);
    let mut process = Profilink::start(dir, &["run", "--config", config.to_str().unwrap()], &[]);
    for addr in listening {
        process.wait_port(addr, Duration::from_secs(20));
    }
    process
}

/// One sample of the `/metrics` served at `addr`; 0 when it is not there.
pub async fn metric(addr: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    let (_, text) = get_text(&format!("http://{addr}/metrics")).await;
    profilink::telemetry::metrics::scrape(&text, name, labels).unwrap_or(0)
}

/// A loopback OTLP backend: profilink_receiver's own gRPC server into a channel (taking traces
/// too when `traces`), standing in for the OTLP endpoint of an exporter.
pub async fn otlp_backend(
    traces: bool,
) -> (
    profilink_receiver::ServerHandle,
    tokio::sync::mpsc::Receiver<profilink_consumer::Batch>,
) {
    let (consumer, batches) = profilink_consumer::ChannelConsumer::new(256);
    let server = profilink_receiver::serve_otlp_grpc(
        &profilink_receiver::OtlpGrpcConfig {
            endpoint: "127.0.0.1:0".into(),
            ..Default::default()
        },
        Arc::new(consumer.with_traces(traces)),
        Arc::new(profilink_receiver::Stats::default()),
        std::future::pending(),
    )
    .await
    .expect("loopback OTLP backend");
    (server, batches)
}

/// A running `profilink` with one `profiles` pipeline from one receiver to a `sentry` exporter
/// whose DSN points at a stand-in (chunks go idle after 300 ms).
pub struct ToSentry {
    /// The process (stopped when dropped).
    pub process: Profilink,
    /// The receiver's address (OTLP/gRPC or the envelope endpoint).
    pub listen: String,
    /// The metrics address.
    pub metrics: String,
    /// The working directory (queue in `./data/queue`).
    pub dir: tempfile::TempDir,
}

/// The configuration of one `profiles` pipeline from the receiver `receiver` (configured by
/// `receivers`, the YAML under `receivers:`; lines after the first indented by 4) to a `sentry`
/// exporter whose DSN is `${env:TEST_SENTRY_DSN}` (chunks idle after 300 ms, a durable queue in
/// `./data/queue`), with metrics at `metrics`.
pub fn to_sentry_config(receivers: &str, receiver: &str, metrics: &str) -> String {
    format!(
        r#"
receivers:
  {receivers}
exporters:
  sentry:
    dsn: "${{env:TEST_SENTRY_DSN}}"
    chunk_idle_timeout: 300ms
    tick: 20ms
    sending_queue: {{ storage: ./data/queue, max_size_mib: 64 }}
service:
  pipelines:
    profiles: {{ receivers: [{receiver}], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
    )
}

/// Waits (bounded by `timeout`, checking every 50 ms) until `pred` holds.
pub async fn wait_until(what: &str, timeout: Duration, mut pred: impl AsyncFnMut() -> bool) {
    let start = std::time::Instant::now();
    while !pred().await {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts [`ToSentry`] with the `otlp` (gRPC) or the `sentry` receiver (`receiver`).
pub fn start_to_sentry(standin: &SentryStandIn, receiver: &str) -> ToSentry {
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (free_addr(), free_addr());
    let receivers = match receiver {
        "otlp" => format!(r#"otlp: {{ protocols: {{ grpc: {{ endpoint: "{listen}" }} }} }}"#),
        _ => format!(r#"sentry: {{ endpoint: "{listen}" }}"#),
    };
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &to_sentry_config(&receivers, receiver, &metrics),
    );
    let dsn = standin.dsn();
    let mut process = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("TEST_SENTRY_DSN", Some(&dsn))],
    );
    process.wait_port(&listen, Duration::from_secs(10));
    ToSentry {
        process,
        listen,
        metrics,
        dir,
    }
}

/// Posts an SDK envelope to the `sentry` receiver at `addr`; returns the answer's status.
pub async fn post_envelope(client: &reqwest::Client, addr: &str, body: Vec<u8>) -> u16 {
    client
        .post(format!("http://{addr}/api/42/envelope/"))
        .header(
            "x-sentry-auth",
            format!("Sentry sentry_key={KEY}, sentry_version=7"),
        )
        .header("content-type", "application/x-sentry-envelope")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}
