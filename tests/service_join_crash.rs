//! A SIGKILL during the join window loses nothing and keeps every link. The real binary runs a
//! `sentry` receiver -> `profile_linking` -> `otlp` exporter pipeline with a durable sending
//! queue, sending to a stand-in OTLP gRPC backend. Two real sentry-python chunks arrive, then
//! every transaction of their run (one envelope each); the chunks wait in the join buffer for
//! `join_window`. Two runs of the same traffic side by side:
//!
//! * uninterrupted: the chunks leave when their window ends;
//! * crashed: SIGKILL 2 s after the last transaction (the chunks answered 200 long ago, still
//!   held), then a restart on the same directory.
//!
//! The crashed run must deliver every chunk, with exactly the observations and the links of the
//! uninterrupted run, once each. (Before the join log: 0 of the 2,035 observations.)
//!
//! And `profile_linking.storage`: the log goes where it says, and is locked against a second
//! process.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_consumer::{Batch, Payload};
use profilink_proto::otlp::{ExportProfilesServiceRequest, request_from_data};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::sentry_to_otlp::restore_chunk_with_links;
use profilink_translator::{Dictionary, SampleLink};
use service_support::*;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// The join window of both runs: long enough that the kill comes well inside it.
const WINDOW: Duration = Duration::from_secs(10);

fn config(dir: &Path, sentry: &str, backend: &str, metrics: &str) -> PathBuf {
    write_config(
        dir,
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry: {{ endpoint: "{sentry}" }}
processors:
  profile_linking: {{ join_window: {}s }}
exporters:
  otlp:
    endpoint: "{backend}"
    tls: {{ insecure: true }}
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 0s }}
    sending_queue: {{ storage: ./data/otlp-queue }}
service:
  pipelines:
    profiles: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            WINDOW.as_secs()
        ),
    )
}

/// What the backend got: per chunk id, its observation count and its sample links.
#[derive(Debug, Default, PartialEq, Eq)]
struct Delivered {
    /// Chunk ids, sorted, once per delivery.
    chunk_ids: Vec<String>,
    /// Observations (sample timestamps) of the OTLP profiles.
    observations: u64,
    /// Every linked observation, sorted.
    links: Vec<SampleLink>,
}

impl Delivered {
    fn add(&mut self, req: &ExportProfilesServiceRequest) {
        let dict = Dictionary::new(req.dictionary.as_ref());
        for rp in &req.resource_profiles {
            for sp in &rp.scope_profiles {
                for p in &sp.profiles {
                    let (chunk, l) = restore_chunk_with_links(&dict, rp, p).expect("restorable");
                    self.chunk_ids.push(chunk.chunk_id);
                    self.links.extend(l);
                }
            }
        }
        self.observations += otlp_counts(req).1;
        self.chunk_ids.sort();
        self.links.sort();
    }
}

/// The fixture's two chunk envelopes (with their chunk ids) and one envelope per transaction.
fn traffic() -> (Vec<Vec<u8>>, Vec<String>, Vec<Vec<u8>>) {
    let python = fixtures().join("sentry/python");
    let mut chunks = Vec::new();
    let mut ids = Vec::new();
    for f in ["trace-chunk-00.envelope", "trace-chunk-01.envelope"] {
        let body = std::fs::read(python.join(f)).unwrap();
        for item in Envelope::parse(&body).unwrap().profile_chunks() {
            ids.push(ProfileChunk::from_json(&item.payload).unwrap().chunk_id);
        }
        chunks.push(body);
    }
    ids.sort();
    let jsonl = std::fs::read_to_string(python.join("trace-transactions.jsonl")).unwrap();
    let transactions = jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            format!(
                "{{}}\n{{\"type\":\"transaction\",\"length\":{}}}\n{line}\n",
                line.len()
            )
            .into_bytes()
        })
        .collect();
    (chunks, ids, transactions)
}

