//! The `pprof` receiver on the real binary, with a real Go service (`tests/testdata/gosvc`,
//! built with the machine's `go` at test time; skipped without it unless
//! `PROFILINK_REQUIRE_PPROF_TOOLS=1`): `remote` scrapes of its `/debug/pprof/profile` give
//! chunks naming its functions within two intervals; a CPU profile it recorded, pushed to
//! `POST /v1/pprof`, is answered 204 and arrives with every stack's count exactly the pprof's;
//! `file` mode reads that profile once; bad pushes are refused with their reasons and counted.
//! Chunks go through the real pipeline to a file exporter and pass `profilink validate`.

mod pprof_support;
mod service_support;

use pprof_support::*;
use service_support::*;
use std::time::{Duration, Instant};

/// The functions of the Go service's busy loop.
const GO_FUNCTIONS: [&str; 2] = ["main.hashLoop", "main.parse"];

fn names_go_functions(chunks: &[profilink_proto::sentry::ProfileChunk]) -> bool {
    chunks.iter().any(|c| {
        c.profile.frames.iter().any(|f| {
            f.function
                .as_deref()
                .is_some_and(|n| GO_FUNCTIONS.contains(&n))
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_scrapes_of_a_go_service_name_its_functions_within_two_intervals() {
    let Some(binary) = gosvc() else { return };
    let go = GoService::start(&binary);
    let dir = tempfile::tempdir().unwrap();
    let metrics = free_addr();
    let interval = Duration::from_secs(2);
    let receivers = format!(
        "  pprof:\n    remote: {{ endpoint: \"http://{}/debug/pprof/profile?seconds=1\", \
         collection_interval: 2s, initial_delay: 0s }}",
        go.addr
    );
    let p = start_to_files(dir.path(), &receivers, "pprof", &metrics, &[]);
    // From the moment the service serves its metrics (it is running).
    let started = Instant::now();
    let out = dir.path().join("out");
    let mut first = None;
    while started.elapsed() < Duration::from_secs(30) {
        if names_go_functions(&envelope_chunks(&out)) {
            first = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first =
        first.unwrap_or_else(|| panic!("no chunk names {GO_FUNCTIONS:?}; stderr:\n{}", p.stderr()));
    eprintln!("first chunk naming the Go functions after {first:?} (interval {interval:?})");
    // Two intervals, plus the exporter's idle timeout (300 ms) and its tick.
    assert!(
        first <= 2 * interval + Duration::from_secs(1),
        "chunks after {first:?}"
    );
    // The scrapes are counted.
    wait_until("two scrapes", Duration::from_secs(10), async || {
        metric(
            &metrics,
            "profilink_receiver_scrapes_total",
            &[("receiver", "pprof"), ("transport", "scrape")],
        )
        .await
            >= 2
    })
    .await;
    assert!(validate_envelopes(&out) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_failures_are_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (metrics, nobody) = (free_addr(), free_addr());
    // A server that answers 404 to everything, and an address where nothing listens.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let not_found = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, axum::Router::new()).await });
    let receivers = format!(
        "  pprof/a:\n    remote: {{ endpoint: \"http://{not_found}/debug/pprof/heap\", \
         collection_interval: 200ms, initial_delay: 0s }}\n  \
         pprof/b:\n    remote: {{ endpoint: \"http://{nobody}/debug/pprof/heap\", \
         collection_interval: 200ms, initial_delay: 0s }}"
    );
    let yaml = format!(
        r#"
receivers:
{receivers}
exporters:
  file: {{ path: ./out }}
service:
  pipelines:
    profiles: {{ receivers: [pprof/a, pprof/b], exporters: [file] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
    );
    let p = start_with_config(dir.path(), &yaml, &[&metrics]);
    wait_until("failures of both", Duration::from_secs(10), async || {
        let status = metric(
            &metrics,
            "profilink_receiver_scrape_failures_total",
            &[("receiver", "pprof/a"), ("reason", "status")],
        )
        .await;
        let connect = metric(
            &metrics,
            "profilink_receiver_scrape_failures_total",
            &[("receiver", "pprof/b"), ("reason", "connect")],
        )
        .await;
        status >= 2 && connect >= 2
    })
    .await;
    let stderr = p.stderr();
    assert!(stderr.contains("pprof scrape failed"), "{stderr}");
    assert!(stderr.contains("404"), "the status is logged:\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_go_cpu_profile_is_answered_204_and_its_stacks_arrive_with_exact_counts() {
    let Some(binary) = gosvc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let profile = go_cpu_profile(&binary, dir.path(), 1.0);
    let expected = pprof_stack_counts(&decode(&profile));
    let total: u64 = expected.values().sum();
    assert!(total > 20, "the Go profile has {total} samples");
    let (listen, metrics) = (free_addr(), free_addr());
    let receivers = format!("  pprof:\n    server: {{ endpoint: \"{listen}\" }}");
    let p = start_to_files(dir.path(), &receivers, "pprof", &metrics, &[&listen]);
    // As Go writes it: gzipped, announced as such.
    let r = reqwest::Client::new()
        .post(format!("http://{listen}/v1/pprof"))
        .header("content-encoding", "identity")
        .body(profile.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    let out = dir.path().join("out");
    let chunks = wait_for_observations(&p, &out, total as usize, Duration::from_secs(15));
    assert_eq!(
        chunk_stack_counts(&chunks),
        expected,
        "every stack's count is the pprof's"
    );
    assert!(names_go_functions(&chunks));
    assert!(validate_envelopes(&out) > 0);
    assert_eq!(
        metric(
            &metrics,
            "otelcol_receiver_requests_total",
            &[("receiver", "pprof"), ("outcome", "success")]
        )
        .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_mode_reads_a_go_profile_once() {
    let Some(binary) = gosvc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("profiles");
    std::fs::create_dir(&profiles).unwrap();
    let profile = go_cpu_profile(&binary, &profiles, 1.0);
    let expected = pprof_stack_counts(&decode(&profile));
    let total: u64 = expected.values().sum();
    let metrics = free_addr();
    let receivers = format!(
        "  pprof:\n    file: {{ include: \"{}/*-cpu.pb.gz\", collection_interval: 200ms, initial_delay: 0s }}",
        profiles.display()
    );
    let p = start_to_files(dir.path(), &receivers, "pprof", &metrics, &[]);
    let out = dir.path().join("out");
    wait_for_observations(&p, &out, total as usize, Duration::from_secs(15));
    // Several more looks at the glob: the file is not read again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let chunks = envelope_chunks(&out);
    assert_eq!(chunk_stack_counts(&chunks), expected);
    assert_eq!(
        metric(
            &metrics,
            "profilink_receiver_scrapes_total",
            &[("receiver", "pprof"), ("transport", "file")]
        )
        .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pushes_are_refused_with_their_reasons_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (free_addr(), free_addr());
    let receivers =
        format!("  pprof:\n    server: {{ endpoint: \"{listen}\", max_request_body_size_mib: 1 }}");
    let _p = start_to_files(dir.path(), &receivers, "pprof", &metrics, &[&listen]);
    let client = reqwest::Client::new();
    let url = format!("http://{listen}/v1/pprof");
    let post = |body: Vec<u8>, encoding: Option<&'static str>| {
        let mut r = client.post(&url).body(body);
        if let Some(e) = encoding {
            r = r.header("content-encoding", e);
        }
        r.send()
    };
    // Not pprof.
    let r = post(b"\x0a\xff\xff\xff\xff not a profile".to_vec(), None)
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.starts_with("failed to parse pprof data:"), "{text}");
    // A gzip bomb: 1 KiB inflating past the 1 MiB limit.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &vec![0u8; 8 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    let r = post(bomb.clone(), Some("gzip")).await.unwrap();
    assert_eq!(r.status(), 413, "{}", r.text().await.unwrap());
    let r = post(bomb, None).await.unwrap();
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(text.contains("inflates to more than"), "{text}");
    // Unsupported encoding, other method, other path.
    let r = post(vec![1], Some("br")).await.unwrap();
    assert_eq!(r.status(), 400);
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(
        r.text().await.unwrap(),
        "method GET not allowed, supported: [POST]\n"
    );
    let r = client
        .post(format!("http://{listen}/v1/other"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let refusals = |reason: &'static str| {
        let metrics = metrics.clone();
        async move {
            metric(
                &metrics,
                "profilink_receiver_refusals_total",
                &[("receiver", "pprof"), ("reason", reason)],
            )
            .await
        }
    };
    assert_eq!(refusals("invalid").await, 2);
    assert_eq!(refusals("too_large").await, 1);
    assert_eq!(refusals("unsupported_encoding").await, 1);
}
