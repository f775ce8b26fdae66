//! Trace linking in the running binary, Sentry → OTLP: chunks and transactions arrive in
//! separate envelopes (chunks first, as SDKs send them) and the join buffer links them exactly
//! as the offline translation does; a flood of chunks without transactions stays within the
//! buffer's bounds and loses nothing.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::{ExportProfilesServiceRequest, request_from_data};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_receiver::{Batch, Payload};
use profilink_translator::SampleLink;
use profilink_translator::dictionary::Dictionary;
use profilink_translator::sentry_to_otlp::restore::restore_chunk_with_links;
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
  otlp: {{ endpoint: "{backend}" }}
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
    // unit-tested in `service::join`).
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
