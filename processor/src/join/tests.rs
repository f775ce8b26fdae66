//! The durable join across restarts: a join log written by one `SentryJoin`, read back by the
//! next, with arrival times set in the records so no test sleeps.

use super::*;
use profilink_proto::sentry::{Frame, ProfileData, Sample};
use profilink_translator::LinkSource;

const P: &str = "11111111111111111111111111111111";
const S: u64 = 1_000_000_000;

fn chunk(id: u64, from: u64, to: u64) -> ProfileChunk {
    ProfileChunk {
        chunk_id: format!("{id:032x}"),
        profiler_id: P.into(),
        platform: "python".into(),
        version: "2".into(),
        profile: ProfileData {
            frames: vec![std::sync::Arc::new(Frame {
                function: Some("f".into()),
                ..Default::default()
            })],
            stacks: vec![vec![0]],
            samples: (from..=to)
                .map(|t| Sample {
                    stack_id: 0,
                    thread_id: "7".into(),
                    timestamp: t as f64,
                })
                .collect(),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn span(id: u8, from: u64, to: u64) -> SpanInterval {
    SpanInterval {
        profiler_id: P.into(),
        thread_id: "7".into(),
        start_ns: from * S,
        end_ns: to * S,
        is_root: false,
        trace_id: [1; 16],
        span_id: [id; 8],
    }
}

fn cfg() -> JoinConfig {
    JoinConfig {
        window: Duration::from_secs(30),
        span_retention: Duration::from_secs(120),
        ..JoinConfig::default()
    }
}

fn open(dir: &Path) -> SentryJoin {
    SentryJoin::new(cfg()).with_log(dir).unwrap()
}

fn ago(secs: u64) -> u64 {
    unix_ns(SystemTime::now()) - secs * S
}

fn chunk_ids(r: &[Release]) -> Vec<String> {
    r.iter()
        .flat_map(|r| r.chunks.iter().map(|(_, c)| c.chunk_id.clone()))
        .collect()
}

/// Writes records as an earlier run would have left them.
fn leave(dir: &Path, chunks: &[(u64, ProfileChunk)], spans: &[(u64, Vec<SpanInterval>)]) {
    let (log, _) = JoinLog::open(dir).unwrap();
    for (at, c) in chunks {
        log.append(&[record::encode_chunk(*at, 7, c)], None)
            .unwrap();
    }
    for (at, s) in spans {
        log.append(&[], Some(&record::encode_spans(*at, s)))
            .unwrap();
    }
}

#[tokio::test]
async fn held_chunks_wait_out_the_rest_of_their_window_with_their_spans() {
    let dir = tempfile::tempdir().unwrap();
    // Chunk 1 arrived 10 s ago (20 s of its window left), chunk 2 40 s ago (window over); the
    // span arrived 10 s ago and covers both chunks' samples.
    leave(
        dir.path(),
        &[(ago(10), chunk(1, 100, 110)), (ago(40), chunk(2, 50, 60))],
        &[(ago(10), vec![span(9, 40, 120)])],
    );
    let join = open(dir.path());
    let m = join.metrics();
    assert_eq!(
        (
            m.restored_chunks.load(Ordering::Relaxed),
            m.restored_spans.load(Ordering::Relaxed),
            m.held_chunks.load(Ordering::Relaxed),
        ),
        (2, 1, 2)
    );
    assert!(join.is_durable());
    let r = join.due().await;
    assert_eq!(
        chunk_ids(&r),
        vec![format!("{:032x}", 2)],
        "only chunk 2's window is over"
    );
    assert_eq!(r[0].chunks[0].0, 7, "project kept");
    assert_eq!(
        r[0].links.link(P, "7", 55 * S),
        Some(([1; 16], [9; 8])),
        "linked"
    );
    assert_eq!(m.held_chunks.load(Ordering::Relaxed), 1);
    // Released but not acknowledged (the exporters did not take it yet): a crash now brings
    // it back, as well as the held chunk and the span.
    drop(join);
    let join = open(dir.path());
    assert_eq!(m_of(&join).restored_chunks.load(Ordering::Relaxed), 2);
    let r = join.due().await;
    join.ack_chunks(r.iter().flat_map(|r| r.records.clone()).collect())
        .await;
    drop(join);
    // Acknowledged: only the held chunk comes back, still held.
    let join = open(dir.path());
    assert_eq!(m_of(&join).restored_chunks.load(Ordering::Relaxed), 1);
    assert!(join.due().await.is_empty());
    // The rest of the window: its release links like chunk 2's.
    let r = join.all();
    assert_eq!(r[0].links.link(P, "7", 105 * S), Some(([1; 16], [9; 8])));
}

fn m_of(j: &SentryJoin) -> Arc<JoinMetrics> {
    j.metrics()
}

#[tokio::test]
async fn added_data_is_on_disk_before_add_returns_and_spans_leave_with_their_retention() {
    let dir = tempfile::tempdir().unwrap();
    let join = open(dir.path());
    let out = join
        .add(vec![chunk(1, 100, 110)], 3, vec![span(1, 100, 105)])
        .await
        .unwrap();
    assert!(out.is_empty(), "held for its window");
    assert!(join.metrics().log_bytes.load(Ordering::Relaxed) > 0);
    drop(join);
    // A crash right after the answer: both are back, arrived just now.
    let join = open(dir.path());
    let m = join.metrics();
    assert_eq!(
        (
            m.restored_chunks.load(Ordering::Relaxed),
            m.restored_spans.load(Ordering::Relaxed)
        ),
        (1, 1)
    );
    assert!(join.due().await.is_empty(), "the window is not over");
    drop(join);

    // Spans past their retention leave the buffer and the log.
    leave(dir.path(), &[], &[(ago(300), vec![span(2, 1, 2)])]);
    let join = open(dir.path());
    assert_eq!(join.metrics().restored_spans.load(Ordering::Relaxed), 2);
    assert!(join.due().await.is_empty());
    assert_eq!(join.metrics().kept_spans.load(Ordering::Relaxed), 1);
    drop(join);
    let join = open(dir.path());
    assert_eq!(join.metrics().restored_spans.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_request_the_log_cannot_take_is_refused_and_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let join = open(dir.path());
    // The directory disappears under the log: no segment can be created.
    std::fs::remove_dir_all(dir.path().join("chunks")).unwrap();
    let err = join
        .add(vec![chunk(1, 100, 110)], 3, Vec::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConsumeError::Log {
                log: "join log",
                ..
            }
        ) && err.to_string().starts_with("join log:"),
        "{err:?}"
    );
    let m = join.metrics();
    assert_eq!(m.log_append_failures.load(Ordering::Relaxed), 1);
    assert_eq!(m.held_chunks.load(Ordering::Relaxed), 0, "nothing held");
}

#[tokio::test]
async fn a_parked_request_dropped_from_memory_stays_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    leave(dir.path(), &[(ago(40), chunk(1, 100, 110))], &[]);
    let join = open(dir.path());
    let r = join.due().await;
    let records = r[0].records.clone();
    assert_ne!(records, vec![0]);
    join.park(Parked {
        req: Default::default(),
        records,
    });
    for _ in 0..MAX_PARKED {
        join.park(Parked {
            req: Default::default(),
            records: vec![0],
        });
    }
    assert_eq!(join.metrics().dropped_requests.load(Ordering::Relaxed), 1);
    drop(join);
    let join = open(dir.path());
    assert_eq!(chunk_ids(&join.due().await), vec![format!("{:032x}", 1)]);
}

#[test]
fn arrival_times_convert_between_the_clocks() {
    let now = Instant::now();
    let wall = 1_000 * S;
    assert_eq!(
        arrived_at(wall - 5 * S, now, wall),
        now - Duration::from_secs(5)
    );
    assert_eq!(
        arrived_at(wall + 5 * S, now, wall),
        now,
        "the future is now"
    );
    assert!(unix_ns(SystemTime::now()) > 1_700_000_000 * S);
}

#[test]
fn a_full_disk_asks_the_client_to_come_back() {
    let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
    assert!(matches!(refusal(full), ConsumeError::Full { .. }));
    let other = std::io::Error::other("boom");
    assert!(matches!(refusal(other), ConsumeError::Log { .. }));
}

/// A chunk sent again after a crash (released, its acknowledgement not yet written) is the
/// same request: its translation depends only on the chunk and its session's spans.
#[test]
fn a_released_chunk_translates_to_the_same_bytes_every_time() {
    use profilink_translator::TransactionLinks;
    use profilink_translator::sentry_to_otlp::{OtlpOptions, SentryInput, to_otlp};
    use prost::Message;
    let mut c = chunk(1, 100, 160);
    for (i, s) in c.profile.samples.iter_mut().enumerate() {
        s.thread_id = (i % 5).to_string().into();
    }
    let spans = vec![span(1, 100, 120), span(2, 110, 150), span(3, 140, 170)];
    let bytes = || {
        let links = TransactionLinks::from_intervals(spans.clone());
        let t = to_otlp(
            &SentryInput {
                chunks: std::slice::from_ref(&c),
                v1_profiles: &[],
            },
            &links,
            &OtlpOptions::default(),
        );
        t.request.encode_to_vec()
    };
    let first = bytes();
    assert!(first.len() > 100);
    for _ in 0..20 {
        assert_eq!(bytes(), first);
    }
}
