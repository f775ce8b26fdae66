//! Validators: real fixtures are clean of errors, one hand-made invalid input per rule, and no
//! panics on random or truncated input.

use profilink_proto::otlp::{
    AnyValue, ArrayValue, ExportProfilesServiceRequest, Function, KeyValue, KeyValueAndUnit,
    KeyValueList, Line, Link, Location, Mapping, Profile, ProfilesDictionary, Resource,
    ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType, any_value,
};
use profilink_proto::sentry::{
    ClientSdk, DebugImage, DebugMeta, Envelope, EnvelopeItem, Frame, Measurement, MeasurementValue,
    ProfileChunk, ProfileData, Transaction,
};
use profilink_proto::validate::{
    Finding, MAX_CHUNK_BYTES, MAX_FINDINGS_PER_RULE, Severity, has_errors, has_warnings,
    validate_chunk, validate_chunk_json, validate_dictionary, validate_envelope, validate_otlp,
    validate_profile, validate_v1_profile_json,
};
use proptest::prelude::*;
use prost::Message;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use Severity::{Error, Warning};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");

// ---------------------------------------------------------------------------------------------
// helpers

fn fixture_files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(format!("{FIXTURES}/{dir}"))
        .unwrap_or_else(|e| panic!("fixture dir {dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.{ext} fixtures in {dir}");
    files
}

fn show(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| format!("  {f}\n"))
        .collect::<String>()
}

/// Asserts a finding of `rule` at `path` with `severity` is present.
fn expect(findings: &[Finding], severity: Severity, rule: &str, path: &str) {
    assert!(
        findings
            .iter()
            .any(|f| f.rule == rule && f.path == path && f.severity == severity),
        "expected {severity}[{rule}] at {path}, got:\n{}",
        show(findings)
    );
}

fn assert_clean(findings: &[Finding]) {
    assert!(
        findings.is_empty(),
        "expected no findings:\n{}",
        show(findings)
    );
}

fn rule_set(findings: &[Finding]) -> BTreeSet<(Severity, &'static str)> {
    findings.iter().map(|f| (f.severity, f.rule)).collect()
}

/// `cases!(base, validate; Severity "rule" "path" => |v| mutation; ...)`: validating `base()`
/// finds nothing; each mutation of a fresh `base()` yields that finding (among others).
/// (A macro so that each case stays on one line.)
macro_rules! cases {
    ($base:expr, $validate:expr; $($sev:ident $rule:literal $path:literal => |$v:ident| $mutate:expr;)+) => {{
        let validate = $validate;
        assert_clean(&validate(&$base()));
        $({
            let mut value = $base();
            let $v = &mut value;
            $mutate;
            expect(&validate(&value), $sev, $rule, $path);
        })+
    }};
}

// ---------------------------------------------------------------------------------------------
// OTLP builders

fn kvu(key: i32, value: any_value::Value) -> KeyValueAndUnit {
    KeyValueAndUnit {
        key_strindex: key,
        value: Some(AnyValue { value: Some(value) }),
        unit_strindex: 0,
    }
}

fn strindex(i: i32) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValueStrindex(i)),
    }
}

/// A small valid dictionary: one mapping, location, function, link, stack and two attributes
/// with the same key (`thread.id`).
fn dict() -> ProfilesDictionary {
    let strings = ["", "samples", "count", "main", "thread.id", "/bin/app"];
    ProfilesDictionary {
        string_table: strings.iter().map(|s| s.to_string()).collect(),
        mapping_table: vec![
            Mapping::default(),
            Mapping {
                memory_start: 0x1000,
                memory_limit: 0x2000,
                filename_strindex: 5,
                ..Default::default()
            },
        ],
        location_table: vec![
            Location::default(),
            Location {
                mapping_index: 1,
                address: 0x1010,
                lines: vec![Line {
                    function_index: 1,
                    line: 3,
                    column: 0,
                }],
                attribute_indices: vec![],
            },
        ],
        function_table: vec![
            Function::default(),
            Function {
                name_strindex: 3,
                ..Default::default()
            },
        ],
        link_table: vec![
            Link::default(),
            Link {
                trace_id: vec![1; 16],
                span_id: vec![2; 8],
            },
        ],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            kvu(4, any_value::Value::IntValue(7)),
            kvu(4, any_value::Value::IntValue(8)),
        ],
        stack_table: vec![
            Stack::default(),
            Stack {
                location_indices: vec![1],
            },
        ],
    }
}

