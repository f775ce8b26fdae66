use super::record::{self, Queued, RecordError};
use super::*;
use profilink_storage::SegmentLog;
use std::time::Duration;

#[derive(Clone, PartialEq, prost::Message)]
struct Msg {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(bytes = "vec", tag = "2")]
    pad: Vec<u8>,
}

impl Queued for Msg {
    const KIND: u8 = b'X';
}

fn msg(name: &str, pad: usize) -> (Msg, u64) {
    let m = Msg {
        name: name.into(),
        pad: vec![7; pad],
    };
    (m, name.len() as u64)
}

fn limits(max_requests: Option<u64>, max_bytes: u64) -> QueueLimits {
    QueueLimits {
        max_requests,
        max_bytes,
        block_on_overflow: false,
    }
}

fn open(dir: Option<&Path>, l: QueueLimits) -> (Arc<SendQueue<Msg>>, Recovered) {
    let (q, rec) = SendQueue::open(dir, false, l).unwrap();
    (Arc::new(q), rec)
}

async fn pop_name(q: &SendQueue<Msg>) -> (u64, String) {
    let c = q.pop().await.unwrap().unwrap();
    (c.id, c.value.name)
}

#[tokio::test]
async fn memory_queue_bounds_by_requests_and_bytes() {
    let (q, _) = open(None, limits(Some(3), 100));
    assert!(!q.is_durable());
    // An empty queue takes an oversized push, then refuses more bytes.
    q.push_all(vec![msg("a", 150)]).await.unwrap();
    assert!(matches!(
        q.push_all(vec![msg("b", 1)]).await,
        Err(PushError::Full { .. })
    ));
    assert_eq!(q.drain_memory(), (1, 1));
    q.push_all(vec![msg("c", 30), msg("d", 30)]).await.unwrap();
    assert!(matches!(
        q.push_all(vec![msg("e", 40)]).await,
        Err(PushError::Full { .. })
    ));
    q.push_all(vec![msg("f", 10)]).await.unwrap();
    assert!(
        matches!(
            q.push_all(vec![msg("g", 0)]).await,
            Err(PushError::Full { .. })
        ),
        "3 requests"
    );
    // In memory, a claimed request no longer counts.
    assert_eq!(pop_name(&q).await.1, "c");
    q.push_all(vec![msg("h", 0)]).await.unwrap();
    q.close();
    assert!(matches!(
        q.push_all(vec![msg("i", 0)]).await,
        Err(PushError::Closed)
    ));
    let mut rest = Vec::new();
    while let Some(c) = q.pop().await {
        rest.push(c.unwrap().value.name);
    }
    assert_eq!(rest, vec!["d", "f", "h"]);
}

#[tokio::test]
async fn durable_queue_replays_unacknowledged_requests_in_order_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (q, rec) = open(Some(dir.path()), limits(Some(100), 1 << 20));
        assert_eq!(rec, Recovered::default());
        q.push_all(vec![msg("one", 10), msg("two", 10)])
            .await
            .unwrap();
        q.push_all(vec![msg("three", 10)]).await.unwrap();
        let (id, name) = pop_name(&q).await;
        assert_eq!(name, "one");
        q.ack(id).await.unwrap();
        // "two" is claimed but not acknowledged when the process dies: it comes back.
        assert_eq!(pop_name(&q).await.1, "two");
        assert_eq!(q.unacknowledged(), (2, 8));
    }
    let (q, rec) = open(Some(dir.path()), limits(Some(100), 1 << 20));
    assert_eq!((rec.requests, rec.items, rec.corrupt), (2, 8, 0));
    assert_eq!(q.bytes(), rec.bytes);
    q.push_all(vec![msg("four", 0)]).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let c = q.pop().await.unwrap().unwrap();
        got.push((c.value.name, c.items));
        q.ack(c.id).await.unwrap();
    }
    assert_eq!(
        got,
        vec![("two".into(), 3), ("three".into(), 5), ("four".into(), 4)]
    );
    assert_eq!((q.bytes(), q.unacknowledged()), (0, (0, 0)));
    drop(q);
    let (_, rec) = open(Some(dir.path()), limits(Some(100), 1 << 20));
    assert_eq!(rec.requests, 0, "acknowledged records do not come back");
}

