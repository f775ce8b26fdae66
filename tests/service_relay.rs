//! profilink as a Relay in front of Sentry SDKs, with the real binary: everything an SDK sends
//! reaches the upstream byte for byte (auth, `User-Agent`, `Content-Encoding` kept) while
//! profiles and transactions also reach the OTLP pipeline; an upstream that is down loses
//! nothing (even across a restart) and keeps each project's order; upstream rate limits come
//! back to the SDK category by category; a full forward queue answers 503; the legacy store,
//! security and OTLP integration paths are proxied; malformed chunks are refused with their
//! reason, never a 200 with nothing anywhere; without an upstream, what no pipeline consumes is
//! counted and logged.

mod service_support;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use flate2::Compression;
use flate2::write::GzEncoder;
use profilink::telemetry::metrics::scrape;
use profilink_consumer::{Batch, Payload};
use profilink_proto::otlp::request_from_data;
use profilink_proto::sentry::{Envelope, EnvelopeItem};
use profilink_translator::Dictionary;
use profilink_translator::sentry_to_otlp::restore_chunk_with_links;
use service_support::*;
use std::io::Write;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One request the upstream stand-in took (answered 2xx).
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Option<String>,
    headers: HeaderMap,
    body: Bytes,
}

impl Seen {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The envelope, decompressed as its `Content-Encoding` says.
    fn envelope(&self) -> Envelope {
        let raw = match self.header("content-encoding") {
            "gzip" => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(
                    &mut flate2::read::GzDecoder::new(&self.body[..]),
                    &mut out,
                )
                .unwrap();
                out
            }
            _ => self.body.to_vec(),
        };
        Envelope::parse(&raw).expect("upstream got a valid envelope")
    }
}

#[derive(Default)]
struct UpstreamState {
    seen: Mutex<Vec<Seen>>,
    attempts: AtomicU64,
    status: AtomicU16,
    rate_limits: Mutex<Option<String>>,
}

/// A Sentry stand-in for the upstream: takes any path, answers the configured status (with
/// `X-Sentry-Rate-Limits` when set) and records what it answered 2xx to.
#[derive(Clone)]
struct UpstreamStandIn {
    state: Arc<UpstreamState>,
    url: String,
}

async fn upstream_handler(State(st): State<Arc<UpstreamState>>, req: Request) -> Response {
    st.attempts.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let status = StatusCode::from_u16(st.status.load(Ordering::SeqCst)).unwrap();
    if status.is_success() {
        st.seen.lock().unwrap().push(Seen {
            path: parts.uri.path().to_string(),
            query: parts.uri.query().map(str::to_string),
            headers: parts.headers,
            body,
        });
    }
    let mut r = (status, "{}").into_response();
    if let Some(l) = st.rate_limits.lock().unwrap().clone() {
        r.headers_mut()
            .insert("x-sentry-rate-limits", l.parse().unwrap());
    }
    r
}

impl UpstreamStandIn {
    async fn start() -> UpstreamStandIn {
        let state = Arc::new(UpstreamState {
            status: AtomicU16::new(200),
            ..Default::default()
        });
        let app = Router::new()
            .fallback(upstream_handler)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        UpstreamStandIn { state, url }
    }

