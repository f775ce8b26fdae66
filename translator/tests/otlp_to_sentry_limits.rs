//! Malformed input and limits: rejection per profile, bounded work and memory.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{B, check_chunk, int_value, kv, resource, sample, str_value};
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, Line, Location, Profile, ProfilesDictionary,
    Sample, Stack, ValueType, any_value,
};
use profilink_translator::TranslateError;
use profilink_translator::otlp_to_sentry::{
    ChunkOptions, ChunkTranslation, NonCpuPolicy, SparseThreadPolicy, request_to_chunks, to_chunks,
};
use std::time::{Duration, Instant};

const T0: u64 = 1_795_317_063_000_000_000;
const MS: u64 = 1_000_000;

/// A valid request: resource 0 (the one tests break) and resource 1 (always valid).
struct Base {
    b: B,
    stack: i32,
    loc_native: i32,
    loc_fn: i32,
    mapping: i32,
    function: i32,
    tid: i32,
}

fn base() -> Base {
    let mut b = B::new();
    let mapping = b.mapping("libapp.so", 0x1000, 0x9000, Some("aabbccdd"));
    let function = b.func("work", "/src/work.c");
    let loc_fn = b.loc(mapping, 0x1100, &[(function, 3, 0)], Some("native"));
    let loc_native = b.loc(mapping, 0x1200, &[], Some("native"));
    let stack = b.stack(&[loc_fn, loc_native]);
    let tid = b.attr_int("thread.id", 1);
    Base {
        b,
        stack,
        loc_native,
        loc_fn,
        mapping,
        function,
        tid,
    }
}

/// The bad profile in resource 0; a profile with its own stack, location, function, mapping
/// and thread attribute in resource 1.
fn two_resources(mut base: Base, bad: Profile) -> ExportProfilesServiceRequest {
    let b = &mut base.b;
    let m = b.mapping("libgood.so", 0x1000, 0x9000, Some("1122"));
    let f = b.func("good", "/src/good.c");
    let l = b.loc(m, 0x1100, &[(f, 3, 0)], Some("native"));
    let st = b.stack(&[l]);
    let tid = b.attr_int("thread.id", 2);
    let good = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(st, vec![tid], vec![T0, T0 + 50 * MS])],
    );
    base.b.request(vec![
        resource(vec![kv("process.pid", int_value(1))], vec![bad]),
        resource(vec![kv("process.pid", int_value(2))], vec![good]),
    ])
}

fn good_profile(base: &mut Base) -> Profile {
    let (stack, tid) = (base.stack, base.tid);
    base.b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(stack, vec![tid], vec![T0 + 10 * MS, T0 + 20 * MS])],
    )
}

fn assert_rejected(t: &ChunkTranslation, table: &str, index: i64) {
    assert_eq!(t.rejected.len(), 1, "{:?}", t.rejected);
    let r = &t.rejected[0];
    assert_eq!(r.path, "resource_profiles[0].scope_profiles[0].profiles[0]");
    match &r.error {
        TranslateError::IndexOutOfRange {
            table: t2,
            index: i2,
            ..
        } => {
            assert_eq!((*t2, *i2), (table, index), "{}", r.error);
        }
        other => panic!("expected {table}[{index}] out of range, got {other}"),
    }
    assert!(r.error.to_string().contains(table));
    // The other resource still translates, and nothing of the rejected profile is left.
    assert_eq!(t.chunks.len(), 1);
    assert_eq!(t.stats.samples_out, 2);
    assert_eq!(t.stats.profiles_rejected, 1);
    for c in &t.chunks {
        check_chunk(c, &ChunkOptions::default(), true);
    }
}

fn run(req: &ExportProfilesServiceRequest) -> ChunkTranslation {
    request_to_chunks(req, &ChunkOptions::default())
}

