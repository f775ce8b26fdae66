//! Random valid requests -> chunks that pass the chunk checks and keep every observation; some
//! resources carry another producer's `sentry.*` marks (valid or invalid ids, on the profile or
//! the resource). Every emitted chunk passes the chunk validator (none is removed as invalid),
//! the window-by-window translation equals the whole-session oracle, and, when the Python
//! `vroomrs` (Sentry's chunk library) is installed, vroomrs reads them.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{
    B, actual_observations, assert_same_observations, check_chunk, expected_observations,
    int_value, kv, resource, str_value,
};
use profilink_proto::otlp::Sample;
use profilink_proto::validate::validate_chunk_errors;
use profilink_translator::otlp_to_sentry::{ChunkOptions, SparseThreadGrouping, request_to_chunks};
use profilink_translator::testing::to_chunks_whole;
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use std::process::{Command, Stdio};

const T0: u64 = 1_795_317_063_000_000_000;
const MS: u64 = 1_000_000;
const FUNCTIONS: [(&str, &str); 4] = [
    ("alpha", "/app/a.py"),
    ("beta", "src/b.go"),
    ("gamma", "/usr/lib/x.so"),
    ("", ""),
];
/// Marks of another producer: none; valid ids as profile attributes; invalid ones; a valid
/// profiler id on the resource.
const MARKS: usize = 4;

const FRAME_TYPES: [Option<&str>; 5] = [
    None,
    Some("native"),
    Some("go"),
    Some("jvm"),
    Some("cpython"),
];

/// (lines as (function, line), mapping, address, frame type)
type LocSpec = (Vec<(usize, i64)>, Option<usize>, u64, usize);

#[derive(Debug, Clone)]
struct SampleSpec {
    stack: usize,
    thread: Option<i64>,
    pid: Option<i64>,
    /// Millisecond offsets; empty means aggregated.
    ts_ms: Vec<u64>,
    value: i64,
}

#[derive(Debug, Clone)]
struct Spec {
    locs: Vec<LocSpec>,
    stacks: Vec<Vec<usize>>,
    /// Per resource: its `process.pid`, its profiles' samples, and its `sentry.*` marks
    /// ([`MARKS`]).
    resources: Vec<(Option<i64>, Vec<Vec<SampleSpec>>, usize)>,
    window_ms: u64,
    max_duration_s: u64,
    max_kib: usize,
}

fn sample_spec(n_stacks: usize, window_ms: u64) -> impl Strategy<Value = SampleSpec> {
    (
        0..=n_stacks,
        option::of(1i64..5),
        option::of(100i64..103),
        prop_oneof![3 => vec(0..window_ms, 1..12), 1 => Just(vec![])],
        0i64..6,
    )
        .prop_map(|(stack, thread, pid, ts_ms, value)| SampleSpec {
            stack,
            thread,
            pid,
            ts_ms,
            value,
        })
}

fn spec() -> impl Strategy<Value = Spec> {
    let locs = vec(
        (
            vec((0usize..4, 0i64..50), 0..4),
            option::of(0usize..2),
            1u64..0x10000,
            0usize..5,
        ),
        1..8,
    );
    (locs, 1u64..200_000, 1u64..70, 8usize..256).prop_flat_map(
        |(locs, window_ms, max_duration_s, max_kib)| {
            let n_locs = locs.len();
            let stacks = vec(vec(0..=n_locs, 0..7), 1..6);
            stacks.prop_flat_map(move |stacks| {
                let n_stacks = stacks.len();
                let resources = vec(
                    (
                        option::of(1i64..4),
                        vec(vec(sample_spec(n_stacks, window_ms), 0..6), 1..3),
                        0..MARKS,
                    ),
                    1..4,
                );
                let locs = locs.clone();
                resources.prop_map(move |resources| Spec {
                    locs: locs.clone(),
                    stacks: stacks.clone(),
                    resources,
                    window_ms,
                    max_duration_s,
                    max_kib,
                })
            })
        },
    )
}

