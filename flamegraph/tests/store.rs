//! The embedded store: idempotent inserts, read-back, WAL, retention by age and by size.

mod common;

use common::*;
use profilink_flamegraph::{ChunkMeta, ProfileStore, StoreConfig, StoreError};
use std::time::Duration;

fn cfg(dir: &tempfile::TempDir) -> StoreConfig {
    StoreConfig {
        path: dir.path().join("nested/dir/store.db"),
        ..Default::default()
    }
}

fn synth(seed: u64, start: f64) -> profilink_proto::sentry::ProfileChunk {
    synth_sized(seed, start, 200)
}

fn synth_sized(seed: u64, start: f64, samples: usize) -> profilink_proto::sentry::ProfileChunk {
    synth_chunk(&Synth {
        seed,
        platform: "python",
        environment: Some("production"),
        release: Some("app@1.0.0"),
        start,
        samples_per_thread: samples,
        threads: 2,
        profiler_id: hex32(seed),
    })
}

#[test]
fn insert_is_idempotent_by_project_and_chunk_id_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(&cfg(&dir)).unwrap();
    let chunks = fixture_chunks();
    let meta = ChunkMeta {
        project_id: 7,
        transaction_names: vec!["b".into(), "a".into(), "a".into()],
        received: 0.0,
    };
    store.insert(&chunks[0], &meta).unwrap();
    store.insert(&chunks[0], &meta).unwrap();
    assert_eq!(store.list().unwrap().len(), 1);
    // The same chunk id in another project is another chunk.
    store
        .insert(
            &chunks[0],
            &ChunkMeta {
                project_id: 8,
                ..meta.clone()
            },
        )
        .unwrap();
    assert_eq!(store.list().unwrap().len(), 2);
    assert!(store.contains(7, &chunks[0].chunk_id).unwrap());
    assert!(!store.contains(9, &chunks[0].chunk_id).unwrap());

    let back = store.get_chunk(7, &chunks[0].chunk_id).unwrap().unwrap();
    assert_eq!(back.to_json(), chunks[0].to_json());
    let info = &store.list().unwrap()[0];
    let (lo, hi) = sample_range(&chunks[0]);
    assert_eq!((info.start, info.end), (lo, hi));
    assert_eq!(info.environment.as_deref(), Some("research"));
    assert_eq!(info.release.as_deref(), Some("clients-demo@1.0.0"));
    assert_eq!(info.platform, "python");
    assert_eq!(info.thread_ids.len(), 7);
    assert_eq!(
        info.transaction_names,
        vec!["a".to_string(), "b".to_string()]
    );
    assert_eq!(info.payload_size, chunks[0].to_json().len() as u64);
    assert!(
        info.received > now() - 60.0,
        "non-positive received means now"
    );

    let facets = store.facets().unwrap();
    assert_eq!(facets.projects, vec![7, 8]);
    assert_eq!(facets.environments, vec!["research".to_string()]);
    assert_eq!(facets.chunks, 2);

    // Reopening keeps everything; the database is in WAL mode.
    drop(store);
    let store = ProfileStore::open(&cfg(&dir)).unwrap();
    assert_eq!(store.list().unwrap().len(), 2);
    let conn = rusqlite::Connection::open(dir.path().join("nested/dir/store.db")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn invalid_chunks_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(&cfg(&dir)).unwrap();
    let mut chunk = synth(1, 1000.0);
    chunk.profile.samples[5].stack_id = 999;
    let err = store.insert(&chunk, &ChunkMeta::default()).unwrap_err();
    assert!(matches!(err, StoreError::InvalidChunk(_)), "{err}");
    chunk.profile.samples.clear();
    assert!(store.insert(&chunk, &ChunkMeta::default()).is_err());
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn retention_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(&StoreConfig {
        retention: Duration::from_secs(72 * 3600),
        ..cfg(&dir)
    })
    .unwrap();
    let t = now();
    for (i, age_h) in [100.0, 80.0, 71.0, 1.0].iter().enumerate() {
        let meta = ChunkMeta {
            project_id: 1,
            transaction_names: vec![],
            received: t - age_h * 3600.0,
        };
        store
            .insert(&synth(i as u64 + 1, t - 7200.0), &meta)
            .unwrap();
    }
    let stats = store.enforce_retention().unwrap();
    assert_eq!(stats.deleted_by_age, 2);
    assert_eq!(stats.deleted_by_size, 0);
    assert_eq!(stats.remaining_chunks, 2);
    let left: Vec<f64> = store.list().unwrap().iter().map(|i| i.received).collect();
    assert!(left.iter().all(|r| *r > t - 72.0 * 3600.0));
}