#[test]
fn every_out_of_range_index_kind_rejects_only_its_profile() {
    type Break = fn(&mut Base, &mut Profile) -> (&'static str, i64);
    let cases: Vec<(&str, Break)> = vec![
        ("sample.stack_index", |_, p| {
            p.samples[1].stack_index = 99;
            ("stack_table", 99)
        }),
        ("negative stack_index", |_, p| {
            p.samples[1].stack_index = -1;
            ("stack_table", -1)
        }),
        ("stack location", |b, _| {
            b.b.d.stack_table[b.stack as usize]
                .location_indices
                .push(500);
            ("location_table", 500)
        }),
        ("location.mapping_index", |b, _| {
            b.b.d.location_table[b.loc_native as usize].mapping_index = 77;
            ("mapping_table", 77)
        }),
        ("line.function_index", |b, _| {
            b.b.d.location_table[b.loc_fn as usize].lines[0].function_index = 66;
            ("function_table", 66)
        }),
        ("function.name_strindex", |b, _| {
            b.b.d.function_table[b.function as usize].name_strindex = 9999;
            ("string_table", 9999)
        }),
        ("function.filename_strindex", |b, _| {
            b.b.d.function_table[b.function as usize].filename_strindex = 8888;
            ("string_table", 8888)
        }),
        ("mapping.filename_strindex", |b, _| {
            b.b.d.mapping_table[b.mapping as usize].filename_strindex = 7777;
            ("string_table", 7777)
        }),
        ("mapping.attribute_indices", |b, _| {
            b.b.d.mapping_table[b.mapping as usize]
                .attribute_indices
                .push(555);
            ("attribute_table", 555)
        }),
        ("location.attribute_indices", |b, _| {
            b.b.d.location_table[b.loc_native as usize]
                .attribute_indices
                .push(444);
            ("attribute_table", 444)
        }),
        ("sample.attribute_indices", |_, p| {
            p.samples[1].attribute_indices.push(333);
            ("attribute_table", 333)
        }),
        ("attribute key_strindex", |b, p| {
            let a = b.b.attr_str("x.key", "v");
            b.b.d.attribute_table[a as usize].key_strindex = 6666;
            p.samples[1].attribute_indices.push(a);
            ("string_table", 6666)
        }),
        ("attribute string_value_strindex", |b, p| {
            let a = b.b.attr(
                "x.ref",
                AnyValue {
                    value: Some(any_value::Value::StringValueStrindex(5555)),
                },
            );
            p.samples[1].attribute_indices.push(a);
            ("string_table", 5555)
        }),
        ("sample.link_index", |_, p| {
            p.samples[1].link_index = 12;
            ("link_table", 12)
        }),
        ("profile.attribute_indices", |_, p| {
            p.attribute_indices.push(222);
            ("attribute_table", 222)
        }),
        ("sample_type.type_strindex", |_, p| {
            p.sample_type.as_mut().unwrap().type_strindex = 4444;
            ("string_table", 4444)
        }),
        ("period_type.unit_strindex", |_, p| {
            p.period_type.as_mut().unwrap().unit_strindex = -4;
            ("string_table", -4)
        }),
    ];
    for (name, break_it) in cases {
        let mut b = base();
        let mut bad = good_profile(&mut b);
        // A valid sample first, so a rejected profile must roll back what it already added.
        let extra = bad.samples[0].clone();
        bad.samples.push(extra);
        let (table, index) = break_it(&mut b, &mut bad);
        let t = run(&two_resources(b, bad));
        eprintln!("case {name}");
        assert_rejected(&t, table, index);
    }
}

#[test]
fn shared_entry_breaks_every_profile_that_uses_it() {
    let mut b = base();
    b.b.d.location_table[b.loc_native as usize].mapping_index = 1234;
    let p1 = good_profile(&mut b);
    let p2 = good_profile(&mut b);
    let req =
        b.b.request(vec![resource(vec![], vec![p1]), resource(vec![], vec![p2])]);
    let t = run(&req);
    assert_eq!(t.rejected.len(), 2);
    assert!(t.chunks.is_empty());
    assert_eq!(
        t.rejected[1].path,
        "resource_profiles[1].scope_profiles[0].profiles[0]"
    );
}

#[test]
fn resource_attribute_key_strindex_out_of_range() {
    let mut b = base();
    let bad = good_profile(&mut b);
    let mut req = two_resources(b, bad);
    req.resource_profiles[0]
        .resource
        .as_mut()
        .unwrap()
        .attributes
        .push(KeyValue {
            key: String::new(),
            key_strindex: 31337,
            value: Some(str_value("x")),
        });
    let t = run(&req);
    assert_rejected(&t, "string_table", 31337);
}

#[test]
fn values_timestamps_length_mismatch() {
    let mut b = base();
    let mut bad = good_profile(&mut b);
    bad.samples[0].values = vec![1, 2, 3];
    let t = run(&two_resources(b, bad));
    assert_eq!(t.rejected.len(), 1);
    assert!(matches!(t.rejected[0].error, TranslateError::Invalid(_)));
    assert!(t.rejected[0].error.to_string().contains("samples[0]"));
    assert_eq!(t.chunks.len(), 1);
}

#[test]
fn missing_zero_entries_and_missing_dictionary() {
    // Tables without their zero entries: index 0 is the real entry there, as the Collector's
    // pdata reads it (stack 0 holds location 0 twice, string 0 is "thread.id"); a table
    // without entries leaves index 0 unset; nothing panics.
    let dict = ProfilesDictionary {
        string_table: vec![
            "thread.id".into(),
            "f".into(),
            "samples".into(),
            "count".into(),
        ],
        location_table: vec![Location {
            mapping_index: 0,
            address: 0x10,
            lines: vec![Line {
                function_index: 0,
                line: 1,
                column: 0,
            }],
            attribute_indices: vec![],
        }],
        stack_table: vec![Stack {
            location_indices: vec![0, 0],
        }],
        ..Default::default()
    };
    let samples = vec![Sample {
        stack_index: 0,
        timestamps_unix_nano: vec![T0, T0 + MS],
        ..Default::default()
    }];
    // (Without a sample type, type and unit would be string 0, "thread.id": not CPU.)
    let profile = Profile {
        samples,
        time_unix_nano: T0,
        sample_type: Some(ValueType {
            type_strindex: 2,
            unit_strindex: 3,
        }),
        ..Default::default()
    };
    let rps = vec![resource(
        vec![kv("process.pid", int_value(5))],
        vec![profile.clone()],
    )];
    let t = to_chunks(Some(&dict), &rps, &ChunkOptions::default());
    assert!(t.rejected.is_empty());
    assert_eq!(t.stats.samples_out, 2);
    // Stack 0 is `stack_table[0]`: location 0 twice (function 0 absent: a frame by address).
    assert_eq!(t.chunks[0].profile.stacks, vec![vec![0usize, 0]]);
    assert_eq!(t.chunks[0].profile.samples[0].thread_id, "5");

    // No dictionary at all: index 0 works, any other index is out of range.
    let mut profile = profile;
    profile.sample_type = None;
    let rps = vec![resource(
        vec![kv("process.pid", int_value(5))],
        vec![profile.clone()],
    )];
    let t = to_chunks(None, &rps, &ChunkOptions::default());
    assert!(t.rejected.is_empty());
    assert_eq!(t.stats.samples_out, 2);
    let mut p2 = profile;
    p2.samples[0].stack_index = 1;
    let t = to_chunks(
        None,
        &[resource(vec![], vec![p2])],
        &ChunkOptions::default(),
    );
    assert_eq!(t.rejected.len(), 1);
    assert!(matches!(
        t.rejected[0].error,
        TranslateError::IndexOutOfRange {
            table: "stack_table",
            index: 1,
            len: 0
        }
    ));

    // Empty tables where zero entries are referenced (attribute 0, link 0, mapping 0).
    let dict = ProfilesDictionary::default();
    let samples = vec![Sample {
        attribute_indices: vec![0],
        link_index: 0,
        timestamps_unix_nano: vec![T0],
        ..Default::default()
    }];
    let t = to_chunks(
        Some(&dict),
        &[resource(
            vec![],
            vec![Profile {
                samples,
                ..Default::default()
            }],
        )],
        &ChunkOptions::default(),
    );
    assert!(t.rejected.is_empty());
    assert_eq!(t.chunks.len(), 1);
}

#[test]
fn million_deep_stack_is_truncated_at_the_root_side() {
    let mut b = B::new();
    let leaf = b.fn_loc("leaf", "/src/a.rs", 1, "native");
    let mid = b.fn_loc("mid", "/src/a.rs", 2, "native");
    let mut locations = vec![leaf];
    locations.extend(std::iter::repeat_n(mid, 999_999));
    let deep = b.stack(&locations);
    let tid = b.attr_int("thread.id", 3);
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![sample(deep, vec![tid], vec![T0, T0 + MS])],
    );
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(3))],
        vec![p],
    )]);
    let start = Instant::now();
    let opts = ChunkOptions::default();
    let t = request_to_chunks(&req, &opts);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(t.rejected.is_empty());
    assert_eq!(t.stats.stacks_truncated, 1);
    let c = &t.chunks[0];
    assert_eq!(c.profile.stacks[0].len(), 1024);
    assert_eq!(
        c.profile.frames[c.profile.stacks[0][0]].function.as_deref(),
        Some("leaf")
    );
    assert_eq!(c.profile.frames.len(), 2);
    check_chunk(c, &opts, true);

    // An out-of-range index in the cut part still rejects the profile.
    let mut req2 = req.clone();
    req2.dictionary.as_mut().unwrap().stack_table[deep as usize].location_indices[900_000] =
        1 << 30;
    let t = request_to_chunks(&req2, &opts);
    assert_eq!(t.rejected.len(), 1);
    assert!(matches!(
        t.rejected[0].error,
        TranslateError::IndexOutOfRange {
            table: "location_table",
            ..
        }
    ));
}

