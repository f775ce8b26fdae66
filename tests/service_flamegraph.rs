//! The real binary with the `profile_store` and `flamegraph_api` extensions: real OTLP
//! fixtures (gRPC → the Sentry exporter) and real sentry-python envelopes (Sentry receiver →
//! an OTLP backend, chunks and transactions in separate envelopes) go through the service; the
//! API's answers are then checked against a brute-force recomputation from the chunks the
//! store kept.

mod service_support;

#[path = "../flamegraph/tests/common/mod.rs"]
#[allow(unused_imports)]
mod fg;

use fg::{Expected, assert_matches, brute_force, fnv1a32, key_of, stored};
use profilink::telemetry::metrics::scrape;
use profilink_flamegraph::{ProfileStore, StoreConfig, StoredChunkInfo};
use profilink_proto::sentry::{Envelope, ProfileChunk, Transaction};
use serde_json::Value;
use service_support::*;
use std::collections::BTreeSet;
use std::time::Duration;

const TOKEN: &str = "test-token-123";

type Select = Box<dyn Fn(&StoredChunkInfo) -> bool>;

/// One API query and the chunks it must cover.
struct Case {
    name: &'static str,
    params: Vec<(&'static str, String)>,
    select: Select,
    fingerprint: Option<u32>,
}

fn case(
    name: &'static str,
    params: &[(&'static str, &str)],
    select: impl Fn(&StoredChunkInfo) -> bool + 'static,
) -> Case {
    Case {
        name,
        params: params.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        select: Box::new(select),
        fingerprint: None,
    }
}

fn sentry_envelopes() -> Vec<(String, Vec<u8>)> {
    // Production order: the chunks first, then the transactions that ended later.
    [
        "trace-chunk-00.envelope",
        "trace-chunk-01.envelope",
        "trace-transaction-0001.envelope",
        "trace-transaction-0002.envelope",
    ]
    .iter()
    .map(|n| {
        let path = fixtures().join("sentry/python").join(n);
        (n.to_string(), std::fs::read(path).unwrap())
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_over_the_service_matches_recomputation() {
    // Loopback OTLP backend for the Sentry → OTLP pipeline (its batches are not checked here).
    let (backend, mut batches) = otlp_backend(false).await;
    let backend_addr = backend.local_addr();
    tokio::spawn(async move { while batches.recv().await.is_some() {} });
    let standin = SentryStandIn::start(None).await;

    let dir = tempfile::tempdir().unwrap();
    let (grpc, sentry, api, metrics) = (free_addr(), free_addr(), free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
  sentry: {{ endpoint: "{sentry}" }}
exporters:
  sentry:
    dsn: "${{env:TEST_SENTRY_DSN}}"
    chunk_idle_timeout: 300ms
    tick: 20ms
    sending_queue: {{ storage: ./data/queue }}
  otlp: {{ endpoint: "{backend_addr}", tls: {{ insecure: true }} }}
extensions:
  profile_store: {{ path: ./data/store.db, retention: 100000h }}
  flamegraph_api: {{ endpoint: "{api}", bearer_token: "${{env:TEST_API_TOKEN}}" }}
service:
  extensions: [flamegraph_api, profile_store]
  pipelines:
    profiles/to_sentry: {{ receivers: [otlp], exporters: [sentry] }}
    profiles/from_sentry: {{ receivers: [sentry], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    );
    let dsn = standin.dsn();
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[
            ("TEST_SENTRY_DSN", Some(&dsn)),
            ("TEST_API_TOKEN", Some(TOKEN)),
        ],
    );
    p.wait_port(&metrics, Duration::from_secs(20));

    // OTLP → Sentry: the merged chunks the exporter sends are what the store keeps.
    let mut expected = Observations::new();
    for name in ["ebpf-profile.pb", "ebpf-k8s-0.pb"] {
        let req = otlp_fixture(name);
        for (k, v) in expected_observations(&expected_chunks(&req)) {
            expected.entry(k).or_default().extend(v);
        }
        grpc_export(&grpc, req).await;
    }
    let n = observation_count(&expected);
    let ok = standin
        .wait_for(Duration::from_secs(20), |c| {
            observation_count(&observations(c)) >= n
        })
        .await;
    assert!(ok, "OTLP data not delivered; stderr:\n{}", p.stderr());

    // Sentry → OTLP: chunks, then the transactions that link to them.
    let client = reqwest::Client::new();
    let mut sentry_chunks: Vec<ProfileChunk> = Vec::new();
    let mut transactions: Vec<Transaction> = Vec::new();
    for (name, body) in sentry_envelopes() {
        let env = Envelope::parse(&body).unwrap();
        for item in env.profile_chunks() {
            sentry_chunks.push(ProfileChunk::from_json(&item.payload).unwrap());
        }
        for item in env.items_of("transaction") {
            transactions.push(Transaction::from_json(&item.payload).unwrap());
        }
        let resp = client
            .post(format!("http://{sentry}/api/7/envelope/"))
            .header("x-sentry-auth", format!("Sentry sentry_key={KEY}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{name}");
    }
    assert_eq!(sentry_chunks.len(), 2);
    assert_eq!(transactions.len(), 2);

    // Everything offered is stored: the delivered chunks and the received ones.
    let delivered: BTreeSet<String> = standin.chunks().into_iter().map(|c| c.chunk_id).collect();
    let want = (delivered.len() + sentry_chunks.len()) as u64;
    let metrics_url = format!("http://{metrics}/metrics");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, text) = get_text(&metrics_url).await;
        let l = [("outcome", "stored")];
        let got = scrape(&text, "profilink_store_chunks_total", &l).unwrap_or(0);
        if got >= want {
            assert_eq!(got, want, "{text}");
            for outcome in ["dropped", "failed"] {
                assert_eq!(
                    scrape(
                        &text,
                        "profilink_store_chunks_total",
                        &[("outcome", outcome)]
                    ),
                    Some(0),
                    "{outcome}"
                );
            }
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "stored {got} of {want}:\n{text}\nstderr:\n{}",
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let base = format!("http://{api}/api/0/organizations/acme/profiling/flamegraph/");
    // The API needs the token.
    let resp = client
        .get(&base)
        .query(&[("project", "-1")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = client
        .get(&base)
        .bearer_auth(TOKEN)
        .query(&[("statsPeriod", "soon")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400, "bad statsPeriod");

    // A function of the sentry-python chunks, for the fingerprint query.
    let py = &sentry_chunks[0].profile;
    let leaf = &py.frames[py.stacks[py.samples[0].stack_id][0]];
    let (fname, fpackage) = key_of(leaf);
    let fp = fnv1a32(&fpackage, &fname);

    let range = [
        ("start", "2020-01-01T00:00:00Z"),
        ("end", "2030-01-01T00:00:00Z"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        let mut v = range.to_vec();
        v.extend_from_slice(extra);
        v
    };
    let linked = |i: &StoredChunkInfo| !i.transaction_names.is_empty();
    let mut cases = vec![
        case(
            "profiles, every project",
            &with(&[("dataSource", "profiles"), ("project", "-1")]),
            |_| true,
        ),
        case(
            "functions, every project",
            &with(&[("dataSource", "functions")]),
            |_| true,
        ),
        case("default (transactions)", &with(&[]), linked),
        case("spans", &with(&[("dataSource", "spans")]), linked),
        case(
            "project 42 (exported)",
            &with(&[("dataSource", "profiles"), ("project", "42")]),
            |i| i.project_id == 42,
        ),
        case(
            "project 7 (received)",
            &with(&[("dataSource", "profiles"), ("project", "7")]),
            |i| i.project_id == 7,
        ),
        case(
            "environment research",
            &with(&[("dataSource", "profiles"), ("environment", "research")]),
            |i| i.environment.as_deref() == Some("research"),
        ),
        case(
            "query !platform:python",
            &with(&[("dataSource", "profiles"), ("query", "!platform:python")]),
            |i| i.platform != "python",
        ),
        case(
            "query release",
            &with(&[
                ("dataSource", "profiles"),
                ("query", "release:\"clients-demo@1.0.0\""),
            ]),
            |i| i.release.as_deref() == Some("clients-demo@1.0.0"),
        ),
        case(
            "query transaction",
            &with(&[
                ("dataSource", "transactions"),
                ("query", "transaction:\"worker-recursion/json+recursion\""),
            ]),
            |i| {
                i.transaction_names
                    .iter()
                    .any(|n| n == "worker-recursion/json+recursion")
            },
        ),
    ];
    let fp_text: &'static str = Box::leak(fp.to_string().into_boxed_str());
    cases.push(Case {
        fingerprint: Some(fp),
        ..case(
            "functions with a fingerprint",
            &with(&[
                ("dataSource", "functions"),
                ("fingerprint", fp_text),
                ("expand", "metrics"),
            ]),
            |_| true,
        )
    });

    let mut answers: Vec<(Case, Value)> = Vec::new();
    for c in cases {
        let resp = client
            .get(&base)
            .bearer_auth(TOKEN)
            .query(&c.params)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{}", c.name);
        let body: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        answers.push((c, body));
    }

    // The viewer renders the stored profiles.
    let resp = client
        .get(format!("http://{api}/ui/flamegraph.svg"))
        .bearer_auth(TOKEN)
        .query(&with(&[("dataSource", "profiles"), ("project", "7")]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let svg = resp.text().await.unwrap();
    let escaped = fname
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        svg.contains("<svg") && svg.contains(&escaped),
        "{escaped} in the SVG"
    );

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    backend.abort();

    // What the store kept: exactly the delivered and the received chunks.
    let store = ProfileStore::open(&StoreConfig {
        path: dir.path().join("data/store.db"),
        retention: Duration::from_secs(100_000 * 3600),
        ..Default::default()
    })
    .unwrap();
    let kept = stored(&store);
    let ids = |project: u64| -> BTreeSet<String> {
        kept.iter()
            .filter(|(i, _)| i.project_id == project)
            .map(|(i, _)| i.chunk_id.clone())
            .collect()
    };
    assert_eq!(ids(42), delivered, "the exporter's merged chunks");
    let received: BTreeSet<String> = sentry_chunks.iter().map(|c| c.chunk_id.clone()).collect();
    assert_eq!(ids(7), received, "the received chunks");
    // The transactions arrived after their chunks and still link to them (same profiler id,
    // overlapping time range).
    let mut linked_chunks = 0;
    for (info, chunk) in kept.iter().filter(|(i, _)| i.project_id == 7) {
        let (lo, hi) = fg::sample_range(chunk);
        let want: BTreeSet<String> = transactions
            .iter()
            .filter(|t| {
                t.contexts
                    .profile
                    .as_ref()
                    .and_then(|p| p.profiler_id.as_deref())
                    == Some(chunk.profiler_id.as_str())
            })
            .filter(|t| {
                t.start_timestamp.unwrap().as_secs_f64() <= hi
                    && t.timestamp.unwrap().as_secs_f64() >= lo
            })
            .map(|t| t.transaction.clone().unwrap())
            .collect();
        let got: BTreeSet<String> = info.transaction_names.iter().cloned().collect();
        assert_eq!(got, want, "{}", info.chunk_id);
        linked_chunks += usize::from(!got.is_empty());
    }
    assert_eq!(
        linked_chunks, 1,
        "the fixture's transactions cover one chunk"
    );

    for (c, body) in &answers {
        let exp: Expected = brute_force(&kept, &*c.select, c.fingerprint);
        assert!(
            !exp.chunks.is_empty(),
            "{}: the case selects something",
            c.name
        );
        assert_matches(body, &exp, c.name);
        if c.fingerprint.is_some() {
            assert!(body["metrics"].is_array(), "{}: metrics expanded", c.name);
        }
    }
}
