//! The join log on a real directory: replay, acknowledgements, a torn tail, records that do
//! not decode, the directory lock.

use super::*;
use profilink_proto::sentry::{Frame, ProfileChunk, ProfileData, Sample};
use profilink_translator::SpanInterval;

fn chunk(id: u64) -> ProfileChunk {
    ProfileChunk {
        chunk_id: format!("{id:032x}"),
        profiler_id: "11111111111111111111111111111111".into(),
        platform: "python".into(),
        version: "2".into(),
        profile: ProfileData {
            frames: vec![std::sync::Arc::new(Frame {
                function: Some("f".into()),
                ..Default::default()
            })],
            stacks: vec![vec![0]],
            samples: vec![Sample {
                stack_id: 0,
                thread_id: "7".into(),
                timestamp: 100.0 + id as f64,
            }],
            ..Default::default()
        },
        ..Default::default()
    }
}

fn span(id: u8) -> SpanInterval {
    SpanInterval {
        profiler_id: "11111111111111111111111111111111".into(),
        thread_id: "7".into(),
        start_ns: 1,
        end_ns: 2,
        is_root: false,
        trace_id: [1; 16],
        span_id: [id; 8],
    }
}

fn ids_of(r: &Replay) -> (Vec<String>, Vec<u8>) {
    (
        r.chunks
            .iter()
            .map(|(_, c)| c.chunk.chunk_id.clone())
            .collect(),
        r.spans.iter().map(|(_, s)| s.spans[0].span_id[0]).collect(),
    )
}

#[test]
fn what_is_not_acknowledged_comes_back_with_its_arrival_time() {
    let dir = tempfile::tempdir().unwrap();
    let (log, replay) = JoinLog::open(dir.path()).unwrap();
    assert!(replay.chunks.is_empty() && replay.spans.is_empty());
    let c = [
        record::encode_chunk(10, 7, &chunk(1)),
        record::encode_chunk(11, 7, &chunk(2)),
    ];
    let (ids, s1) = log
        .append(&c, Some(&record::encode_spans(12, &[span(1)])))
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_ne!(s1, 0);
    let (ids2, s2) = log
        .append(&[], Some(&record::encode_spans(13, &[span(2)])))
        .unwrap();
    assert!(ids2.is_empty());
    let (ids3, none) = log
        .append(&[record::encode_chunk(14, 8, &chunk(3))], None)
        .unwrap();
    assert_eq!(none, 0);
    assert!(log.live_bytes() > 0);
    log.ack_chunks(&ids[..1]).unwrap();
    log.ack_spans(&[s2]).unwrap();
    drop(log);

    let (log, replay) = JoinLog::open(dir.path()).unwrap();
    assert_eq!(
        ids_of(&replay),
        (vec![format!("{:032x}", 2), format!("{:032x}", 3)], vec![1])
    );
    assert_eq!(replay.chunks[0].1.arrived_unix_ns, 11);
    assert_eq!(replay.chunks[1].1.project_id, 8);
    assert_eq!(replay.chunks[1].1.chunk, chunk(3));
    assert_eq!(replay.spans[0].1.arrived_unix_ns, 12);
    assert_eq!((replay.corrupt, replay.torn_tails), (0, 0));

    // New ids never collide with live ones: acknowledging the new record leaves the old.
    let (new, _) = log
        .append(&[record::encode_chunk(15, 9, &chunk(4))], None)
        .unwrap();
    assert!(!ids.contains(&new[0]) && !ids3.contains(&new[0]));
    log.ack_chunks(&new).unwrap();
    log.ack_chunks(&[ids[1], ids3[0]]).unwrap();
    log.ack_spans(&[s1]).unwrap();
    assert_eq!(log.live_bytes(), 0);
    drop(log);
    let (_, replay) = JoinLog::open(dir.path()).unwrap();
    assert!(replay.chunks.is_empty() && replay.spans.is_empty());
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_torn_tail_is_ignored_and_the_records_before_it_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = JoinLog::open(dir.path()).unwrap();
    log.append(&[record::encode_chunk(1, 1, &chunk(1))], None)
        .unwrap();
    drop(log);
    // A crash in the middle of the next append: part of a frame at the end of the segment.
    let seg = segments(&dir.path().join("chunks")).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let whole = bytes.clone();
    bytes.extend_from_slice(&whole[..whole.len() / 2]);
    std::fs::write(&seg, bytes).unwrap();

    let (log, replay) = JoinLog::open(dir.path()).unwrap();
    assert_eq!(ids_of(&replay).0, vec![format!("{:032x}", 1)]);
    assert_eq!(replay.torn_tails, 1);
    // Appends go on after it, in a fresh segment.
    log.append(&[record::encode_chunk(2, 1, &chunk(2))], None)
        .unwrap();
    drop(log);
    let (_, replay) = JoinLog::open(dir.path()).unwrap();
    assert_eq!(replay.chunks.len(), 2);
}

#[test]
fn a_record_that_does_not_decode_is_skipped_once_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut raw, _) =
            SegmentLog::open(&dir.path().join("spans"), true, 4096, |_, _| {}).unwrap();
        raw.append(&[(5, b"not a spans record".as_slice())])
            .unwrap();
        let (mut raw, _) =
            SegmentLog::open(&dir.path().join("chunks"), true, 4096, |_, _| {}).unwrap();
        let mut truncated = record::encode_chunk(1, 1, &chunk(1));
        truncated.truncate(30);
        raw.append(&[(6, truncated.as_slice())]).unwrap();
    }
    let (log, replay) = JoinLog::open(dir.path()).unwrap();
    assert!(replay.chunks.is_empty() && replay.spans.is_empty());
    assert_eq!(replay.corrupt, 2);
    // Ids go on past the bad ones.
    let (ids, _) = log
        .append(&[record::encode_chunk(1, 1, &chunk(1))], None)
        .unwrap();
    assert!(ids[0] > 6);
    drop(log);
    let (_, replay) = JoinLog::open(dir.path()).unwrap();
    assert_eq!((replay.chunks.len(), replay.corrupt), (1, 0));
}

#[test]
fn a_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, _) = JoinLog::open(dir.path()).unwrap();
    let err = JoinLog::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
}
