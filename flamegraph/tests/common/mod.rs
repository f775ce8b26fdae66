//! Shared test support: fixture and synthetic chunks, a loopback server, and an independent
//! brute-force recomputation of the flamegraph from stored chunks.
#![allow(dead_code)]

use profilink_flamegraph::{ApiConfig, ChunkMeta, ProfileStore, StoreConfig, StoredChunkInfo};
use profilink_proto::sentry::{Envelope, Frame, ProfileChunk, Sample, ThreadMetadata};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/sentry/python"
);

pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The two real sentry-python chunks.
pub fn fixture_chunks() -> Vec<ProfileChunk> {
    ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|name| {
            let bytes = std::fs::read(format!("{FIXTURES}/{name}")).expect("fixture");
            let env = Envelope::parse(&bytes).expect("envelope");
            let item = env.profile_chunks().next().expect("profile_chunk item");
            ProfileChunk::from_json(&item.payload).expect("chunk")
        })
        .collect()
}

/// Transaction names linked to `chunk` the way trace linking does it: the fixture's
/// transactions with the same profiler id whose time range overlaps the chunk's samples.
pub fn linked_transactions(chunk: &ProfileChunk) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/trace-transactions.jsonl")).unwrap();
    let (lo, hi) = sample_range(chunk);
    let ts = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
            .map(|d| d.timestamp_micros() as f64 / 1e6)
            .unwrap_or(f64::NAN)
    };
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let t: Value = serde_json::from_str(line).unwrap();
        if t["contexts"]["profile"]["profiler_id"].as_str() != Some(&chunk.profiler_id) {
            continue;
        }
        let (s, e) = (ts(&t["start_timestamp"]), ts(&t["timestamp"]));
        if s <= hi && e >= lo {
            names.insert(t["transaction"].as_str().unwrap().to_string());
        }
    }
    names.into_iter().collect()
}

pub fn sample_range(chunk: &ProfileChunk) -> (f64, f64) {
    chunk
        .profile
        .samples
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| {
            (a.min(s.timestamp), b.max(s.timestamp))
        })
}

/// Deterministic pseudo-random numbers.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn f(module: Option<&str>, package: Option<&str>, function: Option<&str>, line: u32) -> Frame {
    Frame {
        module: module.map(Into::into),
        package: package.map(Into::into),
        function: function.map(Into::into),
        lineno: Some(line),
        filename: Some(
            format!("src/{}.x", function.unwrap_or("anon"))
                .as_str()
                .into(),
        ),
        in_app: None,
        ..Default::default()
    }
}

