//! Snapshots of small hand-built requests (chunk JSON, links, stats).

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{B, check_chunk, int_value, kv, resource, sample, str_value};
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, Profile, Sample, any_value,
};
use profilink_translator::otlp_to_sentry::{ChunkOptions, ChunkTranslation, request_to_chunks};
use serde_json::{Value, json};

const T0: u64 = 1_795_317_063_000_000_000;
const MS: u64 = 1_000_000;

fn snapshot_value(t: &ChunkTranslation) -> Value {
    let chunks: Vec<Value> = t
        .chunks
        .iter()
        .map(|c| serde_json::from_slice(&c.to_json()).unwrap())
        .collect();
    let links: Vec<Value> = t
        .links
        .iter()
        .map(|l| {
            json!({
                "profiler_id": l.profiler_id,
                "thread_id": l.thread_id,
                "timestamp_ns": l.timestamp_ns,
                "trace_id": hex::encode(l.trace_id),
                "span_id": hex::encode(l.span_id),
            })
        })
        .collect();
    let rejected: Vec<Value> = t
        .rejected
        .iter()
        .map(|r| json!({"path": r.path, "error": r.error.to_string()}))
        .collect();
    json!({
        "chunks": chunks,
        "links": links,
        "rejected": rejected,
        "stats": format!("{:?}", t.stats),
    })
}

fn run(req: &ExportProfilesServiceRequest) -> ChunkTranslation {
    let opts = ChunkOptions {
        sdk_version: "test".into(),
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(req, &opts);
    for c in &t.chunks {
        check_chunk(c, &opts, true);
    }
    assert_eq!(request_to_chunks(req, &opts), t, "deterministic");
    t
}

#[test]
fn inlined_frames() {
    let mut b = B::new();
    let inner = b.func("inner", "/src/app/inline.rs");
    let middle = b.func("middle", "/src/app/inline.rs");
    let outer = b.func("outer", "/src/app/lib.rs");
    let main = b.func("main", "src/main.rs");
    let exe = b.mapping("/usr/bin/app", 0x1000, 0x9000, None);
    // One location, three lines: lines[0] is the innermost inlined callee.
    let l1 = b.loc(
        exe,
        0x1234,
        &[(inner, 10, 5), (middle, 20, 0), (outer, 30, 7)],
        Some("native"),
    );
    let l2 = b.loc(exe, 0x2000, &[(main, 3, 0)], Some("native"));
    let st = b.stack(&[l1, l2]);
    let tid = b.attr_int("thread.id", 7);
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(st, vec![tid], vec![T0 + 50 * MS, T0 + 100 * MS])],
    );
    let req = b.request(vec![resource(
        vec![
            kv("process.pid", int_value(7)),
            kv("service.name", str_value("app")),
        ],
        vec![p],
    )]);
    let t = run(&req);
    let c = &t.chunks[0];
    let names: Vec<_> = c.profile.stacks[0]
        .iter()
        .map(|&f| c.profile.frames[f].function.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["inner", "middle", "outer", "main"]);
    insta::assert_json_snapshot!("inlined_frames", snapshot_value(&t));
}

#[test]
fn native_frames_with_build_ids() {
    let mut b = B::new();
    let app = b.mapping(
        "/opt/app/server",
        0x400000,
        0x800000,
        Some("f1c3bcc0279865fe3058404b2831d9e64135386c"),
    );
    let libc = b.mapping(
        "libc.so.6",
        0x28000,
        0x1b0000,
        Some("274eec488d230825a136fa9c4d85370fed7a0a5e"),
    );
    let nobuild = b.mapping("libjit.so", 0x1000, 0x2000, None);
    let vmlinux = b.mapping(
        "vmlinux",
        0,
        0,
        Some("e97b80c39b0187ecf6cb349fb27e7707b58a8fe2"),
    );
    let kfn = b.func("do_syscall_64", "");
    let k = b.loc(vmlinux, 0x14d610d, &[(kfn, 0, 0)], Some("kernel"));
    let n1 = b.loc(libc, 0x2a1ca, &[], Some("native"));
    let n2 = b.loc(app, 0x401234, &[], Some("native"));
    let n3 = b.loc(nobuild, 0x1500, &[], Some("native"));
    let s1 = b.stack(&[k, n1, n2]);
    let s2 = b.stack(&[n3, n2]);
    let t1 = b.attr_int("thread.id", 100);
    let name = b.attr_str("thread.name", "server");
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![
            sample(s1, vec![t1, name], vec![T0, T0 + 50 * MS, T0 + 100 * MS]),
            sample(s2, vec![t1, name], vec![T0 + 150 * MS]),
        ],
    );
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(100))],
        vec![p],
    )]);
    let t = run(&req);
    let c = &t.chunks[0];
    assert_eq!(c.platform, "rust");
    let images = &c.debug_meta.as_ref().unwrap().images;
    assert_eq!(
        images.len(),
        2,
        "one image per used mapping with a build id and a range (not vmlinux 0-0)"
    );
    let server = images
        .iter()
        .find(|i| i.code_file.as_deref() == Some("/opt/app/server"))
        .unwrap();
    assert_eq!(
        server.debug_id.as_deref(),
        Some("c0bcc3f1-9827-fe65-3058-404b2831d9e6")
    );
    insta::assert_json_snapshot!("native_frames_with_build_ids", snapshot_value(&t));
}