#[test]
fn retention_by_size_deletes_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(&StoreConfig {
        max_size_mib: 1,
        ..cfg(&dir)
    })
    .unwrap();
    let t = now();
    // Each synthetic chunk stores a few KiB; insert until well past 1 MiB.
    let n = 80u64;
    for i in 0..n {
        let meta = ChunkMeta {
            project_id: 1,
            transaction_names: vec![],
            received: t - (n - i) as f64,
        };
        store
            .insert(&synth_sized(i + 1, t - 3600.0, 1500), &meta)
            .unwrap();
    }
    let stats = store.enforce_retention().unwrap();
    assert!(stats.remaining_bytes <= 1 << 20, "{stats:?}");
    assert!(
        stats.remaining_chunks > 10 && stats.remaining_chunks < n,
        "{stats:?}"
    );
    // The survivors are the most recently received ones.
    let mut received: Vec<f64> = store.list().unwrap().iter().map(|i| i.received).collect();
    received.sort_by(f64::total_cmp);
    let oldest_left = received[0];
    assert_eq!(oldest_left, t - (stats.remaining_chunks as f64));
    // Inserts keep enforcing the bound without explicit calls.
    assert!(dir.path().join("nested/dir/store.db").exists());
}

#[test]
fn transactions_link_whichever_arrives_first() {
    use profilink_flamegraph::TransactionLink;
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(&cfg(&dir)).unwrap();
    let chunks = fixture_chunks();
    let (lo0, hi0) = sample_range(&chunks[0]);
    let (lo1, _) = sample_range(&chunks[1]);
    assert_ne!(chunks[0].profiler_id, chunks[1].profiler_id);
    let meta = ChunkMeta {
        project_id: 7,
        transaction_names: vec![],
        received: 0.0,
    };
    let link = |p: &str, start: f64, end: f64, name: &str| TransactionLink {
        profiler_id: p.into(),
        start,
        end,
        name: name.into(),
    };
    // Transaction first: the chunk picks its name up at insert.
    let early = link(&chunks[0].profiler_id, lo0 + 0.1, lo0 + 0.2, "early");
    // Not linked: another profiler, a time range before the chunk, a bad range.
    let others = [
        link(&chunks[1].profiler_id, lo0, lo1 + 1.0, "other profiler"),
        link(&chunks[0].profiler_id, lo0 - 10.0, lo0 - 5.0, "before"),
        link(&chunks[0].profiler_id, hi0, lo0, "reversed"),
        link(&chunks[0].profiler_id, lo0, f64::NAN, "nan"),
    ];
    assert_eq!(store.link_transactions(&[early]).unwrap(), 0);
    assert_eq!(store.link_transactions(&others).unwrap(), 0);
    store.insert(&chunks[0], &meta).unwrap();
    let names = |id: &str| {
        store
            .list()
            .unwrap()
            .into_iter()
            .find(|i| i.chunk_id == id)
            .map(|i| i.transaction_names)
            .unwrap()
    };
    assert_eq!(names(&chunks[0].chunk_id), vec!["early".to_string()]);

    // Chunk first: a later transaction updates it, once.
    let late = link(&chunks[0].profiler_id, hi0 - 0.1, hi0 + 5.0, "late");
    assert_eq!(
        store
            .link_transactions(std::slice::from_ref(&late))
            .unwrap(),
        1
    );
    assert_eq!(store.link_transactions(&[late]).unwrap(), 0, "idempotent");
    assert_eq!(
        names(&chunks[0].chunk_id),
        vec!["early".to_string(), "late".to_string()]
    );
    // The other chunk saw none of them.
    store.insert(&chunks[1], &meta).unwrap();
    assert_eq!(
        names(&chunks[1].chunk_id),
        vec!["other profiler".to_string()]
    );
}
