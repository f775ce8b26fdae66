//! A request shaped like an independent OTLP converter's output (not profilink's): the
//! `sentry.chunk_id` and `sentry.profiler_id` marks as *profile* attributes, `service.*` and
//! `telemetry.sdk.language` on the resource, and no `sentry.platform` / `sentry.version`.
#![allow(dead_code)]

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit, Line, Link,
    Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType, any_value,
};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::secs_to_nanos;

/// The producer's chunk id (valid).
pub const CHUNK_ID: &str = "5d8f3c2a1b4e4f6a9c0d7e8f1a2b3c4d";
/// The producer's profiler id, as it writes it (upper case with dashes: valid, normalized).
pub const PROFILER_ID: &str = "0A1B2C3D-4E5F-4071-8293-A4B5C6D7E8F9";
/// [`PROFILER_ID`] as Sentry wants it.
pub const PROFILER_ID_NORMALIZED: &str = "0a1b2c3d4e5f40718293a4b5c6d7e8f9";
/// The resource's `service.version` (the chunks' `release`).
pub const RELEASE: &str = "checkout@1.2.3";

/// One observation: (thread id, Unix ns, function names leaf first).
pub type Obs = (String, u64, Vec<String>);

fn text(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.into())),
    }
}

fn int(i: i64) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::IntValue(i)),
    }
}

/// The request (two threads, 20 samples each, 10 ms apart from `t0`) and its observations.
pub fn other_producer_request(t0: u64) -> (ExportProfilesServiceRequest, Vec<Obs>) {
    let strings: Vec<String> = [
        "",
        "main",
        "/app/main.py",
        "work",
        "/app/work.py",
        "thread.id",
        "thread.name",
        "MainThread",
        "worker",
        "samples",
        "count",
        "cpu",
        "nanoseconds",
        "sentry.chunk_id",
        "sentry.profiler_id",
        "profile.frame.type",
        "cpython",
    ]
    .map(String::from)
    .to_vec();
    let s = |x: &str| strings.iter().position(|y| y == x).unwrap() as i32;
    let attr = |k: &str, v: AnyValue| KeyValueAndUnit {
        key_strindex: s(k),
        value: Some(v),
        unit_strindex: 0,
    };
    let attribute_table = vec![
        KeyValueAndUnit::default(),
        attr("thread.id", int(7)),
        attr("thread.name", text("MainThread")),
        attr("thread.id", int(8)),
        attr("thread.name", text("worker")),
        attr("sentry.chunk_id", text(CHUNK_ID)),
        attr("sentry.profiler_id", text(PROFILER_ID)),
        attr("profile.frame.type", text("cpython")),
    ];
    let func = |name: &str, file: &str| Function {
        name_strindex: s(name),
        system_name_strindex: 0,
        filename_strindex: s(file),
        start_line: 0,
    };
    let loc = |f: i32, line: i64| Location {
        mapping_index: 0,
        address: 0,
        lines: vec![Line {
            function_index: f,
            line,
            column: 0,
        }],
        attribute_indices: vec![7],
    };
    let dictionary = ProfilesDictionary {
        mapping_table: vec![Mapping::default()],
        location_table: vec![Location::default(), loc(1, 10), loc(2, 20)],
        function_table: vec![
            Function::default(),
            func("main", "/app/main.py"),
            func("work", "/app/work.py"),
        ],
        link_table: vec![Link::default()],
        string_table: strings.clone(),
        attribute_table,
        stack_table: vec![
            Stack::default(),
            Stack {
                location_indices: vec![2, 1],
            },
            Stack {
                location_indices: vec![1],
            },
        ],
    };
    let times =
        |offset: u64| -> Vec<u64> { (0..20).map(|i| t0 + offset + i * 10_000_000).collect() };
    let samples = vec![
        Sample {
            stack_index: 1,
            attribute_indices: vec![1, 2],
            link_index: 0,
            values: vec![],
            timestamps_unix_nano: times(0),
        },
        Sample {
            stack_index: 2,
            attribute_indices: vec![3, 4],
            link_index: 0,
            values: vec![],
            timestamps_unix_nano: times(5_000_000),
        },
    ];
    let mut observations = Vec::new();
    for &ts in &samples[0].timestamps_unix_nano {
        observations.push(("7".into(), ts, vec!["work".into(), "main".into()]));
    }
    for &ts in &samples[1].timestamps_unix_nano {
        observations.push(("8".into(), ts, vec!["main".into()]));
    }
    let profile = Profile {
        sample_type: Some(ValueType {
            type_strindex: s("samples"),
            unit_strindex: s("count"),
        }),
        samples,
        time_unix_nano: t0,
        duration_nano: 1_000_000_000,
        period_type: Some(ValueType {
            type_strindex: s("cpu"),
            unit_strindex: s("nanoseconds"),
        }),
        period: 10_000_000,
        attribute_indices: vec![5, 6],
        ..Default::default()
    };
    let kv = |k: &str, v: AnyValue| KeyValue {
        key: k.into(),
        value: Some(v),
        key_strindex: 0,
    };
    let resource = ResourceProfiles {
        resource: Some(Resource {
            attributes: vec![
                kv("service.name", text("checkout")),
                kv("service.version", text(RELEASE)),
                kv("deployment.environment.name", text("prod")),
                kv("telemetry.sdk.language", text("python")),
                kv("process.pid", int(4242)),
            ],
            ..Default::default()
        }),
        scope_profiles: vec![ScopeProfiles {
            scope: None,
            profiles: vec![profile],
            schema_url: String::new(),
        }],
        schema_url: String::new(),
    };
    let request = ExportProfilesServiceRequest {
        resource_profiles: vec![resource],
        dictionary: Some(dictionary),
    };
    (request, observations)
}