fn build(spec: &Spec) -> profilink_proto::otlp::ExportProfilesServiceRequest {
    let mut b = B::new();
    let funcs: Vec<i32> = FUNCTIONS.iter().map(|(n, f)| b.func(n, f)).collect();
    let maps = [
        b.mapping("libapp.so", 0x1000, 0x100000, Some("0badc0de")),
        b.mapping("/usr/lib/libc.so.6", 0, 0x200000, None),
    ];
    let locs: Vec<i32> = spec
        .locs
        .iter()
        .map(|(lines, mapping, addr, ft)| {
            let lines: Vec<(i32, i64, i64)> =
                lines.iter().map(|&(f, l)| (funcs[f], l, 0)).collect();
            b.loc(
                mapping.map_or(0, |m| maps[m]),
                *addr,
                &lines,
                FRAME_TYPES[*ft],
            )
        })
        .collect();
    let stacks: Vec<i32> = spec
        .stacks
        .iter()
        .map(|s| {
            let ls: Vec<i32> = s
                .iter()
                .map(|&i| if i == 0 { 0 } else { locs[i - 1] })
                .collect();
            b.stack(&ls)
        })
        .collect();
    let mut rps = Vec::new();
    for (ri, (pid, profiles, marks)) in spec.resources.iter().enumerate() {
        let mut ps = Vec::new();
        for (pi, samples) in profiles.iter().enumerate() {
            let samples: Vec<Sample> = samples
                .iter()
                .map(|s| {
                    let mut attrs = Vec::new();
                    if let Some(t) = s.thread {
                        attrs.push(b.attr_int("thread.id", t));
                        attrs.push(b.attr_str("thread.name", &format!("t{t}")));
                    }
                    if let Some(p) = s.pid {
                        attrs.push(b.attr_int("process.pid", p));
                    }
                    Sample {
                        stack_index: if s.stack == 0 { 0 } else { stacks[s.stack - 1] },
                        attribute_indices: attrs,
                        link_index: 0,
                        values: if s.ts_ms.is_empty() {
                            vec![s.value]
                        } else {
                            vec![]
                        },
                        timestamps_unix_nano: s.ts_ms.iter().map(|ms| T0 + ms * MS).collect(),
                    }
                })
                .collect();
            let mut p = b.cpu_profile(T0, spec.window_ms * MS, samples);
            match marks {
                1 => {
                    p.attribute_indices = vec![
                        b.attr_str("sentry.chunk_id", &format!("{:032x}", 0xc0 + ri * 8 + pi)),
                        b.attr_str("sentry.profiler_id", &format!("{:032X}", 0xf0 + ri)),
                    ]
                }
                2 => {
                    p.attribute_indices = vec![
                        b.attr_str("sentry.chunk_id", "chunk-1"),
                        b.attr_str("sentry.profiler_id", ""),
                    ]
                }
                _ => {}
            }
            ps.push(p);
        }
        let mut attrs = pid
            .map(|p| vec![kv("process.pid", int_value(p))])
            .unwrap_or_default();
        if *marks != 0 {
            attrs.push(kv("service.version", str_value("app@1.0")));
        }
        if *marks == 3 {
            attrs.push(kv(
                "sentry.profiler_id",
                str_value("8f0b2a4c-6d1e-4f3a-9b5c-7e2d1a0f3b4c"),
            ));
        }
        rps.push(resource(attrs, ps));
    }
    b.request(rps)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_requests_translate_faithfully(spec in spec()) {
        let req = build(&spec);
        // Threads as they are, and grouped (the default): the same observations, on the same
        // threads or (grouped) on any thread; chunks within their limits either way.
        for grouping in [SparseThreadGrouping::None, SparseThreadGrouping::Group] {
            let opts = ChunkOptions {
                max_chunk_duration_ns: spec.max_duration_s * 1_000_000_000,
                max_chunk_bytes: spec.max_kib * 1024,
                sparse_thread_grouping: grouping,
                ..ChunkOptions::default()
            };
            let t = request_to_chunks(&req, &opts);
            // One window at a time, exactly as the whole session (issue #33).
            let whole = to_chunks_whole(req.dictionary.as_ref(), &req.resource_profiles, &opts);
            prop_assert_eq!(&t.chunks, &whole.chunks);
            prop_assert_eq!(&t.links, &whole.links);
            prop_assert_eq!(t.stats, whole.stats);
            prop_assert!(t.rejected.is_empty(), "{:?}", t.rejected);
            // Strict out never had to remove a chunk of valid input.
            prop_assert!(t.invalid_chunks.is_empty(), "{:?}", t.invalid_chunks);
            prop_assert_eq!(t.stats.profiles_restored, 0);
            for c in &t.chunks {
                check_chunk(c, &opts, true);
                prop_assert!(
                    !validate_chunk_errors(c).iter().any(|f| f.is_error() && f.rule != "no-samples"),
                    "{:?}",
                    validate_chunk_errors(c)
                );
            }
            prop_assert_eq!(t.stats.samples_dropped_size, 0);
            prop_assert_eq!(t.stats.samples_in, t.stats.samples_out);
            let (mut actual, mut expected) =
                (actual_observations(&t), expected_observations(&req, opts.max_stack_depth));
            if grouping == SparseThreadGrouping::Group {
                for o in actual.iter_mut().chain(expected.iter_mut()) {
                    o.0.clear();
                }
            } else {
                prop_assert_eq!(t.stats.samples_grouped, 0);
            }
            assert_same_observations(actual, expected);
        }
    }
}

/// True when `python3 -c "import vroomrs"` works; panics when it does not but the environment
/// demands it (`PROFILINK_REQUIRE_VROOMRS=1`, set by the test script and CI).
fn vroomrs_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import vroomrs"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var("PROFILINK_REQUIRE_VROOMRS").is_ok_and(|v| v == "1") {
        panic!("vroomrs is required (run scripts/setup-test-tools.sh)");
    }
    ok
}

/// The chunks of 64 random requests (same generator, fixed seed), Relay's sparse-thread rule
/// applied as the CLI does, all read by vroomrs (one Python run for all of them).
#[test]
fn vroomrs_reads_the_chunks_of_random_requests() {
    if !vroomrs_available() {
        eprintln!("skipping: vroomrs is not installed (scripts/setup-test-tools.sh)");
        return;
    }
    let mut runner = TestRunner::deterministic();
    let mut ndjson = Vec::new();
    let mut n = 0;
    for _ in 0..64 {
        let spec = spec().new_tree(&mut runner).unwrap().current();
        let req = build(&spec);
        let opts = ChunkOptions {
            max_chunk_duration_ns: spec.max_duration_s * 1_000_000_000,
            max_chunk_bytes: spec.max_kib * 1024,
            sparse_thread_policy: profilink_translator::otlp_to_sentry::SparseThreadPolicy::Drop,
            ..ChunkOptions::default()
        };
        let t = request_to_chunks(&req, &opts);
        assert!(t.invalid_chunks.is_empty(), "{:?}", t.invalid_chunks);
        for c in &t.chunks {
            ndjson.extend_from_slice(&c.to_json());
            ndjson.push(b'\n');
            n += 1;
        }
    }
    assert!(n > 20, "only {n} chunks");
    let path =
        std::env::temp_dir().join(format!("profilink-proptest-{}.ndjson", std::process::id()));
    std::fs::write(&path, &ndjson).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vroomrs_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "vroomrs rejected chunks:\n{report}");
    assert_eq!(report.lines().count(), n);
}
