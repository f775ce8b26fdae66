//! The flamegraph API over a real loopback server, checked against a brute-force recomputation
//! from the stored chunks for every data source and filter.

mod common;

use common::*;
use profilink_flamegraph::{ProfileStore, StoredChunkInfo};
use serde_json::Value;
use std::sync::Arc;

const PATH: &str = "/api/0/organizations/acme/profiling/flamegraph/";

struct Ctx {
    _dir: tempfile::TempDir,
    store: Arc<ProfileStore>,
    server: TestServer,
    client: reqwest::Client,
    chunks: Vec<(StoredChunkInfo, profilink_proto::sentry::ProfileChunk)>,
    /// Start of synthetic chunk 0.
    base: f64,
    /// A window covering every chunk.
    all: (String, String),
}

fn iso(t: f64) -> String {
    let secs = t.floor() as i64;
    let micros = ((t - t.floor()) * 1e6) as u32;
    chrono::DateTime::from_timestamp(secs, micros * 1000)
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

async fn setup(token: Option<&str>) -> Ctx {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir);
    // Synthetic chunk i starts at base + 600 i; chunks 19..=23 fall in the last hour.
    let base = (now() - 4.0 * 3600.0 - 300.0).floor();
    let data = dataset(base);
    let s = Arc::clone(&store);
    tokio::task::spawn_blocking(move || {
        for (chunk, meta) in &data {
            s.insert(chunk, meta).unwrap();
        }
    })
    .await
    .unwrap();
    let chunks = stored(&store);
    assert_eq!(chunks.len(), 26);
    let lo = chunks
        .iter()
        .map(|(i, _)| i.start)
        .fold(f64::INFINITY, f64::min);
    let hi = chunks.iter().map(|(i, _)| i.end).fold(0.0, f64::max);
    let server = TestServer::start(Arc::clone(&store), token).await;
    Ctx {
        _dir: dir,
        store,
        server,
        client: reqwest::Client::new(),
        chunks,
        base,
        all: (iso(lo - 1.0), iso(hi + 1.0)),
    }
}

impl Ctx {
    async fn get(&self, query: &[(&str, &str)]) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{PATH}", self.server.base))
            .query(query)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap())
    }

    async fn ok(&self, query: &[(&str, &str)]) -> Value {
        let (status, body) = self.get(query).await;
        assert_eq!(status, 200, "{query:?}: {body}");
        body
    }

    /// Checks one query against the recomputation over chunks accepted by `select`.
    async fn check(
        &self,
        what: &str,
        query: &[(&str, &str)],
        select: &dyn Fn(&StoredChunkInfo) -> bool,
        fingerprint: Option<u32>,
    ) -> Value {
        let resp = self.ok(query).await;
        let exp = brute_force(&self.chunks, select, fingerprint);
        assert_matches(&resp, &exp, what);
        resp
    }
}

