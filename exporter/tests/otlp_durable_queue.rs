//! The OTLP exporters' durable sending queue (`sending_queue.storage`) against the HTTP
//! stand-in on 127.0.0.1: persisted before `export` returns, kept across a crash (the exporter
//! dropped without shutdown) and a shutdown, replayed in order at the next start, removed once
//! delivered or given up (counted), and a full queue refuses.

mod common;

use common::*;
use profilink_consumer::ExportError;
use profilink_exporter::{
    DiscardReason, OtlpExporter, OtlpExporterConfig, OtlpProtocol, OtlpTracesConfig, QueueConfig,
    QueueSizer, RetryConfig, TracesExporter, TracesExporterConfig,
};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, Profile, ResourceProfiles, ScopeProfiles,
};
use profilink_proto::otlp::{ExportTraceServiceRequest, ResourceSpans, ScopeSpans, Span};
use prost::Message;
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// A request of one profile whose `profile_id` names it.
fn request(name: &str) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    profile_id: name.as_bytes().to_vec(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: None,
    }
}

fn names(server: &StandIn) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| (200..300).contains(&r.answered))
        .map(|r| {
            let req = ExportProfilesServiceRequest::decode(&r.decoded_body()[..]).unwrap();
            String::from_utf8(
                req.resource_profiles[0].scope_profiles[0].profiles[0]
                    .profile_id
                    .clone(),
            )
            .unwrap()
        })
        .collect()
}

