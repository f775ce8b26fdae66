//! Trace linking in the running binary, Sentry → OTLP: chunks and transactions (or span
//! streaming `span` items) arrive in separate envelopes and the join buffer links them exactly
//! as the offline translation does, whether the chunks come first or in the order the SDK sends
//! everything (each transaction or span when it ends, each chunk when its window closes, with
//! transactions of other threads still open at a chunk's end); a flood of chunks without
//! transactions stays within the buffer's bounds and loses nothing.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_consumer::{Batch, Payload};
use profilink_proto::otlp::{ExportProfilesServiceRequest, request_from_data};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::Dictionary;
use profilink_translator::SampleLink;
use profilink_translator::sentry_to_otlp::restore_chunk_with_links;
use prost::Message;
use service_support::*;
use std::time::Duration;
use tokio::sync::mpsc;

/// Every profile of `req` restored to its chunk id and sample links.
fn links(req: &ExportProfilesServiceRequest) -> (Vec<String>, Vec<SampleLink>) {
    let dict = Dictionary::new(req.dictionary.as_ref());
    let mut ids = Vec::new();
    let mut out = Vec::new();
    for rp in &req.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                let (chunk, l) = restore_chunk_with_links(&dict, rp, p).expect("restorable");
                ids.push(chunk.chunk_id);
                out.extend(l);
            }
        }
    }
    (ids, out)
}

async fn backend() -> (
    String,
    mpsc::Receiver<Batch>,
    profilink_receiver::ServerHandle,
) {
    let (server, batches) = otlp_backend(false).await;
    (server.local_addr().to_string(), batches, server)
}

fn config(
    dir: &std::path::Path,
    sentry: &str,
    backend: &str,
    metrics: &str,
    linking: &str,
) -> std::path::PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry: {{ endpoint: "{sentry}" }}
processors:
  profile_linking: {linking}
exporters:
  otlp: {{ endpoint: "{backend}", tls: {{ insecure: true }} }}
service:
  pipelines:
    profiles/from_sentry: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    )
}

