use super::*;

fn cfg(max_mib: u64, overflow: Overflow) -> QueueConfig {
    QueueConfig {
        max_size_mib: Some(max_mib),
        overflow: Some(overflow),
        ..Default::default()
    }
}

fn meta(route: &str) -> ReadyMeta {
    ReadyMeta {
        id: 0,
        route: route.into(),
        category: "profile_chunk".into(),
        chunk_id: "c".repeat(32),
        platform: "rust".into(),
        bytes: 0,
        samples: 0,
        consumed: Vec::new(),
    }
}

#[test]
fn inputs_and_ready_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(ExporterMetrics::default());
    let (q, rec) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m.clone()).unwrap();
    assert!(rec.inputs.is_empty());
    let (ids, _) = q
        .append_inputs(&[b"first".to_vec(), b"second".to_vec()])
        .unwrap();
    let metas = q
        .append_ready(vec![(meta("a"), b"{\"chunk\":1}".to_vec())])
        .unwrap();
    q.ack_inputs(&ids[..1]).unwrap();
    assert!(m.snapshot().queue_size_bytes > 0);
    drop(q);
    let (q, rec) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m).unwrap();
    assert_eq!(rec.inputs.len(), 1);
    assert_eq!(rec.inputs[0].id, ids[1]);
    assert_eq!(rec.inputs[0].body, b"second");
    assert_eq!(rec.ready.len(), 1);
    assert_eq!(rec.ready[0].route, "a");
    let (m2, json) = q.read_ready(metas[0].id).unwrap().unwrap();
    assert_eq!(m2.chunk_id, "c".repeat(32));
    assert_eq!(json, b"{\"chunk\":1}");
    // New ids do not collide with recovered ones.
    let (ids2, _) = q.append_inputs(&[b"x".to_vec()]).unwrap();
    assert!(ids2[0] > metas[0].id);
}

#[test]
fn full_queue_backpressures_or_drops_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(ExporterMetrics::default());
    let big = vec![b'x'; 400 << 10];
    let (q, _) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m.clone()).unwrap();
    q.append_inputs(std::slice::from_ref(&big)).unwrap();
    q.append_inputs(std::slice::from_ref(&big)).unwrap();
    assert!(matches!(
        q.append_inputs(std::slice::from_ref(&big)),
        Err(QueueError::Full { .. })
    ));
    drop(q);

    let dir = tempfile::tempdir().unwrap();
    let (q, _) = Queue::open(&cfg(1, Overflow::DropOldest), dir.path(), m).unwrap();
    let r = q
        .append_ready(vec![(meta(""), big.clone()), (meta(""), big.clone())])
        .unwrap();
    assert!(q.lease(r[1].id));
    let (_, dropped) = q.append_inputs(std::slice::from_ref(&big)).unwrap();
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].id, r[0].id);
    assert!(!q.lease(r[0].id));
    // Only the leased one is left to drop: refused.
    assert!(q.append_inputs(&[big]).is_err());
}

#[test]
fn drop_oldest_frees_the_whole_overshoot() {
    // A merged chunk is appended before its inputs are acknowledged, so the queue can sit
    // above capacity; making room must free that overshoot too, not only the new bytes.
    let dir = tempfile::tempdir().unwrap();
    let m = Arc::new(ExporterMetrics::default());
    let (q, _) = Queue::open(&cfg(1, Overflow::DropOldest), dir.path(), m).unwrap();
    let part = vec![b'x'; 250 << 10];
    let items = (0..3).map(|_| (meta(""), part.clone())).collect();
    let r = q.append_ready(items).unwrap();
    let (pending, _) = q.append_inputs(std::slice::from_ref(&part)).unwrap();
    q.append_ready(vec![(meta(""), part.clone())]).unwrap();
    assert!(
        q.size_bytes() > q.capacity_bytes(),
        "over capacity until the ack"
    );
    let (_, dropped) = q.append_inputs(std::slice::from_ref(&part)).unwrap();
    let ids: Vec<u64> = dropped.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        vec![r[0].id, r[1].id],
        "oldest first, enough for the overshoot"
    );
    assert!(q.size_bytes() <= q.capacity_bytes());
    q.ack_inputs(&pending).unwrap();
}

#[test]
fn memory_queue_works_without_disk() {
    let m = Arc::new(ExporterMetrics::default());
    let c = QueueConfig {
        enabled: false,
        ..Default::default()
    };
    let (q, _) = Queue::open(&c, Path::new("/nonexistent/never-created"), m).unwrap();
    let (ids, _) = q.append_inputs(&[b"x".to_vec()]).unwrap();
    q.ack_inputs(&ids).unwrap();
    assert_eq!(q.size_bytes(), 0);
}
