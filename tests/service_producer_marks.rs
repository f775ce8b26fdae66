//! The real binary: OTLP from another producer carrying partial `sentry.*` marks (profile-level
//! `sentry.chunk_id` / `sentry.profiler_id`, no `sentry.platform` / `sentry.version`) reaches a
//! loopback Sentry as valid chunks with the producer's profiler id and every observation, and
//! no chunk was removed as invalid.

#[path = "common/producer.rs"]
mod producer;
mod service_support;

use producer::{
    assert_same, assert_valid_chunk, chunk_observations, fixture_chunk_and_invalid_copy,
    other_producer_request,
};
use profilink::telemetry::metrics::scrape;
use service_support::*;
use std::time::Duration;

const T0: u64 = 1_795_317_063_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_producers_marks_reach_sentry_as_valid_chunks() {
    let standin = SentryStandIn::start(None).await;
    let run = start_to_sentry(&standin, "otlp");
    let (grpc, metrics) = (run.listen.clone(), run.metrics.clone());
    let mut p = run.process;

    let (req, want) = other_producer_request(T0);
    grpc_export(&grpc, req).await;
    let ok = standin
        .wait_for(Duration::from_secs(10), |c| {
            c.iter().map(|c| c.profile.samples.len()).sum::<usize>() >= want.len()
        })
        .await;
    assert!(ok, "not delivered; stderr:\n{}", p.stderr());
    let chunks = standin.chunks();
    for c in &chunks {
        assert_valid_chunk(c);
    }
    assert_same(chunk_observations(&chunks), want);

    let (status, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(status, 200);
    assert_eq!(
        scrape(
            &text,
            "profilink_translation_errors_total",
            &[("reason", "invalid_chunk")]
        ),
        Some(0),
        "{text}"
    );
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(15)).success());
}

/// Sentry chunks passed through to Sentry are held to the same check, at the receiver's door:
/// an invalid one is refused with the rule it breaks (400, and counted with that reason) and
/// never sent, the valid one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_received_chunks_are_not_sent_to_sentry() {
    use profilink_proto::sentry::Envelope;
    let standin = SentryStandIn::start(None).await;
    let run = start_to_sentry(&standin, "sentry");
    let (sentry, metrics) = (run.listen.clone(), run.metrics.clone());
    let mut p = run.process;

    let (good, bad) = fixture_chunk_and_invalid_copy(&fixtures(), |c| c.version = String::new());
    let client = reqwest::Client::new();
    for (chunk, want) in [(&bad, 400), (&good, 200)] {
        let resp = client
            .post(format!("http://{sentry}/api/42/envelope/"))
            .header(
                "x-sentry-auth",
                format!("Sentry sentry_key={KEY}, sentry_version=7"),
            )
            .header("content-type", "application/x-sentry-envelope")
            .body(Envelope::for_chunk(chunk, "sentry.python", "2.0.0").to_bytes())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), want);
        if want == 400 {
            let detail = resp.text().await.unwrap();
            assert!(detail.contains("chunk-version"), "{detail}");
        }
    }
    let n = good.profile.samples.len();
    let ok = standin
        .wait_for(Duration::from_secs(10), |c| {
            c.iter().map(|c| c.profile.samples.len()).sum::<usize>() >= n
        })
        .await;
    assert!(ok, "not delivered; stderr:\n{}", p.stderr());
    // The invalid chunk was judged before the receiver answered: it can never arrive, and no
    // pipeline saw it.
    let ids: Vec<String> = standin.chunks().into_iter().map(|c| c.chunk_id).collect();
    assert!(!ids.contains(&bad.chunk_id), "{ids:?}");
    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(
        scrape(
            &text,
            "profilink_translation_errors_total",
            &[("reason", "invalid_chunk")]
        ),
        Some(0),
        "{text}"
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_receiver_refused_items_total",
            &[
                ("receiver", "sentry"),
                ("type", "profile_chunk"),
                ("reason", "chunk-version")
            ]
        ),
        Some(1),
        "{text}"
    );
    p.signal("TERM");
    assert!(p.wait_exit(Duration::from_secs(15)).success());
}
