//! Cross-check against vroomrs (PyPI), the library Sentry runs on every ingested chunk: its
//! `extract_functions_metrics` reports each function's fingerprint, package, in-app flag and
//! call-tree node durations, which must equal this crate's frames (fingerprint, image,
//! is_application) and frame_infos (count = number of nodes, weight = sum of node durations).
//! vroomrs leaves out functions seen in a single sample.
//!
//! Skipped with a message when `python3 -c "import vroomrs"` fails, unless
//! `PROFILINK_REQUIRE_VROOMRS=1`.

mod common;

use common::*;
use profilink_flamegraph::ChunkMeta;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

const SCRIPT: &str = r#"
import json, sys
import vroomrs
for line in open(sys.argv[1], encoding="utf-8"):
    if not line.strip():
        continue
    chunk = json.loads(line)
    chunk.update(organization_id=1, project_id=1, received=0.0, retention_days=90)
    parsed = vroomrs.profile_chunk_from_json_str_and_version(json.dumps(chunk), "2")
    parsed.normalize()
    fns = parsed.extract_functions_metrics(min_depth=0, filter_system_frames=False,
                                           filter_non_leaf_functions=False)
    print(json.dumps({"chunk_id": chunk["chunk_id"], "functions": [
        {"function": f.get_function(), "package": f.get_package(),
         "fingerprint": f.get_fingerprint(), "in_app": f.get_in_app(),
         "total_times_ns": f.get_total_times_ns()} for f in fns]}))
"#;

fn vroomrs_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import vroomrs"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("PROFILINK_REQUIRE_VROOMRS").as_deref() == Ok("1") {
            panic!("vroomrs is required (PROFILINK_REQUIRE_VROOMRS=1) but not importable");
        }
        eprintln!(
            "skipping vroomrs cross-check: `python3 -c \"import vroomrs\"` fails (pip install vroomrs)"
        );
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fingerprints_counts_and_weights_match_vroomrs() {
    if !vroomrs_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&dir);
    let mut chunks = fixture_chunks();
    for (i, platform) in ["python", "rust", "node"].iter().enumerate() {
        chunks.push(synth_chunk(&Synth {
            seed: 50 + i as u64,
            platform,
            environment: Some("production"),
            release: None,
            start: 1_790_000_000.0 + i as f64 * 100.0,
            samples_per_thread: 300,
            threads: 2,
            profiler_id: hex32(9),
        }));
    }
    // One project per chunk, so each can be queried alone.
    for (i, c) in chunks.iter().enumerate() {
        let meta = ChunkMeta {
            project_id: i as u64 + 1,
            ..Default::default()
        };
        store.insert(c, &meta).unwrap();
    }
    let stored = stored(&store);
    let ndjson: String = stored
        .iter()
        .map(|(_, c)| String::from_utf8(c.to_json()).unwrap() + "\n")
        .collect();
    let input = dir.path().join("chunks.ndjson");
    std::fs::write(&input, ndjson).unwrap();
    let script = dir.path().join("vroomrs_functions.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "vroomrs script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: BTreeMap<String, Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["chunk_id"].as_str().unwrap().to_string(),
                v["functions"].clone(),
            )
        })
        .collect();
    assert_eq!(reports.len(), stored.len());

    let server = TestServer::start(Arc::clone(&store), None).await;
    let client = reqwest::Client::new();
    let mut checked = 0;
    for (info, _) in &stored {
        let url = format!(
            "{}/api/0/organizations/1/profiling/flamegraph/?dataSource=profiles&project={}\
             &start=2020-01-01T00:00:00Z&end=2100-01-01T00:00:00Z",
            server.base, info.project_id
        );
        let resp: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        let frames = resp["shared"]["frames"].as_array().unwrap();
        let infos = resp["shared"]["frame_infos"].as_array().unwrap();
        let ours: BTreeMap<(String, String), (&Value, &Value)> = frames
            .iter()
            .zip(infos)
            .map(|(f, i)| {
                (
                    (
                        f["name"].as_str().unwrap().to_string(),
                        f["image"].as_str().unwrap_or("").to_string(),
                    ),
                    (f, i),
                )
            })
            .collect();
        let theirs = reports[&info.chunk_id].as_array().unwrap();
        assert!(!theirs.is_empty());
        for f in theirs {
            let key = (
                f["function"].as_str().unwrap().to_string(),
                f["package"].as_str().unwrap().to_string(),
            );
            let (frame, fi) = ours
                .get(&key)
                .unwrap_or_else(|| panic!("{}: vroomrs function {key:?} missing", info.chunk_id));
            assert_eq!(
                frame["fingerprint"], f["fingerprint"],
                "{}: fingerprint of {key:?}",
                info.chunk_id
            );
            assert_eq!(
                profilink_flamegraph::fingerprint::fingerprint_of(&key.1, &key.0),
                f["fingerprint"].as_u64().unwrap() as u32
            );
            assert_eq!(
                frame["is_application"], f["in_app"],
                "{}: in_app of {key:?}",
                info.chunk_id
            );
            let times: Vec<u64> = f["total_times_ns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap())
                .collect();
            assert_eq!(
                fi["count"].as_u64().unwrap(),
                times.len() as u64,
                "{}: nodes of {key:?}",
                info.chunk_id
            );
            let (ours_w, theirs_w) = (fi["weight"].as_u64().unwrap(), times.iter().sum::<u64>());
            // Both truncate `seconds * 1e9`; JSON float parsing may differ by one ulp (~256 ns).
            assert!(
                ours_w.abs_diff(theirs_w) <= 512 * times.len() as u64,
                "{}: weight of {key:?}: {ours_w} vs {theirs_w}",
                info.chunk_id
            );
            checked += 1;
        }
        // Every named function we report is one vroomrs reports, except those seen in a
        // single sample (vroomrs drops `sample_count <= 1`): a single call-tree node each.
        let reported: std::collections::BTreeSet<(String, String)> = theirs
            .iter()
            .map(|f| {
                (
                    f["function"].as_str().unwrap().to_string(),
                    f["package"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for (key, (_, fi)) in ours.iter().filter(|(k, _)| !k.0.is_empty()) {
            if !reported.contains(key) {
                assert_eq!(
                    fi["count"], 1,
                    "{}: {key:?} not reported by vroomrs",
                    info.chunk_id
                );
            }
        }
    }
    assert!(checked > 100, "checked {checked} functions");
    server.stop().await;
}