/// A valid profile for [`dict`]: window [1000, 1100), one sample with two timestamps.
fn profile() -> Profile {
    Profile {
        sample_type: Some(ValueType {
            type_strindex: 1,
            unit_strindex: 2,
        }),
        time_unix_nano: 1_000,
        duration_nano: 100,
        samples: vec![Sample {
            stack_index: 1,
            attribute_indices: vec![1],
            link_index: 1,
            values: vec![],
            timestamps_unix_nano: vec![1_010, 1_020],
        }],
        ..Default::default()
    }
}

fn check_dict(d: &ProfilesDictionary) -> Vec<Finding> {
    validate_dictionary(Some(d))
}

fn check_profile(p: &Profile) -> Vec<Finding> {
    validate_profile(Some(&dict()), p, "p")
}

fn request(d: Option<ProfilesDictionary>, profiles: Vec<Profile>) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        dictionary: d,
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn check_request(r: &ExportProfilesServiceRequest) -> Vec<Finding> {
    validate_otlp(r.dictionary.as_ref(), &r.resource_profiles)
}

// ---------------------------------------------------------------------------------------------
// Sentry builders

fn frame(name: &str) -> Frame {
    Frame {
        function: Some(name.into()),
        instruction_addr: Some("0x1000".into()),
        in_app: Some(true),
        ..Default::default()
    }
}

fn chunk_sample(timestamp: f64, thread: &str) -> profilink_proto::sentry::Sample {
    profilink_proto::sentry::Sample {
        timestamp,
        stack_id: 0,
        thread_id: thread.into(),
    }
}

/// A valid chunk: four samples of thread "1" over 30 ms, one two-frame stack.
fn chunk() -> ProfileChunk {
    ProfileChunk {
        chunk_id: "0123456789abcdef0123456789abcdef".into(),
        profiler_id: "fedcba9876543210fedcba9876543210".into(),
        platform: "python".into(),
        version: "2".into(),
        client_sdk: Some(ClientSdk {
            name: "sentry.python".into(),
            version: "2.75.0".into(),
        }),
        profile: ProfileData {
            samples: (0..4)
                .map(|i| chunk_sample(1_795_317_063.0 + f64::from(i) * 0.01, "1"))
                .collect(),
            stacks: vec![vec![0, 1]],
            frames: vec![frame("leaf").into(), frame("root").into()],
            ..Default::default()
        },
        ..Default::default()
    }
}

/// One measurement series `cpu` with one value.
fn measurements(unit: &str, timestamp: f64, value: f64) -> BTreeMap<String, Measurement> {
    let m = Measurement {
        unit: unit.into(),
        values: vec![MeasurementValue { timestamp, value }],
    };
    [("cpu".to_string(), m)].into()
}

fn image(image_type: &str, addr: &str) -> DebugMeta {
    DebugMeta {
        images: vec![DebugImage {
            image_type: image_type.into(),
            image_addr: Some(addr.into()),
            ..Default::default()
        }],
    }
}

/// A synthetic slot base (profilink's image space starts at 2^56).
const SLOT: u64 = (1 << 56) + (7 << 32);

/// `debug_meta` with `symbolic` images of the given (address, size).
fn sized_images(ranges: &[(u64, u64)]) -> DebugMeta {
    DebugMeta {
        images: ranges
            .iter()
            .map(|&(addr, size)| DebugImage {
                image_type: "symbolic".into(),
                image_addr: Some(format!("{addr:#x}")),
                image_size: Some(size),
                ..Default::default()
            })
            .collect(),
    }
}

/// The valid chunk as a JSON value.
fn chunk_value() -> Value {
    serde_json::from_slice(&chunk().to_json()).unwrap()
}

fn check_chunk_value(v: &Value) -> Vec<Finding> {
    validate_chunk_json(&serde_json::to_vec(v).unwrap())
}

/// A valid V1 profile as a JSON value.
fn v1_value() -> Value {
    json!({
        "version": "1",
        "platform": "python",
        "timestamp": "2026-11-22T03:49:44.314Z",
        "profile": {
            "samples": [
                {"elapsed_since_start_ns": "0", "thread_id": "1", "stack_id": 0},
                {"elapsed_since_start_ns": 10_000_000, "thread_id": 1, "stack_id": 0}
            ],
            "stacks": [[0, 1]],
            "frames": [{"function": "leaf"}, {"function": "root"}]
        },
        "transactions": [{"id": "fc7a68b87d6a4c06990e6bfb3408bfa5", "name": "t",
            "trace_id": "289169fa61f4432db34ac1928e81629b", "active_thread_id": "1",
            "relative_start_ns": "0", "relative_end_ns": "20000000"}]
    })
}

