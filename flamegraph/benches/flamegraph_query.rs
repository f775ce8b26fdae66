//! Flamegraph API latency over 1,000 stored chunks of realistic size.
//!
//! The chunks are the two real sentry-python fixture chunks (1215 and 820 samples, 7 threads,
//! ~130 KB and ~96 KB of JSON) cloned with new ids, shifted over the last 48 hours, spread over
//! 5 projects, 3 environments and 3 releases, and with 10% of their samples' stacks shuffled so
//! the trees differ. Queries go over loopback HTTP like a client's.
//!
//! Before criterion runs, every query is timed 30 times warm (after one cold run that reads
//! call trees from SQLite) and p50/p95 are printed: the target is p95 < 200 ms.
//!
//! `cargo bench -p profilink-flamegraph --bench flamegraph_query`

use criterion::{Criterion, criterion_group, criterion_main};
use profilink_flamegraph::{ApiConfig, ChunkMeta, ProfileStore, StoreConfig};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHUNKS: usize = 1000;
const RUNS: usize = 30;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn fixtures() -> Vec<ProfileChunk> {
    ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|n| {
            let path = format!(
                "{}/../tests/fixtures/sentry/python/{n}",
                env!("CARGO_MANIFEST_DIR")
            );
            let env = Envelope::parse(&std::fs::read(path).unwrap()).unwrap();
            ProfileChunk::from_json(&env.profile_chunks().next().unwrap().payload).unwrap()
        })
        .collect()
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn make_chunks() -> Vec<(ProfileChunk, ChunkMeta)> {
    let templates = fixtures();
    let mut rng = Lcg(42);
    let t0 = now() - 48.0 * 3600.0;
    let envs = ["production", "staging", "development"];
    let releases = ["app@1.0.0", "app@1.1.0", "app@2.0.0"];
    (0..CHUNKS)
        .map(|i| {
            let mut c = templates[i % 2].clone();
            c.chunk_id = format!("{:032x}", 0xabc0_0000_u64 + i as u64);
            c.profiler_id = format!("{:032x}", 0xdef0_0000_u64 + (i / 10) as u64);
            c.environment = Some(envs[i % 3].into());
            c.release = Some(releases[(i / 3) % 3].into());
            let first = c
                .profile
                .samples
                .iter()
                .map(|s| s.timestamp)
                .fold(f64::INFINITY, f64::min);
            let shift = t0 + i as f64 * 170.0 - first;
            for s in &mut c.profile.samples {
                s.timestamp += shift;
            }
            let n = c.profile.samples.len();
            for _ in 0..n / 10 {
                let (a, b) = (rng.next() as usize % n, rng.next() as usize % n);
                let sa = c.profile.samples[a].stack_id;
                c.profile.samples[a].stack_id = c.profile.samples[b].stack_id;
                c.profile.samples[b].stack_id = sa;
            }
            let meta = ChunkMeta {
                project_id: 1 + (i % 5) as u64,
                transaction_names: if i % 2 == 0 {
                    vec![format!("GET /route/{}", i % 7)]
                } else {
                    vec![]
                },
                received: 0.0,
            };
            (c, meta)
        })
        .collect()
}

/// json.loads runs in two of the fixture's threads.
fn loads_fingerprint() -> String {
    profilink_flamegraph::fingerprint::fingerprint_of("json", "loads").to_string()
}