#[test]
fn location_with_many_inlined_lines_is_capped() {
    let mut b = B::new();
    let f = b.func("inl", "/src/a.rs");
    let lines: Vec<(i32, i64, i64)> = (0..5000).map(|i| (f, i + 1, 0)).collect();
    let l = b.loc(0, 0x10, &lines, Some("native"));
    let st = b.stack(&[l]);
    let p = b.cpu_profile(T0, 0, vec![sample(st, vec![], vec![T0, T0 + 1])]);
    let req = b.request(vec![resource(vec![], vec![p])]);
    let opts = ChunkOptions {
        max_stack_depth: 100,
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&req, &opts);
    assert_eq!(t.chunks[0].profile.stacks[0].len(), 100);
    assert_eq!(
        t.chunks[0].profile.frames[t.chunks[0].profile.stacks[0][0]].lineno,
        Some(1)
    );
    assert_eq!(t.stats.stacks_truncated, 1);
}

fn many_timestamps(n: u64, spacing_ns: u64) -> ExportProfilesServiceRequest {
    let mut b = B::new();
    let f = b.fn_loc("hot", "/src/hot.rs", 1, "native");
    let g = b.fn_loc("main", "/src/main.rs", 1, "native");
    let st = b.stack(&[f, g]);
    let tid = b.attr_int("thread.id", 42);
    let ts: Vec<u64> = (0..n).map(|i| T0 + i * spacing_ns).collect();
    let p = b.cpu_profile(T0, n * spacing_ns, vec![sample(st, vec![tid], ts)]);
    b.request(vec![resource(
        vec![kv("process.pid", int_value(42))],
        vec![p],
    )])
}