fn check_v1_value(v: &Value) -> Vec<Finding> {
    validate_v1_profile_json(&serde_json::to_vec(v).unwrap())
}

fn envelope(items: Vec<EnvelopeItem>) -> Envelope {
    Envelope {
        items,
        ..Default::default()
    }
}

fn chunk_item() -> EnvelopeItem {
    EnvelopeItem::profile_chunk(&chunk())
}

// ---------------------------------------------------------------------------------------------
// (1) fixtures

#[test]
fn otlp_fixtures_have_no_errors() {
    for path in fixture_files("otlp", "pb") {
        let bytes = std::fs::read(&path).unwrap();
        let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
        let findings = check_request(&req);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        assert!(!has_errors(&findings), "{name}:\n{}", show(&findings));
        if name.starts_with("ebpf-") {
            // What the eBPF profiler (through pdata) really writes.
            let expected: BTreeSet<_> = [
                (Warning, "attribute-table-zero-empty-value"),
                (Warning, "timestamp-at-window-end"),
            ]
            .into();
            assert_eq!(
                rule_set(&findings),
                expected,
                "{name}:\n{}",
                show(&findings)
            );
            expect(
                &findings,
                Warning,
                "attribute-table-zero-empty-value",
                "dictionary.attribute_table[0].value",
            );
        } else {
            assert!(!has_warnings(&findings), "{name}:\n{}", show(&findings));
        }
    }
}

#[test]
fn sentry_fixture_envelopes_have_no_errors() {
    for dir in ["sentry/python", "sentry/python-v1"] {
        for path in fixture_files(dir, "envelope") {
            let bytes = std::fs::read(&path).unwrap();
            let env = Envelope::parse(&bytes).unwrap();
            let findings = validate_envelope(&env);
            assert!(
                !has_errors(&findings),
                "{}:\n{}",
                path.display(),
                show(&findings)
            );
        }
    }
}

#[test]
fn sentry_fixture_chunks_validate_as_json_too() {
    for path in fixture_files("sentry/python", "envelope") {
        let env = Envelope::parse(&std::fs::read(&path).unwrap()).unwrap();
        for item in env.profile_chunks() {
            let findings = validate_chunk_json(&item.payload);
            assert!(!has_errors(&findings), "{}", show(&findings));
            let parsed = ProfileChunk::from_json(&item.payload).unwrap();
            assert_eq!(validate_chunk(&parsed), findings);
        }
    }
}

#[test]
fn every_fixture_transaction_parses() {
    let text =
        std::fs::read_to_string(format!("{FIXTURES}/sentry/python/trace-transactions.jsonl"))
            .unwrap();
    let mut n = 0;
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        Transaction::from_json(line.as_bytes()).unwrap_or_else(|e| panic!("line {i}: {e}"));
        n += 1;
    }
    assert!(n > 0);
}

// ---------------------------------------------------------------------------------------------
// (2) OTLP rules

fn array_value(i: i32) -> Option<AnyValue> {
    let values = vec![AnyValue::default(), strindex(i)];
    Some(AnyValue {
        value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
    })
}

fn kvlist_value(key_strindex: i32) -> Option<AnyValue> {
    let kv = KeyValue {
        key_strindex,
        ..Default::default()
    };
    Some(AnyValue {
        value: Some(any_value::Value::KvlistValue(KeyValueList {
            values: vec![kv],
        })),
    })
}