#[tokio::test]
async fn a_full_durable_queue_refuses_counting_claimed_records_until_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _) = open(Some(dir.path()), limits(None, 10_000));
    q.push_all(vec![msg("a", 6000)]).await.unwrap();
    let (id, _) = pop_name(&q).await;
    // Claimed, still on disk: it counts against the byte bound.
    let err = q.push_all(vec![msg("b", 6000)]).await.unwrap_err();
    assert!(matches!(err, PushError::Full { .. }), "{err}");
    assert!(err.to_string().contains("of 10000 bytes"), "{err}");
    q.ack(id).await.unwrap();
    q.push_all(vec![msg("b", 6000)]).await.unwrap();
    // Nothing of the refused push was written.
    drop(q);
    let (_, rec) = open(Some(dir.path()), limits(None, 10_000));
    assert_eq!(rec.requests, 1);
}

#[tokio::test]
async fn block_on_overflow_waits_for_room_then_for_close() {
    let dir = tempfile::tempdir().unwrap();
    let l = QueueLimits {
        block_on_overflow: true,
        ..limits(Some(1), 1 << 20)
    };
    let (q, _) = open(Some(dir.path()), l);
    q.push_all(vec![msg("a", 0)]).await.unwrap();
    let q2 = q.clone();
    let blocked = tokio::spawn(async move { q2.push_all(vec![msg("b", 0)]).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!blocked.is_finished(), "waits while the queue is full");
    let (id, _) = pop_name(&q).await;
    q.ack(id).await.unwrap();
    blocked.await.unwrap().unwrap();
    let q3 = q.clone();
    let blocked = tokio::spawn(async move { q3.push_all(vec![msg("c", 0)]).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    q.close();
    assert!(matches!(blocked.await.unwrap(), Err(PushError::Closed)));
}

#[tokio::test]
async fn unreadable_records_are_refused_and_counted_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = record::encode(&msg("ok", 4).0, 2);
    let mut bad_proto = good.clone();
    bad_proto.truncate(record::HEADER + 3);
    bad_proto.push(0xff);
    let mut other_kind = good.clone();
    other_kind[1] = b'P';
    let mut other_version = good.clone();
    other_version[0] = 9;
    {
        let (mut log, _) = SegmentLog::open(dir.path(), false, 1 << 20, |_, _| {}).unwrap();
        log.append(&[
            (1, &good[..]),
            (2, &bad_proto[..]),
            (3, &other_kind[..]),
            (4, &other_version[..]),
            (5, &good[..4]),
            (6, &good[..]),
        ])
        .unwrap();
    }
    // A byte flipped inside record 6's frame: the segment log skips it (CRC).
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let n = bytes.len();
    bytes[n - 2] ^= 0x55;
    std::fs::write(&seg, bytes).unwrap();

    let (q, rec) = open(Some(dir.path()), limits(None, 1 << 20));
    // 3, 4 and 5 fail their header, 6 its CRC; 2 fails only when decoded.
    assert_eq!((rec.requests, rec.corrupt), (2, 4));
    assert_eq!(pop_name(&q).await.1, "ok");
    let corrupt = q.pop().await.unwrap().unwrap_err();
    assert_eq!((corrupt.id, corrupt.items), (2, 2));
    assert!(
        corrupt.error.contains("does not decode"),
        "{}",
        corrupt.error
    );
    q.ack(corrupt.id).await.unwrap();
    q.ack(1).await.unwrap();
    drop(q);
    let (_, rec) = open(Some(dir.path()), limits(None, 1 << 20));
    assert_eq!(
        (rec.requests, rec.corrupt),
        (0, 0),
        "refused records are removed"
    );
}

#[test]
fn records_round_trip_and_bad_headers_are_named() {
    let (m, items) = msg("round", 3);
    let r = record::encode(&m, items);
    assert_eq!(record::header::<Msg>(&r).unwrap(), 5);
    let (back, n) = record::decode::<Msg>(&r).unwrap();
    assert_eq!((back, n), (m, 5));
    assert!(matches!(
        record::decode::<Msg>(&r[..3]),
        Err(RecordError::Short(3))
    ));
    let mut v = r.clone();
    v[0] = 2;
    assert!(matches!(
        record::decode::<Msg>(&v),
        Err(RecordError::Version(2))
    ));
    let mut k = r.clone();
    k[1] = b'T';
    let e = record::decode::<Msg>(&k).unwrap_err();
    assert!(e.to_string().contains("'T'"), "{e}");
}