fn config(server: &StandIn, storage: &Path) -> OtlpExporterConfig {
    OtlpExporterConfig {
        endpoint: format!("http://{}", server.addr),
        protocol: OtlpProtocol::Http,
        retry_on_failure: RetryConfig {
            initial_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(50),
            max_elapsed_time: Duration::ZERO,
            ..Default::default()
        },
        timeout: Duration::from_secs(2),
        sending_queue: QueueConfig {
            storage: Some(storage.to_path_buf()),
            num_consumers: Some(1),
            fsync: false,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_profiles_survive_a_crash_and_a_shutdown_and_are_sent_in_order() {
    let server = StandIn::start().await;
    server.set_default(Behaviour::status(503));
    let dir = tempfile::tempdir().unwrap();
    let exp = OtlpExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    for n in ["a", "b", "c"] {
        exp.export(request(n)).await.unwrap();
    }
    assert!(server.wait_for(WAIT, |s| s.requests().len() >= 2).await);
    // A crash: no shutdown, every request still on disk.
    drop(exp);

    let exp = start_when_free(|| OtlpExporter::start(config(&server, dir.path()))).await;
    exp.export(request("d")).await.unwrap();
    let m = exp.metrics();
    assert!(server.wait_for(WAIT, |s| s.requests().len() >= 8).await);
    // A shutdown while the backend is down keeps everything (nothing counted as dropped).
    exp.shutdown(Duration::from_millis(100)).await;
    let s = m.snapshot();
    assert_eq!(s.dropped.iter().map(|(_, n)| n).sum::<u64>(), 0, "{s:?}");
    assert!(s.queue_size_bytes > 0, "{s:?}");

    // A request cut off by the shutdown may still be answered: let it be a 503 (were it a 200,
    // the request would rightly be sent again, the at-least-once duplicate).
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.set_default(Behaviour::ok());
    let exp = OtlpExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    let m = exp.metrics();
    assert!(server.wait_for(WAIT, |s| names(s).len() == 4).await);
    exp.shutdown(WAIT).await;
    assert_eq!(names(&server), vec!["a", "b", "c", "d"]);
    let s = m.snapshot();
    assert_eq!((s.sent_chunks, s.queue_size_bytes), (4, 0), "{s:?}");

    // Delivered means removed: a fourth start sends nothing.
    let exp = OtlpExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    exp.shutdown(WAIT).await;
    assert_eq!(names(&server).len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_given_up_is_counted_and_removed() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::status(400)]);
    server.set_default(Behaviour::ok());
    let dir = tempfile::tempdir().unwrap();
    let exp = OtlpExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    let m = exp.metrics();
    exp.export(request("refused")).await.unwrap();
    exp.export(request("sent")).await.unwrap();
    exp.shutdown(WAIT).await;
    let s = m.snapshot();
    assert_eq!(s.dropped(DiscardReason::SendError), 1, "{s:?}");
    assert_eq!(s.sent_chunks, 1);
    let exp = OtlpExporter::start(config(&server, dir.path()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    exp.shutdown(WAIT).await;
    assert_eq!(server.requests().len(), 2, "neither comes back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_durable_queue_refuses_export() {
    let server = StandIn::start().await;
    server.set_default(Behaviour::status(503));
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&server, dir.path());
    cfg.sending_queue.sizer = Some(QueueSizer::Bytes);
    cfg.sending_queue.queue_size = Some(50);
    let exp = OtlpExporter::start(cfg.clone()).await.unwrap();
    let m = exp.metrics();
    // An empty queue takes one request whatever its size; the next one is refused.
    exp.export(request("first")).await.unwrap();
    let err = exp.export(request("second")).await.unwrap_err();
    assert!(matches!(err, ExportError::Full { .. }), "{err}");
    assert_eq!(m.snapshot().refused_full, 1);
    assert_eq!(m.snapshot().queue_capacity_bytes, 50);
    exp.shutdown(Duration::from_millis(50)).await;
    // After a restart the refused request is not there, the accepted one is (once: a request
    // cut off by the shutdown is answered 503 before the stand-in turns to 200).
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.set_default(Behaviour::ok());
    let exp = OtlpExporter::start(cfg).await.unwrap();
    assert!(server.wait_for(WAIT, |s| !names(s).is_empty()).await);
    exp.shutdown(WAIT).await;
    assert_eq!(names(&server), vec!["first"]);
}

fn spans(name: &str, n: usize) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: (0..n)
                    .map(|i| Span {
                        name: format!("{name}-{i}"),
                        trace_id: vec![1; 16],
                        span_id: vec![2; 8],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_traces_survive_a_shutdown_while_the_backend_is_down() {
    let server = StandIn::start().await;
    server.set_default(Behaviour::status(503));
    let dir = tempfile::tempdir().unwrap();
    let base = config(&server, dir.path());
    let cfg = TracesExporterConfig::OtlpHttp(OtlpTracesConfig {
        endpoint: Some(base.endpoint.clone()),
        retry_on_failure: base.retry_on_failure.clone(),
        sending_queue: base.sending_queue.clone(),
        ..Default::default()
    });
    let exp = TracesExporter::start(cfg.clone()).await.unwrap();
    let m = exp.metrics();
    exp.export(spans("x", 3)).await.unwrap();
    exp.export(spans("y", 2)).await.unwrap();
    assert!(server.wait_for(WAIT, |s| !s.requests().is_empty()).await);
    exp.shutdown(Duration::from_millis(100)).await;
    assert_eq!(m.snapshot().send_failed_spans, 0, "kept, not dropped");
    assert!(dir.path().join("traces").is_dir());

    tokio::time::sleep(Duration::from_millis(300)).await;
    server.set_default(Behaviour::ok());
    let exp = TracesExporter::start(cfg).await.unwrap();
    let m = exp.metrics();
    let delivered = |s: &StandIn| s.requests().iter().filter(|r| r.answered == 200).count();
    assert!(
        server.wait_for(WAIT, |s| delivered(s) == 2).await,
        "{:?}",
        server
            .requests()
            .iter()
            .map(|r| (r.answered, r.body.len()))
            .collect::<Vec<_>>()
    );
    exp.shutdown(WAIT).await;
    let s = m.snapshot();
    assert_eq!((s.sent_requests, s.sent_spans), (2, 5), "{s:?}");
}