#[test]
fn dictionary_rules() {
    cases! { dict, check_dict;
        Warning "string-table-zero" "dictionary.string_table[0]" => |d| d.string_table[0] = "x".into();
        Warning "table-zero-missing" "dictionary.string_table" => |d| d.string_table.clear();
        Warning "table-zero" "dictionary.mapping_table[0]" => |d| d.mapping_table[0].memory_limit = 1;
        Warning "table-zero" "dictionary.location_table[0]" => |d| d.location_table[0].address = 1;
        Warning "table-zero" "dictionary.function_table[0]" => |d| d.function_table[0].start_line = 1;
        Warning "table-zero" "dictionary.link_table[0]" => |d| d.link_table[0].span_id = vec![1; 8];
        Warning "table-zero" "dictionary.stack_table[0]" => |d| d.stack_table[0].location_indices = vec![1];
        Warning "table-zero" "dictionary.attribute_table[0]" => |d| d.attribute_table[0].key_strindex = 4;
        Warning "table-zero-missing" "dictionary.function_table" => |d| d.function_table.clear();
        Warning "attribute-table-zero-empty-value" "dictionary.attribute_table[0].value" => |d| d.attribute_table[0].value = Some(AnyValue { value: None });
        Error "index-out-of-range" "dictionary.location_table[1].mapping_index" => |d| d.location_table[1].mapping_index = 2;
        Error "index-out-of-range" "dictionary.location_table[1].mapping_index" => |d| d.location_table[1].mapping_index = -1;
        Error "index-out-of-range" "dictionary.location_table[1].lines[0].function_index" => |d| d.location_table[1].lines[0].function_index = 2;
        Error "index-out-of-range" "dictionary.location_table[1].attribute_indices[0]" => |d| d.location_table[1].attribute_indices = vec![3];
        Error "index-out-of-range" "dictionary.function_table[1].name_strindex" => |d| d.function_table[1].name_strindex = 6;
        Error "index-out-of-range" "dictionary.function_table[1].system_name_strindex" => |d| d.function_table[1].system_name_strindex = 99;
        Error "index-out-of-range" "dictionary.function_table[1].filename_strindex" => |d| d.function_table[1].filename_strindex = -5;
        Error "index-out-of-range" "dictionary.mapping_table[1].filename_strindex" => |d| d.mapping_table[1].filename_strindex = 6;
        Error "index-out-of-range" "dictionary.mapping_table[1].attribute_indices[0]" => |d| d.mapping_table[1].attribute_indices = vec![-1];
        Error "index-out-of-range" "dictionary.attribute_table[1].key_strindex" => |d| d.attribute_table[1].key_strindex = 6;
        Error "index-out-of-range" "dictionary.attribute_table[1].unit_strindex" => |d| d.attribute_table[1].unit_strindex = 42;
        Error "index-out-of-range" "dictionary.attribute_table[1].value.string_value_strindex" => |d| d.attribute_table[1].value = Some(strindex(77));
        Error "index-out-of-range" "dictionary.attribute_table[1].value.array_value.values[1].string_value_strindex" => |d| d.attribute_table[1].value = array_value(9);
        Error "index-out-of-range" "dictionary.attribute_table[1].value.kvlist_value.values[0].key_strindex" => |d| d.attribute_table[1].value = kvlist_value(50);
        Error "index-out-of-range" "dictionary.stack_table[1].location_indices[1]" => |d| d.stack_table[1].location_indices = vec![1, 5];
        Error "duplicate-attribute-key" "dictionary.location_table[1].attribute_indices[1]" => |d| d.location_table[1].attribute_indices = vec![1, 2];
        Error "duplicate-attribute-key" "dictionary.mapping_table[1].attribute_indices[1]" => |d| d.mapping_table[1].attribute_indices = vec![2, 1];
        Error "link-id-length" "dictionary.link_table[1].trace_id" => |d| d.link_table[1].trace_id = vec![1; 15];
        Error "link-id-length" "dictionary.link_table[1].span_id" => |d| d.link_table[1].span_id = vec![1; 16];
        Error "mapping-range" "dictionary.mapping_table[1].memory_start" => |d| d.mapping_table[1].memory_start = 0x3000;
        Warning "negative-line-number" "dictionary.location_table[1].lines[0].column" => |d| d.location_table[1].lines[0].column = -1;
    }
}

#[test]
fn zero_link_may_have_zero_bytes_and_empty_dictionary_is_fine() {
    let mut d = dict();
    d.link_table[0] = Link {
        trace_id: vec![0; 16],
        span_id: vec![0; 8],
    };
    assert_clean(&check_dict(&d));
    assert_clean(&validate_dictionary(None));
    assert_clean(&validate_dictionary(Some(&ProfilesDictionary::default())));
    // No dictionary and a profile without samples or sample type: only the warning.
    let findings = check_request(&request(None, vec![Profile::default()]));
    assert_eq!(
        rule_set(&findings),
        [(Warning, "sample-type-missing")].into()
    );
}

#[test]
fn referenced_empty_tables_are_warned_once() {
    let findings = check_request(&request(None, vec![profile(), profile()]));
    for table in ["stack_table", "link_table", "attribute_table"] {
        let path = format!("dictionary.{table}");
        expect(&findings, Warning, "table-zero-missing", &path);
        assert_eq!(findings.iter().filter(|f| f.path == path).count(), 1);
    }
    expect(
        &findings,
        Warning,
        "table-zero-missing",
        "dictionary.string_table",
    );
}

