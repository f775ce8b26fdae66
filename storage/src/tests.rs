//! Tests of the segment log: locking, append/ack/reopen, segment deletion, corrupt records,
//! torn tails and acknowledgement files cut short.

use super::framing::{HEADER, frame};
use super::*;

fn open(dir: &Path) -> (SegmentLog, Vec<(u64, Vec<u8>)>, ScanStats) {
    let mut got = Vec::new();
    let (log, stats) =
        SegmentLog::open(dir, true, 4096, |id, b| got.push((id, b.to_vec()))).unwrap();
    (log, got, stats)
}

#[test]
fn a_directory_open_in_one_log_is_refused_to_another_until_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, _, _) = open(dir.path());
    first.append(&[(1, b"kept".as_slice())]).unwrap();
    let err = SegmentLog::open(dir.path(), true, 4096, |_, _| {}).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
    assert!(err.to_string().contains("in use"), "{err}");
    drop(first);
    let (_, got, _) = open(dir.path());
    assert_eq!(got, vec![(1, b"kept".to_vec())]);
}

#[test]
fn append_ack_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, got, _) = open(dir.path());
    assert!(got.is_empty());
    log.append(&[(1, b"one"), (2, b"two")]).unwrap();
    log.append(&[(3, b"three")]).unwrap();
    assert_eq!(log.read(2).unwrap().as_deref(), Some(&b"two"[..]));
    log.ack(&[2]).unwrap();
    assert_eq!(log.read(2).unwrap(), None);
    drop(log);
    let (log, got, stats) = open(dir.path());
    assert_eq!(got, vec![(1, b"one".to_vec()), (3, b"three".to_vec())]);
    assert_eq!(stats.live, 2);
    assert_eq!(log.len(), 2);
}

#[test]
fn fully_acked_segments_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = open(dir.path());
    let body = vec![7u8; 3000];
    for id in 0..10u64 {
        log.append(&[(id, &body)]).unwrap();
    }
    assert!(log.segment_count() >= 5);
    log.ack(&(0..10).collect::<Vec<_>>()).unwrap();
    assert!(log.segment_count() <= 1);
    assert_eq!(log.live_bytes(), 0);
    drop(log);
    let (_, got, _) = open(dir.path());
    assert!(got.is_empty());
    let files = fs::read_dir(dir.path()).unwrap().count();
    assert!(files <= 2, "{files} files left");
}

#[test]
fn corrupt_record_is_skipped_and_torn_tail_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = open(dir.path());
    log.append(&[(1, b"aaaa"), (2, b"bbbb"), (3, b"cccc")])
        .unwrap();
    drop(log);
    let path = seg_path(dir.path(), 1, "log");
    let mut bytes = fs::read(&path).unwrap();
    // Flip a payload byte of record 2 and add a torn record at the end.
    let rec = HEADER + 8 + 4;
    bytes[rec + HEADER + 9] ^= 0xff;
    let mut torn = Vec::new();
    frame(4, b"dddd", &mut torn);
    bytes.extend_from_slice(&torn[..torn.len() - 2]);
    fs::write(&path, bytes).unwrap();
    let (_, got, stats) = open(dir.path());
    assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 3]);
    assert_eq!(stats.corrupt, 1);
    assert_eq!(stats.torn_tails, 1);
}

#[test]
fn acknowledgements_after_a_partial_entry_still_count() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = open(dir.path());
    log.append(&[(1, b"a".as_slice()), (2, b"b"), (3, b"c"), (4, b"d")])
        .unwrap();
    log.ack(&[1]).unwrap();
    drop(log);
    // The disk filled up under the next acknowledgement: part of it was written.
    let ack = seg_path(dir.path(), 1, "ack");
    let mut bytes = fs::read(&ack).unwrap();
    bytes.extend_from_slice(&2u64.to_le_bytes()[..5]);
    fs::write(&ack, bytes).unwrap();
    let (mut log, got, _) = open(dir.path());
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    log.ack(&[2, 3]).unwrap();
    drop(log);
    let (_, got, _) = open(dir.path());
    assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![4]);
}

#[test]
fn garbage_file_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        seg_path(dir.path(), 5, "log"),
        [0xFFu8, 0x50, 0x4C, 0x51, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2],
    )
    .unwrap();
    fs::write(seg_path(dir.path(), 5, "ack"), [1u8, 2, 3]).unwrap();
    let (mut log, got, _) = open(dir.path());
    assert!(got.is_empty());
    log.append(&[(1, b"x")]).unwrap();
    assert_eq!(log.read(1).unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn records_given_in_parts_read_back_whole_even_beyond_one_vectored_write() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = open(dir.path());
    // 1,500 records of 3 parts each: more slices than one `writev` takes (1,024), and an
    // empty part, so the writes are continued after short ones.
    let bodies: Vec<[Vec<u8>; 3]> = (0..1500u32)
        .map(|i| {
            [
                i.to_le_bytes().to_vec(),
                Vec::new(),
                vec![(i % 251) as u8; (i % 97) as usize],
            ]
        })
        .collect();
    let refs: Vec<[&[u8]; 3]> = bodies
        .iter()
        .map(|[a, b, c]| [a.as_slice(), b.as_slice(), c.as_slice()])
        .collect();
    let records: Vec<(u64, &[&[u8]])> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u64 + 1, &r[..]))
        .collect();
    log.append_parts(&records).unwrap();
    let whole = |i: usize| bodies[i].concat();
    assert_eq!(log.read(1000).unwrap(), Some(whole(999)));
    let live = log.live_bytes();
    drop(log);
    let (log, got, stats) = open(dir.path());
    assert_eq!(stats.corrupt, 0);
    assert_eq!(got.len(), 1500);
    for (i, (id, body)) in got.iter().enumerate() {
        assert_eq!((*id, body), (i as u64 + 1, &whole(i)));
    }
    assert_eq!(log.live_bytes(), live);
    // The frames are the ones `append` writes for the concatenated bodies.
    let mut expected = Vec::new();
    for i in 0..1500 {
        frame(i as u64 + 1, &whole(i), &mut expected);
    }
    let mut on_disk = Vec::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "log") {
            on_disk.extend(std::fs::read(p).unwrap());
        }
    }
    assert_eq!(on_disk, expected);
}

#[test]
fn a_record_whose_segment_was_cut_or_changed_under_it_reads_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _, _) = open(dir.path());
    let body = vec![9u8; 1000];
    log.append(&[(1, body.as_slice())]).unwrap();
    let record = log.locate(1).unwrap();
    assert_eq!(record.read().unwrap(), Some(body.clone()));
    let seg = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let whole = fs::read(&seg).unwrap();
    // A byte changed: the CRC catches it.
    let mut changed = whole.clone();
    let last = changed.len() - 1;
    changed[last] ^= 0xFF;
    fs::write(&seg, &changed).unwrap();
    let err = record.read().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    // Cut short: fewer bytes than the record's length, an error and not a short body.
    fs::write(&seg, &whole[..whole.len() - 10]).unwrap();
    let err = record.read().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    assert!(err.to_string().contains("cut short"), "{err}");
}