/// One run: the service, its directory, its backend.
struct Run {
    dir: tempfile::TempDir,
    args: Vec<String>,
    sentry: String,
    metrics: String,
    process: Profilink,
    batches: mpsc::Receiver<Batch>,
    _backend: profilink_receiver::ServerHandle,
}

impl Run {
    async fn start() -> Run {
        let (backend, batches) = otlp_backend(false).await;
        let dir = tempfile::tempdir().unwrap();
        let (sentry, metrics) = (free_addr(), free_addr());
        let cfg = config(
            dir.path(),
            &sentry,
            &backend.local_addr().to_string(),
            &metrics,
        );
        let args = vec![
            "run".to_string(),
            "--config".into(),
            cfg.display().to_string(),
        ];
        let process = Self::spawn(dir.path(), &args, &sentry);
        Run {
            dir,
            args,
            sentry,
            metrics,
            process,
            batches,
            _backend: backend,
        }
    }

    fn spawn(dir: &Path, args: &[String], sentry: &str) -> Profilink {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut p = Profilink::start(dir, &args, &[]);
        p.wait_port(sentry, Duration::from_secs(20));
        p
    }

    /// Sends the chunks, then every transaction; each answered 200.
    async fn send(&self, chunks: &[Vec<u8>], transactions: &[Vec<u8>]) {
        let client = reqwest::Client::new();
        for body in chunks.iter().chain(transactions) {
            let status = post_envelope(&client, &self.sentry, body.clone()).await;
            assert_eq!(status, 200, "{}", self.process.stderr());
        }
    }