#[test]
fn profile_rules() {
    cases! { profile, check_profile;
        Error "index-out-of-range" "p.samples[0].stack_index" => |p| p.samples[0].stack_index = 2;
        Error "index-out-of-range" "p.samples[0].stack_index" => |p| p.samples[0].stack_index = -1;
        Error "index-out-of-range" "p.samples[0].link_index" => |p| p.samples[0].link_index = 2;
        Error "index-out-of-range" "p.samples[0].attribute_indices[1]" => |p| p.samples[0].attribute_indices = vec![1, 5];
        Error "index-out-of-range" "p.attribute_indices[0]" => |p| p.attribute_indices = vec![7];
        Error "index-out-of-range" "p.sample_type.type_strindex" => |p| p.sample_type = Some(ValueType { type_strindex: 40, unit_strindex: 0 });
        Error "index-out-of-range" "p.period_type.unit_strindex" => |p| p.period_type = Some(ValueType { type_strindex: 0, unit_strindex: -3 });
        Error "duplicate-attribute-key" "p.samples[0].attribute_indices[1]" => |p| p.samples[0].attribute_indices = vec![1, 2];
        Error "duplicate-attribute-key" "p.attribute_indices[1]" => |p| p.attribute_indices = vec![2, 1];
        Warning "sample-type-missing" "p.sample_type" => |p| p.sample_type = None;
        Error "sample-empty" "p.samples[0]" => |p| p.samples[0].timestamps_unix_nano.clear();
        Error "sample-length-mismatch" "p.samples[0].values" => |p| p.samples[0].values = vec![1];
        Warning "timestamp-at-window-end" "p.samples[0].timestamps_unix_nano[1]" => |p| p.samples[0].timestamps_unix_nano[1] = 1_100;
        Warning "timestamp-outside-profile" "p.samples[0].timestamps_unix_nano[0]" => |p| p.samples[0].timestamps_unix_nano[0] = 999;
        Warning "timestamp-outside-profile" "p.samples[0].timestamps_unix_nano[1]" => |p| p.samples[0].timestamps_unix_nano[1] = 5_000;
        Error "profile-id-length" "p.profile_id" => |p| p.profile_id = vec![1; 3];
    }
}

#[test]
fn profile_edge_cases_that_are_fine() {
    let mut p = profile();
    p.samples[0].stack_index = 0; // the empty stack
    p.samples[0].values = vec![5, 6];
    p.duration_nano = 0; // no window to check
    p.samples[0].timestamps_unix_nano = vec![1, u64::MAX];
    assert_clean(&check_profile(&p));
    let mut p = profile();
    p.samples[0].values = vec![3];
    p.samples[0].timestamps_unix_nano.clear();
    assert_clean(&check_profile(&p));
}

#[test]
fn one_timestamp_finding_per_sample_and_capped_per_profile() {
    let mut p = profile();
    p.samples[0].timestamps_unix_nano = vec![1_100, 1, 2, 3];
    let findings = check_profile(&p);
    assert_eq!(findings.len(), 1, "{}", show(&findings));
    let path = "p.samples[0].timestamps_unix_nano[1]";
    expect(&findings, Warning, "timestamp-outside-profile", path);

    p.samples = vec![p.samples[0].clone(); 1000];
    let findings = check_profile(&p);
    assert_eq!(
        findings.len(),
        MAX_FINDINGS_PER_RULE + 1,
        "{}",
        show(&findings)
    );
    let summary = findings.last().unwrap();
    assert_eq!(summary.rule, "timestamp-outside-profile");
    assert_eq!(summary.path, "p");
    assert!(summary.message.contains("980 more"), "{summary}");
}

#[test]
fn otlp_request_paths() {
    let mut r = request(Some(dict()), vec![profile(), profile()]);
    r.resource_profiles[0].scope_profiles[0].profiles[1].samples[0].stack_index = 9;
    let by_name = KeyValue {
        key: "service.name".into(),
        ..Default::default()
    };
    let by_index = KeyValue {
        key_strindex: 99,
        value: Some(strindex(3)),
        ..Default::default()
    };
    r.resource_profiles[0].resource = Some(Resource {
        attributes: vec![by_name, by_index],
        ..Default::default()
    });
    let findings = check_request(&r);
    let sample = "resource_profiles[0].scope_profiles[0].profiles[1].samples[0].stack_index";
    expect(&findings, Error, "index-out-of-range", sample);
    let key = "resource_profiles[0].resource.attributes[1].key_strindex";
    expect(&findings, Error, "index-out-of-range", key);
    assert_eq!(findings.len(), 2, "{}", show(&findings));
    let f = &findings[0];
    let shown = format!("error[index-out-of-range] {}: {}", f.path, f.message);
    assert_eq!(f.to_string(), shown);
}