fn assert_split_bounded(t: &ChunkTranslation, opts: &ChunkOptions, n: u64) {
    assert!(t.rejected.is_empty());
    assert_eq!(t.stats.samples_out, n);
    let total: usize = t.chunks.iter().map(|c| c.profile.samples.len()).sum();
    assert_eq!(total as u64, n);
    for c in &t.chunks {
        check_chunk(c, opts, true);
    }
    // Chunks of one session do not overlap in time.
    for w in t.chunks.windows(2) {
        assert!(
            w[0].profile.samples.last().unwrap().timestamp <= w[1].profile.samples[0].timestamp
        );
    }
}

#[test]
fn a_million_timestamps_split_by_duration() {
    let n = 1_000_000;
    let req = many_timestamps(n, MS);
    let opts = ChunkOptions::default();
    let t = request_to_chunks(&req, &opts);
    // 1000 s of samples: at least 17 chunks of <= 60 s.
    assert!(t.chunks.len() >= 17, "{} chunks", t.chunks.len());
    assert_split_bounded(&t, &opts, n);
}

#[test]
fn chunks_of_a_session_share_their_frames() {
    // 200 s of samples: 4 chunks of one session, each listing the same two frames.
    let req = many_timestamps(20_000, 10 * MS);
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert!(t.chunks.len() >= 4, "{} chunks", t.chunks.len());
    let first = &t.chunks[0].profile.frames;
    assert_eq!(first.len(), 2);
    for c in &t.chunks[1..] {
        assert_eq!(c.profile.frames.len(), first.len());
        for (a, b) in first.iter().zip(&c.profile.frames) {
            assert!(
                std::sync::Arc::ptr_eq(a, b),
                "a frame is built once per session"
            );
        }
    }
}