#[test]
fn reference_based_attributes() {
    let mut b = B::new();
    let f = b.fn_loc("handle", "/app/handler.py", 12, "cpython");
    let g = b.fn_loc("<module>", "/app/main.py", 1, "cpython");
    let st = b.stack(&[f, g]);
    // Sample attributes: keys and values both by string-table reference.
    let tid = b.attr_strref("thread.id", "4242");
    let tname = b.attr_strref("thread.name", "worker-1");
    // Resource attributes with key_strindex / string_value_strindex.
    let k_service = b.s("service.name");
    let v_service = b.s("shop");
    let k_version = b.s("service.version");
    let v_version = b.s("shop@2.0.1");
    let k_env = b.s("deployment.environment.name");
    let v_env = b.s("staging");
    let strref = |k: i32, v: i32| KeyValue {
        key: String::new(),
        key_strindex: k,
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValueStrindex(v)),
        }),
    };
    let attrs = vec![
        strref(k_service, v_service),
        strref(k_version, v_version),
        strref(k_env, v_env),
        kv("process.pid", int_value(9)),
    ];
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(
            st,
            vec![tid, tname],
            vec![T0 + 10 * MS, T0 + 20 * MS],
        )],
    );
    let req = b.request(vec![resource(attrs, vec![p])]);
    let t = run(&req);
    let c = &t.chunks[0];
    assert_eq!(c.release.as_deref(), Some("shop@2.0.1"));
    assert_eq!(c.environment.as_deref(), Some("staging"));
    assert_eq!(
        c.profile.thread_metadata["4242"].name.as_deref(),
        Some("worker-1")
    );
    assert_eq!(c.platform, "python");
    insta::assert_json_snapshot!("reference_based_attributes", snapshot_value(&t));
}

#[test]
fn aggregated_samples() {
    let mut b = B::new();
    let f = b.fn_loc("main.work", "/src/main.go", 10, "go");
    let g = b.fn_loc("main.main", "/src/main.go", 3, "go");
    let st1 = b.stack(&[f, g]);
    let st2 = b.stack(&[g]);
    let tid = b.attr_int("thread.id", 1);
    // samples/count: value 4 -> 4 samples spread over the 1 s window; value 2 -> 2 samples.
    let agg = |stack: i32, attrs: Vec<i32>, v: i64| Sample {
        stack_index: stack,
        attribute_indices: attrs,
        link_index: 0,
        values: vec![v],
        timestamps_unix_nano: vec![],
    };
    let p1 = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![agg(st1, vec![tid], 4), agg(st2, vec![tid], 2)],
    );
    // cpu/nanoseconds with a 10 ms period: 30 ms -> 3 samples, in a 300 ms window.
    let cpu_ns = b.value_type("cpu", "nanoseconds");
    let tid2 = b.attr_int("thread.id", 2);
    let p2 = Profile {
        sample_type: Some(cpu_ns),
        samples: vec![
            agg(st1, vec![tid2], 30_000_000),
            agg(st2, vec![tid2], 20_000_000),
        ],
        time_unix_nano: T0 + 2_000 * MS,
        duration_nano: 300 * MS,
        period_type: Some(cpu_ns),
        period: 10_000_000,
        ..Default::default()
    };
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(1))],
        vec![p1, p2],
    )]);
    let t = run(&req);
    assert_eq!(t.stats.samples_out, 4 + 2 + 3 + 2);
    insta::assert_json_snapshot!("aggregated_samples", snapshot_value(&t));
}

#[test]
fn several_processes_in_one_resource() {
    let mut b = B::new();
    let f = b.fn_loc("int Worker.run()", "Worker.java", 5, "jvm");
    let g = b.fn_loc("runtime.goexit", "runtime/asm_amd64.s", 1700, "go");
    let sj = b.stack(&[f]);
    let sg = b.stack(&[g]);
    // Older eBPF profiler layout: one resource per container, process.* on samples.
    let pid1 = b.attr_int("process.pid", 1001);
    let exe1 = b.attr_str("process.executable.name", "java");
    let pid2 = b.attr_int("process.pid", 2002);
    let exe2 = b.attr_str("process.executable.name", "agent");
    let t1 = b.attr_int("thread.id", 1010);
    let t2 = b.attr_int("thread.id", 2020);
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![
            sample(sj, vec![pid1, exe1, t1], vec![T0 + 50 * MS, T0 + 100 * MS]),
            sample(sg, vec![pid2, exe2, t2], vec![T0 + 60 * MS, T0 + 110 * MS]),
        ],
    );
    let req = b.request(vec![resource(
        vec![kv("container.id", str_value("c0ffee"))],
        vec![p],
    )]);
    let t = run(&req);
    assert_eq!(t.chunks.len(), 2);
    assert_ne!(t.chunks[0].profiler_id, t.chunks[1].profiler_id);
    assert_eq!(t.chunks[0].platform, "java");
    assert_eq!(t.chunks[1].platform, "go");
    insta::assert_json_snapshot!("several_processes_in_one_resource", snapshot_value(&t));
}

