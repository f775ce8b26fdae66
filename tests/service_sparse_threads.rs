//! The real binary, OTLP → a loopback Sentry stand-in: the eBPF fixtures' samples that
//! Relay's thread rule would drop reach Sentry in group threads (`sparse_threads: group`, the
//! exporters' default), decided on the merged chunk; every chunk passes the project's
//! validator (no thread Relay would drop) and vroomrs; nothing is invented; `/metrics` counts
//! the grouped samples.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::{Severity, validate_chunk};
use service_support::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

/// (fixture, observations that reach Sentry, all): the limit, every sample of a process seen
/// at least twice in its merged chunk (without grouping: 179, 27 and 46). ebpf-k8s-1's
/// sessions span 46-61 s across a minute boundary: each becomes one chunk (the two windows
/// pair), except one spanning 60.7 s, cut at the minute.
const FIXTURES: [(&str, usize, usize); 3] = [
    ("ebpf-profile.pb", 189, 189),
    ("ebpf-k8s-0.pb", 55, 58),
    ("ebpf-k8s-1.pb", 102, 107),
];

/// Input observation timestamps in microseconds, with multiplicity.
fn input_micros(req: &ExportProfilesServiceRequest) -> BTreeMap<i64, usize> {
    let mut out = BTreeMap::new();
    for p in req
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
    {
        for s in &p.samples {
            for &t in &s.timestamps_unix_nano {
                *out.entry((t / 1_000) as i64).or_insert(0) += 1;
            }
        }
    }
    out
}

/// Removes each chunk sample from `left` (within 2 µs); panics on one the input lacks.
fn take_samples(chunks: &[ProfileChunk], left: &mut BTreeMap<i64, usize>) {
    for c in chunks {
        for s in &c.profile.samples {
            let us = (s.timestamp * 1e6).round() as i64;
            let hit = left
                .range(us - 2..=us + 2)
                .find(|(_, n)| **n > 0)
                .map(|(t, _)| *t)
                .unwrap_or_else(|| panic!("sample at {} is not in the input", s.timestamp));
            *left.get_mut(&hit).unwrap() -= 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ebpf_samples_reach_sentry_in_group_threads() {
    let standin = SentryStandIn::start(None).await;
    let run = start_to_sentry(&standin, "otlp");
    let (grpc, metrics, dir) = (run.listen.clone(), run.metrics.clone(), run.dir);
    let mut p = run.process;

    let mut grouped_total = 0;
    let mut delivered = 0;
    for (name, kept, all) in FIXTURES {
        // One fixture at a time: its sessions go idle and are merged before the next one
        // (the k8s fixtures are two parts of one stream, of the same processes).
        let req = otlp_fixture(name);
        let mut left = input_micros(&req);
        assert_eq!(left.values().sum::<usize>(), all, "{name}");
        let before = standin.chunks().len();
        grpc_export(&grpc, req).await;
        let want = delivered + kept;
        let ok = standin
            .wait_for(Duration::from_secs(10), |c| {
                c.iter().map(|c| c.profile.samples.len()).sum::<usize>() >= want
            })
            .await;
        // Let any straggler chunk arrive (the sessions are idle after 300 ms).
        tokio::time::sleep(Duration::from_millis(700)).await;
        let chunks: Vec<ProfileChunk> = standin.chunks()[before..].to_vec();
        let got: usize = chunks.iter().map(|c| c.profile.samples.len()).sum();
        assert!(
            ok,
            "{name}: {got} of {kept} delivered; stderr:\n{}",
            p.stderr()
        );
        assert_eq!(got, kept, "{name}: {got} of {all} observations kept");
        assert!(got * 10 >= all * 9, "{name}: {got} of {all}, want >= 90%");
        delivered += got;
        take_samples(&chunks, &mut left);

        // Valid chunks: no error, no thread Relay would drop; group threads are named.
        for c in &chunks {
            for f in validate_chunk(c) {
                assert!(
                    f.severity != Severity::Error && f.rule != "thread-too-few-samples",
                    "{name}: {f:?}"
                );
            }
            for s in &c.profile.samples {
                let id: u64 = s.thread_id.parse().unwrap();
                if id >= profilink_proto::sentry::GROUP_ID_MIN {
                    grouped_total += 1;
                    assert!(
                        c.profile.thread_metadata[s.thread_id.as_str()]
                            .name
                            .is_some(),
                        "{name}: unnamed group {}",
                        s.thread_id
                    );
                }
            }
        }
        if vroomrs_available() {
            let path = dir.path().join(format!("{name}.ndjson"));
            let mut f = std::fs::File::create(&path).unwrap();
            for c in &chunks {
                f.write_all(&c.to_json()).unwrap();
                f.write_all(b"\n").unwrap();
            }
            drop(f);
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vroomrs_check.py");
            let res = std::process::Command::new("python3")
                .arg(script)
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                res.status.success(),
                "vroomrs rejected {name}:\n{}",
                String::from_utf8_lossy(&res.stdout)
            );
        }
    }
    assert!(grouped_total > 0, "no group thread");

    let (status, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(status, 200);
    let e = [("exporter", "sentry")];
    // Samples in group threads, plus the lone samples that joined a same-name thread.
    let grouped = scrape(&text, "profilink_exporter_sparse_samples_grouped_total", &e).unwrap();
    assert!(
        grouped >= grouped_total,
        "{grouped} < {grouped_total}\n{text}"
    );
    assert!(scrape(&text, "profilink_exporter_sparse_threads_grouped_total", &e).unwrap() > 0);
    let lost: usize = FIXTURES.iter().map(|f| f.2 - f.1).sum();
    assert_eq!(
        scrape(&text, "profilink_exporter_sparse_samples_dropped_total", &e),
        Some(lost as u64)
    );
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(15));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
}

/// `true` when `python3 -c "import vroomrs"` works.
fn vroomrs_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import vroomrs"])
        .output()
        .is_ok_and(|o| o.status.success())
}