// ---------------------------------------------------------------------------------------------
// (2) Sentry chunk rules

#[test]
fn chunk_rules() {
    cases! { chunk, validate_chunk;
        Error "chunk-version" "version" => |c| c.version = String::new();
        Error "chunk-version" "version" => |c| c.version = "1".into();
        Error "chunk-id-format" "chunk_id" => |c| c.chunk_id = "xyz".into();
        Warning "id-not-canonical" "chunk_id" => |c| c.chunk_id = c.chunk_id.to_uppercase();
        Error "profiler-id-format" "profiler_id" => |c| c.profiler_id = String::new();
        Error "client-sdk" "client_sdk" => |c| c.client_sdk = None;
        Error "client-sdk" "client_sdk.version" => |c| c.client_sdk.as_mut().unwrap().version.clear();
        Error "platform" "platform" => |c| c.platform.clear();
        Error "thread-id-type" "profile.samples[0].thread_id" => |c| c.profile.samples[0].thread_id.clear();
        Warning "thread-id-not-decimal" "profile.samples[0].thread_id" => |c| c.profile.samples.iter_mut().for_each(|s| s.thread_id = "main".into());
        Error "stack-id-range" "profile.samples[1].stack_id" => |c| c.profile.samples[1].stack_id = 5;
        Error "frame-index-range" "profile.stacks[0][2]" => |c| c.profile.stacks[0].push(7);
        Error "frame-index-range" "profile.stacks[1][0]" => |c| c.profile.stacks.push(vec![9]);
        Error "timestamp-not-finite" "profile.samples[2].timestamp" => |c| c.profile.samples[2].timestamp = f64::NAN;
        Error "chunk-duration" "profile.samples" => |c| c.profile.samples[3].timestamp += 66.5;
        Warning "thread-too-few-samples" "profile.samples[4]" => |c| c.profile.samples.push(chunk_sample(1_795_317_063.0, "2"));
        Error "no-samples" "profile.samples" => |c| c.profile.stacks[0].clear();
        Error "no-samples" "profile.samples" => |c| c.profile.samples.clear();
        Error "instruction-addr-format" "profile.frames[1].instruction_addr" => |c| std::sync::Arc::make_mut(&mut c.profile.frames[1]).instruction_addr = Some("1a".into());
        Error "debug-image-type" "debug_meta.images[0].type" => |c| c.debug_meta = Some(image("elf", "0x1000"));
        Error "image-addr-format" "debug_meta.images[0].image_addr" => |c| c.debug_meta = Some(image("symbolic", "nope"));
        Warning "debug-image-overlap" "debug_meta.images[1]" => |c| c.debug_meta = Some(sized_images(&[(0x1000, 0x1000), (0x1800, 0x100)]));
        Warning "instruction-addr-outside-image" "profile.frames[1].instruction_addr" => |c| {
            c.debug_meta = Some(sized_images(&[(SLOT, 0x1000)]));
            std::sync::Arc::make_mut(&mut c.profile.frames[0]).instruction_addr = Some(format!("{:#x}", SLOT + 0x10).into());
            std::sync::Arc::make_mut(&mut c.profile.frames[1]).instruction_addr = Some(format!("{:#x}", SLOT + 0x2000).into());
        };
        Error "measurement-unit" "measurements.cpu.unit" => |c| c.measurements = measurements("millisecond", 1.0, 1.0);
        Error "measurement-unit" "measurements.cpu.unit" => |c| c.measurements = measurements("", 1.0, 1.0);
        Error "timestamp-not-finite" "measurements.cpu.values[0].timestamp" => |c| c.measurements = measurements("percent", f64::INFINITY, 1.0);
        Error "measurement-value-not-finite" "measurements.cpu.values[0].value" => |c| c.measurements = measurements("percent", 1.0, f64::NAN);
    }
}

