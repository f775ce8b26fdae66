//! The Sentry exporter against a real HTTP stand-in on 127.0.0.1.

mod common;

use common::*;
use profilink_consumer::{ExportChunk, ExportError};
use profilink_exporter::{
    Clock, DiscardReason, ManualClock, Overflow, QueueConfig, RetryConfig, RoutingConfig,
    SentryExporter, SentryExporterConfig, SharedClock, StartError, VERSION, content_checksum,
    merged_chunk_id,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn config(server: &StandIn, dir: &Path) -> SentryExporterConfig {
    SentryExporterConfig {
        dsn: Some(server.dsn(42)),
        timeout: Duration::from_secs(2),
        retry_on_failure: RetryConfig {
            initial_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(100),
            max_elapsed_time: Duration::from_secs(20),
            ..Default::default()
        },
        sending_queue: QueueConfig {
            storage: Some(dir.join("queue")),
            ..Default::default()
        },
        tick: Duration::from_millis(10),
        client_report_interval: Duration::from_secs(3600),
        // These tests stop the exporter to see every chunk; restarts keep open chunks by
        // default (tested in the engine and end to end).
        flush_on_shutdown: true,
        ..Default::default()
    }
}

fn manual() -> (Arc<ManualClock>, SharedClock) {
    let c = Arc::new(ManualClock::new());
    let shared: SharedClock = c.clone();
    (c, shared)
}

async fn export_all(exp: &SentryExporter, chunks: Vec<profilink_proto::sentry::ProfileChunk>) {
    for c in chunks {
        exp.export(vec![ExportChunk::new(c)]).await.expect("export");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_five_second_chunks_arrive_as_one_minute_chunk() {
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let exp = SentryExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    export_all(&exp, twelve_chunks(PROFILER_A, "python", T0)).await;
    exp.shutdown(WAIT).await;

    let reqs = server.chunk_requests();
    assert_eq!(reqs.len(), 1, "one envelope for the whole minute");
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/api/42/envelope/");
    assert_eq!(
        r.header("x-sentry-auth"),
        Some(
            format!("Sentry sentry_key={KEY}, sentry_version=7, sentry_client=profilink/{VERSION}")
                .as_str()
        )
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/x-sentry-envelope")
    );
    assert_eq!(r.header("content-encoding"), Some("zstd"), "the default");
    let env = r.envelope();
    assert_eq!(env.items.len(), 1, "one chunk per envelope");
    assert_eq!(env.headers["sdk"]["name"], "profilink");
    assert_eq!(env.headers["sdk"]["version"], VERSION);
    assert_eq!(env.headers["dsn"], server.dsn(42).as_str());
    let sent_at = env.headers["sent_at"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(sent_at).is_ok(),
        "{sent_at}"
    );
    assert!(sent_at.ends_with('Z'));
    let item = &env.items[0];
    assert_eq!(item.item_type(), Some("profile_chunk"));
    assert_eq!(item.headers["length"], item.payload.len() as u64);
    let chunk = r.chunk().unwrap();
    assert_eq!(item.platform(), Some(chunk.platform.as_str()));
    assert_eq!(chunk.platform, "python");
    assert_eq!(chunk.profiler_id, PROFILER_A);
    assert_eq!(chunk.profile.samples.len(), 1200);
    assert_eq!(chunk.profile.frames.len(), 2);
    assert_eq!(chunk.profile.stacks.len(), 2);
    assert_eq!(chunk.release.as_deref(), Some("app@1.0"));
    let first = chunk.profile.samples[0].timestamp;
    let last = chunk.profile.samples[1199].timestamp;
    assert!(last - first < 60.0 && last - first > 59.9);
    assert_eq!(
        chunk.chunk_id,
        merged_chunk_id(PROFILER_A, first, last, 1200, content_checksum(&chunk))
    );
    let errors: Vec<String> = profilink_proto::validate::validate_chunk(&chunk)
        .iter()
        .filter(|f| f.is_error())
        .map(|f| f.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_timeout_flushes_the_tail_and_every_chunk_arrives_once() {
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    // Windows close as soon as the stream passes them (no lateness, no settling on this
    // clock), so the tails alone wait for the idle timeout.
    let cfg = SentryExporterConfig {
        chunk_lateness: Duration::ZERO,
        ..config(&server, dir.path())
    };
    let exp = SentryExporter::start_with_clock(cfg, shared).await.unwrap();
    // Two sessions, 2.5 minutes each: 30 chunks of 5 s → 60 s + 60 s + 30 s per session.
    let mut inputs = Vec::new();
    for i in 0..30 {
        inputs.push(chunk(PROFILER_A, "python", T0 + 5.0 * i as f64, 5.0, 20.0));
        inputs.push(chunk(PROFILER_B, "node", T0 + 5.0 * i as f64, 5.0, 20.0));
    }
    export_all(&exp, inputs).await;
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 4)
            .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        server.delivered_chunks().len(),
        4,
        "tails wait for the idle timeout"
    );
    clock.advance(Duration::from_secs(9));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(server.delivered_chunks().len(), 4);
    clock.advance(Duration::from_secs(1));
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 6)
            .await
    );
    let chunks = server.delivered_chunks();
    for p in [PROFILER_A, PROFILER_B] {
        let mut ts: Vec<f64> = chunks
            .iter()
            .filter(|c| c.profiler_id == p)
            .flat_map(|c| c.profile.samples.iter().map(|s| s.timestamp))
            .collect();
        assert_eq!(ts.len(), 3000, "every sample exactly once");
        ts.sort_by(f64::total_cmp);
        ts.dedup();
        assert_eq!(ts.len(), 3000);
        let sizes: Vec<usize> = chunks
            .iter()
            .filter(|c| c.profiler_id == p)
            .map(|c| c.profile.samples.len())
            .collect();
        assert_eq!(sizes, vec![1200, 1200, 600]);
    }
    let ids: std::collections::HashSet<_> = chunks.iter().map(|c| c.chunk_id.clone()).collect();
    assert_eq!(ids.len(), 6);
    let metrics = exp.metrics();
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().sent_chunks == 6)
            .await,
        "sent_chunks reaches 6"
    );
    let m = metrics.snapshot();
    assert_eq!(m.sent_chunks, 6);
    assert_eq!(m.accepted_chunks, 60);
    exp.shutdown(WAIT).await;
    assert_eq!(server.delivered_chunks().len(), 6, "nothing sent twice");
}