/// Sessions and threads depend on the resource and the identity and thread attributes only:
/// other per-sample attributes do not split them, a thread name seen later is kept, the same
/// sample attributes under another resource are another process, and an out-of-range
/// attribute index still rejects its profile when the sample is otherwise known.
#[test]
fn sessions_and_threads_follow_identity_attributes() {
    let mut b = B::new();
    let f = b.fn_loc("main", "/app/main.py", 3, "cpython");
    let st = b.stack(&[f]);
    let pid = b.attr_int("process.pid", 42);
    let tid = b.attr_int("thread.id", 7);
    let name = b.attr_str("thread.name", "worker");
    let cpu0 = b.attr_int("cpu.id", 0);
    let cpu1 = b.attr_int("cpu.id", 1);
    let ms = |n: u64| T0 + n * MS;
    let first = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![
            sample(st, vec![pid, tid, cpu0], vec![ms(10), ms(20)]),
            sample(st, vec![cpu1, pid, tid], vec![ms(30)]),
            sample(st, vec![pid, tid, name, cpu1], vec![ms(40)]),
        ],
    );
    let second = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(st, vec![pid, tid, cpu0], vec![ms(50), ms(60)])],
    );
    let other_resource = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(st, vec![pid, tid, cpu0], vec![ms(15), ms(25)])],
    );
    let broken = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![
            sample(st, vec![pid, tid, cpu0], vec![ms(70)]),
            sample(st, vec![pid, tid, 9_999], vec![ms(80)]),
        ],
    );
    let req = b.request(vec![
        resource(
            vec![kv("service.instance.id", str_value("a"))],
            vec![first, second, broken],
        ),
        resource(
            vec![kv("service.instance.id", str_value("b"))],
            vec![other_resource],
        ),
    ]);
    let t = run(&req);
    assert_eq!(t.rejected.len(), 1, "{:?}", t.rejected);
    assert!(
        t.rejected[0].error.to_string().contains("attribute_table"),
        "{}",
        t.rejected[0].error
    );
    assert_eq!(t.chunks.len(), 2);
    assert_ne!(t.chunks[0].profiler_id, t.chunks[1].profiler_id);
    let a = &t.chunks[0];
    assert_eq!(a.profile.samples.len(), 6);
    assert!(a.profile.samples.iter().all(|s| s.thread_id == "7"));
    assert_eq!(a.profile.thread_metadata.len(), 1);
    assert_eq!(
        a.profile.thread_metadata["7"].name.as_deref(),
        Some("worker")
    );
    assert_eq!(t.chunks[1].profile.samples.len(), 2);
    assert_eq!(t.chunks[1].profile.thread_metadata["7"].name, None);
}

#[test]
fn samples_with_links() {
    let mut b = B::new();
    let f = b.fn_loc("checkout", "/app/shop.py", 40, "cpython");
    let st = b.stack(&[f]);
    let tid = b.attr_int("thread.id", 77);
    let trace: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
    let span: [u8; 8] = core::array::from_fn(|i| 0xa0 + i as u8);
    let link = b.link(trace, span);
    // A link with a short span id is unusable: no SampleLink, counted.
    let bad = b.link(trace, [0; 8]);
    let mut linked = sample(st, vec![tid], vec![T0 + 10 * MS, T0 + 20 * MS]);
    linked.link_index = link;
    let mut unlinked = sample(st, vec![tid], vec![T0 + 30 * MS]);
    unlinked.link_index = bad;
    let plain = sample(st, vec![tid], vec![T0 + 40 * MS]);
    let p = b.cpu_profile(T0, 1_000 * MS, vec![linked, unlinked, plain]);
    let req = b.request(vec![resource(
        vec![
            kv("service.name", str_value("shop")),
            kv("host.name", str_value("h1")),
        ],
        vec![p],
    )]);
    let t = run(&req);
    assert_eq!(t.links.len(), 2);
    for (l, ts) in t.links.iter().zip([T0 + 10 * MS, T0 + 20 * MS]) {
        assert_eq!(l.profiler_id, t.chunks[0].profiler_id);
        assert_eq!(l.thread_id, "77");
        assert_eq!(l.timestamp_ns, ts);
        assert_eq!(l.trace_id, trace);
        assert_eq!(l.span_id, span);
    }
    assert_eq!(t.stats.links_dropped, 1);
    insta::assert_json_snapshot!("samples_with_links", snapshot_value(&t));
}