#[test]
fn chunk_edge_cases() {
    // A valid chunk with measurements, images, a decimal address and a 66 s span.
    let mut c = chunk();
    c.measurements = measurements("percent", 1.0, 2.0);
    c.debug_meta = Some(image("symbolic", "0x7f00"));
    std::sync::Arc::make_mut(&mut c.profile.frames[0]).instruction_addr = Some("4096".into());
    c.profile.samples[3].timestamp = c.profile.samples[0].timestamp + 66.0;
    assert_clean(&validate_chunk(&c));
    // Adjacent images, and synthetic addresses inside their image, are fine; so are frames
    // outside the synthetic space that no image holds.
    let mut ok = chunk();
    ok.debug_meta = Some(sized_images(&[(SLOT, 0x1000), (SLOT + 0x1000, 0x10)]));
    std::sync::Arc::make_mut(&mut ok.profile.frames[0]).instruction_addr =
        Some(format!("{:#x}", SLOT + 0x1005).into());
    assert_clean(&validate_chunk(&ok));
    // The elf message says why.
    c.debug_meta = Some(image("elf", "0x1"));
    assert!(validate_chunk(&c)[0].message.contains("elf"));
    // A dropped thread's samples do not count for the duration.
    let mut c = chunk();
    c.profile.samples.push(chunk_sample(1_795_317_963.0, "2"));
    let findings = validate_chunk(&c);
    assert_eq!(
        rule_set(&findings),
        [(Warning, "thread-too-few-samples")].into()
    );
}

#[test]
fn chunk_json_rules() {
    cases! { chunk_value, check_chunk_value;
        Error "json-parse" "profile.samples[0].thread_id" => |v| v["profile"]["samples"][0]["thread_id"] = json!(5);
        Error "json-parse" "version" => |v| v["version"] = json!(2);
        Error "json-parse" "profile.frames[0].lineno" => |v| v["profile"]["frames"][0]["lineno"] = json!(-1);
        Error "json-shape" "debug_meta.images" => |v| v["debug_meta"] = json!({});
        Error "json-shape" "measurements" => |v| v["measurements"] = Value::Null;
        Error "json-shape" "profile.samples" => |v| v["profile"]["samples"] = Value::Null;
        Error "json-shape" "profile.frames" => |v| v["profile"].as_object_mut().unwrap().remove("frames");
    }
    let mut v = chunk_value();
    v["profile"]["samples"][0]["thread_id"] = json!(5);
    assert_eq!(
        check_chunk_value(&v).len(),
        1,
        "an integer thread id is one finding"
    );
    expect(
        &validate_chunk_json(b"{\"chunk_id\": "),
        Error,
        "json-parse",
        "chunk_id",
    );
    expect(&validate_chunk_json(b"5"), Error, "json-parse", ".");

    let mut big = vec![b' '; MAX_CHUNK_BYTES];
    big.extend_from_slice(&chunk().to_json());
    let findings = validate_chunk_json(&big);
    assert_eq!(rule_set(&findings), [(Error, "chunk-size")].into());
    expect(&findings, Error, "chunk-size", ".");
}

#[test]
fn v1_rules() {
    cases! { v1_value, check_v1_value;
        Error "no-samples" "profile.samples" => |v| v["profile"]["samples"] = json!([]);
        Error "stack-id-range" "profile.samples[1].stack_id" => |v| v["profile"]["samples"][1]["stack_id"] = json!(3);
        Error "frame-index-range" "profile.stacks[0][1]" => |v| v["profile"]["stacks"] = json!([[0, 4]]);
        Error "thread-id-type" "profile.samples[0].thread_id" => |v| v["profile"]["samples"][0]["thread_id"] = json!("main");
        Error "json-parse" "profile.samples[0].elapsed_since_start_ns" => |v| v["profile"]["samples"][0]["elapsed_since_start_ns"] = json!("x");
        Error "platform" "platform" => |v| v["platform"] = json!("");
        Error "instruction-addr-format" "profile.frames[0].instruction_addr" => |v| v["profile"]["frames"][0]["instruction_addr"] = json!("0xZZ");
    }
}

// ---------------------------------------------------------------------------------------------
// (2) envelope rules

fn check_items(items: Vec<EnvelopeItem>) -> Vec<Finding> {
    validate_envelope(&envelope(items))
}