/// Frames per platform, with the quirks the aggregation must handle: frames differing only by
/// line (same function), a frame without a function, one with only a file, packages with paths.
fn vocabulary(platform: &str) -> Vec<Frame> {
    match platform {
        "python" => vec![
            f(Some("threading"), None, Some("Thread.run"), 982),
            f(Some("app.web"), None, Some("handle_request"), 88),
            f(Some("app.worker"), None, Some("do_work"), 42),
            f(Some("json"), None, Some("loads"), 299),
            f(Some("app.worker"), None, Some("do_work"), 57),
            f(Some("app.db"), None, Some("query"), 12),
            f(Some("re"), None, Some("compile"), 250),
            f(None, None, Some("lambda_fn"), 1),
            f(Some("app.util"), None, None, 3),
        ],
        "rust" => vec![
            f(
                None,
                Some("/srv/app/target/release/server"),
                Some("server::main"),
                10,
            ),
            f(
                None,
                Some("/srv/app/target/release/server"),
                Some("server::handle"),
                20,
            ),
            f(
                None,
                Some("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                Some("malloc"),
                0,
            ),
            f(
                None,
                Some("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                Some("memcpy"),
                0,
            ),
            f(
                None,
                Some("/srv/app/target/release/server"),
                Some("server::parse"),
                30,
            ),
            f(
                None,
                Some("/srv/app/target/release/server"),
                Some("server::db::query"),
                40,
            ),
            Frame {
                package: Some("/srv/app/target/release/server".into()),
                instruction_addr: Some("0x1234".into()),
                ..Default::default()
            },
            Frame {
                package: Some("/srv/app/target/release/server".into()),
                instruction_addr: Some("0x5678".into()),
                ..Default::default()
            },
            f(
                None,
                Some("/srv/app/target/release/server"),
                Some("server::handle"),
                21,
            ),
        ],
        _ => vec![
            f(
                Some("node:internal/process"),
                None,
                Some("processTicksAndRejections"),
                95,
            ),
            f(Some("app/server"), None, Some("handle"), 5),
            f(Some("app/render"), None, Some("render"), 7),
            f(Some("node_modules/lodash"), None, Some("cloneDeep"), 9),
            f(Some("app/render"), None, Some("render"), 8),
            f(Some("app/db"), None, Some("query"), 11),
            f(Some("node:fs"), None, Some("readFileSync"), 3),
            f(None, None, Some("(anonymous)"), 1),
            f(Some("app/util"), None, None, 2),
        ],
    }
}

/// Leaf-first stacks over the 9-frame vocabulary (root = last), including recursion, a
/// frame-less function, the duplicate-by-line frames and an empty stack.
const STACKS: &[&[usize]] = &[
    &[1, 0],
    &[2, 1, 0],
    &[3, 2, 1, 0],
    &[4, 1, 0],
    &[5, 4, 1, 0],
    &[3, 4, 1, 0],
    &[6, 2, 1, 0],
    &[2, 6, 2, 1, 0],
    &[7, 5, 1, 0],
    &[8, 1, 0],
    &[],
    &[6, 5],
];

/// What a synthetic chunk looks like.
#[derive(Clone, Debug)]
pub struct Synth {
    pub seed: u64,
    pub platform: &'static str,
    pub environment: Option<&'static str>,
    pub release: Option<&'static str>,
    pub start: f64,
    pub samples_per_thread: usize,
    pub threads: usize,
    pub profiler_id: String,
}

pub fn hex32(n: u64) -> String {
    format!("{:016x}{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15), n)
}

/// A synthetic chunk: every thread sampled on a ~10 ms tick with jitter; stacks persist for a
/// while (runs) and switch at random.
pub fn synth_chunk(s: &Synth) -> ProfileChunk {
    let mut rng = Lcg(s.seed.wrapping_mul(2654435761).wrapping_add(17));
    let mut chunk = ProfileChunk {
        chunk_id: hex32(s.seed ^ 0xc0ffee),
        profiler_id: s.profiler_id.clone(),
        platform: s.platform.into(),
        environment: s.environment.map(Into::into),
        release: s.release.map(Into::into),
        version: "2".into(),
        client_sdk: Some(profilink_proto::sentry::ClientSdk {
            name: "synthetic".into(),
            version: "1.0".into(),
        }),
        ..Default::default()
    };
    let mut frames = vocabulary(s.platform);
    // In-app set on some frames only; the platform rules decide the others.
    for (i, fr) in frames.iter_mut().enumerate() {
        if i % 3 == 1 {
            fr.in_app = Some(true);
        }
    }
    chunk.profile.frames = frames.into_iter().map(Into::into).collect();
    chunk.profile.stacks = STACKS.iter().map(|st| st.to_vec()).collect();
    for t in 0..s.threads {
        let tid = format!("{}", 1000 + t as u64 * 7 + s.seed % 3);
        if t % 2 == 0 {
            chunk.profile.thread_metadata.insert(
                tid.clone(),
                ThreadMetadata {
                    name: Some(if t == 0 {
                        "MainThread".into()
                    } else {
                        format!("worker-{t}")
                    }),
                    priority: None,
                },
            );
        }
    }
    let mut current = vec![0usize; s.threads];
    for i in 0..s.samples_per_thread {
        let tick = s.start + i as f64 * 0.01 + rng.below(2000) as f64 * 1e-6;
        for (t, cur) in current.iter_mut().enumerate() {
            if rng.below(100) < 30 {
                *cur = rng.below(STACKS.len() as u64) as usize;
            }
            chunk.profile.samples.push(Sample {
                timestamp: tick + t as f64 * 1e-5,
                stack_id: *cur,
                thread_id: format!("{}", 1000 + t as u64 * 7 + s.seed % 3).into(),
            });
        }
    }
    // Samples need not arrive sorted.
    let n = chunk.profile.samples.len();
    if n > 3 {
        chunk.profile.samples.swap(1, n - 2);
    }
    chunk
}

pub const PROJECTS: [u64; 3] = [1, 2, 3];
pub const ENVIRONMENTS: [Option<&str>; 3] = [Some("production"), Some("staging"), None];
pub const RELEASES: [Option<&str>; 3] = [Some("app@1.0.0"), Some("app@2.0.0"), None];
pub const PLATFORMS: [&str; 3] = ["python", "rust", "node"];

/// The test data set: the two fixtures (project 1, linked like the trace-linking stage would)
/// and 24 synthetic chunks spread over projects, environments, releases, platforms, link
/// states and the last six hours (chunk `i` starts at `base + 600 i`).
pub fn dataset(base: f64) -> Vec<(ProfileChunk, ChunkMeta)> {
    let mut out = Vec::new();
    for chunk in fixture_chunks() {
        let names = linked_transactions(&chunk);
        out.push((
            chunk,
            ChunkMeta {
                project_id: 1,
                transaction_names: names,
                received: 0.0,
            },
        ));
    }
    for i in 0..24u64 {
        let spec = Synth {
            seed: i + 1,
            platform: PLATFORMS[(i as usize / 5) % 3],
            environment: ENVIRONMENTS[(i as usize / 3) % 3],
            release: RELEASES[(i as usize / 2) % 3],
            start: base + 600.0 * i as f64,
            samples_per_thread: 150 + (i as usize % 4) * 40,
            threads: 1 + (i as usize % 3),
            profiler_id: hex32(100 + i / 4),
        };
        let names: Vec<String> = match i % 4 {
            0 => vec![],
            1 => vec!["GET /users".into()],
            2 => vec!["POST /login".into(), "GET /users".into()],
            _ => vec!["worker \"nightly\"".into()],
        };
        out.push((
            synth_chunk(&spec),
            ChunkMeta {
                project_id: PROJECTS[i as usize % 3],
                transaction_names: names,
                received: 0.0,
            },
        ));
    }
    out
}

pub fn open_store(dir: &tempfile::TempDir) -> Arc<ProfileStore> {
    let cfg = StoreConfig {
        path: dir.path().join("data/store.db"),
        ..Default::default()
    };
    Arc::new(ProfileStore::open(&cfg).expect("open store"))
}

/// A running server on a loopback port.
pub struct TestServer {
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start(store: Arc<ProfileStore>, token: Option<&str>) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = ApiConfig {
            endpoint: addr.to_string(),
            bearer_token: token.map(Into::into),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            profilink_flamegraph::serve_on(listener, store, &cfg, async {
                let _ = rx.await;
            })
            .await
        });
        TestServer {
            base: format!("http://{addr}"),
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
    }
}

/// Every stored chunk with its metadata, read back from the store.
pub fn stored(store: &ProfileStore) -> Vec<(StoredChunkInfo, ProfileChunk)> {
    store
        .list()
        .unwrap()
        .into_iter()
        .map(|info| {
            let chunk = store
                .get_chunk(info.project_id, &info.chunk_id)
                .unwrap()
                .expect("stored chunk");
            (info, chunk)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Independent recomputation.

/// 64-bit FNV-1a truncated to 32 bits (Sentry's vroomrs fingerprint), written out here.
pub fn fnv1a32(package: &str, name: &str) -> u32 {
    let mut h: u64 = 14695981039346656037;
    for b in package
        .bytes()
        .chain(std::iter::once(b':'))
        .chain(name.bytes())
    {
        h ^= b as u64;
        h = h.wrapping_mul(1099511628211);
    }
    h as u32
}

pub fn package_of(fr: &Frame) -> String {
    if let Some(m) = fr.module.as_deref().filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    if let Some(p) = fr.package.as_deref().filter(|p| !p.is_empty()) {
        let last = p.rsplit('/').next().unwrap_or(p);
        for ext in [".so", ".dylib", ".dll", ".exe", ".a"] {
            if let Some(s) = last.strip_suffix(ext) {
                return s.to_string();
            }
        }
        return last.to_string();
    }
    String::new()
}

pub type Key = (String, String);

pub fn key_of(fr: &Frame) -> Key {
    (
        fr.function.as_deref().unwrap_or_default().to_string(),
        package_of(fr),
    )
}

/// The identity under which consecutive samples continue a call (module/package/file,
/// function, address).
fn identity(fr: &Frame) -> (String, String, String) {
    let first = if let Some(m) = fr.module.as_deref() {
        m.to_string()
    } else if fr.package.is_some() {
        package_of(fr)
    } else if let Some(file) = fr.filename.as_deref() {
        file.to_string()
    } else {
        "-".into()
    };
    (
        first,
        fr.function.as_deref().unwrap_or("-").to_string(),
        fr.instruction_addr
            .as_deref()
            .unwrap_or_default()
            .to_string(),
    )
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct InfoExp {
    pub count: u64,
    pub weight: u64,
    pub sum_self: u64,
    pub durations: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct Expected {
    pub chunks: BTreeSet<String>,
    pub examples: BTreeSet<(String, String)>,
    pub end_value: u64,
    pub total_ns: u64,
    pub stacks: BTreeMap<Vec<Key>, (u64, u64)>,
    pub infos: BTreeMap<Key, InfoExp>,
}

/// A call in progress: (identity, function, duration so far, samples so far).
type OpenRun = ((String, String, String), Key, u64, u64);

fn ns(t: f64) -> u64 {
    (t * 1e9) as u64
}

/// Recomputes the flamegraph of the chunks `select` accepts; with `fingerprint`, only threads
/// whose represented samples contain that function count.
pub fn brute_force(
    chunks: &[(StoredChunkInfo, ProfileChunk)],
    select: &dyn Fn(&StoredChunkInfo) -> bool,
    fingerprint: Option<u32>,
) -> Expected {
    let mut exp = Expected::default();
    for (info, chunk) in chunks.iter().filter(|(i, _)| select(i)) {
        let p = &chunk.profile;
        let mut threads: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
        for s in &p.samples {
            threads.entry(&s.thread_id).or_default().push(s);
        }
        for (tid, mut samples) in threads {
            samples.sort_by(|a, b| a.timestamp.partial_cmp(&b.timestamp).unwrap());
            if samples.len() < 2 {
                continue;
            }
            let represented = &samples[..samples.len() - 1];
            if let Some(fp) = fingerprint {
                let has = represented.iter().any(|s| {
                    p.stacks[s.stack_id].iter().any(|&fi| {
                        let (n, pk) = key_of(&p.frames[fi]);
                        fnv1a32(&pk, &n) == fp
                    })
                });
                if !has {
                    continue;
                }
            }
            let mut contributed = false;
            // Open runs from the root: (identity, key, duration, samples).
            let mut open: Vec<OpenRun> = Vec::new();
            let close = |run: OpenRun, exp: &mut Expected| {
                let e = exp.infos.entry(run.1).or_default();
                e.count += 1;
                if run.3 > 1 || run.2 > 0 {
                    e.durations.push(run.2);
                }
            };
            for (i, s) in represented.iter().enumerate() {
                let dur = ns(samples[i + 1].timestamp) - ns(s.timestamp);
                let root_first: Vec<&Frame> = p.stacks[s.stack_id]
                    .iter()
                    .rev()
                    .map(|&fi| &*p.frames[fi])
                    .collect();
                // Runs continue while the identity prefix matches.
                let mut keep = 0;
                while keep < open.len()
                    && keep < root_first.len()
                    && open[keep].0 == identity(root_first[keep])
                {
                    keep += 1;
                }
                while open.len() > keep {
                    let run = open.pop().unwrap();
                    close(run, &mut exp);
                }
                for (d, fr) in root_first.iter().enumerate() {
                    if d < keep {
                        open[d].2 += dur;
                        open[d].3 += 1;
                    } else {
                        open.push((identity(fr), key_of(fr), dur, 1));
                    }
                    exp.infos.entry(key_of(fr)).or_default().weight += dur;
                }
                if let Some(leaf) = root_first.last() {
                    contributed = true;
                    exp.infos.entry(key_of(leaf)).or_default().sum_self += dur;
                    exp.end_value += 1;
                    exp.total_ns += dur;
                    let stack: Vec<Key> = root_first.iter().map(|f| key_of(f)).collect();
                    let e = exp.stacks.entry(stack).or_default();
                    e.0 += 1;
                    e.1 += dur;
                }
            }
            while let Some(run) = open.pop() {
                close(run, &mut exp);
            }
            if contributed {
                exp.chunks.insert(info.chunk_id.clone());
                exp.examples
                    .insert((info.chunk_id.clone(), tid.to_string()));
            }
        }
    }
    for e in exp.infos.values_mut() {
        e.durations.sort_unstable();
    }
    exp
}

pub fn nearest_rank(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() as f64 * q).ceil() as usize;
    sorted[rank.max(1) - 1]
}

/// Asserts that an API response matches the recomputation.
pub fn assert_matches(resp: &Value, exp: &Expected, what: &str) {
    if exp.stacks.len() <= 1000 {
        let shared: BTreeSet<(String, String)> = resp["shared"]["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["chunk_id"].as_str().unwrap().to_string(),
                    p["thread_id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(shared, exp.examples, "{what}: shared.profiles");
    }
    let frames = resp["shared"]["frames"].as_array().expect("frames");
    let infos = resp["shared"]["frame_infos"]
        .as_array()
        .expect("frame_infos");
    assert_eq!(frames.len(), infos.len(), "{what}: frames vs frame_infos");
    let keys: Vec<Key> = frames
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["image"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (k, f) in keys.iter().zip(frames) {
        assert_eq!(
            f["fingerprint"].as_u64().unwrap() as u32,
            fnv1a32(&k.1, &k.0),
            "{what}: fingerprint of {k:?}"
        );
    }
    let got: BTreeMap<Key, &Value> = keys.iter().cloned().zip(infos.iter()).collect();
    assert_eq!(got.len(), keys.len(), "{what}: duplicate frames");
    let want_keys: BTreeSet<&Key> = exp.infos.keys().collect();
    let got_keys: BTreeSet<&Key> = got.keys().collect();
    assert_eq!(got_keys, want_keys, "{what}: functions");
    for (k, e) in &exp.infos {
        let g = got[k];
        let field = |n: &str| g[n].as_u64().unwrap();
        assert_eq!(field("count"), e.count, "{what}: count of {k:?}");
        assert_eq!(field("weight"), e.weight, "{what}: weight of {k:?}");
        assert_eq!(
            field("sumDuration"),
            e.weight,
            "{what}: sumDuration of {k:?}"
        );
        assert_eq!(
            field("sumSelfTime"),
            e.sum_self,
            "{what}: sumSelfTime of {k:?}"
        );
        assert_eq!(
            field("p75Duration"),
            nearest_rank(&e.durations, 0.75),
            "{what}: p75 {k:?}"
        );
        assert_eq!(
            field("p95Duration"),
            nearest_rank(&e.durations, 0.95),
            "{what}: p95 {k:?}"
        );
        assert_eq!(
            field("p99Duration"),
            nearest_rank(&e.durations, 0.99),
            "{what}: p99 {k:?}"
        );
    }
    let profile = &resp["profiles"][0];
    assert_eq!(
        profile["endValue"].as_u64().unwrap(),
        exp.end_value,
        "{what}: endValue"
    );
    assert_eq!(profile["type"], "sampled");
    assert_eq!(profile["unit"], "count");
    let samples = profile["samples"].as_array().unwrap();
    let counts = profile["sample_counts"].as_array().unwrap();
    let weights = profile["weights"].as_array().unwrap();
    let durs = profile["sample_durations_ns"].as_array().unwrap();
    assert_eq!(counts, weights, "{what}: weights are sample counts");
    assert_eq!(
        samples.len(),
        exp.stacks.len().min(1000),
        "{what}: number of stacks"
    );
    if exp.stacks.len() <= 1000 {
        let mut got_stacks: BTreeMap<Vec<Key>, (u64, u64)> = BTreeMap::new();
        for ((s, c), d) in samples.iter().zip(counts).zip(durs) {
            let stack: Vec<Key> = s
                .as_array()
                .unwrap()
                .iter()
                .map(|i| keys[i.as_u64().unwrap() as usize].clone())
                .collect();
            let e = got_stacks.entry(stack).or_default();
            e.0 += c.as_u64().unwrap();
            e.1 += d.as_u64().unwrap();
        }
        assert_eq!(got_stacks, exp.stacks, "{what}: stacks");
        let n_profiles = resp["shared"]["profiles"].as_array().unwrap().len() as u64;
        for ex in profile["samples_examples"].as_array().into_iter().flatten() {
            for i in ex.as_array().unwrap() {
                assert!(i.as_u64().unwrap() < n_profiles);
            }
        }
    }
}