    fn answer(&self, status: u16, rate_limits: Option<&str>) {
        self.state.status.store(status, Ordering::SeqCst);
        *self.state.rate_limits.lock().unwrap() = rate_limits.map(str::to_string);
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    fn attempts(&self) -> u64 {
        self.state.attempts.load(Ordering::SeqCst)
    }

    async fn wait_seen(&self, n: usize, timeout: Duration, p: &Profilink) -> Vec<Seen> {
        let start = Instant::now();
        loop {
            let seen = self.seen();
            if seen.len() >= n {
                return seen;
            }
            assert!(
                start.elapsed() < timeout,
                "upstream saw {} of {n} requests; stderr:\n{}",
                seen.len(),
                p.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A running profilink whose `sentry` receiver forwards to `upstream` (when given) and feeds
/// a `profiles` pipeline with `profile_linking` into an OTLP exporter at `otlp`.
struct Relay {
    process: Profilink,
    listen: String,
    metrics: String,
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

fn relay_config(
    dir: &std::path::Path,
    listen: &str,
    metrics: &str,
    upstream: Option<&str>,
    otlp: &str,
) -> std::path::PathBuf {
    let upstream = upstream.map_or(String::new(), |u| format!(", upstream: {u}"));
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry: {{ endpoint: "{listen}"{upstream} }}
processors:
  profile_linking: {{ join_window: 2s }}
exporters:
  otlp: {{ endpoint: "{otlp}", tls: {{ insecure: true }} }}
service:
  pipelines:
    profiles: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    )
}

impl Relay {
    fn start(upstream: Option<&str>, otlp: &str) -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let (listen, metrics) = (free_addr(), free_addr());
        let config = relay_config(dir.path(), &listen, &metrics, upstream, otlp);
        let mut relay = Relay {
            process: Profilink::start(
                dir.path(),
                &["run", "--config", config.to_str().unwrap()],
                &[],
            ),
            listen,
            metrics,
            dir,
            config,
        };
        relay
            .process
            .wait_port(&relay.listen, Duration::from_secs(20));
        relay
    }

    /// Kills the process (SIGKILL) and starts it again on the same config and directory.
    fn restart_hard(&mut self) {
        let dir = self.dir.path().to_path_buf();
        self.process.signal("KILL");
        self.process.wait_exit(Duration::from_secs(10));
        self.process = Profilink::start_logging_to(
            &dir,
            &["run", "--config", self.config.to_str().unwrap()],
            &[],
            &dir.join("profilink-2.stderr"),
        );
        self.process
            .wait_port(&self.listen, Duration::from_secs(20));
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.listen)
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let (_, text) = get_text(&format!("http://{}/metrics", self.metrics)).await;
        scrape(&text, name, labels).unwrap_or(0)
    }
}

fn upstream_cfg(url: &str, extra: &str) -> String {
    format!(
        "{{ endpoint: \"{url}\", timeout: 5s, sending_queue: {{ storage: ./data/forward }}, \
         retry_on_failure: {{ initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 0s }}{extra} }}"
    )
}

fn item(item_type: &str, extra: serde_json::Value, payload: &[u8]) -> EnvelopeItem {
    let mut i = EnvelopeItem::new(item_type, payload.to_vec());
    if let serde_json::Value::Object(m) = extra {
        i.headers.extend(m);
    }
    i
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The chunk of the Python fixture run and the first transaction of that run (it overlaps the
/// chunk on one of its threads).
fn fixture_chunk_and_transaction() -> (Vec<u8>, String) {
    let python = fixtures().join("sentry/python");
    let env =
        Envelope::parse(&std::fs::read(python.join("trace-chunk-00.envelope")).unwrap()).unwrap();
    let chunk = env.profile_chunks().next().unwrap().payload.clone();
    let line = std::fs::read_to_string(python.join("trace-transactions.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    (chunk, line)
}

const UA: &str = "sentry.python/2.75.0";

fn sdk_auth() -> String {
    format!("Sentry sentry_key={KEY}, sentry_version=7, sentry_client={UA}")
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    gzip_it: bool,
) -> reqwest::Response {
    let mut r = client
        .post(url)
        .header("x-sentry-auth", sdk_auth())
        .header("user-agent", UA)
        .header("content-type", "application/x-sentry-envelope");
    let body = if gzip_it {
        r = r.header("content-encoding", "gzip");
        gzip(&body)
    } else {
        body
    };
    r.body(body).send().await.unwrap()
}

/// Waits for OTLP batches until one profile arrived; returns the trace ids of its links.
async fn otlp_link_trace_ids(batches: &mut mpsc::Receiver<Batch>, p: &Profilink) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let b = tokio::time::timeout_at(deadline, batches.recv())
            .await
            .unwrap_or_else(|_| panic!("no profile reached OTLP; stderr:\n{}", p.stderr()))
            .unwrap();
        let Payload::Otlp(data) = b.payload else {
            continue;
        };
        let req = request_from_data(data);
        let dict = Dictionary::new(req.dictionary.as_ref());
        let mut ids = Vec::new();
        for rp in &req.resource_profiles {
            for sp in &rp.scope_profiles {
                for prof in &sp.profiles {
                    let (_, links) = restore_chunk_with_links(&dict, rp, prof).unwrap();
                    ids.extend(links.iter().map(|l| hex(&l.trace_id)));
                }
            }
        }
        if b.profiles > 0 {
            return ids;
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_item_reaches_upstream_byte_equal_and_profiles_reach_otlp() {
    let upstream = UpstreamStandIn::start().await;
    let (otlp, mut batches) = otlp_backend(false).await;
    let relay = Relay::start(
        Some(&upstream_cfg(&upstream.url, "")),
        &otlp.local_addr().to_string(),
    );
    let (chunk, transaction) = fixture_chunk_and_transaction();
    let trace_id = serde_json::from_str::<serde_json::Value>(&transaction).unwrap()["contexts"]
        ["trace"]["trace_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut envelope = Envelope::default();
    envelope
        .headers
        .insert("event_id".into(), "9ec79c33ec9942ab8353589fcb2e04dc".into());
    envelope.items = vec![
        item(
            "event",
            serde_json::json!({}),
            br#"{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":"boom","level":"error"}"#,
        ),
        item(
            "session",
            serde_json::json!({}),
            br#"{"sid":"7c7b6585f901424d8f35a1d35b2d6ef1","status":"ok","started":"2026-11-22T03:11:00Z","init":true}"#,
        ),
        item(
            "attachment",
            serde_json::json!({"filename": "core.bin", "content_type": "application/octet-stream"}),
            &[0u8, 1, 2, 10, 255, 10, 13, 0],
        ),
        item(
            "client_report",
            serde_json::json!({}),
            br#"{"timestamp":"2026-11-22T03:11:05Z","discarded_events":[{"reason":"queue_overflow","category":"error","quantity":1}]}"#,
        ),
        item("transaction", serde_json::json!({}), transaction.as_bytes()),
        item(
            "profile_chunk",
            serde_json::json!({"platform": "python"}),
            &chunk,
        ),
    ];
    let plain = envelope.to_bytes();
    let sent = gzip(&plain);
    let client = reqwest::Client::new();
    let r = client
        .post(relay.url("/api/42/envelope/"))
        .header("x-sentry-auth", sdk_auth())
        .header("user-agent", UA)
        .header("content-encoding", "gzip")
        .body(sent.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", relay.process.stderr());
    assert_eq!(
        r.text().await.unwrap(),
        r#"{"id":"9ec79c33ec9942ab8353589fcb2e04dc"}"#
    );

    let seen = upstream
        .wait_seen(1, Duration::from_secs(20), &relay.process)
        .await;
    let got = &seen[0];
    assert_eq!(got.path, "/api/42/envelope/");
    assert_eq!(got.header("x-sentry-auth"), sdk_auth());
    assert_eq!(got.header("user-agent"), UA);
    assert_eq!(got.header("content-encoding"), "gzip");
    // The very bytes the SDK sent, so every item is byte-equal.
    assert_eq!(&got.body[..], &sent[..]);
    let forwarded = got.envelope();
    assert_eq!(forwarded.items.len(), 6);
    for (a, b) in forwarded.items.iter().zip(&envelope.items) {
        assert_eq!(a.item_type(), b.item_type());
        assert_eq!(a.payload, b.payload, "{:?}", a.item_type());
    }

    // The chunk reached OTLP, linked to the transaction of the same envelope.
    let ids = otlp_link_trace_ids(&mut batches, &relay.process).await;
    assert!(
        ids.contains(&trace_id),
        "no sample linked to trace {trace_id}: {ids:?}"
    );
    assert_eq!(
        relay
            .metric(
                "profilink_receiver_upstream_sent_requests_total",
                &[("receiver", "sentry")]
            )
            .await,
        1
    );
    assert_eq!(
        relay
            .metric(
                "profilink_receiver_dropped_items_total",
                &[("receiver", "sentry"), ("type", "event")]
            )
            .await,
        0
    );
}

/// An envelope of project `project` holding one event whose message is `tag`.
fn tagged_event(tag: &str) -> Vec<u8> {
    let mut e = Envelope::default();
    e.items.push(item(
        "event",
        serde_json::json!({}),
        format!(r#"{{"message":"{tag}"}}"#).as_bytes(),
    ));
    e.to_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_down_then_back_loses_nothing_and_keeps_each_projects_order() {
    let upstream = UpstreamStandIn::start().await;
    upstream.answer(503, None);
    let (otlp, _batches) = otlp_backend(false).await;
    let mut relay = Relay::start(
        Some(&upstream_cfg(&upstream.url, "")),
        &otlp.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let mut sent = Vec::new();
    for i in 0..12 {
        let project = if i % 3 == 0 { 43 } else { 42 };
        let tag = format!("p{project}-{i}");
        let r = post(
            &client,
            &relay.url(&format!("/api/{project}/envelope/")),
            tagged_event(&tag),
            i % 2 == 0,
        )
        .await;
        assert_eq!(r.status(), 200);
        sent.push((project, tag));
        if i == 5 {
            // Upstream has refused everything so far; a crash must not lose the queue.
            while upstream.attempts() == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            relay.restart_hard();
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(upstream.seen().is_empty());
    assert!(upstream.attempts() >= 2, "retries while down");
    upstream.answer(200, None);
    let seen = upstream
        .wait_seen(sent.len(), Duration::from_secs(20), &relay.process)
        .await;
    assert_eq!(seen.len(), sent.len(), "nothing lost, nothing doubled");
    for project in [42u64, 43] {
        let want: Vec<&str> = sent
            .iter()
            .filter(|(p, _)| *p == project)
            .map(|(_, t)| t.as_str())
            .collect();
        let got: Vec<String> = seen
            .iter()
            .filter(|s| s.path == format!("/api/{project}/envelope/"))
            .map(|s| {
                let e = s.envelope();
                let v: serde_json::Value = serde_json::from_slice(&e.items[0].payload).unwrap();
                v["message"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(got, want, "project {project} in order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_rate_limits_reach_the_sdks_next_response_by_category() {
    let upstream = UpstreamStandIn::start().await;
    upstream.answer(429, Some("60:error:org"));
    let (otlp, _batches) = otlp_backend(false).await;
    let relay = Relay::start(
        Some(&upstream_cfg(&upstream.url, "")),
        &otlp.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let url = relay.url("/api/42/envelope/");
    let r = post(&client, &url, tagged_event("first"), false).await;
    assert_eq!(r.status(), 200);
    let start = Instant::now();
    while upstream.attempts() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Give the forwarder the moment to record the answer.
    tokio::time::sleep(Duration::from_millis(200)).await;
    upstream.answer(200, None);

    // The next envelope: its error is limited, its session is not.
    let mut e = Envelope::default();
    e.items.push(item(
        "event",
        serde_json::json!({}),
        br#"{"message":"second"}"#,
    ));
    e.items.push(item(
        "session",
        serde_json::json!({}),
        br#"{"sid":"s1","status":"ok"}"#,
    ));
    let r = post(&client, &url, e.to_bytes(), true).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-sentry-rate-limits"], "60:error:org");
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((58..=60).contains(&retry), "{retry}");
    let seen = upstream
        .wait_seen(1, Duration::from_secs(10), &relay.process)
        .await;
    let forwarded = seen[0].envelope();
    let types: Vec<_> = forwarded.items.iter().map(|i| i.item_type()).collect();
    assert_eq!(
        types,
        vec![Some("session")],
        "only what upstream does not refuse"
    );

    // An envelope of other categories goes through with a 200.
    let mut s = Envelope::default();
    s.items.push(item(
        "session",
        serde_json::json!({}),
        br#"{"sid":"s2","status":"ok"}"#,
    ));
    let r = post(&client, &url, s.to_bytes(), false).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("x-sentry-rate-limits").is_none());
    upstream
        .wait_seen(2, Duration::from_secs(10), &relay.process)
        .await;
    assert_eq!(
        relay
            .metric(
                "profilink_receiver_refused_items_total",
                &[
                    ("receiver", "sentry"),
                    ("type", "event"),
                    ("reason", "rate_limited")
                ]
            )
            .await,
        1
    );
    assert_eq!(
        relay
            .metric(
                "profilink_receiver_upstream_dropped_requests_total",
                &[("receiver", "sentry"), ("reason", "rate_limited")]
            )
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_forward_queue_answers_503_and_loses_nothing_it_took() {
    let upstream = UpstreamStandIn::start().await;
    upstream.answer(503, None);
    let (otlp, _batches) = otlp_backend(false).await;
    let relay = Relay::start(
        Some(&upstream_cfg(&upstream.url, "").replace(
            "storage: ./data/forward",
            "storage: ./data/forward, max_size_mib: 1",
        )),
        &otlp.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let url = relay.url("/api/42/envelope/");
    let big = "x".repeat(300 << 10);
    let mut accepted = 0;
    let mut full = None;
    for i in 0..10 {
        let r = post(&client, &url, tagged_event(&format!("{i}-{big}")), false).await;
        match r.status().as_u16() {
            200 => accepted += 1,
            503 => {
                full = Some(r);
                break;
            }
            s => panic!("unexpected {s}"),
        }
    }
    let full = full.expect("the bounded queue fills");
    assert!(accepted >= 2, "{accepted}");
    assert!(full.headers().get("retry-after").is_some());
    assert!(
        full.headers().get("x-sentry-rate-limits").is_none(),
        "a full queue is not a rate limit"
    );
    upstream.answer(200, None);
    let seen = upstream
        .wait_seen(accepted, Duration::from_secs(20), &relay.process)
        .await;
    assert_eq!(seen.len(), accepted);
    assert!(
        relay
            .metric(
                "profilink_receiver_upstream_refused_full_total",
                &[("receiver", "sentry")]
            )
            .await
            >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_security_and_otlp_integration_paths_are_proxied() {
    let upstream = UpstreamStandIn::start().await;
    let (otlp, _batches) = otlp_backend(false).await;
    let relay = Relay::start(
        Some(&upstream_cfg(&upstream.url, "")),
        &otlp.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let event = br#"{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":"legacy"}"#.to_vec();
    let r = client
        .post(relay.url("/api/42/store/"))
        .header("x-sentry-auth", sdk_auth())
        .header("content-type", "application/json")
        .body(event.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp =
        br#"{"csp-report":{"document-uri":"https://example.com","violated-directive":"img-src"}}"#
            .to_vec();
    let query = format!("sentry_key={KEY}&sentry_version=7");
    let r = client
        .post(relay.url(&format!("/api/42/security/?{query}")))
        .header("content-type", "application/csp-report")
        .body(csp.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let traces = vec![0x0a, 0x00, 0x12, 0x03, 1, 2, 3];
    let r = client
        .post(relay.url("/api/42/integration/otlp/v1/traces"))
        .header("x-sentry-auth", sdk_auth())
        .header("content-type", "application/x-protobuf")
        .body(traces.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .post(relay.url("/api/42/integration/otlp/v1/logs"))
        .body(b"{}".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "auth is checked at the door");

    let seen = upstream
        .wait_seen(3, Duration::from_secs(20), &relay.process)
        .await;
    let store = &seen[0];
    assert_eq!(store.path, "/api/42/store/");
    assert_eq!(store.header("x-sentry-auth"), sdk_auth());
    assert_eq!(&store.body[..], &event[..]);
    let sec = &seen[1];
    assert_eq!(sec.path, "/api/42/security/");
    assert_eq!(sec.query.as_deref(), Some(query.as_str()));
    assert_eq!(sec.header("content-type"), "application/csp-report");
    assert_eq!(&sec.body[..], &csp[..]);
    let t = &seen[2];
    assert_eq!(t.path, "/api/42/integration/otlp/v1/traces");
    assert_eq!(t.header("content-type"), "application/x-protobuf");
    assert_eq!(&t.body[..], &traces[..]);
}

/// The fixture chunk mutated by `f`.
fn mutated(chunk: &[u8], f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(chunk).unwrap();
    f(&mut v);
    serde_json::to_vec(&v).unwrap()
}

fn chunk_envelope(payload: &[u8]) -> Vec<u8> {
    let mut e = Envelope::default();
    e.items.push(item(
        "profile_chunk",
        serde_json::json!({"platform": "python"}),
        payload,
    ));
    e.to_bytes()
}

/// The malformed chunks of the issue, each with the reason it must be refused for.
fn malformed_chunks() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let (chunk, _) = fixture_chunk_and_transaction();
    vec![
        (
            "every stack_id 2^32",
            mutated(&chunk, |v| {
                for s in v["profile"]["samples"].as_array_mut().unwrap() {
                    s["stack_id"] = serde_json::json!(1u64 << 32);
                }
            }),
            "stack-id-range",
        ),
        (
            "every timestamp 1e300",
            mutated(&chunk, |v| {
                for s in v["profile"]["samples"].as_array_mut().unwrap() {
                    s["timestamp"] = serde_json::json!(1e300);
                }
            }),
            "timestamp-out-of-range",
        ),
        (
            "\"profile\": {}",
            mutated(&chunk, |v| v["profile"] = serde_json::json!({})),
            "no-samples",
        ),
        (
            "a stack pointing at frame 10^9",
            mutated(&chunk, |v| {
                v["profile"]["stacks"][0][0] = serde_json::json!(1_000_000_000u64);
            }),
            "frame-index-range",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_chunks_are_refused_with_their_reason_never_a_silent_200() {
    let upstream = UpstreamStandIn::start().await;
    let (otlp, _batches) = otlp_backend(false).await;
    let alone = Relay::start(None, &otlp.local_addr().to_string());
    let proxy = Relay::start(
        Some(&upstream_cfg(&upstream.url, "")),
        &otlp.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let cases = malformed_chunks();
    for (i, (what, payload, reason)) in cases.iter().enumerate() {
        let body = chunk_envelope(payload);
        // Without an upstream: a 400 that says why.
        let r = post(&client, &alone.url("/api/42/envelope/"), body.clone(), true).await;
        assert_eq!(r.status(), 400, "{what}");
        let detail = r.text().await.unwrap();
        assert!(detail.contains(reason), "{what}: {detail}");
        // With one: forwarded (upstream decides, and reports its own outcome), counted here.
        let r = post(&client, &proxy.url("/api/42/envelope/"), body, true).await;
        assert_eq!(r.status(), 200, "{what}");
        upstream
            .wait_seen(i + 1, Duration::from_secs(10), &proxy.process)
            .await;
    }
    for (what, _, reason) in &cases {
        for relay in [&alone, &proxy] {
            let n = relay
                .metric(
                    "profilink_receiver_refused_items_total",
                    &[
                        ("receiver", "sentry"),
                        ("type", "profile_chunk"),
                        ("reason", reason),
                    ],
                )
                .await;
            assert!(n >= 1, "{what}: not counted with reason {reason}");
        }
    }
    // None of them reached the pipeline.
    assert_eq!(
        proxy
            .metric(
                "profilink_receiver_accepted_profiles_total",
                &[("receiver", "sentry"), ("transport", "http")]
            )
            .await,
        0
    );
    assert!(
        proxy.process.stderr().contains("refused at the door"),
        "a log line says so"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_upstream_unconsumed_items_are_counted_and_logged() {
    let (otlp, _batches) = otlp_backend(false).await;
    let relay = Relay::start(None, &otlp.local_addr().to_string());
    let client = reqwest::Client::new();
    let mut e = Envelope::default();
    e.items
        .push(item("event", serde_json::json!({}), br#"{"message":"x"}"#));
    e.items
        .push(item("event", serde_json::json!({}), br#"{"message":"y"}"#));
    e.items
        .push(item("session", serde_json::json!({}), br#"{"sid":"s"}"#));
    e.items.push(item("x-custom", serde_json::json!({}), b"?"));
    let r = post(
        &client,
        &relay.url("/api/42/envelope/"),
        e.to_bytes(),
        false,
    )
    .await;
    assert_eq!(r.status(), 200);
    let r = client
        .post(relay.url("/api/42/store/"))
        .header("x-sentry-auth", sdk_auth())
        .body(b"{}".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    for (t, n) in [("event", 3), ("session", 1), ("other", 1)] {
        assert_eq!(
            relay
                .metric(
                    "profilink_receiver_dropped_items_total",
                    &[("receiver", "sentry"), ("type", t)]
                )
                .await,
            n,
            "{t}"
        );
    }
    let stderr = relay.process.stderr();
    assert!(
        stderr.contains("has no upstream"),
        "startup warning: {stderr}"
    );
    assert!(
        stderr.contains("discarded_events"),
        "client-report-style log line"
    );
}
