//! The file exporter: merged chunks as atomic `<chunk_id>.envelope` files.

mod common;

use common::*;
use profilink_consumer::ExportChunk;
use profilink_exporter::{FileExporter, FileExporterConfig, ManualClock, SharedClock};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use std::sync::Arc;
use std::time::Duration;

fn envelopes(dir: &std::path::Path) -> Vec<(String, Envelope)> {
    let mut out: Vec<(String, Envelope)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, Envelope::parse(&std::fs::read(&p).unwrap()).unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_one_envelope_per_merged_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cfg = FileExporterConfig {
        path: out.clone(),
        tick: Duration::from_millis(10),
        ..Default::default()
    };
    let exp = FileExporter::start(cfg).await.unwrap();
    let mut chunks = twelve_chunks(PROFILER_A, "rust", T0);
    chunks.extend(twelve_chunks(PROFILER_B, "cocoa", T0));
    for c in chunks {
        exp.export(vec![ExportChunk::new(c)]).await.unwrap();
    }
    exp.shutdown(Duration::from_secs(5)).await;
    let files = envelopes(&out);
    assert_eq!(
        files.len(),
        2,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (name, env) in files {
        assert_eq!(env.items.len(), 1);
        let item = &env.items[0];
        let chunk = ProfileChunk::from_json(&item.payload).unwrap();
        assert_eq!(name, format!("{}.envelope", chunk.chunk_id));
        assert_eq!(item.platform(), Some(chunk.platform.as_str()));
        assert_eq!(chunk.profile.samples.len(), 1200);
        assert_eq!(env.headers["sdk"]["name"], "profilink");
    }
    // No temporary files left; the queue directory is hidden.
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n.ends_with(".envelope") || n == ".queue"),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_written_without_shutdown_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let clock = Arc::new(ManualClock::new());
    let shared: SharedClock = clock.clone();
    let cfg = FileExporterConfig {
        path: out.clone(),
        tick: Duration::from_millis(10),
        ..Default::default()
    };
    let exp = FileExporter::start_with_clock(cfg.clone(), shared)
        .await
        .unwrap();
    exp.export(vec![ExportChunk::new(chunk(
        PROFILER_A, "python", T0, 5.0, 20.0,
    ))])
    .await
    .unwrap();
    clock.advance(Duration::from_secs(10));
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while envelopes(&out).is_empty() && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(envelopes(&out).len(), 1);
    // A chunk accepted but still accumulating when the process dies…
    exp.export(vec![ExportChunk::new(chunk(
        PROFILER_B, "python", T0, 5.0, 20.0,
    ))])
    .await
    .unwrap();
    drop(exp);
    // …is written by the next run.
    let exp = start_when_free(|| FileExporter::start(cfg.clone())).await;
    exp.shutdown(Duration::from_secs(5)).await;
    let files = envelopes(&out);
    assert_eq!(files.len(), 2);
}