#[test]
fn envelope_rules() {
    let v1 = EnvelopeItem::new("profile", serde_json::to_vec(&v1_value()).unwrap());
    assert_clean(&check_items(vec![chunk_item()]));
    assert_clean(&check_items(vec![v1.clone()]));
    let two = check_items(vec![chunk_item(), chunk_item()]);
    expect(&two, Error, "envelope-profile-items", "items[1]");
    let mixed = check_items(vec![v1, chunk_item()]);
    expect(&mixed, Error, "envelope-profile-items", "items[1]");

    let mut item = chunk_item();
    item.headers.insert("platform".into(), json!("rust"));
    let findings = check_items(vec![item.clone()]);
    expect(
        &findings,
        Error,
        "item-platform-mismatch",
        "items[0].headers.platform",
    );
    item.headers.remove("platform");
    let findings = check_items(vec![item.clone()]);
    assert_eq!(
        rule_set(&findings),
        [(Warning, "item-platform-missing")].into()
    );
    item.headers.insert("meta_length".into(), json!(10));
    let findings = check_items(vec![item]);
    expect(
        &findings,
        Error,
        "item-meta-length",
        "items[0].headers.meta_length",
    );

    let mut bad = chunk();
    bad.profile.samples[1].stack_id = 3;
    let findings = check_items(vec![EnvelopeItem::profile_chunk(&bad)]);
    expect(
        &findings,
        Error,
        "stack-id-range",
        "items[0].profile.samples[1].stack_id",
    );

    let findings = check_items(vec![EnvelopeItem::new("attachment", vec![]); 501]);
    expect(&findings, Error, "envelope-item-count", "items");

    let mut untyped = EnvelopeItem::new("x", vec![]);
    untyped.headers.clear();
    expect(
        &check_items(vec![untyped]),
        Error,
        "item-type",
        "items[0].headers.type",
    );

    let tx = EnvelopeItem::new("transaction", br#"{"contexts": 5}"#.to_vec());
    expect(
        &check_items(vec![tx]),
        Error,
        "json-parse",
        "items[0].contexts",
    );
    let bad_v1 = EnvelopeItem::new("profile", b"5".to_vec());
    expect(&check_items(vec![bad_v1]), Error, "json-parse", "items[0]");

    let mut env = envelope(vec![chunk_item()]);
    env.headers.insert("sent_at".into(), json!("yesterday"));
    expect(
        &validate_envelope(&env),
        Error,
        "envelope-sent-at",
        "headers.sent_at",
    );
}

// ---------------------------------------------------------------------------------------------
// (3) no panics

fn ebpf_fixture() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| std::fs::read(format!("{FIXTURES}/otlp/ebpf-profile.pb")).unwrap())
}

fn validate_everything(bytes: &[u8]) {
    if let Ok(req) = ExportProfilesServiceRequest::decode(bytes) {
        let _ = check_request(&req);
    }
    let _ = validate_chunk_json(bytes);
    let _ = validate_v1_profile_json(bytes);
    if let Ok(env) = Envelope::parse(bytes) {
        let _ = validate_envelope(&env);
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        validate_everything(&bytes);
    }

    #[test]
    fn truncated_or_flipped_protobuf_never_panics(cut in 0usize..25_107, flip in any::<(usize, u8)>()) {
        let full = ebpf_fixture();
        let mut bytes = full[..cut.min(full.len())].to_vec();
        validate_everything(&bytes);
        if !bytes.is_empty() {
            let i = flip.0 % bytes.len();
            bytes[i] ^= flip.1;
            validate_everything(&bytes);
        }
    }

    #[test]
    fn random_indices_never_panic(ix in prop::collection::vec(-3i32..12, 16), ts in any::<u64>()) {
        let mut d = dict();
        d.location_table[1].mapping_index = ix[0];
        d.location_table[1].lines[0].function_index = ix[1];
        d.location_table[1].attribute_indices = vec![ix[2], ix[3]];
        d.function_table[1].name_strindex = ix[4];
        d.stack_table[1].location_indices = vec![ix[5], ix[6]];
        d.attribute_table[1].key_strindex = ix[7];
        d.attribute_table[2].value = Some(strindex(ix[8]));
        let mut p = profile();
        p.samples[0].stack_index = ix[9];
        p.samples[0].attribute_indices = vec![ix[10], ix[11], ix[12]];
        p.samples[0].link_index = ix[13];
        p.samples[0].timestamps_unix_nano.push(ts);
        p.duration_nano = u64::MAX;
        p.time_unix_nano = ts;
        d.string_table.truncate(usize::try_from(ix[14].max(0)).unwrap());
        let _ = check_request(&request(Some(d), vec![p]));
    }
}