#[test]
fn sessions_of_one_platform_share_frames() {
    // Two processes over the same stack: one chunk each, the same frames (built once).
    let mut b = B::new();
    let f = b.fn_loc("hot", "/src/hot.rs", 1, "native");
    let st = b.stack(&[f]);
    let tid = b.attr_int("thread.id", 42);
    let ts = vec![T0, T0 + MS, T0 + 2 * MS];
    let resources = [1, 2]
        .map(|pid| {
            let p = b.cpu_profile(T0, 3 * MS, vec![sample(st, vec![tid], ts.clone())]);
            resource(vec![kv("process.pid", int_value(pid))], vec![p])
        })
        .to_vec();
    let t = request_to_chunks(&b.request(resources), &ChunkOptions::default());
    assert_eq!(t.chunks.len(), 2);
    assert_ne!(t.chunks[0].profiler_id, t.chunks[1].profiler_id);
    assert!(std::sync::Arc::ptr_eq(
        &t.chunks[0].profile.frames[0],
        &t.chunks[1].profile.frames[0]
    ));
}

#[test]
fn small_size_limit_splits_by_size() {
    let n = 20_000;
    let req = many_timestamps(n, MS);
    let opts = ChunkOptions {
        max_chunk_bytes: 64 * 1024,
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&req, &opts);
    assert!(t.chunks.len() > 10, "{} chunks", t.chunks.len());
    assert_split_bounded(&t, &opts, n);
    // The estimate is tight enough to fill chunks reasonably.
    let big = t
        .chunks
        .iter()
        .filter(|c| c.to_json().len() > 40 * 1024)
        .count();
    assert!(big * 2 > t.chunks.len());
}

#[test]
fn sample_too_big_for_any_chunk_is_dropped_and_counted() {
    let req = many_timestamps(10, MS);
    let opts = ChunkOptions {
        max_chunk_bytes: 300,
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&req, &opts);
    assert!(t.chunks.is_empty());
    assert_eq!(t.stats.samples_dropped_size, 10);
    assert_eq!(t.stats.samples_in, 10);
}

#[test]
#[ignore = "10^7 samples: run in release (`cargo test --release -- --ignored`); ~1-2 s there"]
fn ten_million_timestamps() {
    let n = 10_000_000;
    let req = many_timestamps(n, 100_000);
    let opts = ChunkOptions::default();
    let start = Instant::now();
    let t = request_to_chunks(&req, &opts);
    let elapsed = start.elapsed();
    eprintln!("10^7 timestamps: {} chunks in {elapsed:?}", t.chunks.len());
    assert_eq!(t.stats.samples_out, n);
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    for c in &t.chunks {
        assert!(c.to_json().len() <= opts.max_chunk_bytes);
    }
}

fn aggregated(values: &[i64]) -> ExportProfilesServiceRequest {
    let mut b = B::new();
    let f = b.fn_loc("agg", "/src/agg.rs", 1, "native");
    let st = b.stack(&[f]);
    let tid = b.attr_int("thread.id", 9);
    let samples = values
        .iter()
        .map(|&v| Sample {
            stack_index: st,
            attribute_indices: vec![tid],
            values: vec![v],
            ..Default::default()
        })
        .collect();
    let p = b.cpu_profile(T0, 10_000 * MS, samples);
    b.request(vec![resource(
        vec![kv("process.pid", int_value(9))],
        vec![p],
    )])
}