    /// Collects until `chunks` chunks arrived (or `wait` passed), then a little more for
    /// duplicates.
    async fn collect(&mut self, chunks: usize, wait: Duration) -> Delivered {
        let mut got = Delivered::default();
        let deadline = tokio::time::Instant::now() + wait;
        while got.chunk_ids.len() < chunks {
            match tokio::time::timeout_at(deadline, self.batches.recv()).await {
                Ok(Some(b)) => take(&mut got, b),
                _ => break,
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        while let Ok(b) = self.batches.try_recv() {
            take(&mut got, b);
        }
        got
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
        let (_, text) = get_text(&format!("http://{}/metrics", self.metrics)).await;
        scrape(&text, name, labels)
    }
}

fn take(got: &mut Delivered, b: Batch) {
    match b.payload {
        Payload::Otlp(data) => got.add(&request_from_data(data)),
        other => panic!("unexpected payload {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_in_the_join_window_delivers_every_chunk_with_its_links() {
    let (chunks, chunk_ids, transactions) = traffic();
    assert_eq!(chunk_ids.len(), 2);
    assert!(
        transactions.len() > 50,
        "{} transactions",
        transactions.len()
    );
    let (mut steady, mut crashed) = tokio::join!(Run::start(), Run::start());
    tokio::join!(
        steady.send(&chunks, &transactions),
        crashed.send(&chunks, &transactions)
    );

    // 2 s after the last transaction the chunks are still held (nothing reached the backend).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = crashed
        .metric("profilink_join_held_chunks", &[("pipeline", "profiles")])
        .await;
    assert_eq!(held, Some(2), "{}", crashed.process.stderr());
    assert!(
        crashed.batches.try_recv().is_err(),
        "released before the kill"
    );
    crashed.process.signal("KILL");
    crashed.process.wait_exit(Duration::from_secs(10));
    crashed.process = Run::spawn(crashed.dir.path(), &crashed.args, &crashed.sentry);

    let wait = WINDOW + Duration::from_secs(20);
    let (want, got) = tokio::join!(steady.collect(2, wait), crashed.collect(2, wait));
    assert_eq!(
        want.chunk_ids, chunk_ids,
        "the uninterrupted run delivers each chunk once"
    );
    assert!(want.links.len() > 1_000, "the run links many samples");
    println!(
        "join crash: {} of {} observations delivered after SIGKILL and restart ({} of {} chunks, {} of {} links)",
        got.observations,
        want.observations,
        got.chunk_ids.len(),
        want.chunk_ids.len(),
        got.links.len(),
        want.links.len()
    );
    assert_eq!(
        (got.observations, got.chunk_ids.len(), got.links.len()),
        (want.observations, want.chunk_ids.len(), want.links.len()),
        "observations, chunks and links delivered after SIGKILL and restart (left) and \
         uninterrupted (right); stderr:\n{}",
        crashed.process.stderr()
    );
    assert_eq!(got, want, "the same chunks with the same links, once each");
    // They came back from the join log, with the spans that link them.
    let pipeline = [("pipeline", "profiles")];
    let restored = (
        crashed
            .metric("profilink_join_restored_chunks_total", &pipeline)
            .await,
        crashed
            .metric("profilink_join_restored_spans_total", &pipeline)
            .await
            .unwrap_or(0)
            > 100,
    );
    assert_eq!(restored, (Some(2), true));

    for run in [&mut steady, &mut crashed] {
        run.process.signal("TERM");
        let status = run.process.wait_exit(Duration::from_secs(20));
        assert!(status.success(), "{}", run.process.stderr());
    }
}

/// `profile_linking.storage` naming a `file_storage` extension puts the join log under the
/// extension's directory, even with an OTLP exporter whose queue is in memory; a second
/// process on the same log is refused at start, naming it; a restart holds the chunk again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_log_goes_where_profile_linking_storage_says_and_is_locked() {
    let (backend, _batches) = otlp_backend(false).await;
    let dir = tempfile::tempdir().unwrap();
    let (sentry, metrics) = (free_addr(), free_addr());
    let cfg = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
extensions:
  file_storage/join: {{ directory: ./state, create_directory: true }}
receivers:
  sentry: {{ endpoint: "{sentry}" }}
processors:
  profile_linking/held: {{ storage: file_storage/join }}
exporters:
  otlp: {{ endpoint: "{}", tls: {{ insecure: true }} }}
service:
  extensions: [file_storage/join]
  pipelines:
    profiles/sdk: {{ receivers: [sentry], processors: [profile_linking/held], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            backend.local_addr()
        ),
    );
    let args = ["run", "--config", cfg.to_str().unwrap()];
    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(20));
    let body = std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
    let status = post_envelope(&reqwest::Client::new(), &sentry, body).await;
    assert_eq!(status, 200, "{}", p.stderr());
    let log = dir
        .path()
        .join("state/processor_profile_linking_held_profiles~002Fsdk");
    let segments = std::fs::read_dir(log.join("chunks"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert_eq!(segments, 1, "the held chunk is in {}", log.display());
    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let pipeline = [("pipeline", "profiles/sdk")];
    assert!(scrape(&text, "profilink_join_log_bytes", &pipeline).unwrap() > 50_000);

    let mut second = Profilink::start(dir.path(), &args, &[]);
    let status = second.wait_exit(Duration::from_secs(20));
    let stderr = second.stderr();
    assert!(!status.success());
    assert!(
        stderr.contains("service.pipelines.profiles/sdk: cannot open the join log")
            && stderr.contains("in use"),
        "{stderr}"
    );

    p.signal("KILL");
    p.wait_exit(Duration::from_secs(10));
    let mut p = Profilink::start(dir.path(), &args, &[]);
    p.wait_port(&sentry, Duration::from_secs(20));
    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(
        (
            scrape(&text, "profilink_join_restored_chunks_total", &pipeline),
            scrape(&text, "profilink_join_held_chunks", &pipeline)
        ),
        (Some(1), Some(1)),
        "{text}"
    );
    p.signal("TERM");
    assert!(
        p.wait_exit(Duration::from_secs(20)).success(),
        "{}",
        p.stderr()
    );
    assert!(
        p.stderr()
            .contains("join log keeps held chunks for the next start"),
        "{}",
        p.stderr()
    );
}
