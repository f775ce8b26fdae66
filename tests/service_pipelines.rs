//! The real binary with configured pipelines: OTLP (gRPC and HTTP) → a loopback Sentry
//! stand-in, Sentry SDK envelopes → a loopback OTLP receiver, `/metrics` counts, and the
//! health check during a SIGTERM drain.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_consumer::Payload;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use prost::Message;
use service_support::*;
use std::io::Write;
use std::time::Duration;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Checks what the stand-in got: auth, gzip, one `profile_chunk` per envelope with its
/// platform in the item header.
fn check_envelopes(standin: &SentryStandIn) {
    for r in standin.received() {
        if r.envelope.items_of("client_report").count() > 0 {
            continue;
        }
        assert_eq!(r.project, "42");
        assert!(
            r.auth.contains(&format!("sentry_key={KEY}")) && r.auth.contains("sentry_version=7"),
            "X-Sentry-Auth: {}",
            r.auth
        );
        assert_eq!(r.encoding, "gzip");
        assert_eq!(r.envelope.items.len(), 1, "one item per envelope");
        let item = &r.envelope.items[0];
        assert_eq!(item.item_type(), Some("profile_chunk"));
        let chunk = ProfileChunk::from_json(&item.payload).unwrap();
        assert_eq!(item.platform(), Some(chunk.platform.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_to_sentry_metrics_and_drain() {
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, metrics, health) = (free_addr(), free_addr(), free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
      http: {{ endpoint: "{http}" }}
processors:
  batch: {{ timeout: 1s, send_batch_size: 8192 }}
  profile_sampling: {{ session_sample_rate: 1.0 }}
exporters:
  sentry:
    dsn: "${{env:TEST_SENTRY_DSN}}"
    compression: gzip
    timeout: 5s
    chunk_idle_timeout: 300ms
    # This test drains the open windows at SIGTERM (by default they wait for the next start;
    # see service_restart.rs).
    flush_on_shutdown: true
    sparse_threads: drop
    tick: 20ms
    retry_on_failure: {{ enabled: true, initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 60s }}
    sending_queue: {{ enabled: true, storage: ./data/queue, max_size_mib: 64 }}
extensions:
  health_check: {{ endpoint: "{health}" }}
service:
  extensions: [health_check]
  pipelines:
    profiles/to_sentry: {{ receivers: [otlp], processors: [batch, profile_sampling], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
    logs: {{ level: info }}
"#
        ),
    );
    let dsn = standin.dsn();
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("TEST_SENTRY_DSN", Some(&dsn))],
    );
    let health_url = format!("http://{health}/");
    p.wait_healthy(&health_url, Duration::from_secs(10)).await;

    let req = otlp_fixture("ebpf-profile.pb");
    let (profiles, samples) = otlp_counts(&req);
    let expected = expected_observations_dropped(&expected_chunks(&req));
    let n = observation_count(&expected);

    // gRPC: every observation reaches the stand-in once the session goes idle.
    grpc_export(&grpc, req.clone()).await;
    let ok = standin
        .wait_for(Duration::from_secs(10), |c| {
            observation_count(&observations(c)) >= n
        })
        .await;
    assert!(ok, "gRPC data not delivered; stderr:\n{}", p.stderr());
    assert_same_observations(&expected, &observations(&standin.chunks()), "after gRPC");

    // HTTP (gzip protobuf): the same again.
    let resp = reqwest::Client::new()
        .post(format!("http://{http}/v1development/profiles"))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "gzip")
        .body(gzip(&req.encode_to_vec()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ok = standin
        .wait_for(Duration::from_secs(10), |c| {
            observation_count(&observations(c)) >= 2 * n
        })
        .await;
    assert!(ok, "HTTP data not delivered; stderr:\n{}", p.stderr());
    let mut twice = expected.clone();
    for v in twice.values_mut() {
        let copy = v.clone();
        v.extend(copy);
        v.sort_by(f64::total_cmp);
    }
    assert_same_observations(&twice, &observations(&standin.chunks()), "after HTTP");
    check_envelopes(&standin);

    // /metrics counts exactly what was sent.
    let (status, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(status, 200);
    for transport in ["grpc", "http"] {
        let l = [("receiver", "otlp"), ("transport", transport)];
        assert_eq!(
            scrape(&text, "profilink_receiver_accepted_samples_total", &l),
            Some(samples),
            "{transport}:\n{text}"
        );
        assert_eq!(
            scrape(&text, "profilink_receiver_accepted_profiles_total", &l),
            Some(profiles)
        );
        assert_eq!(
            scrape(&text, "profilink_receiver_refused_samples_total", &l),
            Some(0)
        );
    }
    let e = [("exporter", "sentry")];
    let delivered = standin.chunks().len() as u64;
    assert_eq!(
        scrape(&text, "profilink_exporter_sent_chunks_total", &e),
        Some(delivered),
        "{text}"
    );
    assert_eq!(
        scrape(&text, "profilink_exporter_dropped_chunks_total", &e),
        Some(0)
    );
    // What the exporter left out (`sparse_threads: drop`) is exactly the sparse threads'
    // samples; `tests/service_sparse_threads.rs` covers the default, grouping.
    let all = observation_count(&observations(&expected_chunks(&req))) as u64;
    assert_eq!(
        scrape(&text, "profilink_exporter_sparse_samples_dropped_total", &e),
        Some(2 * (all - n as u64))
    );
    assert!(scrape(&text, "profilink_translated_chunks_total", &[]).unwrap() > 0);
    assert_eq!(
        scrape(&text, "profilink_translation_errors_total", &[]),
        Some(0)
    );
    assert_eq!(
        scrape(&text, "profilink_queue_capacity_bytes", &e),
        Some(64 << 20)
    );
    assert!(text.contains("# TYPE profilink_queue_size_bytes gauge"));

    // Drain: a slow Sentry keeps the drain going; health answers 503 meanwhile, and what was
    // accepted is flushed before the process exits 0.
    standin.set_delay(Duration::from_millis(1500));
    let mut later = req.clone();
    shift_timestamps(&mut later, 120_000_000_000);
    grpc_export(&grpc, later).await;
    p.signal("TERM");
    let mut saw_503 = false;
    let client = reqwest::Client::new();
    while p.running() {
        if let Ok(r) = client.get(&health_url).send().await
            && r.status() == 503
        {
            saw_503 = true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    assert!(saw_503, "health never answered 503 during the drain");
    assert_eq!(
        observation_count(&observations(&standin.chunks())),
        3 * n,
        "the drain flushed the last request; stderr:\n{}",
        p.stderr()
    );
}

/// Moves every timestamp of a request by `ns` (a later, distinct copy of the same sessions).
fn shift_timestamps(req: &mut ExportProfilesServiceRequest, ns: u64) {
    for rp in &mut req.resource_profiles {
        for sp in &mut rp.scope_profiles {
            for p in &mut sp.profiles {
                p.time_unix_nano += ns;
                for s in &mut p.samples {
                    for t in &mut s.timestamps_unix_nano {
                        *t += ns;
                    }
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_envelopes_to_otlp() {
    let (backend, mut batches) = otlp_backend(false).await;
    let backend_addr = backend.local_addr();

    let dir = tempfile::tempdir().unwrap();
    let (sentry, metrics) = (free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  sentry: {{ endpoint: "{sentry}" }}
processors:
  profile_linking: {{ join_window: 1s }}
exporters:
  otlp: {{ endpoint: "{backend_addr}", compression: gzip, tls: {{ insecure: true }} }}
service:
  pipelines:
    profiles/from_sentry: {{ receivers: [sentry], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&sentry, Duration::from_secs(10));

    let mut files: Vec<_> = std::fs::read_dir(fixtures().join("sentry/python"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "envelope"))
        .collect();
    files.sort();
    let mut chunk_samples = 0u64;
    let mut chunk_count = 0u64;
    let client = reqwest::Client::new();
    for f in &files {
        let body = std::fs::read(f).unwrap();
        let env = Envelope::parse(&body).unwrap();
        for item in env.profile_chunks() {
            chunk_samples += ProfileChunk::from_json(&item.payload)
                .unwrap()
                .profile
                .samples
                .len() as u64;
            chunk_count += 1;
        }
        let status = post_envelope(&client, &sentry, body).await;
        assert_eq!(status, 200, "{}", f.display());
    }
    assert!(chunk_count >= 2);

    // Every chunk sample arrives at the backend as one observation.
    let mut got_samples = 0u64;
    let mut got_profiles = 0u64;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got_profiles < chunk_count {
        let b = tokio::time::timeout_at(deadline, batches.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "OTLP backend got {got_profiles} of {chunk_count} profiles; stderr:\n{}",
                    p.stderr()
                )
            })
            .unwrap();
        assert!(matches!(b.payload, Payload::Otlp(_)));
        got_samples += b.samples;
        got_profiles += b.profiles;
    }
    assert_eq!(got_profiles, chunk_count);
    assert_eq!(got_samples, chunk_samples);

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let l = [("receiver", "sentry"), ("transport", "http")];
    assert_eq!(
        scrape(&text, "profilink_receiver_accepted_samples_total", &l),
        Some(chunk_samples),
        "{text}"
    );
    assert_eq!(
        scrape(&text, "profilink_translated_profiles_total", &[]),
        Some(chunk_count)
    );
    let e = [("exporter", "otlp")];
    assert_eq!(
        scrape(&text, "profilink_exporter_accepted_chunks_total", &e),
        Some(
            files
                .iter()
                .filter(|f| f.to_string_lossy().contains("chunk"))
                .count() as u64
        )
    );

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    backend.abort();
}