/// The observations of chunks, in the same shape.
pub fn chunk_observations(chunks: &[ProfileChunk]) -> Vec<Obs> {
    let mut out = Vec::new();
    for c in chunks {
        for s in &c.profile.samples {
            let stack = c.profile.stacks[s.stack_id]
                .iter()
                .map(|&f| {
                    c.profile.frames[f]
                        .function
                        .as_deref()
                        .unwrap_or("")
                        .to_owned()
                })
                .collect();
            out.push((
                s.thread_id.to_string(),
                secs_to_nanos(s.timestamp).unwrap(),
                stack,
            ));
        }
    }
    out
}

/// Asserts two observation multisets are equal (timestamps to the microsecond: a chunk's JSON
/// float seconds may move by an ulp).
pub fn assert_same(mut got: Vec<Obs>, mut want: Vec<Obs>) {
    assert_eq!(got.len(), want.len(), "observation counts");
    got.sort();
    want.sort();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, &g.2), (&w.0, &w.2));
        assert!(g.1.abs_diff(w.1) <= 1_000, "{} vs {}", g.1, w.1);
    }
}

/// The checks every emitted chunk of this request must pass: valid ids, the resource's
/// metadata, Sentry's platform, version 2, and no validator error.
pub fn assert_valid_chunk(c: &ProfileChunk) {
    assert_eq!(c.version, "2");
    assert_eq!(c.platform, "python");
    assert_eq!(c.profiler_id, PROFILER_ID_NORMALIZED);
    assert_eq!(c.release.as_deref(), Some(RELEASE));
    assert_eq!(c.environment.as_deref(), Some("prod"));
    let errors: Vec<_> = profilink_proto::validate::validate_chunk(c)
        .into_iter()
        .filter(|f| f.is_error())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// The first chunk of the real sentry-python fixture `trace-chunk-00.envelope` (read from
/// `fixtures`), and an invalid copy of it under another id, broken by `spoil`.
pub fn fixture_chunk_and_invalid_copy(
    fixtures: &std::path::Path,
    spoil: impl FnOnce(&mut ProfileChunk),
) -> (ProfileChunk, ProfileChunk) {
    let path = fixtures.join("sentry/python/trace-chunk-00.envelope");
    let env = profilink_proto::sentry::Envelope::parse(&std::fs::read(path).unwrap()).unwrap();
    let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
    let good = ProfileChunk::from_json(&item.payload).unwrap();
    let mut bad = good.clone();
    bad.chunk_id = "0123456789abcdef0123456789abcdef".into();
    spoil(&mut bad);
    (good, bad)
}