fn linked(i: &StoredChunkInfo) -> bool {
    !i.transaction_names.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_sources_and_filters_match_recomputation() {
    let ctx = setup(None).await;
    let (start, end) = (ctx.all.0.as_str(), ctx.all.1.as_str());
    let all = [("start", start), ("end", end)];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut q: Vec<(&str, &str)> = all.to_vec();
        q.extend_from_slice(extra);
        q
    };

    // profiles: every chunk.
    let resp = ctx
        .check(
            "profiles",
            &with(&[("dataSource", "profiles")]),
            &|_| true,
            None,
        )
        .await;
    assert_eq!(resp["metrics"], Value::Null);
    assert_eq!(resp["activeProfileIndex"], 0);
    assert_eq!(resp["projectID"], 0, "several projects");
    assert_eq!(resp["platform"], "", "several platforms");
    assert!(
        resp["metadata"]["received"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );

    // Default data source: transactions (only linked chunks); spans: the same here.
    ctx.check("default=transactions", &with(&[]), &linked, None)
        .await;
    ctx.check(
        "transactions",
        &with(&[("dataSource", "transactions")]),
        &linked,
        None,
    )
    .await;
    ctx.check("spans", &with(&[("dataSource", "spans")]), &linked, None)
        .await;

    // functions without a fingerprint: every chunk.
    ctx.check(
        "functions",
        &with(&[("dataSource", "functions")]),
        &|_| true,
        None,
    )
    .await;

    // Environments (repeated).
    ctx.check(
        "environments",
        &with(&[
            ("dataSource", "profiles"),
            ("environment", "production"),
            ("environment", "staging"),
        ]),
        &|i| matches!(i.environment.as_deref(), Some("production" | "staging")),
        None,
    )
    .await;
    ctx.check(
        "research environment (fixtures)",
        &with(&[("dataSource", "profiles"), ("environment", "research")]),
        &|i| i.environment.as_deref() == Some("research"),
        None,
    )
    .await;

    // Projects: one, several, -1.
    let resp = ctx
        .check(
            "project 2",
            &with(&[("dataSource", "profiles"), ("project", "2")]),
            &|i| i.project_id == 2,
            None,
        )
        .await;
    assert_eq!(resp["projectID"], 2);
    assert_eq!(resp["metadata"]["projectID"], 2);
    ctx.check(
        "projects 2,3",
        &with(&[
            ("dataSource", "profiles"),
            ("project", "2"),
            ("project", "3"),
        ]),
        &|i| i.project_id != 1,
        None,
    )
    .await;
    ctx.check(
        "project -1",
        &with(&[("dataSource", "profiles"), ("project", "-1")]),
        &|_| true,
        None,
    )
    .await;

    // Search syntax: release glob, negation, platform.
    ctx.check(
        "release glob, negation, platform",
        &with(&[
            ("dataSource", "profiles"),
            (
                "query",
                "release:app@*.0.0 !environment:staging platform:[python,rust]",
            ),
        ]),
        &|i| {
            matches!(i.release.as_deref(), Some("app@1.0.0" | "app@2.0.0"))
                && i.environment.as_deref() != Some("staging")
                && (i.platform == "python" || i.platform == "rust")
        },
        None,
    )
    .await;
    ctx.check(
        "release of the fixtures",
        &with(&[
            ("dataSource", "profiles"),
            ("query", "release:\"clients-demo@1.0.0\""),
        ]),
        &|i| i.release.as_deref() == Some("clients-demo@1.0.0"),
        None,
    )
    .await;
    ctx.check(
        "no release",
        &with(&[("dataSource", "profiles"), ("query", "release:\"\"")]),
        &|i| i.release.is_none(),
        None,
    )
    .await;
    ctx.check(
        "negated transaction",
        &with(&[
            ("dataSource", "profiles"),
            ("query", "!transaction:\"GET /users\""),
        ]),
        &|i| !i.transaction_names.iter().any(|n| n == "GET /users"),
        None,
    )
    .await;
    let resp = ctx
        .check(
            "transaction with quotes",
            &with(&[
                ("dataSource", "transactions"),
                (
                    "query",
                    r#"transaction:"worker \"nightly\"" AND environment:production"#,
                ),
            ]),
            &|i| {
                i.transaction_names
                    .iter()
                    .any(|n| n == "worker \"nightly\"")
                    && i.environment.as_deref() == Some("production")
            },
            None,
        )
        .await;
    assert_eq!(resp["transactionName"], "worker \"nightly\"");
    ctx.check(
        "fixture transactions by glob",
        &with(&[("query", "transaction:main-A/*")]),
        &|i| i.transaction_names.iter().any(|n| n.starts_with("main-A/")),
        None,
    )
    .await;

    // Time range: chunks overlapping [start, end) (start_ts < end and end_ts >= start).
    let (w0, w1) = (ctx.base + 600.0 * 5.0 + 1.0, ctx.base + 600.0 * 9.0 + 0.5);
    let (s, e) = (iso(w0), iso(w1));
    ctx.check(
        "time range",
        &[("dataSource", "profiles"), ("start", &s), ("end", &e)],
        &|i| i.start < w1 && i.end >= w0,
        None,
    )
    .await;
    // statsPeriod overrides start/end and is relative to now: the last hour holds synthetic
    // chunks 19..=23 (chunk i starts at now - 4h05 + 10 min * i).
    let t_now = now();
    let resp = ctx
        .check(
            "statsPeriod=1h",
            &[
                ("dataSource", "profiles"),
                ("statsPeriod", "1h"),
                ("start", &s),
                ("end", &e),
            ],
            &|i| i.end >= t_now - 3600.0,
            None,
        )
        .await;
    let in_last_hour: std::collections::BTreeSet<&str> = resp["shared"]["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["chunk_id"].as_str().unwrap())
        .collect();
    assert_eq!(in_last_hour.len(), 5, "synthetic chunks 19..=23");
    // Fixture chunks were captured in the past: statsPeriod=1s finds nothing.
    let resp = ctx
        .check(
            "statsPeriod=1s",
            &[("dataSource", "profiles"), ("statsPeriod", "1s")],
            &|_| false,
            None,
        )
        .await;
    assert_eq!(resp["profiles"][0]["endValue"], 0);
    assert_eq!(resp["profiles"][0]["samples"], Value::Array(vec![]));

    ctx.server.stop().await;
    drop(ctx.store);
}

impl Ctx {
    fn fixture_infos(&self) -> Vec<&StoredChunkInfo> {
        self.chunks
            .iter()
            .filter(|(i, _)| i.environment.as_deref() == Some("research"))
            .map(|(i, _)| i)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprints_select_functions_and_metrics() {
    let ctx = setup(None).await;
    let (start, end) = (ctx.all.0.as_str(), ctx.all.1.as_str());
    assert_eq!(ctx.fixture_infos().len(), 2);

    // A function of the fixtures that runs on two of the seven threads.
    let (name, package) = ("loads".to_string(), "json".to_string());
    let fp = fnv1a32(&package, &name);
    let fp_s = fp.to_string();
    let has_fp = |i: &StoredChunkInfo| {
        let chunk = &ctx
            .chunks
            .iter()
            .find(|(x, _)| x.chunk_id == i.chunk_id)
            .unwrap()
            .1;
        chunk
            .profile
            .frames
            .iter()
            .any(|f| key_of(f) == (name.clone(), package.clone()))
    };
    let resp = ctx
        .check(
            "fingerprint (functions by default)",
            &[("start", start), ("end", end), ("fingerprint", &fp_s)],
            &|i| has_fp(i),
            Some(fp),
        )
        .await;
    let frames = resp["shared"]["frames"].as_array().unwrap();
    assert!(
        frames
            .iter()
            .any(|f| f["fingerprint"] == fp && f["name"] == name.as_str())
    );

    // A synthetic function present on some threads of some chunks.
    let fp2 = fnv1a32("app.db", "query");
    let fp2_s = fp2.to_string();
    ctx.check(
        "fingerprint app.db:query",
        &[
            ("start", start),
            ("end", end),
            ("dataSource", "functions"),
            ("fingerprint", &fp2_s),
        ],
        &|_| true,
        Some(fp2),
    )
    .await;
    // A fingerprint in vroom's (Go, FNV-1) variant selects the same chunks and threads.
    let legacy = profilink_flamegraph::fingerprint::legacy_fingerprint_of("app.db", "query");
    let legacy_s = legacy.to_string();
    let a = ctx
        .ok(&[("start", start), ("end", end), ("fingerprint", &fp2_s)])
        .await;
    let b = ctx
        .ok(&[("start", start), ("end", end), ("fingerprint", &legacy_s)])
        .await;
    assert_eq!(a["shared"]["frame_infos"], b["shared"]["frame_infos"]);
    // An unknown fingerprint selects nothing.
    let resp = ctx
        .ok(&[("start", start), ("end", end), ("fingerprint", "12345")])
        .await;
    assert_eq!(resp["shared"]["frames"], Value::Array(vec![]));

    // expand=metrics: vroom's function metrics (in-app functions, ordered, consistent).
    let resp = ctx
        .ok(&[
            ("start", start),
            ("end", end),
            ("dataSource", "profiles"),
            ("expand", "metrics"),
        ])
        .await;
    let metrics = resp["metrics"].as_array().expect("metrics");
    assert!(!metrics.is_empty() && metrics.len() <= 100);
    for m in metrics {
        let (n, p) = (m["name"].as_str().unwrap(), m["package"].as_str().unwrap());
        assert_eq!(m["fingerprint"].as_u64().unwrap() as u32, fnv1a32(p, n));
        assert_eq!(m["in_app"], true);
        let g = |k: &str| m[k].as_u64().unwrap();
        assert!(g("count") >= 2, "{m}");
        assert!(g("p75") <= g("p95") && g("p95") <= g("p99") && g("p99") <= g("sum"));
        assert!(m["avg"].as_f64().unwrap() > 0.0);
        let examples = m["examples"].as_array().unwrap();
        assert!(!examples.is_empty() && examples.len() <= 5);
        assert!(m["worst"]["chunk_id"].is_string());
    }
    // Sums are ordered by self time; the sum is never below the p99.
    let resp = ctx
        .ok(&[
            ("start", start),
            ("end", end),
            ("dataSource", "profiles"),
            ("expand", "metrics"),
            ("expand", "metrics"),
        ])
        .await;
    assert_eq!(resp["metrics"].as_array().unwrap().len(), metrics.len());

    ctx.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_flamegraph_shape() {
    let ctx = setup(None).await;
    let (start, end) = (ctx.all.0.as_str(), ctx.all.1.as_str());
    let resp = ctx
        .check(
            "fixtures only",
            &[
                ("start", start),
                ("end", end),
                ("dataSource", "profiles"),
                ("environment", "research"),
            ],
            &|i| i.environment.as_deref() == Some("research"),
            None,
        )
        .await;
    assert_eq!(resp["platform"], "python");
    assert_eq!(resp["projectID"], 1);
    assert_eq!(resp["metadata"]["organizationID"], 0, "slug, not an id");
    let frames = resp["shared"]["frames"].as_array().unwrap();
    let run = frames
        .iter()
        .find(|f| f["name"] == "Thread.run")
        .expect("Thread.run");
    assert_eq!(run["image"], "threading");
    assert_eq!(run["is_application"], false, "python stdlib is system code");
    assert!(run["file"].is_string() && run["line"].is_u64() && run["path"].is_string());
    // Every stack is root first: Thread.run style roots never appear as leaves only.
    let profile = &resp["profiles"][0];
    assert_eq!(profile["isMainThread"], true);
    let total: u64 = profile["sample_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, profile["endValue"].as_u64().unwrap());
    let examples = resp["shared"]["profiles"].as_array().unwrap();
    for e in examples {
        assert_eq!(e["project_id"], 1);
        assert!(e["profiler_id"].as_str().unwrap().len() == 32);
        assert!(e["start"].as_f64().unwrap() <= e["end"].as_f64().unwrap());
    }
    // Numeric organization ids are echoed.
    let url = format!(
        "{}/api/0/organizations/42/profiling/flamegraph?dataSource=profiles&start={start}&end={end}",
        ctx.server.base
    );
    let body: Value = ctx
        .client
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["metadata"]["organizationID"], 42);
    ctx.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_400() {
    let ctx = setup(None).await;
    for (query, needle) in [
        (
            vec![("dataSource", "profiles"), ("fingerprint", "1")],
            "only permitted",
        ),
        (vec![("dataSource", "events")], "valid choice"),
        (vec![("fingerprint", "-1")], "fingerprint"),
        (vec![("fingerprint", "4294967296")], "fingerprint"),
        (vec![("statsPeriod", "1y")], "statsPeriod"),
        (vec![("start", "2026-01-01T00:00:00")], "both required"),
        (
            vec![("start", "2026-01-02"), ("end", "2026-01-01")],
            "before",
        ),
        (vec![("start", "soon"), ("end", "2026-01-01")], "ISO-8601"),
        (vec![("project", "abc")], "project"),
        (vec![("expand", "everything")], "expand"),
        (vec![("query", "release:a OR release:b")], "OR"),
        (vec![("query", "user.email:x")], "unsupported key"),
        (vec![("query", "some free text")], "free-text"),
        (vec![("query", "release:\"unterminated")], "unterminated"),
    ] {
        let (status, body) = ctx.get(&query).await;
        assert_eq!(status, 400, "{query:?}: {body}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{query:?}: {detail}");
    }
    ctx.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_when_configured() {
    let ctx = setup(Some("s3cret")).await;
    let url = format!("{}{PATH}?dataSource=profiles", ctx.server.base);
    let resp = ctx.client.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let body: Value = resp.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("not provided"));
    let resp = ctx
        .client
        .get(&url)
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = ctx
        .client
        .get(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // The viewer: a login page without the token, the page with it (header or cookie).
    let ui = format!("{}/ui/", ctx.server.base);
    let resp = ctx.client.get(&ui).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    assert!(resp.text().await.unwrap().contains("API token"));
    let resp = ctx
        .client
        .get(&ui)
        .header("cookie", "profilink_token=s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = ctx
        .client
        .get(format!("{}/ui/flamegraph.svg", ctx.server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    ctx.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewer_serves_svg() {
    let ctx = setup(None).await;
    let resp = ctx
        .client
        .get(format!(
            "{}/ui/flamegraph.svg?environment=research",
            ctx.server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("image/svg+xml")
    );
    let svg = resp.text().await.unwrap();
    assert!(svg.contains("<svg") && svg.contains("Thread.run"));
    let html = ctx
        .client
        .get(format!("{}/ui/?project=2", ctx.server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("<svg") && html.contains("id=\"frames\""));
    assert!(
        !html.contains("http://") || !html.contains("src=\"http"),
        "no external resources"
    );
    let resp = ctx
        .client
        .get(format!("{}/ui/?query=bad%20text", ctx.server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    ctx.server.stop().await;
}

/// More than 64 chunks take the two-thread aggregation path; it must agree exactly too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_chunks_merge_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir);
    let base = 1_790_000_000.0;
    for i in 0..90u64 {
        let chunk = synth_chunk(&Synth {
            seed: 1000 + i,
            platform: PLATFORMS[i as usize % 3],
            environment: ENVIRONMENTS[i as usize % 3],
            release: RELEASES[(i as usize / 3) % 3],
            start: base + 30.0 * i as f64,
            samples_per_thread: 40 + (i as usize % 5) * 10,
            threads: 1 + (i as usize % 3),
            profiler_id: hex32(i / 9),
        });
        let meta = profilink_flamegraph::ChunkMeta {
            project_id: 1 + i % 2,
            transaction_names: vec![],
            received: 0.0,
        };
        store.insert(&chunk, &meta).unwrap();
    }
    let chunks = stored(&store);
    let server = TestServer::start(Arc::clone(&store), None).await;
    let client = reqwest::Client::new();
    let get = |q: String| {
        let client = client.clone();
        let url = format!(
            "{}{PATH}?start=2026-09-01T00:00:00Z&end=2026-10-01T00:00:00Z&{q}",
            server.base
        );
        async move {
            let r = client.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let resp = get("dataSource=profiles&expand=metrics".into()).await;
    assert_matches(&resp, &brute_force(&chunks, &|_| true, None), "90 chunks");
    assert!(!resp["metrics"].as_array().unwrap().is_empty());
    let fp = fnv1a32("app.db", "query");
    let resp = get(format!("fingerprint={fp}")).await;
    assert_matches(
        &resp,
        &brute_force(&chunks, &|_| true, Some(fp)),
        "90 chunks, fingerprint",
    );
    server.stop().await;
}
