//! The Sentry → OTLP path survives a crash while the OTLP backend is down: Sentry SDK envelopes
//! with profile chunks go into the `sentry` receiver of the real binary, whose `otlp` exporter
//! has a durable sending queue (`sending_queue.storage`); the backend's address answers
//! nothing. profilink is SIGKILLed, started again, then the backend comes up: every chunk that
//! was answered 200 arrives, with all its observations, exactly once (no answer was lost, so
//! the queue's at-least-once delivery makes no duplicate here).
//!
//! `profile_linking.join_window: 0s`: the join buffer in front of the exporter holds chunks in
//! memory (up to 30 s by default) before they are translated and queued; the test kills the
//! process once the buffer is empty and the chunks are in the exporter's queue.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_consumer::{Batch, Payload};
use profilink_proto::otlp::request_from_data;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::sentry_to_otlp::restore_request;
use service_support::*;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn config(dir: &Path, sentry: &str, backend: &str, metrics: &str) -> std::path::PathBuf {
    config_with_queue(dir, sentry, backend, metrics, "")
}

/// [`config`] with more `sending_queue` keys (`extra`, e.g. `, max_size_mib: 1`).
fn config_with_queue(
    dir: &Path,
    sentry: &str,
    backend: &str,
    metrics: &str,
    extra: &str,
) -> std::path::PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry: {{ endpoint: "{sentry}" }}
processors:
  profile_linking: {{ join_window: 0s }}
exporters:
  otlp:
    endpoint: "{backend}"
    tls: {{ insecure: true }}
    timeout: 1s
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 0s }}
    sending_queue: {{ storage: ./data/otlp-queue, num_consumers: 2{extra} }}
service:
  pipelines:
    profiles: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    )
}

/// The Sentry SDK envelopes of the fixtures that carry profile chunks, with their chunks.
fn chunk_envelopes() -> Vec<(Vec<u8>, Vec<ProfileChunk>)> {
    let mut files: Vec<_> = std::fs::read_dir(fixtures().join("sentry/python"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "envelope"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let body = std::fs::read(f).unwrap();
            let chunks = Envelope::parse(&body)
                .unwrap()
                .profile_chunks()
                .map(|i| ProfileChunk::from_json(&i.payload).unwrap())
                .collect::<Vec<_>>();
            (body, chunks)
        })
        .filter(|(_, chunks)| !chunks.is_empty())
        .collect()
}

/// The chunks restored from the OTLP profiles of one batch.
fn restored(b: Batch) -> Vec<ProfileChunk> {
    let Payload::Otlp(data) = b.payload else {
        return Vec::new();
    };
    restore_request(&request_from_data(data))
        .into_iter()
        .map(|c| c.expect("a chunk-made profile restores"))
        .collect()
}

/// The OTLP backend comes up at `addr` (where the exporter keeps trying): its batches.
async fn start_backend(
    addr: &str,
) -> (
    profilink_receiver::ServerHandle,
    tokio::sync::mpsc::Receiver<Batch>,
) {
    let (consumer, batches) = profilink_consumer::ChannelConsumer::new(256);
    let server = profilink_receiver::serve_otlp_grpc(
        &profilink_receiver::OtlpGrpcConfig {
            endpoint: addr.to_owned(),
            ..Default::default()
        },
        Arc::new(consumer),
        Arc::new(profilink_receiver::Stats::default()),
        std::future::pending(),
    )
    .await
    .expect("OTLP backend");
    (server, batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_chunks_survive_sigkill_while_the_otlp_backend_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let (sentry, backend, metrics) = (free_addr(), free_addr(), free_addr());
    let cfg = config(dir.path(), &sentry, &backend, &metrics);
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(10));

    let client = reqwest::Client::new();
    let mut sent = Vec::new();
    // Several rounds of the fixtures, so that requests are queued behind the ones in flight.
    for _ in 0..3 {
        for (body, chunks) in chunk_envelopes() {
            let status = post_envelope(&client, &sentry, body).await;
            assert_eq!(status, 200, "{}", p.stderr());
            sent.extend(chunks);
        }
    }
    assert!(sent.len() >= 6, "{} chunks", sent.len());
    // Every chunk translated and out of the join buffer, the queue on disk no longer growing:
    // everything is in the exporter's queue while the backend is unreachable.
    let e = [("exporter", "otlp")];
    let mut last = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
        let translated = scrape(&text, "profilink_translated_profiles_total", &[]);
        let held = scrape(
            &text,
            "profilink_join_held_chunks",
            &[("pipeline", "profiles")],
        );
        let queued = scrape(&text, "profilink_queue_size_bytes", &e).unwrap_or(0);
        if translated == Some(sent.len() as u64) && held == Some(0) && queued > 0 && queued == last
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "translated {translated:?} of {}, held {held:?}, queued {queued}\n{text}",
            sent.len()
        );
        last = queued;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p.signal("KILL");
    p.wait_exit(Duration::from_secs(10));

    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The backend comes up at the address the exporter keeps trying.
    let (_server, mut batches) = start_backend(&backend).await;

    let want = observations(&sent);
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while got.len() < sent.len() {
        let b = tokio::time::timeout_at(deadline, batches.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the backend got {} of {} chunks; stderr:\n{}",
                    got.len(),
                    sent.len(),
                    p.stderr()
                )
            })
            .unwrap();
        got.extend(restored(b));
    }
    // Nothing more comes: exactly once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    while let Ok(b) = batches.try_recv() {
        got.extend(restored(b));
    }
    assert_eq!(got.len(), sent.len(), "duplicated chunks");
    assert_same_observations(&want, &observations(&got), "after SIGKILL and restart");

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(scrape(&text, "profilink_queue_size_bytes", &e), Some(0));
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(15)).success());
}