#[test]
fn huge_aggregated_values_are_bounded() {
    let opts = ChunkOptions::default();
    let start = Instant::now();
    let t = request_to_chunks(&aggregated(&[4_000_000_000]), &opts);
    assert!(start.elapsed() < Duration::from_secs(20));
    assert_eq!(t.stats.samples_out, 1_000_000);
    assert_eq!(t.stats.samples_in, 4_000_000_000);
    assert_eq!(t.stats.samples_dropped_expansion, 4_000_000_000 - 1_000_000);

    // Proportional scaling across samples, bounded by the option.
    let opts = ChunkOptions {
        max_expanded_samples: 1000,
        ..ChunkOptions::default()
    };
    let t = request_to_chunks(&aggregated(&[3_000_000_000, 1_000_000_000, -5, 0]), &opts);
    assert_eq!(t.stats.samples_out, 1000);
    assert!(t.rejected.is_empty());
}

#[test]
fn implausible_aggregated_claims_are_rejected_not_counted_as_drops() {
    // Issue 28: a claim of 10^12 or 2^63-1 observations was scaled down and its difference
    // added to the drop counter, which one request could saturate. A profile claiming more
    // than 2^32 observations (1.4 CPU years at 100 Hz) is rejected as `limit_exceeded`.
    let opts = ChunkOptions {
        max_expanded_samples: 1000,
        ..ChunkOptions::default()
    };
    for values in [
        &[1_000_000_000_000][..],
        &[i64::MAX; 3],
        &[1 << 31, 1 << 31, 1],
    ] {
        let t = request_to_chunks(&aggregated(values), &opts);
        assert_eq!(t.rejected.len(), 1, "{values:?}");
        assert!(
            matches!(t.rejected[0].error, TranslateError::LimitExceeded(_)),
            "{:?}",
            t.rejected[0].error
        );
        assert_eq!(t.stats.samples_dropped_expansion, 0);
        assert_eq!(t.stats.samples_out, 0);
        assert!(t.chunks.is_empty());
    }
    // Exactly 2^32 is still a claim: scaled, and the drop is what was claimed minus what was kept.
    let t = request_to_chunks(&aggregated(&[1 << 31, 1 << 31]), &opts);
    assert!(t.rejected.is_empty());
    assert_eq!(t.stats.samples_out, 1000);
    assert_eq!(t.stats.samples_dropped_expansion, (1 << 32) - 1000);

    // Across profiles each drop is bounded, so the stats stay far from saturating.
    let mut req = aggregated(&[1 << 31, 1 << 31]);
    let p = req.resource_profiles[0].scope_profiles[0].profiles[0].clone();
    req.resource_profiles[0].scope_profiles[0].profiles.push(p);
    let t = request_to_chunks(&req, &opts);
    assert_eq!(t.stats.profiles_translated, 2);
    assert_eq!(t.stats.samples_in, 2 << 32);
    assert_eq!(t.stats.samples_dropped_expansion, (2 << 32) - 2000);
}

#[test]
fn aggregated_values_over_a_window_of_centuries_make_a_bounded_number_of_chunks() {
    // Found by fuzzing: one aggregated sample whose profile claims a window of ~580 years
    // became one chunk per observation. The spreading window is capped at one hour.
    let mut req = aggregated(&[4_290_000_000]);
    let p = &mut req.resource_profiles[0].scope_profiles[0].profiles[0];
    p.duration_nano = 18_300_000_000_000_000_000;
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.stats.samples_out, 1_000_000);
    assert!(t.stats.chunks <= 61, "{} chunks", t.stats.chunks);
    let last = t
        .chunks
        .iter()
        .flat_map(|c| c.profile.samples.iter().map(|s| s.timestamp))
        .fold(f64::MIN, f64::max);
    let first = t
        .chunks
        .iter()
        .flat_map(|c| c.profile.samples.iter().map(|s| s.timestamp))
        .fold(f64::MAX, f64::min);
    assert!(last - first < 3600.0);
}

#[test]
fn giant_string_table() {
    let mut b = B::new();
    for i in 0..1_000_000 {
        b.d.string_table.push(format!("unused string number {i}"));
    }
    let f = b.fn_loc("f", "/src/f.rs", 1, "native");
    let st = b.stack(&[f]);
    let p = b.cpu_profile(T0, 0, vec![sample(st, vec![], vec![T0, T0 + 1])]);
    let req = b.request(vec![resource(vec![], vec![p])]);
    let start = Instant::now();
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(t.stats.samples_out, 2);
}

