//! pprof <-> OTLP: every mapped field of a hand-built pprof survives pprof -> OTLP -> pprof,
//! the OTLP side carries the Collector's attribute names, and bad input is a typed error
//! (never a panic): string indices, ids, value counts, the expansion and inflation limits.

use profilink_proto::otlp::any_value::Value;
use profilink_translator::pprof::*;
use prost::Message;
use std::io::Write;

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| (*s).to_owned()).collect()
}

/// A CPU profile with two sample types, a mapping with a build id, an inlined location, a
/// folded location, string and numeric labels, comments and the profile-level strings.
fn sample_profile() -> PprofProfile {
    // 0 "", 1 samples, 2 count, 3 cpu, 4 nanoseconds, 5 main, 6 inner, 7 main.go, 8 /bin/app,
    // 9 abc123, 10 worker, 11 a, 12 bytes, 13 size, 14 hello, 15 drop.*, 16 keep.*,
    // 17 https://doc, 18 second comment
    let string_table = strings(&[
        "",
        "samples",
        "count",
        "cpu",
        "nanoseconds",
        "main",
        "inner",
        "main.go",
        "/bin/app",
        "abc123",
        "worker",
        "a",
        "bytes",
        "size",
        "hello",
        "drop.*",
        "keep.*",
        "https://doc",
        "second comment",
    ]);
    PprofProfile {
        sample_type: vec![
            PprofValueType { r#type: 1, unit: 2 },
            PprofValueType { r#type: 3, unit: 4 },
        ],
        sample: vec![
            PprofSample {
                location_id: vec![10, 20],
                value: vec![3, 30_000_000],
                label: vec![
                    PprofLabel {
                        key: 10,
                        str: 11,
                        num: 0,
                        num_unit: 0,
                    },
                    PprofLabel {
                        key: 13,
                        str: 0,
                        num: 4096,
                        num_unit: 12,
                    },
                ],
            },
            PprofSample {
                location_id: vec![20],
                value: vec![1, 10_000_000],
                label: vec![],
            },
        ],
        mapping: vec![PprofMapping {
            id: 7,
            memory_start: 0x1000,
            memory_limit: 0x9000,
            file_offset: 0x100,
            filename: 8,
            build_id: 9,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        }],
        location: vec![
            PprofLocation {
                id: 10,
                mapping_id: 7,
                address: 0x1234,
                // inner inlined into main: innermost first.
                line: vec![
                    PprofLine {
                        function_id: 2,
                        line: 12,
                        column: 3,
                    },
                    PprofLine {
                        function_id: 1,
                        line: 40,
                        column: 0,
                    },
                ],
                is_folded: false,
            },
            PprofLocation {
                id: 20,
                mapping_id: 7,
                address: 0x2000,
                line: vec![PprofLine {
                    function_id: 1,
                    line: 50,
                    column: 0,
                }],
                is_folded: true,
            },
        ],
        function: vec![
            PprofFunction {
                id: 1,
                name: 5,
                system_name: 5,
                filename: 7,
                start_line: 30,
            },
            PprofFunction {
                id: 2,
                name: 6,
                system_name: 6,
                filename: 7,
                start_line: 10,
            },
        ],
        string_table,
        drop_frames: 15,
        keep_frames: 16,
        time_nanos: 1_700_000_000_000_000_000,
        duration_nanos: 2_000_000_000,
        period_type: Some(PprofValueType { r#type: 3, unit: 4 }),
        period: 10_000_000,
        comment: vec![14, 18],
        default_sample_type: 3,
        doc_url: 17,
    }
}

fn s(p: &PprofProfile, i: i64) -> &str {
    &p.string_table[i as usize]
}

#[test]
fn pprof_to_otlp_follows_the_collector_mapping() {
    let p = sample_profile();
    let data = pprof_bytes_to_otlp(&p.encode_to_vec(), &PprofOptions::default()).unwrap();
    let d = data.dictionary.as_ref().unwrap();
    let st = |i: i32| d.string_table[i as usize].as_str();
    let scope = &data.resource_profiles[0].scope_profiles[0];
    assert_eq!(scope.profiles.len(), 2, "one profile per sample type");
    let default = &scope.scope.as_ref().unwrap().attributes[0];
    assert_eq!(default.key, "pprof.scope.default_sample_type");
    assert_eq!(
        default.value.as_ref().unwrap().value,
        Some(Value::StringValue("cpu".into()))
    );
    for (t, prof) in scope.profiles.iter().enumerate() {
        assert_eq!(prof.time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(prof.duration_nano, 2_000_000_000);
        assert_eq!(prof.period, 10_000_000);
        assert_eq!(prof.profile_id.len(), 16);
        let values: Vec<i64> = prof.samples.iter().map(|s| s.values[0]).collect();
        assert_eq!(values, [[3, 1], [30_000_000, 10_000_000]][t]);
        // Same stacks in the same order in both (the sibling rule relies on it).
        assert_eq!(
            prof.samples[0].stack_index,
            scope.profiles[0].samples[0].stack_index
        );
        let keys: Vec<&str> = prof
            .attribute_indices
            .iter()
            .map(|&i| st(d.attribute_table[i as usize].key_strindex))
            .collect();
        assert_eq!(
            keys,
            [
                "pprof.profile.comment",
                "pprof.profile.drop_frames",
                "pprof.profile.keep_frames",
                "pprof.profile.doc_url"
            ]
        );
    }
    // Labels: a string attribute and an integer with its unit.
    let sample = &scope.profiles[0].samples[0];
    let attrs: Vec<_> = sample
        .attribute_indices
        .iter()
        .map(|&i| &d.attribute_table[i as usize])
        .collect();
    assert_eq!(st(attrs[0].key_strindex), "worker");
    assert_eq!(
        attrs[0].value.as_ref().unwrap().value,
        Some(Value::StringValue("a".into()))
    );
    assert_eq!(st(attrs[1].key_strindex), "size");
    assert_eq!(
        attrs[1].value.as_ref().unwrap().value,
        Some(Value::IntValue(4096))
    );
    assert_eq!(st(attrs[1].unit_strindex), "bytes");
    // The inlined location keeps both lines, innermost first; mapping attributes.
    let stack = &d.stack_table[sample.stack_index as usize];
    let loc = &d.location_table[stack.location_indices[0] as usize];
    let names: Vec<&str> = loc
        .lines
        .iter()
        .map(|l| st(d.function_table[l.function_index as usize].name_strindex))
        .collect();
    assert_eq!(names, ["inner", "main"]);
    assert_eq!((loc.lines[0].line, loc.lines[0].column), (12, 3));
    let m = &d.mapping_table[loc.mapping_index as usize];
    assert_eq!(
        (m.memory_start, m.memory_limit, m.file_offset),
        (0x1000, 0x9000, 0x100)
    );
    let mkeys: Vec<&str> = m
        .attribute_indices
        .iter()
        .map(|&i| st(d.attribute_table[i as usize].key_strindex))
        .collect();
    assert_eq!(
        mkeys,
        [
            "process.executable.build_id.gnu",
            "pprof.mapping.has_functions",
            "pprof.mapping.has_filenames",
            "pprof.mapping.has_line_numbers",
            "pprof.mapping.has_inline_frames"
        ]
    );
    let folded = &d.location_table[d.stack_table[scope.profiles[0].samples[1].stack_index as usize]
        .location_indices[0] as usize];
    assert_eq!(
        st(d.attribute_table[folded.attribute_indices[0] as usize].key_strindex),
        "pprof.location.is_folded"
    );
}

#[test]
fn pprof_otlp_pprof_round_trip_keeps_what_pprof_has() {
    let p = sample_profile();
    let data = pprof_bytes_to_otlp(&p.encode_to_vec(), &PprofOptions::default()).unwrap();
    let out = otlp_to_pprof(
        data.dictionary.as_ref(),
        &data.resource_profiles,
        &ToPprofOptions::default(),
    )
    .unwrap();
    assert_eq!(
        out.siblings, 1,
        "cpu/nanoseconds is the sibling of samples/count"
    );
    assert!(out.skipped.is_empty());
    assert_eq!(out.observations, 4);
    let q = &out.profile;
    let types: Vec<(&str, &str)> = q
        .sample_type
        .iter()
        .map(|t| (s(q, t.r#type), s(q, t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(
        (q.time_nanos, q.duration_nanos, q.period),
        (p.time_nanos, p.duration_nanos, p.period)
    );
    let pt = q.period_type.unwrap();
    assert_eq!((s(q, pt.r#type), s(q, pt.unit)), ("cpu", "nanoseconds"));
    let comments: Vec<&str> = q.comment.iter().map(|&c| s(q, c)).collect();
    assert_eq!(comments, ["hello", "second comment"]);
    assert_eq!(
        (s(q, q.drop_frames), s(q, q.keep_frames), s(q, q.doc_url)),
        ("drop.*", "keep.*", "https://doc")
    );
    // Values: counts and count x period; the samples in the same order.
    let values: Vec<&[i64]> = q.sample.iter().map(|s| s.value.as_slice()).collect();
    assert_eq!(values, [&[3, 30_000_000][..], &[1, 10_000_000][..]]);
    // Labels, with the numeric label's unit.
    let l = &q.sample[0].label;
    assert_eq!((s(q, l[0].key), s(q, l[0].str)), ("worker", "a"));
    assert_eq!(
        (s(q, l[1].key), l[1].num, s(q, l[1].num_unit)),
        ("size", 4096, "bytes")
    );
    // Locations, inline lines, mapping and function fields.
    let loc = q
        .location
        .iter()
        .find(|l| l.id == q.sample[0].location_id[0])
        .unwrap();
    assert_eq!(loc.address, 0x1234);
    assert_eq!(loc.line.len(), 2);
    let f = |id: u64| q.function.iter().find(|f| f.id == id).unwrap();
    let inner = f(loc.line[0].function_id);
    assert_eq!(
        (s(q, inner.name), s(q, inner.filename), inner.start_line),
        ("inner", "main.go", 10)
    );
    assert_eq!((loc.line[0].line, loc.line[0].column), (12, 3));
    let m = q.mapping.iter().find(|m| m.id == loc.mapping_id).unwrap();
    assert_eq!(
        (m.memory_start, m.memory_limit, m.file_offset),
        (0x1000, 0x9000, 0x100)
    );
    assert_eq!((s(q, m.filename), s(q, m.build_id)), ("/bin/app", "abc123"));
    assert!(m.has_functions && m.has_filenames && m.has_line_numbers && m.has_inline_frames);
    let folded = q
        .location
        .iter()
        .find(|l| l.id == q.sample[1].location_id[0])
        .unwrap();
    assert!(folded.is_folded);
    // The gzip is a pprof again.
    let back = decode_pprof(&out.to_gzip(), &PprofOptions::default()).unwrap();
    assert_eq!(&back, q);
}

#[test]
fn bad_pprof_is_a_typed_error() {
    let opts = PprofOptions::default();
    let check = |p: PprofProfile, want: &str| {
        let e = pprof_to_otlp(&p, &opts).unwrap_err();
        assert!(e.to_string().contains(want), "{e} should say {want}");
    };
    let mut p = sample_profile();
    p.function[0].name = 99;
    check(p, "function.name: string index 99 is out of range");
    let mut p = sample_profile();
    p.sample[0].label[0].key = -1;
    check(p, "label.key: string index -1");
    let mut p = sample_profile();
    p.sample[1].location_id = vec![3];
    check(p, "location id 3 is not defined");
    let mut p = sample_profile();
    p.location[0].line[0].function_id = 5;
    check(p, "function id 5 is not defined");
    let mut p = sample_profile();
    p.location[1].mapping_id = 8;
    check(p, "mapping id 8 is not defined");
    let mut p = sample_profile();
    p.function[1].id = 1;
    check(p, "function id 1 is defined twice");
    let mut p = sample_profile();
    p.location[0].id = 0;
    check(p, "location id 0 is zero");
    let mut p = sample_profile();
    p.sample[0].value.pop();
    check(p, "sample 0 has 1 values for 2 sample types");
    let mut p = sample_profile();
    p.string_table[0] = "x".into();
    check(p, "does not start with the empty string");
    // Expansion: samples x types (+ labels) beyond the limit.
    let small = PprofOptions {
        max_expanded_items: 5,
        ..PprofOptions::default()
    };
    let e = pprof_to_otlp(&sample_profile(), &small).unwrap_err();
    assert!(
        matches!(e, PprofError::Expansion { items: 8, limit: 5 }),
        "{e}"
    );
    // Not protobuf.
    let e = pprof_bytes_to_otlp(b"\xff\xff\xff", &opts).unwrap_err();
    assert!(matches!(e, PprofError::Decode(_)), "{e}");
}

#[test]
fn inflation_is_bounded() {
    // 1 MiB of zeros gzipped is ~1 KiB: refused when the limit is below it, never inflated whole.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&vec![0u8; 1 << 20]).unwrap();
    let gz = enc.finish().unwrap();
    let opts = PprofOptions {
        max_inflated_bytes: 64 << 10,
        ..PprofOptions::default()
    };
    let e = decode_pprof(&gz, &opts).unwrap_err();
    assert!(matches!(e, PprofError::TooLarge { limit: 65536 }), "{e}");
    // Raw input over the limit is refused too.
    let e = decode_pprof(&vec![0u8; (64 << 10) + 1], &opts).unwrap_err();
    assert!(matches!(e, PprofError::TooLarge { .. }), "{e}");
    // A truncated gzip is a gzip error.
    let e = decode_pprof(&gz[..gz.len() / 2], &PprofOptions::default()).unwrap_err();
    assert!(matches!(e, PprofError::Gzip(_)), "{e}");
}

#[test]
fn otlp_to_pprof_skips_other_types_and_checks_indices() {
    let mut p = sample_profile();
    p.string_table[1] = "alloc_space".into();
    p.string_table[2] = "bytes".into();
    p.string_table[3] = "inuse_space".into();
    p.string_table[4] = "bytes".into();
    p.period_type = None;
    let data = pprof_to_otlp(&p, &PprofOptions::default()).unwrap();
    let out = otlp_to_pprof(
        data.dictionary.as_ref(),
        &data.resource_profiles,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(out.observations, 0);
    assert_eq!(out.skipped.get("alloc_space:bytes"), Some(&1));
    assert_eq!(out.skipped.get("inuse_space:bytes"), Some(&1));
    // An OTLP stack index out of range is an error naming the table.
    let p = sample_profile();
    let mut data = pprof_to_otlp(&p, &PprofOptions::default()).unwrap();
    data.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 999;
    let e = otlp_to_pprof(
        data.dictionary.as_ref(),
        &data.resource_profiles,
        &Default::default(),
    )
    .unwrap_err();
    assert!(format!("{:?}", e).contains("stack_table"), "{e:?}");
}