/// Two processes on one queue directory (a copy-pasted config, a second replica on the same
/// volume) would append to and delete each other's segments. The second is refused at start
/// with a message naming the directory, and the first keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_on_the_same_queue_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (sentry, backend, metrics) = (free_addr(), free_addr(), free_addr());
    let cfg = config(dir.path(), &sentry, &backend, &metrics);
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let mut first = Profilink::start(dir.path(), &args, &[]);
    first.wait_port(&sentry, Duration::from_secs(10));

    let other = tempfile::tempdir().unwrap();
    let (sentry2, metrics2) = (free_addr(), free_addr());
    let cfg2 = config(other.path(), &sentry2, &backend, &metrics2);
    // The second process's queue is the first one's directory.
    let yaml = std::fs::read_to_string(&cfg2).unwrap().replace(
        "./data/otlp-queue",
        &dir.path().join("data/otlp-queue").display().to_string(),
    );
    std::fs::write(&cfg2, yaml).unwrap();
    let args2 = ["run", "--config", cfg2.to_str().unwrap()];
    let mut second = Profilink::start(other.path(), &args2, &[]);
    let status = second.wait_exit(Duration::from_secs(15));
    let stderr = second.stderr();
    assert!(!status.success(), "the second process ran:\n{stderr}");
    assert!(
        stderr.contains("is in use") && stderr.contains("otlp-queue"),
        "{stderr}"
    );

    // The first still takes envelopes.
    let (body, _) = chunk_envelopes().remove(0);
    let status = post_envelope(&reqwest::Client::new(), &sentry, body).await;
    assert_eq!(status, 200, "{}", first.stderr());
    first.signal("TERM");
    assert!(first.wait_exit(Duration::from_secs(15)).success());
}

/// With `join_window: 0s`, an envelope whose chunks the OTLP exporter's queue refuses (full:
/// the backend is down) is refused to the SDK, which sends it again; none is answered 200 and
/// then held in memory only. So after a SIGKILL, every envelope answered 200 reaches the
/// backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_the_full_queue_cannot_take_are_refused_not_held_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (sentry, backend, metrics) = (free_addr(), free_addr(), free_addr());
    let cfg = config_with_queue(dir.path(), &sentry, &backend, &metrics, ", max_size_mib: 1");
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(10));

    let client = reqwest::Client::new();
    let envelopes = chunk_envelopes();
    let (mut accepted, mut refused) = (Vec::new(), 0);
    // Distinct chunks (ids and profiler sessions), until the 1 MiB queue has refused a few.
    for round in 0..400u32 {
        let (body, chunks) = &envelopes[round as usize % envelopes.len()];
        let mut text = String::from_utf8(body.clone()).unwrap();
        let mut chunks = chunks.clone();
        for c in &mut chunks {
            let id = format!("{round:08x}{}", &c.chunk_id[8..]);
            text = text.replace(&c.chunk_id, &id);
            c.chunk_id = id;
        }
        let status = post_envelope(&client, &sentry, text.into_bytes()).await;
        match status {
            200 => accepted.extend(chunks),
            429 | 503 => refused += 1,
            other => panic!("answer {other}: {}", p.stderr()),
        }
        if refused >= 5 {
            break;
        }
    }
    assert!(refused >= 5, "the 1 MiB queue never filled up");
    assert!(!accepted.is_empty());
    p.signal("KILL");
    p.wait_exit(Duration::from_secs(10));

    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(10));
    let (_server, mut batches) = start_backend(&backend).await;
    let want: std::collections::BTreeSet<String> =
        accepted.iter().map(|c| c.chunk_id.clone()).collect();
    let mut got = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !want.is_subset(&got) {
        let Ok(Some(b)) = tokio::time::timeout_at(deadline, batches.recv()).await else {
            break;
        };
        got.extend(restored(b).into_iter().map(|c| c.chunk_id));
    }
    let lost: Vec<_> = want.difference(&got).collect();
    assert!(
        lost.is_empty(),
        "{} of {} chunks answered 200 never reached the backend: {lost:?}\n{}",
        lost.len(),
        want.len(),
        p.stderr()
    );
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(15)).success());
}