#[test]
fn non_cpu_policy() {
    let mut b = B::new();
    let f = b.fn_loc("wait", "/src/w.rs", 1, "native");
    let st = b.stack(&[f]);
    let off_cpu = b.value_type("off_cpu", "nanoseconds");
    let samples = vec![
        Sample {
            stack_index: st,
            values: vec![500, 700],
            timestamps_unix_nano: vec![T0, T0 + MS],
            ..Default::default()
        },
        Sample {
            stack_index: st,
            values: vec![123_456],
            ..Default::default()
        },
    ];
    let p = Profile {
        sample_type: Some(off_cpu),
        samples,
        time_unix_nano: T0,
        duration_nano: 10 * MS,
        ..Default::default()
    };
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(1))],
        vec![p],
    )]);
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.stats.profiles_skipped_non_cpu, 1);
    assert!(t.chunks.is_empty() && t.rejected.is_empty());
    let t = request_to_chunks(
        &req,
        &ChunkOptions {
            non_cpu_policy: NonCpuPolicy::Include,
            ..ChunkOptions::default()
        },
    );
    assert_eq!(t.stats.profiles_skipped_non_cpu, 0);
    // One per timestamp, one per value-only sample.
    assert_eq!(t.stats.samples_out, 3);
}

#[test]
fn sparse_thread_policy_counts_and_drops() {
    let mut b = B::new();
    let f = b.fn_loc("f", "/src/f.rs", 1, "native");
    let st = b.stack(&[f]);
    let busy = b.attr_int("thread.id", 1);
    let once = b.attr_int("thread.id", 2);
    let idle = b.attr_int("thread.id", 3);
    let p = b.cpu_profile(
        T0,
        1_000 * MS,
        vec![
            sample(st, vec![busy], vec![T0, T0 + MS, T0 + 2 * MS]),
            sample(st, vec![once], vec![T0 + MS]),
            sample(0, vec![idle], vec![T0, T0 + MS, T0 + 2 * MS]),
        ],
    );
    let req = b.request(vec![resource(
        vec![kv("process.pid", int_value(1))],
        vec![p],
    )]);
    let keep = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(keep.stats.sparse_threads, 2);
    assert_eq!(keep.stats.samples_out, 7);
    assert_eq!(keep.chunks[0].profile.thread_metadata.len(), 3);
    let opts = ChunkOptions {
        sparse_thread_policy: SparseThreadPolicy::Drop,
        ..ChunkOptions::default()
    };
    let drop = request_to_chunks(&req, &opts);
    assert_eq!(drop.stats.sparse_threads, 2);
    assert_eq!(drop.stats.samples_dropped_sparse, 4);
    assert_eq!(drop.stats.samples_out, 3);
    assert_eq!(
        drop.chunks[0]
            .profile
            .thread_metadata
            .keys()
            .collect::<Vec<_>>(),
        ["1"]
    );
    check_chunk(&drop.chunks[0], &opts, false);
}

#[test]
fn explicit_profiler_id_and_synthetic_thread() {
    let mut b = B::new();
    let f = b.fn_loc("f", "/src/f.rs", 1, "native");
    let st = b.stack(&[f]);
    let p = b.cpu_profile(T0, 0, vec![sample(st, vec![], vec![T0, T0 + 1])]);
    let req = b.request(vec![resource(
        vec![
            kv(
                "sentry.profiler_id",
                str_value("71BBA98D-90B5-45C3-9F2A-E73F702D7EF4"),
            ),
            kv(
                "process.pid",
                AnyValue {
                    value: Some(any_value::Value::StringValue("777".into())),
                },
            ),
        ],
        vec![p],
    )]);
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert_eq!(t.chunks[0].profiler_id, "71bba98d90b545c39f2ae73f702d7ef4");
    // No thread.id: the pid is the thread id.
    assert_eq!(t.chunks[0].profile.samples[0].thread_id, "777");
}