async fn post(client: &reqwest::Client, sentry: &str, body: Vec<u8>) {
    let resp = client
        .post(format!("http://{sentry}/api/7/envelope/"))
        .header("x-sentry-auth", format!("Sentry sentry_key={KEY}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// Receives batches until `profiles` profiles arrived; returns them as requests.
async fn collect(
    batches: &mut mpsc::Receiver<Batch>,
    profiles: u64,
    p: &Profilink,
) -> Vec<ExportProfilesServiceRequest> {
    let mut got = 0;
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while got < profiles {
        let b = tokio::time::timeout_at(deadline, batches.recv())
            .await
            .unwrap_or_else(|_| panic!("{got} of {profiles} profiles; stderr:\n{}", p.stderr()))
            .unwrap();
        got += b.profiles;
        match b.payload {
            Payload::Otlp(data) => out.push(request_from_data(data)),
            other => panic!("unexpected payload {other:?}"),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_then_transactions_link_like_the_offline_translation() {
    let (backend_addr, mut batches, server) = backend().await;
    let dir = tempfile::tempdir().unwrap();
    let (sentry, metrics) = (free_addr(), free_addr());
    let cfg = config(
        dir.path(),
        &sentry,
        &backend_addr,
        &metrics,
        "{ join_window: 8s }",
    );
    let mut p = Profilink::start(dir.path(), &["run", "--config", cfg.to_str().unwrap()], &[]);
    p.wait_port(&sentry, Duration::from_secs(20));

    let python = fixtures().join("sentry/python");
    let chunk_files = [
        python.join("trace-chunk-00.envelope"),
        python.join("trace-chunk-01.envelope"),
    ];
    let client = reqwest::Client::new();
    let mut chunk_ids = Vec::new();
    for f in &chunk_files {
        let body = std::fs::read(f).unwrap();
        for item in Envelope::parse(&body).unwrap().profile_chunks() {
            chunk_ids.push(ProfileChunk::from_json(&item.payload).unwrap().chunk_id);
        }
        post(&client, &sentry, body).await;
    }
    // Nothing leaves before the transactions: the chunks wait in the join buffer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(batches.try_recv().is_err(), "chunks were released early");

    // Then every transaction of the run, one envelope each, as the SDK sends them.
    let jsonl = std::fs::read_to_string(python.join("trace-transactions.jsonl")).unwrap();
    let mut sent = 0;
    for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
        let body = format!(
            "{{}}\n{{\"type\":\"transaction\",\"length\":{}}}\n{line}\n",
            line.len()
        );
        post(&client, &sentry, body.into_bytes()).await;
        sent += 1;
    }
    assert!(sent > 10);

    let reqs = collect(&mut batches, 2, &p).await;
    let mut online_ids = Vec::new();
    let mut online = Vec::new();
    for r in &reqs {
        let (ids, l) = links(r);
        online_ids.extend(ids);
        online.extend(l);
    }
    online_ids.sort();
    chunk_ids.sort();
    assert_eq!(online_ids, chunk_ids, "each chunk once");

    // The offline translation of the same data.
    let out = dir.path().join("offline.pb");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_profilink"))
        .arg("translate")
        .args(["--to", "otlp", "--output"])
        .arg(&out)
        .arg("--transactions")
        .arg(python.join("trace-transactions.jsonl"))
        .args(&chunk_files)
        .status()
        .unwrap();
    assert!(status.success());
    let offline_req =
        ExportProfilesServiceRequest::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
    let (_, mut offline) = links(&offline_req);
    online.sort();
    offline.sort();
    assert!(offline.len() > 100, "the fixture links many samples");
    assert_eq!(online.len(), offline.len());
    assert_eq!(online, offline, "links equal the offline translation");

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let l = [("pipeline", "profiles/from_sentry"), ("reason", "covered")];
    let covered = scrape(&text, "profilink_join_released_chunks_total", &l).unwrap();
    let l = [("pipeline", "profiles/from_sentry"), ("reason", "window")];
    let window = scrape(&text, "profilink_join_released_chunks_total", &l).unwrap();
    // In this run the profiler sampled a few ms past the last transaction's end, so no
    // transaction covers a chunk's end: the window releases both (the `covered` release is
    // unit-tested in the processor crate's join buffer).
    assert_eq!((covered, window), (0, 2), "{text}");
    assert_eq!(
        scrape(
            &text,
            "profilink_join_unlinked_chunks_total",
            &[("pipeline", "profiles/from_sentry")]
        ),
        Some(0)
    );

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unlinked_chunks_stays_within_the_bounds() {
    let (backend_addr, mut batches, server) = backend().await;
    let dir = tempfile::tempdir().unwrap();
    let (sentry, metrics) = (free_addr(), free_addr());
    let cfg = config(
        dir.path(),
        &sentry,
        &backend_addr,
        &metrics,
        "{ join_window: 1h, max_buffer_mib: 1, max_sessions: 50 }",
    );
    let mut p = Profilink::start(dir.path(), &["run", "--config", cfg.to_str().unwrap()], &[]);
    p.wait_port(&sentry, Duration::from_secs(20));
    let drain = tokio::spawn(async move {
        let mut profiles = 0;
        while let Some(b) = batches.recv().await {
            profiles += b.profiles;
        }
        profiles
    });

    let body = std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
    let env = Envelope::parse(&body).unwrap();
    let base = ProfileChunk::from_json(&env.profile_chunks().next().unwrap().payload).unwrap();
    let client = reqwest::Client::new();
    let metrics_url = format!("http://{metrics}/metrics");
    let flood = 300u64;
    let label = [("pipeline", "profiles/from_sentry")];
    for i in 0..flood {
        let mut c = base.clone();
        c.profiler_id = format!("{:032x}", i + 1);
        c.chunk_id = format!("{:032x}", 1_000_000 + i);
        let json = c.to_json();
        let mut body = format!(
            "{{}}\n{{\"type\":\"profile_chunk\",\"length\":{}}}\n",
            json.len()
        )
        .into_bytes();
        body.extend_from_slice(&json);
        post(&client, &sentry, body).await;
        if i % 50 == 49 {
            let (_, text) = get_text(&metrics_url).await;
            let held = scrape(&text, "profilink_join_held_bytes", &label).unwrap();
            assert!(held <= 1 << 20, "held {held} bytes after {i} chunks");
            let chunks = scrape(&text, "profilink_join_held_chunks", &label).unwrap();
            assert!(chunks <= 50, "held {chunks} chunks (sessions bound)");
        }
    }
    let (_, text) = get_text(&metrics_url).await;
    let l = [("pipeline", "profiles/from_sentry"), ("reason", "overflow")];
    let overflow = scrape(&text, "profilink_join_released_chunks_total", &l).unwrap();
    assert!(overflow > flood / 2, "released early: {overflow}");
    let held = scrape(&text, "profilink_join_held_chunks", &label).unwrap();

    // The drain releases the rest: every chunk reached the backend, none linked.
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    server.abort();
    let profiles = drain.await.unwrap();
    assert_eq!(
        profiles, flood,
        "{overflow} overflowed, {held} held at the end"
    );
}

/// One thing the SDK sends: the envelope, and the time (SDK clock, Unix ns) it sends it at.
type Sent = (u64, Vec<u8>);

fn ns(secs: f64) -> u64 {
    profilink_proto::sentry::secs_to_nanos(secs).unwrap()
}

fn rfc3339_secs(v: &serde_json::Value) -> f64 {
    profilink_proto::sentry::Timestamp::parse_rfc3339(v.as_str().unwrap())
        .unwrap()
        .as_secs_f64()
}

/// The real run: its chunks and its transactions (one JSON line each).
fn fixture_run() -> (Vec<ProfileChunk>, Vec<String>) {
    let python = fixtures().join("sentry/python");
    let mut chunks = Vec::new();
    for f in ["trace-chunk-00.envelope", "trace-chunk-01.envelope"] {
        let body = std::fs::read(python.join(f)).unwrap();
        for item in Envelope::parse(&body).unwrap().profile_chunks() {
            chunks.push(ProfileChunk::from_json(&item.payload).unwrap());
        }
    }
    let jsonl = std::fs::read_to_string(python.join("trace-transactions.jsonl")).unwrap();
    let lines = jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    (chunks, lines)
}

/// Last sample of `chunk` (Unix ns).
fn last_sample_ns(chunk: &ProfileChunk) -> u64 {
    chunk
        .profile
        .samples
        .iter()
        .map(|s| ns(s.timestamp))
        .max()
        .unwrap()
}

/// `chunk` cut at `at` (Unix s) as if the SDK's chunk window had closed there: the samples up
/// to `at` (sent at `at`), and the rest under a new chunk id (sent with its last sample).
fn cut(chunk: &ProfileChunk, at: f64) -> [(u64, ProfileChunk); 2] {
    let mut before = chunk.clone();
    before.profile.samples.retain(|s| s.timestamp <= at);
    let mut after = chunk.clone();
    after.profile.samples.retain(|s| s.timestamp > at);
    let id = u128::from_str_radix(&chunk.chunk_id, 16).unwrap();
    after.chunk_id = format!("{:032x}", id.wrapping_add(1));
    assert!(!before.profile.samples.is_empty() && !after.profile.samples.is_empty());
    let end = last_sample_ns(&after);
    [(ns(at), before), (end, after)]
}

fn envelope(item_header: serde_json::Value, payload: &[u8]) -> Vec<u8> {
    let mut header = item_header;
    header["length"] = payload.len().into();
    let mut body = format!("{{}}\n{header}\n").into_bytes();
    body.extend_from_slice(payload);
    body.push(b'\n');
    body
}

fn chunk_envelope(c: &ProfileChunk) -> Vec<u8> {
    envelope(
        serde_json::json!({"type": "profile_chunk", "platform": c.platform}),
        &c.to_json(),
    )
}

/// Each transaction in its own envelope, sent when it ends.
fn transactions_as_sent(lines: &[String]) -> Vec<Sent> {
    lines
        .iter()
        .map(|line| {
            let t: serde_json::Value = serde_json::from_str(line).unwrap();
            let end = ns(rfc3339_secs(&t["timestamp"]));
            let body = envelope(serde_json::json!({"type": "transaction"}), line.as_bytes());
            (end, body)
        })
        .collect()
}

/// The spans of each transaction as span streaming sends them: a V2 `span` item per span
/// (the segment and its children, float-seconds timestamps, `sentry.profiler_id` and
/// `thread.id` attributes), each sent when it ends.
fn spans_as_sent(lines: &[String]) -> Vec<Sent> {
    use serde_json::json;
    let mut out = Vec::new();
    for line in lines {
        let t: serde_json::Value = serde_json::from_str(line).unwrap();
        let trace = &t["contexts"]["trace"];
        let profiler = &t["contexts"]["profile"]["profiler_id"];
        let attrs = |thread: &serde_json::Value| {
            json!({
                "sentry.profiler_id": {"type": "string", "value": profiler},
                "thread.id": {"type": "string", "value": thread},
            })
        };
        let mut spans = vec![json!({
            "trace_id": trace["trace_id"],
            "span_id": trace["span_id"],
            "name": t["transaction"],
            "status": "ok",
            "is_segment": true,
            "start_timestamp": rfc3339_secs(&t["start_timestamp"]),
            "end_timestamp": rfc3339_secs(&t["timestamp"]),
            "attributes": attrs(&trace["data"]["thread.id"]),
        })];
        for c in t["spans"].as_array().unwrap() {
            spans.push(json!({
                "trace_id": c["trace_id"],
                "span_id": c["span_id"],
                "parent_span_id": c["parent_span_id"],
                "name": c["description"],
                "status": "ok",
                "is_segment": false,
                "start_timestamp": rfc3339_secs(&c["start_timestamp"]),
                "end_timestamp": rfc3339_secs(&c["timestamp"]),
                "attributes": attrs(&c["data"]["thread.id"]),
            }));
        }
        for span in spans {
            let end = ns(span["end_timestamp"].as_f64().unwrap());
            let payload = json!({"items": [span]}).to_string();
            let header = json!({"type": "span", "item_count": 1,
                "content_type": "application/vnd.sentry.items.span.v2+json"});
            out.push((end, envelope(header, payload.as_bytes())));
        }
    }
    out
}

/// What the service exported for a replay.
struct Live {
    chunk_ids: Vec<String>,
    links: Vec<SampleLink>,
    covered: u64,
    window: u64,
}

/// The directory named by `PROFILINK_TEST_DUMP`, if set: replays keep their inputs and outputs
/// there (`NAME-live-N.pb`, `NAME-offline.pb`, `NAME-chunk-N.json`, `NAME-transactions.jsonl`)
/// for the independent checkers.
fn dump_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("PROFILINK_TEST_DUMP").map(Into::into)
}

/// Sends `sent` in the SDK's order (by send time, ties in the given order) to a fresh service
/// and collects the OTLP it exports for `chunks` chunks.
async fn replay(name: &str, mut sent: Vec<Sent>, chunks: u64) -> Live {
    sent.sort_by_key(|(at, _)| *at);
    let (backend_addr, mut batches, server) = backend().await;
    let dir = tempfile::tempdir().unwrap();
    let (sentry, metrics) = (free_addr(), free_addr());
    // A short window keeps the test fast: it releases the chunks no span passes (the last of
    // each session); the others must leave by the covered rule, with every span.
    let cfg = config(
        dir.path(),
        &sentry,
        &backend_addr,
        &metrics,
        "{ join_window: 5s }",
    );
    let mut p = Profilink::start(dir.path(), &["run", "--config", cfg.to_str().unwrap()], &[]);
    p.wait_port(&sentry, Duration::from_secs(20));
    let client = reqwest::Client::new();
    for (_, body) in sent {
        post(&client, &sentry, body).await;
    }
    let reqs = collect(&mut batches, chunks, &p).await;
    let mut live = Live {
        chunk_ids: Vec::new(),
        links: Vec::new(),
        covered: 0,
        window: 0,
    };
    for (i, r) in reqs.iter().enumerate() {
        let (ids, l) = links(r);
        live.chunk_ids.extend(ids);
        live.links.extend(l);
        if let Some(d) = dump_dir() {
            std::fs::write(d.join(format!("{name}-live-{i}.pb")), r.encode_to_vec()).unwrap();
        }
    }
    live.chunk_ids.sort();
    live.links.sort();
    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let released = |reason| {
        let l = [("pipeline", "profiles/from_sentry"), ("reason", reason)];
        scrape(&text, "profilink_join_released_chunks_total", &l).unwrap()
    };
    (live.covered, live.window) = (released("covered"), released("window"));
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    server.abort();
    live
}

/// `profilink translate --to otlp --transactions T CHUNKS` on the same data: its links.
fn offline_links(name: &str, chunks: &[ProfileChunk], transactions: &[String]) -> Vec<SampleLink> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = dump_dir().unwrap_or_else(|| tmp.path().to_path_buf());
    let txns = dir.join(format!("{name}-transactions.jsonl"));
    std::fs::write(&txns, transactions.join("\n")).unwrap();
    let mut files = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let f = dir.join(format!("{name}-chunk-{i}.json"));
        std::fs::write(&f, c.to_json()).unwrap();
        files.push(f);
    }
    let out = dir.join(format!("{name}-offline.pb"));
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_profilink"))
        .args(["translate", "--to", "otlp", "--output"])
        .arg(&out)
        .arg("--transactions")
        .arg(&txns)
        .args(&files)
        .status()
        .unwrap();
    assert!(status.success());
    let req =
        ExportProfilesServiceRequest::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
    let (_, mut l) = links(&req);
    l.sort();
    l
}

/// The real run with each session's chunk cut where transactions of several threads are open
/// (as if the SDK's 60 s chunk window had closed there), in SDK order.
fn cut_run() -> Vec<(u64, ProfileChunk)> {
    let (chunks, _) = fixture_run();
    // Session 1 (samples 63.0–69.3 s): at 66.0 four transactions on four threads are open, the
    // first to end (66.12) is short and the last (67.31) ends past the longest seen (1.52 s).
    // Session 2 (70.8–74.6 s): at 72.0 three are open on three threads.
    let at = [1_795_317_066.0, 1_795_317_072.0];
    chunks
        .iter()
        .zip(at)
        .flat_map(|(c, at)| cut(c, at))
        .collect()
}

fn assert_live_equals_offline(live: &Live, chunks: &[ProfileChunk], offline: &[SampleLink]) {
    let mut ids: Vec<String> = chunks.iter().map(|c| c.chunk_id.clone()).collect();
    ids.sort();
    assert_eq!(live.chunk_ids, ids, "each chunk once");
    assert!(offline.len() > 1_000, "the run links many samples");
    let missing = offline
        .iter()
        .filter(|l| live.links.binary_search(l).is_err())
        .count();
    assert_eq!(
        (live.links.len(), missing),
        (offline.len(), 0),
        "live links {} of the {} offline ones ({missing} missing)",
        live.links.len(),
        offline.len()
    );
    assert_eq!(live.links, offline);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_in_sdk_order_link_like_the_offline_translation() {
    let (_, lines) = fixture_run();
    for (name, chunks) in [
        // As recorded: each session's only chunk is sent after all its transactions.
        (
            "recorded",
            fixture_run()
                .0
                .into_iter()
                .map(|c| (last_sample_ns(&c), c))
                .collect::<Vec<_>>(),
        ),
        ("cut", cut_run()),
    ] {
        let mut sent = transactions_as_sent(&lines);
        sent.extend(chunks.iter().map(|(at, c)| (*at, chunk_envelope(c))));
        let chunks: Vec<ProfileChunk> = chunks.into_iter().map(|(_, c)| c).collect();
        let live = replay(name, sent, chunks.len() as u64).await;
        assert_live_equals_offline(&live, &chunks, &offline_links(name, &chunks, &lines));
        // The chunk cut mid-run left by the covered rule, the last of each session by the
        // window (no span ends past it).
        let covered = if name == "cut" { 2 } else { 0 };
        assert_eq!((live.covered, live.window), (covered, 2), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn span_items_in_sdk_order_link_like_the_offline_translation() {
    let (_, lines) = fixture_run();
    let chunks = cut_run();
    let mut sent = spans_as_sent(&lines);
    sent.extend(chunks.iter().map(|(at, c)| (*at, chunk_envelope(c))));
    let chunks: Vec<ProfileChunk> = chunks.into_iter().map(|(_, c)| c).collect();
    let live = replay("spans", sent, chunks.len() as u64).await;
    assert_live_equals_offline(&live, &chunks, &offline_links("spans", &chunks, &lines));
    assert_eq!((live.covered, live.window), (2, 2));
}