fn queries() -> Vec<(&'static str, String)> {
    vec![
        (
            "profiles, all 1000 chunks",
            "dataSource=profiles&statsPeriod=3d".into(),
        ),
        (
            "profiles, all + expand=metrics",
            "dataSource=profiles&statsPeriod=3d&expand=metrics".into(),
        ),
        (
            "transactions (default), 500 chunks",
            "statsPeriod=3d".into(),
        ),
        (
            "environment=production, ~333 chunks",
            "dataSource=profiles&statsPeriod=3d&environment=production".into(),
        ),
        (
            "project=2 last 24h, ~100 chunks",
            "dataSource=profiles&project=2&statsPeriod=24h".into(),
        ),
        (
            "functions fingerprint json.loads",
            format!("fingerprint={}&statsPeriod=3d", loads_fingerprint()),
        ),
        (
            "query release:app@1.* !environment:staging",
            "dataSource=profiles&statsPeriod=3d&query=release%3Aapp%401.*%20!environment%3Astaging"
                .into(),
        ),
        (
            "last hour, ~20 chunks",
            "dataSource=profiles&statsPeriod=1h".into(),
        ),
    ]
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        path: dir.path().join("store.db"),
        ..Default::default()
    };
    let store = Arc::new(ProfileStore::open(&cfg).unwrap());
    let chunks = make_chunks();
    let payload_bytes: usize = chunks.iter().map(|(c, _)| c.to_json().len()).sum();
    let t = Instant::now();
    for (chunk, meta) in &chunks {
        store.insert(chunk, meta).unwrap();
    }
    let insert = t.elapsed();
    let db_size = std::fs::metadata(&cfg.path).map(|m| m.len()).unwrap_or(0);
    println!(
        "stored {CHUNKS} chunks ({:.1} MiB of JSON) in {:.2?} ({:.2} ms/chunk); database file {:.1} MiB",
        payload_bytes as f64 / 1048576.0,
        insert,
        insert.as_secs_f64() * 1e3 / CHUNKS as f64,
        db_size as f64 / 1048576.0
    );
    drop(store);

    // A fresh open so the first query reads every call tree from SQLite (cold cache).
    let store = Arc::new(ProfileStore::open(&cfg).unwrap());
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let api = ApiConfig {
        endpoint: base.clone(),
        bearer_token: None,
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_store = Arc::clone(&store);
    let server = rt.spawn(async move {
        profilink_flamegraph::serve_on(listener, server_store, &api, async {
            let _ = stop_rx.await;
        })
        .await
    });
    let client = reqwest::Client::new();
    let url = |q: &str| format!("{base}/api/0/organizations/1/profiling/flamegraph/?{q}");
    let fetch = |q: &str| {
        let u = url(q);
        rt.block_on(async {
            let resp = client.get(&u).send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.bytes().await.unwrap().len()
        })
    };

    println!(
        "{:<46} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "query", "cold", "p50", "p95", "max", "body"
    );
    let mut worst_p95 = Duration::ZERO;
    for (i, (name, q)) in queries().iter().enumerate() {
        let t = Instant::now();
        let size = fetch(q);
        let cold = t.elapsed();
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                fetch(q);
                t.elapsed()
            })
            .collect();
        times.sort();
        let p95 = percentile(&times, 0.95);
        worst_p95 = worst_p95.max(p95);
        println!(
            "{:<46} {:>9.1?} {:>9.1?} {:>9.1?} {:>9.1?} {:>8} KB{}",
            name,
            cold,
            percentile(&times, 0.5),
            p95,
            times[times.len() - 1],
            size / 1024,
            if i == 0 {
                "  (cold = first query after open)"
            } else {
                ""
            }
        );
    }
    println!(
        "worst warm p95: {worst_p95:.1?} (target < 200 ms): {}",
        if worst_p95 < Duration::from_millis(200) {
            "OK"
        } else {
            "OVER"
        }
    );
    // What a restart costs with the cache warmed in the background.
    let fresh = ProfileStore::open(&cfg).unwrap();
    let t = Instant::now();
    let warmed = fresh.warm_cache().unwrap();
    println!(
        "warm_cache after reopen: {warmed} chunks in {:.1?}",
        t.elapsed()
    );
    drop(fresh);

    let mut group = c.benchmark_group("flamegraph_query");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    for (name, q) in [
        (
            "profiles_all_1000",
            "dataSource=profiles&statsPeriod=3d".to_string(),
        ),
        (
            "environment_production",
            "dataSource=profiles&statsPeriod=3d&environment=production".into(),
        ),
        (
            "fingerprint_functions",
            format!("fingerprint={}&statsPeriod=3d", loads_fingerprint()),
        ),
    ] {
        group.bench_function(name, |b| b.iter(|| fetch(&q)));
    }
    group.finish();

    let _ = stop_tx.send(());
    rt.block_on(server).unwrap().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