async fn rate_limit_case(first: Behaviour, blocks_ui: bool, block_secs: u64) {
    let server = StandIn::start().await;
    server.script(vec![first]);
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let exp = SentryExporter::start_with_clock(config(&server, dir.path()), shared)
        .await
        .unwrap();
    export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    assert!(
        server
            .wait_for(WAIT, |s| s.chunk_requests().len() == 1)
            .await
    );
    assert_eq!(server.chunk_requests()[0].answered, 429);
    // The exporter has read the 429 (the limit runs from now on the manual clock).
    let metrics = exp.metrics();
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().rate_limited >= 1)
            .await
    );

    // A UI chunk (cocoa → profile_chunk_ui).
    export_all(&exp, vec![chunk(PROFILER_B, "cocoa", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    if blocks_ui {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            server.chunk_requests().len(),
            1,
            "the all-category limit blocks ui chunks too"
        );
    } else {
        assert!(
            server
                .wait_for(WAIT, |s| s.delivered_chunks().len() == 1)
                .await
        );
        assert_eq!(server.delivered_chunks()[0].platform, "cocoa");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let backend_sent = |s: &StandIn| {
        s.chunk_requests()
            .iter()
            .filter(|r| r.chunk().is_some_and(|c| c.platform == "python"))
            .count()
    };
    assert_eq!(backend_sent(&server), 1, "backend chunk waits");
    // The limit started at +10 s and the clock is at +20 s: go to 1 s before it ends.
    clock.advance(Duration::from_secs(block_secs - 11));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(backend_sent(&server), 1, "still limited");
    clock.advance(Duration::from_secs(2));
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 2)
            .await
    );
    let seen: Vec<(u16, String, String)> = server
        .chunk_requests()
        .iter()
        .map(|r| {
            let c = r.chunk().unwrap();
            (r.answered, c.platform, c.chunk_id)
        })
        .collect();
    assert_eq!(backend_sent(&server), 2, "{seen:?}");
    // The stand-in records a request before the exporter has read its answer.
    let metrics = exp.metrics();
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().sent_chunks == 2)
            .await,
        "sent_chunks reaches 2"
    );
    let m = exp.metrics().snapshot();
    assert!(m.rate_limited >= 1);
    assert_eq!(m.sent_chunks, 2);
    assert_eq!(
        m.dropped.iter().map(|(_, n)| n).sum::<u64>(),
        0,
        "nothing dropped"
    );
    exp.shutdown(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_for_profile_chunk_blocks_only_backend_chunks() {
    rate_limit_case(
        Behaviour::with_header(
            429,
            "X-Sentry-Rate-Limits",
            // No quota reason: a quota would drop the chunks (see long_limit_case).
            "60:profile_chunk;transaction:key",
        ),
        false,
        60,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_category_rate_limit_blocks_both() {
    rate_limit_case(
        Behaviour::with_header(429, "X-Sentry-Rate-Limits", "45::organization"),
        true,
        45,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_alone_blocks_for_its_time() {
    rate_limit_case(Behaviour::with_header(429, "Retry-After", "30"), true, 30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_429_blocks_for_the_default_60_seconds() {
    rate_limit_case(Behaviour::status(429), true, 60).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_header_on_a_200_is_honoured() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        200,
        "X-Sentry-Rate-Limits",
        "30:profile_chunk:key",
    )]);
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let exp = SentryExporter::start_with_clock(config(&server, dir.path()), shared)
        .await
        .unwrap();
    export_all(&exp, vec![chunk(PROFILER_A, "rust", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 1)
            .await
    );
    let metrics = exp.metrics();
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().rate_limited >= 1)
            .await
    );
    export_all(&exp, vec![chunk(PROFILER_B, "rust", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        server.chunk_requests().len(),
        1,
        "limited by the header on the 200"
    );
    clock.advance(Duration::from_secs(21));
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 2)
            .await
    );
    exp.shutdown(WAIT).await;
}

/// A limit that lasts (a quota, or longer than `rate_limit_max_wait`): the chunk that met it
/// and the chunks after it are dropped as `ratelimit_backoff` (counted, client report), not
/// held in the queue.
async fn long_limit_case(header: &str) {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        429,
        "X-Sentry-Rate-Limits",
        header,
    )]);
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let mut cfg = config(&server, dir.path());
    cfg.client_report_interval = Duration::from_millis(50);
    let exp = SentryExporter::start_with_clock(cfg, shared).await.unwrap();
    let metrics = exp.metrics();
    export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    assert!(
        server
            .wait_for(WAIT, |_| metrics
                .snapshot()
                .dropped(DiscardReason::RatelimitBackoff)
                == 1)
            .await,
        "{:?}",
        metrics.snapshot()
    );
    // A later chunk of the category is dropped without a request.
    export_all(&exp, vec![chunk(PROFILER_B, "python", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    assert!(
        server
            .wait_for(WAIT, |_| metrics
                .snapshot()
                .dropped(DiscardReason::RatelimitBackoff)
                == 2)
            .await
    );
    assert_eq!(server.chunk_requests().len(), 1);
    assert!(
        server
            .wait_for(WAIT, |s| s
                .client_reports()
                .iter()
                .map(|r| r["discarded_events"][0]["quantity"].as_u64().unwrap_or(0))
                .sum::<u64>()
                == 2)
            .await
    );
    for report in server.client_reports() {
        let ev = &report["discarded_events"][0];
        assert_eq!(ev["reason"], "ratelimit_backoff");
        assert_eq!(ev["category"], "profile_chunk");
    }
    let m = metrics.snapshot();
    assert_eq!(m.sent_chunks, 0);
    let samples = m
        .dropped_samples
        .iter()
        .find(|(r, _)| *r == DiscardReason::RatelimitBackoff)
        .map(|(_, n)| *n);
    assert_eq!(samples, Some(2 * 100), "{m:?}");
    exp.shutdown(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hour_long_usage_exceeded_limit_drops_and_reports() {
    long_limit_case("3600:profile_chunk:organization:usage_exceeded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_longer_than_rate_limit_max_wait_drops() {
    // Default rate_limit_max_wait: 5 min.
    long_limit_case("600:profile_chunk:key").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_second_limit_waits_and_delivers() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        429,
        "X-Sentry-Rate-Limits",
        "2:profile_chunk:key",
    )]);
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let exp = SentryExporter::start_with_clock(config(&server, dir.path()), shared)
        .await
        .unwrap();
    let metrics = exp.metrics();
    export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
    clock.advance(Duration::from_secs(10));
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().rate_limited == 1)
            .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.chunk_requests().len(), 1, "the chunk waits");
    clock.advance(Duration::from_secs(2));
    assert!(
        server
            .wait_for(WAIT, |s| s.delivered_chunks().len() == 1)
            .await
    );
    let m = metrics.snapshot();
    assert_eq!(m.dropped.iter().map(|(_, n)| n).sum::<u64>(), 0, "{m:?}");
    exp.shutdown(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_dropped_connections_and_timeouts_are_retried() {
    let server = StandIn::start().await;
    server.script(vec![
        Behaviour::status(500),
        Behaviour::Drop,
        Behaviour::status(503),
        Behaviour::Slow(Duration::from_millis(800), Box::new(Behaviour::ok())),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.timeout = Duration::from_millis(300);
    let exp = SentryExporter::start(cfg).await.unwrap();
    export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
    exp.shutdown(WAIT).await;
    let reqs = server.chunk_requests();
    assert_eq!(
        reqs.len(),
        5,
        "{:?}",
        reqs.iter().map(|r| r.answered).collect::<Vec<_>>()
    );
    assert_eq!(server.delivered_chunks().len(), 1);
    let m = server.delivered_chunks()[0].clone();
    assert_eq!(m.profile.samples.len(), 100);
    // All attempts carried the same chunk.
    let ids: std::collections::HashSet<_> =
        reqs.iter().map(|r| r.chunk().unwrap().chunk_id).collect();
    assert_eq!(ids.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_retries_and_deliveries() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::status(502), Behaviour::Drop]);
    let dir = tempfile::tempdir().unwrap();
    let exp = SentryExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    let metrics = exp.metrics();
    export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
    exp.shutdown(WAIT).await;
    let m = metrics.snapshot();
    assert_eq!(m.sent_chunks, 1);
    assert_eq!(m.retries, 2);
    assert_eq!(m.send_failed_chunks, 2);
    assert_eq!(m.queue_size_bytes, 0, "everything acknowledged");
    assert_eq!(m.queue_capacity_bytes, 256 << 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_are_not_retried_and_are_dead_lettered() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::status(413), Behaviour::status(400)]);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.num_consumers = Some(1);
    cfg.dead_letter_dir = Some(dir.path().join("dead"));
    let exp = SentryExporter::start(cfg).await.unwrap();
    let metrics = exp.metrics();
    export_all(
        &exp,
        vec![
            chunk(PROFILER_A, "python", T0, 5.0, 20.0),
            chunk(PROFILER_B, "python", T0, 5.0, 20.0),
        ],
    )
    .await;
    exp.shutdown(WAIT).await;
    let statuses: Vec<u16> = server.chunk_requests().iter().map(|r| r.answered).collect();
    assert_eq!(statuses, vec![413, 400], "each refused once, no retries");
    let m = metrics.snapshot();
    assert_eq!(m.dropped(DiscardReason::SendError), 2);
    assert_eq!(m.retries, 0);
    assert_eq!(m.dead_lettered, 2);
    let mut files: Vec<_> = std::fs::read_dir(dir.path().join("dead"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    for f in &files {
        assert_eq!(f.extension().and_then(|e| e.to_str()), Some("envelope"));
        let env = profilink_proto::sentry::Envelope::parse(&std::fs::read(f).unwrap()).unwrap();
        assert_eq!(env.profile_chunks().count(), 1);
    }
    // The shutdown client report tells Sentry about the loss.
    let reports = server.client_reports();
    assert_eq!(reports.len(), 1);
    let ev = &reports[0]["discarded_events"][0];
    assert_eq!(ev["reason"], "send_error");
    assert_eq!(ev["category"], "profile_chunk");
    assert_eq!(ev["quantity"], 2);
    assert!(reports[0]["timestamp"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_retries_drop_and_report_network_errors() {
    // A port nobody listens on: connection refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.dsn = Some(format!("http://{KEY}@{dead_addr}/42"));
    cfg.retry_on_failure.max_elapsed_time = Duration::from_millis(300);
    cfg.client_report_interval = Duration::from_millis(50);
    let exp = SentryExporter::start(cfg).await.unwrap();
    let metrics = exp.metrics();
    export_all(&exp, vec![chunk(PROFILER_A, "cocoa", T0, 5.0, 20.0)]).await;
    exp.shutdown(Duration::from_secs(3)).await;
    let m = metrics.snapshot();
    assert_eq!(m.dropped(DiscardReason::NetworkError), 1, "{m:?}");
    assert!(m.retries >= 1);
    assert_eq!(m.sent_chunks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reports_are_sent_periodically() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::status(403)]);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.client_report_interval = Duration::from_millis(50);
    let exp = SentryExporter::start(cfg).await.unwrap();
    export_all(&exp, vec![chunk(PROFILER_A, "android", T0, 5.0, 20.0)]).await;
    exp.shutdown(WAIT).await;
    let reports = server.client_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0]["discarded_events"][0]["category"],
        "profile_chunk_ui"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_recovery_delivers_every_accepted_chunk() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let mut cfg = config(&server, dir.path());
    cfg.dsn = Some(format!("http://{KEY}@{dead_addr}/42"));
    let exp = SentryExporter::start_with_clock(cfg.clone(), shared)
        .await
        .unwrap();
    // Session A: 90 s → one merged minute (in the ready log, failing to send) + 30 s open.
    // Session B: idle-flushed to the ready log. Session C: accepted after the flush, still open.
    let mut expected = 0usize;
    for i in 0..18 {
        exp.export(vec![ExportChunk::new(chunk(
            PROFILER_A,
            "python",
            T0 + 5.0 * i as f64,
            5.0,
            20.0,
        ))])
        .await
        .unwrap();
        expected += 100;
    }
    exp.export(vec![ExportChunk::new(chunk(
        PROFILER_B, "cocoa", T0, 5.0, 20.0,
    ))])
    .await
    .unwrap();
    expected += 100;
    tokio::time::sleep(Duration::from_millis(100)).await;
    clock.advance(Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = "cccccccccccccccccccccccccccccccc";
    exp.export(vec![ExportChunk::new(chunk(c, "rust", T0, 5.0, 20.0))])
        .await
        .unwrap();
    expected += 100;
    let metrics = exp.metrics();
    assert!(
        server
            .wait_for(WAIT, |_| metrics.snapshot().send_failed_chunks >= 1)
            .await,
        "sends were attempted and failed"
    );
    // Crash: no shutdown, no flush.
    drop(exp);

    let mut cfg2 = config(&server, dir.path());
    cfg2.sending_queue = cfg.sending_queue.clone();
    // The dropped exporter's tasks end asynchronously and hold the queue directory's lock
    // until then, like a dying process.
    let exp = start_when_free(|| SentryExporter::start(cfg2.clone())).await;
    exp.shutdown(WAIT).await;
    let chunks = server.delivered_chunks();
    let mut seen = std::collections::HashSet::new();
    let mut samples = 0usize;
    for c in &chunks {
        if seen.insert(c.chunk_id.clone()) {
            samples += c.profile.samples.len();
        }
    }
    assert_eq!(
        samples, expected,
        "every accepted sample delivered (duplicates share ids)"
    );
    let a: usize = chunks
        .iter()
        .filter(|c| c.profiler_id == PROFILER_A)
        .map(|c| c.profile.samples.len())
        .sum();
    assert!(a >= 1800);
    // The queue is empty now: a third start delivers nothing more.
    let before = server.delivered_chunks().len();
    let exp = SentryExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    exp.shutdown(Duration::from_secs(1)).await;
    assert_eq!(server.delivered_chunks().len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_applies_backpressure() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.dsn = Some(format!("http://{KEY}@{dead_addr}/42"));
    cfg.sending_queue.max_size_mib = Some(1);
    let exp = SentryExporter::start(cfg).await.unwrap();
    let mut refused = None;
    for i in 0..200 {
        let big = chunk(PROFILER_A, "python", T0 + 5.0 * i as f64, 5.0, 400.0);
        match exp.export(vec![ExportChunk::new(big)]).await {
            Ok(()) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (i, err) = refused.expect("the queue fills up");
    assert!(i > 3, "some chunks fit first");
    assert!(matches!(err, ExportError::Full { .. }));
    let m = exp.metrics().snapshot();
    assert_eq!(m.refused_full, 1);
    assert!(m.queue_size_bytes <= m.queue_capacity_bytes);
    drop(exp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_the_whole_queue_is_refused_for_good() {
    // Issue 28: such a batch was answered "full, retry later" forever, even by an empty queue.
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.sending_queue.max_size_mib = Some(1);
    let exp = SentryExporter::start(cfg).await.unwrap();
    // 2,000 samples a chunk, about 22 KB each in the queue's record: over 1 MiB together.
    let batch: Vec<ExportChunk> = (0..100)
        .map(|i| ExportChunk::new(chunk(PROFILER_A, "python", T0 + 5.0 * i as f64, 5.0, 400.0)))
        .collect();
    let err = exp.export(batch).await.expect_err("over 1 MiB");
    match err {
        ExportError::TooLarge { needed, capacity } => {
            assert_eq!(capacity, 1 << 20);
            assert!(needed > capacity, "{needed}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(exp.metrics().snapshot().refused_full, 0, "not a full queue");
    // What fits is still taken.
    let small = chunk(PROFILER_A, "python", T0, 5.0, 400.0);
    exp.export(vec![ExportChunk::new(small)]).await.unwrap();
    exp.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_drops_oldest_when_configured() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_addr = dead.local_addr().unwrap();
    drop(dead);
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (clock, shared) = manual();
    let mut cfg = config(&server, dir.path());
    cfg.dsn = Some(format!("http://{KEY}@{dead_addr}/42"));
    cfg.sending_queue.max_size_mib = Some(1);
    cfg.sending_queue.overflow = Some(Overflow::DropOldest);
    cfg.num_consumers = Some(1);
    // Failed sends wait far longer than the test's 440 simulated seconds, so chunks leave
    // the queue only by being dropped for room, never by running out of retries.
    cfg.retry_on_failure.initial_interval = Duration::from_secs(3600);
    cfg.retry_on_failure.max_interval = Duration::from_secs(3600);
    cfg.retry_on_failure.max_elapsed_time = Duration::from_secs(36_000);
    let exp = SentryExporter::start_with_clock(cfg, shared).await.unwrap();
    // Each export becomes its own merged chunk (distinct sessions, idle-flushed), so the ready
    // log holds droppable chunks.
    for i in 0..40u32 {
        let profiler = format!("{:032x}", i + 1);
        let big = chunk(&profiler, "python", T0, 5.0, 400.0);
        if let Err(e) = exp.export(vec![ExportChunk::new(big)]).await {
            panic!("export {i} refused: {e}; {:?}", exp.metrics().snapshot());
        }
        clock.advance(Duration::from_secs(11));
        let merged = u64::from(i) + 1;
        let end = tokio::time::Instant::now() + WAIT;
        while exp.metrics().snapshot().merged_chunks < merged && tokio::time::Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let m = exp.metrics().snapshot();
    assert!(m.dropped(DiscardReason::QueueOverflow) > 0, "{m:?}");
    assert_eq!(m.dropped(DiscardReason::NetworkError), 0, "{m:?}");
    assert_eq!(m.refused_full, 0);
    drop(exp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_by_resource_attribute() {
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.routing = Some(RoutingConfig {
        attribute: "service.name".into(),
        dsns: [("checkout".to_string(), server.dsn(7))].into(),
    });
    let exp = SentryExporter::start(cfg).await.unwrap();
    let mut res = BTreeMap::new();
    res.insert("service.name".to_string(), "checkout".to_string());
    exp.export(vec![
        ExportChunk {
            chunk: chunk(PROFILER_A, "python", T0, 5.0, 20.0),
            resource: res,
            linked_threads: Vec::new(),
        },
        ExportChunk::new(chunk(PROFILER_B, "python", T0, 5.0, 20.0)),
    ])
    .await
    .unwrap();
    exp.shutdown(WAIT).await;
    let reqs = server.chunk_requests();
    assert_eq!(reqs.len(), 2);
    for r in reqs {
        let c = r.chunk().unwrap();
        let project = if c.profiler_id == PROFILER_A { 7 } else { 42 };
        assert_eq!(r.path, format!("/api/{project}/envelope/"));
        assert_eq!(r.envelope().headers["dsn"], server.dsn(project).as_str());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_and_uncompressed_bodies() {
    for (compression, encoding) in [
        (profilink_exporter::Compression::Zstd, Some("zstd")),
        (profilink_exporter::Compression::None, None),
    ] {
        let server = StandIn::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(&server, dir.path());
        cfg.compression = compression;
        let exp = SentryExporter::start(cfg).await.unwrap();
        export_all(&exp, vec![chunk(PROFILER_A, "python", T0, 5.0, 20.0)]).await;
        exp.shutdown(WAIT).await;
        let reqs = server.chunk_requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].header("content-encoding"), encoding);
        assert_eq!(reqs[0].chunk().unwrap().profile.samples.len(), 100);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reads_the_documented_yaml_shape() {
    let json = serde_json::json!({
        "dsn": "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/123",
        "compression": "zstd",
        "timeout": "5s",
        "num_consumers": 4,
        "chunk_duration": "60s",
        "chunk_idle_timeout": "10s",
        "max_chunk_bytes": 8388608,
        "retry_on_failure": { "enabled": true, "initial_interval": "5s", "max_interval": "30s", "max_elapsed_time": "300s", "multiplier": 1.5, "randomization_factor": 0.5 },
        "sending_queue": { "enabled": true, "storage": "./profilink-data/queue", "max_size_mib": 256, "overflow": "drop_oldest" },
        "dead_letter_dir": null,
        "routing": { "attribute": "service.name", "dsns": { "checkout": "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/9" } }
    });
    let cfg: SentryExporterConfig = serde_json::from_value(json).unwrap();
    assert_eq!(cfg.timeout, Duration::from_secs(5));
    assert_eq!(cfg.sending_queue.overflow(), Overflow::DropOldest);
    assert_eq!(cfg.consumers(), 4);
    // The same queue in the Collector's keys.
    let collector: SentryExporterConfig = serde_json::from_value(serde_json::json!({
        "dsn": "https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/123",
        "sending_queue": { "enabled": true, "num_consumers": 2, "sizer": "bytes", "queue_size": 268435456, "block_on_overflow": false }
    }))
    .unwrap();
    collector.check().unwrap();
    assert_eq!(collector.consumers(), 2);
    assert_eq!(collector.sending_queue.capacity_bytes(), 256 << 20);
    assert_eq!(
        cfg.retry_on_failure.max_elapsed_time,
        Duration::from_secs(300)
    );
    let empty: SentryExporterConfig = serde_json::from_value(serde_json::json!({})).unwrap();
    assert_eq!(empty, SentryExporterConfig::default());
    let short: profilink_exporter::RetryConfig = serde_json::from_value(
        serde_json::json!({"initial_interval": "300ms", "max_interval": "1m"}),
    )
    .unwrap();
    assert_eq!(short.initial_interval, Duration::from_millis(300));
    assert_eq!(short.max_interval, Duration::from_secs(60));
    assert!(matches!(
        SentryExporter::start(SentryExporterConfig::default()).await,
        Err(StartError::Missing(_))
    ));
    let _ = ManualClock::new().wall();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_queue_record_is_skipped_and_counted() {
    let server = StandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let exp = SentryExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    let profilers = [PROFILER_A, PROFILER_B, "cccccccccccccccccccccccccccccccc"];
    for p in profilers {
        exp.export(vec![ExportChunk::new(chunk(p, "python", T0, 5.0, 20.0))])
            .await
            .unwrap();
    }
    drop(exp); // crash before the idle timeout: all three are still input records
    wait_until_unlocked(dir.path()).await;
    let input_dir = dir.path().join("queue").join("input");
    let seg = std::fs::read_dir(&input_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().and_then(|e| e.to_str()) == Some("log"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let magic = [0xFFu8, 0x50, 0x4C, 0x51];
    let starts: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == magic)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(starts.len(), 3);
    bytes[starts[1] + 40] ^= 0x55;
    std::fs::write(&seg, bytes).unwrap();

    let exp = SentryExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    let metrics = exp.metrics();
    exp.shutdown(WAIT).await;
    assert_eq!(metrics.snapshot().corrupt_records, 1);
    let got: std::collections::BTreeSet<String> = server
        .delivered_chunks()
        .into_iter()
        .map(|c| c.profiler_id)
        .collect();
    assert_eq!(got.len(), 2);
    assert!(!got.contains(PROFILER_B));
}
