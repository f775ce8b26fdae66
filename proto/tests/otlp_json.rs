//! OTLP/JSON codec: fixture round trips, hand-written inputs, error paths and a property test.

use profilink_proto::otlp::{
    AnyValue, ArrayValue, ExportProfilesPartialSuccess, ExportProfilesServiceRequest,
    ExportProfilesServiceResponse, Function, InstrumentationScope, KeyValue, KeyValueAndUnit,
    KeyValueList, Line, Link, Location, Mapping, Profile, ProfilesData, ProfilesDictionary,
    Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType, any_value,
};
use profilink_proto::otlp_json::{
    MAX_ANY_VALUE_DEPTH, OtlpJsonError, decode_profiles_data, decode_request, decode_response,
    encode_profiles_data, encode_request, encode_response,
};
use prost::Message;
use serde_json::Value;
use std::path::PathBuf;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/otlp");

fn fixtures() -> Vec<(String, ExportProfilesServiceRequest)> {
    let mut out = Vec::new();
    let dir = PathBuf::from(FIXTURES);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pb"))
        .collect();
    paths.sort();
    for path in paths {
        let bytes = std::fs::read(&path).unwrap();
        let req = ExportProfilesServiceRequest::decode(bytes.as_slice())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.push((path.display().to_string(), req));
    }
    assert!(!out.is_empty(), "no fixtures in {FIXTURES}");
    out
}

fn is_lower_hex(s: &str) -> bool {
    s.len().is_multiple_of(2)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// JSON names of the 64-bit integer fields.
const INT64: &[&str] = &[
    "timeUnixNano",
    "durationNano",
    "period",
    "values",
    "timestampsUnixNano",
    "memoryStart",
    "memoryLimit",
    "fileOffset",
    "address",
    "line",
    "column",
    "startLine",
    "intValue",
    "rejectedProfiles",
];

/// Checks the OTLP/JSON conventions on a decoded JSON tree: hex ids, 64-bit integers as
/// strings, 32-bit integers as numbers, camelCase keys. Returns how many ids were seen.
fn check_conventions(v: &Value, key: &str, path: &str) -> usize {
    let mut ids = 0;
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                assert!(!k.contains('_'), "{path}.{k}: snake_case key on output");
                ids += check_conventions(child, k, &format!("{path}.{k}"));
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                ids += check_conventions(child, key, &format!("{path}[{i}]"));
            }
        }
        Value::String(s) => {
            if matches!(key, "traceId" | "spanId" | "profileId") {
                assert!(is_lower_hex(s), "{path}: id {s:?} is not lowercase hex");
                ids += 1;
            }
            if INT64.contains(&key) {
                assert!(s.parse::<i128>().is_ok(), "{path}: {s:?} is not decimal");
            }
        }
        Value::Number(_) => {
            assert!(
                !INT64.contains(&key),
                "{path}: 64-bit integer written as a JSON number"
            );
            if key != "doubleValue" {
                assert!(v.as_i64().is_some(), "{path}: {v} is not an integer");
            }
        }
        Value::Bool(_) | Value::Null => {
            assert!(!v.is_null(), "{path}: null on output");
        }
    }
    ids
}

#[test]
fn fixtures_round_trip_exactly() {
    let mut ids = 0;
    for (name, req) in fixtures() {
        let json = encode_request(&req);
        let tree: Value = serde_json::from_slice(&json)
            .unwrap_or_else(|e| panic!("{name}: encoder wrote invalid JSON: {e}"));
        ids += check_conventions(&tree, "", "");
        let back = decode_request(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(back == req, "{name}: request changed in the round trip");
        // Re-encoding is byte-identical.
        assert_eq!(encode_request(&back), json, "{name}");
        // ProfilesData shares the layout.
        let data = ProfilesData {
            resource_profiles: req.resource_profiles.clone(),
            dictionary: req.dictionary.clone(),
        };
        let json2 = encode_profiles_data(&data);
        assert_eq!(json2, json, "{name}");
        assert!(decode_profiles_data(&json2).unwrap() == data, "{name}");
        // Pretty-printed input (whitespace everywhere) decodes to the same message.
        let pretty = serde_json::to_vec_pretty(&tree).unwrap();
        assert!(decode_request(&pretty).unwrap() == req, "{name}: pretty");
    }
    assert!(ids > 0, "the fixtures should exercise hex ids");
}

#[test]
fn fixtures_survive_truncation_and_corruption() {
    let (_, req) = fixtures().remove(0);
    let json = encode_request(&req);
    let step = (json.len() / 300).max(1);
    for cut in (0..json.len()).step_by(step) {
        let err = decode_request(&json[..cut]).expect_err("truncated JSON must fail");
        assert!(!err.path.is_empty() && !err.message.is_empty());
    }
    // Single-byte corruptions: must not panic (most fail, some are still valid JSON).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut bad = json.clone();
        let at = (state % bad.len() as u64) as usize;
        bad[at] = (state >> 32) as u8;
        let _ = decode_request(&bad);
    }
}

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
        key_strindex: 0,
    }
}

#[test]
fn hand_written_request_decodes() {
    let json = r#"{
      "resource_profiles": [{
        "resource": {
          "attributes": [
            {"key": "service.name", "value": {"stringValue": "checkout"}},
            {"key": "n", "value": {"int_value": 42}},
            {"key": "big", "value": {"intValue": "-9223372036854775808"}},
            {"key": "ok", "value": {"boolValue": true}},
            {"key": "pi", "value": {"doubleValue": 3.5}},
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "1"}]}}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "x", "value": {"bytesValue": "AQI="}}]}}},
            {"keyStrindex": 3, "value": {"stringValueStrindex": 4}}
          ],
          "dropped_attributes_count": "2",
          "entity_refs": [{"schema_url": "s", "type": "service", "id_keys": ["service.name"], "descriptionKeys": ["d"]}],
          "someFutureField": {"deep": [1, 2, {"x": null}]}
        },
        "schemaUrl": "https://opentelemetry.io/schemas/1.30.0",
        "scopeProfiles": [{
          "scope": {"name": "ebpf", "version": "1", "attributes": [], "droppedAttributesCount": 0},
          "profiles": [{
            "sample_type": {"type_strindex": 1, "unitStrindex": "2"},
            "samples": [
              {"stack_index": 1, "values": [1, "2", "-3"], "timestamps_unix_nano": ["1700000000000000000", 1700000000000000001], "link_index": 1, "attribute_indices": [0, "1"]},
              {}
            ],
            "timeUnixNano": "1700000000000000000",
            "duration_nano": 1e9,
            "periodType": {},
            "period": "10000000",
            "profileId": "0102030405060708090A0B0C0D0E0F10",
            "original_payload_format": "pprof",
            "originalPayload": "H4sI",
            "attributeIndices": [2],
            "droppedAttributesCount": null,
            "unknown": [[[[]]]]
          }]
        }]
      }],
      "dictionary": {
        "mapping_table": [{}, {"memory_start": "4096", "memoryLimit": 8192, "file_offset": "0", "filename_strindex": 5, "attributeIndices": [1]}],
        "location_table": [{}, {"mapping_index": 1, "address": "0x10", "lines": [{"function_index": 1, "line": "12", "column": 3}]}],
        "function_table": [{}, {"name_strindex": 6, "system_name_strindex": 6, "filename_strindex": 5, "start_line": "10"}],
        "link_table": [{}, {"trace_id": "5B8EFFF798038103D269B633813FC60C", "span_id": "eee19b7ec3c1b174"}],
        "string_table": ["", "samples", "count", "k", "v", "main.go", "main"],
        "attribute_table": [{"value": {}}, {"key_strindex": 3, "value": {"stringValueStrindex": 4}, "unit_strindex": 2}],
        "stack_table": [{}, {"location_indices": [1, "1"]}]
      },
      "extra": "ignored"
    }"#;
    // `address` above is hex, which is not a valid integer: fix it to check the rest.
    let err = decode_request(json.as_bytes()).unwrap_err();
    assert_eq!(err.path, "dictionary.locationTable[1].address");
    let json = json.replace("\"0x10\"", "\"16\"");
    let req = decode_request(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));

    use any_value::Value as V;
    let expected = ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", V::StringValue("checkout".into())),
                    kv("n", V::IntValue(42)),
                    kv("big", V::IntValue(i64::MIN)),
                    kv("ok", V::BoolValue(true)),
                    kv("pi", V::DoubleValue(3.5)),
                    // NaN != NaN: checked separately below, replaced by a placeholder.
                    kv("nan", V::StringValue("placeholder".into())),
                    kv(
                        "arr",
                        V::ArrayValue(ArrayValue {
                            values: vec![
                                AnyValue {
                                    value: Some(V::StringValue("a".into())),
                                },
                                AnyValue {
                                    value: Some(V::IntValue(1)),
                                },
                            ],
                        }),
                    ),
                    kv(
                        "kv",
                        V::KvlistValue(KeyValueList {
                            values: vec![kv("x", V::BytesValue(vec![1, 2]))],
                        }),
                    ),
                    KeyValue {
                        key: String::new(),
                        value: Some(AnyValue {
                            value: Some(V::StringValueStrindex(4)),
                        }),
                        key_strindex: 3,
                    },
                ],
                dropped_attributes_count: 2,
                entity_refs: vec![opentelemetry_proto::tonic::common::v1::EntityRef {
                    schema_url: "s".into(),
                    r#type: "service".into(),
                    id_keys: vec!["service.name".into()],
                    description_keys: vec!["d".into()],
                }],
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "ebpf".into(),
                    version: "1".into(),
                    attributes: vec![],
                    dropped_attributes_count: 0,
                }),
                profiles: vec![Profile {
                    sample_type: Some(ValueType {
                        type_strindex: 1,
                        unit_strindex: 2,
                    }),
                    samples: vec![
                        Sample {
                            stack_index: 1,
                            attribute_indices: vec![0, 1],
                            link_index: 1,
                            values: vec![1, 2, -3],
                            timestamps_unix_nano: vec![
                                1_700_000_000_000_000_000,
                                1_700_000_000_000_000_001,
                            ],
                        },
                        Sample::default(),
                    ],
                    time_unix_nano: 1_700_000_000_000_000_000,
                    duration_nano: 1_000_000_000,
                    period_type: Some(ValueType::default()),
                    period: 10_000_000,
                    profile_id: (1..=16).collect(),
                    dropped_attributes_count: 0,
                    original_payload_format: "pprof".into(),
                    original_payload: vec![0x1f, 0x8b, 0x08],
                    attribute_indices: vec![2],
                }],
                schema_url: String::new(),
            }],
            schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
        }],
        dictionary: Some(ProfilesDictionary {
            mapping_table: vec![
                Mapping::default(),
                Mapping {
                    memory_start: 4096,
                    memory_limit: 8192,
                    file_offset: 0,
                    filename_strindex: 5,
                    attribute_indices: vec![1],
                },
            ],
            location_table: vec![
                Location::default(),
                Location {
                    mapping_index: 1,
                    address: 16,
                    lines: vec![Line {
                        function_index: 1,
                        line: 12,
                        column: 3,
                    }],
                    attribute_indices: vec![],
                },
            ],
            function_table: vec![
                Function::default(),
                Function {
                    name_strindex: 6,
                    system_name_strindex: 6,
                    filename_strindex: 5,
                    start_line: 10,
                },
            ],
            link_table: vec![
                Link::default(),
                Link {
                    trace_id: hex::decode("5b8efff798038103d269b633813fc60c").unwrap(),
                    span_id: hex::decode("eee19b7ec3c1b174").unwrap(),
                },
            ],
            string_table: ["", "samples", "count", "k", "v", "main.go", "main"]
                .map(String::from)
                .to_vec(),
            attribute_table: vec![
                KeyValueAndUnit {
                    key_strindex: 0,
                    value: Some(AnyValue { value: None }),
                    unit_strindex: 0,
                },
                KeyValueAndUnit {
                    key_strindex: 3,
                    value: Some(AnyValue {
                        value: Some(V::StringValueStrindex(4)),
                    }),
                    unit_strindex: 2,
                },
            ],
            stack_table: vec![
                Stack::default(),
                Stack {
                    location_indices: vec![1, 1],
                },
            ],
        }),
    };
    let nan = &req.resource_profiles[0]
        .resource
        .as_ref()
        .unwrap()
        .attributes[5];
    assert_eq!(nan.key, "nan");
    assert!(matches!(
        nan.value,
        Some(AnyValue { value: Some(V::DoubleValue(d)) }) if d.is_nan()
    ));
    let mut got = req.clone();
    got.resource_profiles[0]
        .resource
        .as_mut()
        .unwrap()
        .attributes[5] = kv("nan", V::StringValue("placeholder".into()));
    assert_eq!(got, expected);

    // And it writes back canonically: camelCase, hex ids, string int64s, `{}` kept.
    let out = String::from_utf8(encode_request(&req)).unwrap();
    assert!(out.contains(r#""linkTable":[{},{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"}]"#), "{out}");
    assert!(out.contains(r#""attributeTable":[{"value":{}},"#), "{out}");
    assert!(out.contains(r#""mappingTable":[{},{"memoryStart":"4096","memoryLimit":"8192","filenameStrindex":5,"attributeIndices":[1]}]"#), "{out}");
    assert!(out.contains(r#""values":["1","2","-3"],"timestampsUnixNano":["1700000000000000000","1700000000000000001"]"#), "{out}");
    assert!(out.contains(r#""periodType":{}"#), "{out}");
    assert!(
        out.contains(r#""profileId":"0102030405060708090a0b0c0d0e0f10""#),
        "{out}"
    );
    assert!(out.contains(r#""originalPayload":"H4sI""#), "{out}");
    assert!(
        out.contains(r#"{"value":{"doubleValue":"NaN"},"key":"nan"}"#)
            || out.contains(r#"{"key":"nan","value":{"doubleValue":"NaN"}}"#),
        "{out}"
    );
    assert!(
        out.contains(r#"{"value":{"stringValueStrindex":4},"keyStrindex":3}"#),
        "{out}"
    );
    assert!(!out.contains("droppedAttributesCount\":0"), "{out}");
}

#[test]
fn python_style_base64_ids_decode() {
    // What protobuf's Python `MessageToJson` writes for bytes fields: standard padded base64.
    let json = r#"{"dictionary":{"linkTable":[{"traceId":"W47/95gDgQPSabYzgT/GDA==","spanId":"7uGbfsPBsXQ="}]},
      "resourceProfiles":[{"scopeProfiles":[{"profiles":[{"profileId":"AQIDBAUGBwgJCgsMDQ4PEA=="}]}]}]}"#;
    let req = decode_request(json.as_bytes()).unwrap();
    let link = &req.dictionary.as_ref().unwrap().link_table[0];
    assert_eq!(
        link.trace_id,
        hex::decode("5b8efff798038103d269b633813fc60c").unwrap()
    );
    assert_eq!(link.span_id, hex::decode("eee19b7ec3c1b174").unwrap());
    let profile = &req.resource_profiles[0].scope_profiles[0].profiles[0];
    assert_eq!(profile.profile_id, (1..=16).collect::<Vec<u8>>());
    // URL-safe and unpadded variants too.
    let json = r#"{"dictionary":{"linkTable":[{"traceId":"W47_95gDgQPSabYzgT_GDA","spanId":"7uGbfsPBsXQ"}]}}"#;
    let req = decode_request(json.as_bytes()).unwrap();
    assert_eq!(req.dictionary.unwrap().link_table[0], *link);
    // Empty string = empty id.
    let req =
        decode_request(br#"{"dictionary":{"linkTable":[{"traceId":"","spanId":""}]}}"#).unwrap();
    assert_eq!(req.dictionary.unwrap().link_table[0], Link::default());
}

fn err(json: &[u8]) -> OtlpJsonError {
    match decode_request(json) {
        Ok(req) => panic!("{:?} decoded to {req:?}", String::from_utf8_lossy(json)),
        Err(e) => e,
    }
}

#[test]
fn errors_carry_paths() {
    let p = |inner: &str| {
        format!(
            r#"{{"resourceProfiles":[{{}},{{"scopeProfiles":[{{"profiles":[{{"samples":[{{}},{inner}]}}]}}]}}]}}"#
        )
    };
    let prefix = "resourceProfiles[1].scopeProfiles[0].profiles[0].samples[1]";
    let cases: &[(String, String, &str)] = &[
        (p(r#"{"timestampsUnixNano":["1","2",1.5]}"#), format!("{prefix}.timestampsUnixNano[2]"), "fractional"),
        (p(r#"{"timestampsUnixNano":["-1"]}"#), format!("{prefix}.timestampsUnixNano[0]"), "negative"),
        (p(r#"{"timestamps_unix_nano":[-5]}"#), format!("{prefix}.timestampsUnixNano[0]"), "negative"),
        (p(r#"{"timestampsUnixNano":["18446744073709551616"]}"#), format!("{prefix}.timestampsUnixNano[0]"), "out of range"),
        (p(r#"{"values":["9223372036854775808"]}"#), format!("{prefix}.values[0]"), "out of range"),
        (p(r#"{"values":[true]}"#), format!("{prefix}.values[0]"), "boolean"),
        (p(r#"{"values":[null]}"#), format!("{prefix}.values[0]"), "null"),
        (p(r#"{"values":"1"}"#), format!("{prefix}.values"), "expected an array"),
        (p(r#"{"values":{}}"#), format!("{prefix}.values"), "expected an array"),
        (p(r#"{"stackIndex":2147483648}"#), format!("{prefix}.stackIndex"), "out of range"),
        (p(r#"{"stackIndex":"x"}"#), format!("{prefix}.stackIndex"), "not a valid"),
        (p(r#"{"stackIndex":[1]}"#), format!("{prefix}.stackIndex"), "found an array"),
        (p(r#"{"linkIndex":1.0e-3}"#), format!("{prefix}.linkIndex"), "fractional"),
        (p(r#"7"#), prefix.to_owned(), "expected a Sample object"),
        (p(r#"{"values":[1,]}"#), format!("{prefix}.values[1]"), "invalid JSON"),
        (r#"{"dictionary":{"linkTable":[{"traceId":"zz"}]}}"#.into(), "dictionary.linkTable[0].traceId".into(), "neither hex nor base64"),
        (r#"{"dictionary":{"linkTable":[{"spanId":"0102030405060708090"}]}}"#.into(), "dictionary.linkTable[0].spanId".into(), "neither hex nor base64"),
        (r#"{"dictionary":{"linkTable":[{"traceId":"AQIDBA=="}]}}"#.into(), "dictionary.linkTable[0].traceId".into(), "16-byte id"),
        (r#"{"dictionary":{"linkTable":[{"spanId":12}]}}"#.into(), "dictionary.linkTable[0].spanId".into(), "expected a string"),
        (r#"{"dictionary":{"stringTable":["a",1]}}"#.into(), "dictionary.stringTable[1]".into(), "expected a string"),
        (r#"{"dictionary":{"attributeTable":[{"value":{"bytesValue":"!!"}}]}}"#.into(), "dictionary.attributeTable[0].value.bytesValue".into(), "base64"),
        (r#"{"dictionary":{"attributeTable":[{"value":{"boolValue":"true"}}]}}"#.into(), "dictionary.attributeTable[0].value.boolValue".into(), "expected a boolean"),
        (r#"{"dictionary":{"attributeTable":[{"value":{"doubleValue":"fast"}}]}}"#.into(), "dictionary.attributeTable[0].value.doubleValue".into(), "not a valid double"),
        (r#"{"dictionary":{"attributeTable":[{"value":{"arrayValue":{"values":[{"intValue":"1"},{"intValue":"1.5"}]}}}]}}"#.into(), "dictionary.attributeTable[0].value.arrayValue.values[1].intValue".into(), "fractional"),
        (r#"{"dictionary":{"mappingTable":[{"memoryStart":"-1"}]}}"#.into(), "dictionary.mappingTable[0].memoryStart".into(), "negative"),
        (r#"{"dictionary":[]}"#.into(), "dictionary".into(), "expected a ProfilesDictionary object"),
        (r#"{"resourceProfiles":[{"resource":{"droppedAttributesCount":-1}}]}"#.into(), "resourceProfiles[0].resource.droppedAttributesCount".into(), "negative"),
        (r#"[]"#.into(), ".".into(), "expected a profiles request object"),
        (r#""#.into(), ".".into(), "end of input"),
        (r#"{"resourceProfiles":[]} x"#.into(), ".".into(), "end of input"),
        (r#"{"resourceProfiles":[{"schemaUrl":"a"#.into(), "resourceProfiles[0].schemaUrl".into(), "unterminated string"),
        (r#"{"resourceProfiles":[{"schemaUrl":"\ud800"}]}"#.into(), "resourceProfiles[0].schemaUrl".into(), "surrogate"),
        (r#"{"unknown":[1,2"#.into(), ".".into(), "invalid JSON"),
    ];
    for (json, path, msg) in cases {
        let e = err(json.as_bytes());
        assert_eq!(&e.path, path, "{json}: {e}");
        assert!(e.message.contains(msg), "{json}: {e} (wanted {msg:?})");
        assert_eq!(e.to_string(), format!("{}: {}", e.path, e.message));
    }
}

#[test]
fn invalid_utf8_is_an_error() {
    let e = err(b"{\"resourceProfiles\":[{\"schemaUrl\":\"a\xff\xfeb\"}]}");
    assert_eq!(e.path, "resourceProfiles[0].schemaUrl");
    assert!(e.message.contains("UTF-8"), "{e}");
    let e = err(b"{\"resourceProfiles\xc3\":[]}");
    assert!(e.message.contains("UTF-8"), "{e}");
    let e = err(b"{\"x\":\"\xc3\"}");
    assert!(e.message.contains("UTF-8"), "{e}");
    let e = err(b"\xff{}");
    assert_eq!(e.path, ".");
}

fn nested_array_value(depth: usize) -> String {
    let mut s = String::from(r#"{"intValue":"1"}"#);
    for _ in 1..depth {
        s = format!(r#"{{"arrayValue":{{"values":[{s}]}}}}"#);
    }
    format!(r#"{{"dictionary":{{"attributeTable":[{{"value":{s}}}]}}}}"#)
}

#[test]
fn any_value_nesting_is_bounded() {
    // Exactly at the limit: fine, and round-trips.
    let json = nested_array_value(MAX_ANY_VALUE_DEPTH);
    let req = decode_request(json.as_bytes()).unwrap();
    assert!(decode_request(&encode_request(&req)).unwrap() == req);
    // One deeper: an error whose path points at the offending level.
    let e = err(nested_array_value(MAX_ANY_VALUE_DEPTH + 1).as_bytes());
    assert!(e.message.contains("nesting"), "{e}");
    assert!(
        e.path
            .starts_with("dictionary.attributeTable[0].value.arrayValue.values[0]")
    );
    assert_eq!(
        e.path.matches("arrayValue").count(),
        MAX_ANY_VALUE_DEPTH,
        "{}",
        e.path
    );
    // Very deep nesting (kvlist and array) must fail cleanly, not overflow the stack.
    let deep = "{\"kvlistValue\":{\"values\":[{\"value\":".repeat(100_000);
    let json = format!(r#"{{"dictionary":{{"attributeTable":[{{"value":{deep}"#);
    assert!(err(json.as_bytes()).message.contains("nesting"));
    // Deep unknown subtrees are skipped without recursion.
    let json = format!(
        r#"{{"unknown":{}{},"dictionary":{{}}}}"#,
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let req = decode_request(json.as_bytes()).unwrap();
    assert_eq!(req.dictionary, Some(ProfilesDictionary::default()));
    let json = format!(r#"{{"unknown":{}"#, "[{\"a\":".repeat(200_000));
    err(json.as_bytes());
}

#[test]
fn any_value_encodings() {
    use any_value::Value as V;
    let cases: Vec<(Option<V>, &str)> = vec![
        (None, "{}"),
        (Some(V::StringValue(String::new())), r#"{"stringValue":""}"#),
        (
            Some(V::StringValue("a\"\\\n\u{1}é".into())),
            r#"{"stringValue":"a\"\\\n\u0001é"}"#,
        ),
        (Some(V::BoolValue(false)), r#"{"boolValue":false}"#),
        (Some(V::IntValue(0)), r#"{"intValue":"0"}"#),
        (
            Some(V::IntValue(i64::MIN)),
            r#"{"intValue":"-9223372036854775808"}"#,
        ),
        (Some(V::DoubleValue(0.0)), r#"{"doubleValue":0.0}"#),
        (Some(V::DoubleValue(-0.0)), r#"{"doubleValue":-0.0}"#),
        (Some(V::DoubleValue(1e300)), r#"{"doubleValue":1e300}"#),
        (
            Some(V::DoubleValue(f64::INFINITY)),
            r#"{"doubleValue":"Infinity"}"#,
        ),
        (
            Some(V::DoubleValue(f64::NEG_INFINITY)),
            r#"{"doubleValue":"-Infinity"}"#,
        ),
        (
            Some(V::ArrayValue(ArrayValue::default())),
            r#"{"arrayValue":{}}"#,
        ),
        (
            Some(V::KvlistValue(KeyValueList::default())),
            r#"{"kvlistValue":{}}"#,
        ),
        (
            Some(V::KvlistValue(KeyValueList {
                values: vec![KeyValue::default()],
            })),
            r#"{"kvlistValue":{"values":[{}]}}"#,
        ),
        (Some(V::BytesValue(vec![])), r#"{"bytesValue":""}"#),
        (
            Some(V::BytesValue(vec![0xfb, 0xff])),
            r#"{"bytesValue":"+/8="}"#,
        ),
        (
            Some(V::StringValueStrindex(0)),
            r#"{"stringValueStrindex":0}"#,
        ),
    ];
    for (value, want) in cases {
        let req = ExportProfilesServiceRequest {
            resource_profiles: vec![],
            dictionary: Some(ProfilesDictionary {
                attribute_table: vec![KeyValueAndUnit {
                    key_strindex: 0,
                    value: Some(AnyValue { value }),
                    unit_strindex: 0,
                }],
                ..Default::default()
            }),
        };
        let json = String::from_utf8(encode_request(&req)).unwrap();
        assert_eq!(
            json,
            format!(r#"{{"dictionary":{{"attributeTable":[{{"value":{want}}}]}}}}"#)
        );
        let back = decode_request(json.as_bytes()).unwrap();
        assert_eq!(back, req, "{json}");
        let v = &back.dictionary.unwrap().attribute_table[0];
        if let Some(AnyValue {
            value: Some(V::DoubleValue(d)),
        }) = &v.value
        {
            // -0.0 == 0.0 for PartialEq: check the sign explicitly.
            assert_eq!(
                d.is_sign_negative(),
                want.contains("-0.0") || want.contains("-Inf")
            );
        }
    }
    // NaN: not equal to itself, so checked by hand.
    let req =
        decode_request(br#"{"dictionary":{"attributeTable":[{"value":{"doubleValue":"NaN"}}]}}"#)
            .unwrap();
    let json = encode_request(&req);
    assert_eq!(
        json,
        br#"{"dictionary":{"attributeTable":[{"value":{"doubleValue":"NaN"}}]}}"#
    );
    // Doubles as strings and exponent numbers.
    let req = decode_request(br#"{"dictionary":{"attributeTable":[{"value":{"doubleValue":"1.5e2"}},{"value":{"double_value":-2E-2}}]}}"#).unwrap();
    let t = req.dictionary.unwrap().attribute_table;
    assert_eq!(
        t[0].value.as_ref().unwrap().value,
        Some(V::DoubleValue(150.0))
    );
    assert_eq!(
        t[1].value.as_ref().unwrap().value,
        Some(V::DoubleValue(-0.02))
    );
}

#[test]
fn defaults_are_omitted_and_present_messages_kept() {
    assert_eq!(
        encode_request(&ExportProfilesServiceRequest::default()),
        b"{}"
    );
    let req = ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource::default()),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope::default()),
                profiles: vec![Profile::default()],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(ProfilesDictionary {
            mapping_table: vec![Mapping::default()],
            string_table: vec![String::new()],
            ..Default::default()
        }),
    };
    let json = encode_request(&req);
    assert_eq!(
        String::from_utf8(json.clone()).unwrap(),
        r#"{"resourceProfiles":[{"resource":{},"scopeProfiles":[{"scope":{},"profiles":[{}]}]}],"dictionary":{"mappingTable":[{}],"stringTable":[""]}}"#
    );
    assert_eq!(decode_request(&json).unwrap(), req);
}

#[test]
fn nulls_duplicates_and_unknown_fields() {
    let json = br#"{
        "resourceProfiles": null,
        "dictionary": {
            "stringTable": ["a"], "string_table": ["b", "c"],
            "linkTable": null,
            "mappingTable": [{"memoryStart": "1", "memory_start": "2", "memoryLimit": null}],
            "attributeTable": [
                {"value": null},
                {"value": {"stringValue": "x", "intValue": "3"}},
                {"value": {"stringValue": "x", "intValue": null}},
                {"value": {"future": {"a": [true, false, null, 1e5, "s"]}}}
            ],
            "future": {"x": [{"y": null}]}
        }
    }"#;
    let req = decode_request(json).unwrap();
    let d = req.dictionary.unwrap();
    assert!(req.resource_profiles.is_empty());
    assert_eq!(d.string_table, ["b", "c"]);
    assert!(d.link_table.is_empty());
    assert_eq!(d.mapping_table[0].memory_start, 2);
    use any_value::Value as V;
    assert_eq!(d.attribute_table[0].value, None);
    assert_eq!(
        d.attribute_table[1].value,
        Some(AnyValue {
            value: Some(V::IntValue(3))
        })
    );
    assert_eq!(
        d.attribute_table[2].value,
        Some(AnyValue {
            value: Some(V::StringValue("x".into()))
        })
    );
    assert_eq!(d.attribute_table[3].value, Some(AnyValue { value: None }));
}

#[test]
fn integers_accept_numbers_and_strings() {
    let json = br#"{"dictionary":{"mappingTable":[
        {"memoryStart": 18446744073709551615, "memoryLimit": "18446744073709551615", "fileOffset": 1.0e3},
        {"memoryStart": "0", "memoryLimit": -0, "fileOffset": "007", "filenameStrindex": "-2147483648"}
    ],"functionTable":[{"startLine": -9223372036854775808}, {"startLine": "9223372036854775807"}]}}"#;
    let d = decode_request(json).unwrap().dictionary.unwrap();
    assert_eq!(d.mapping_table[0].memory_start, u64::MAX);
    assert_eq!(d.mapping_table[0].memory_limit, u64::MAX);
    assert_eq!(d.mapping_table[0].file_offset, 1000);
    assert_eq!(d.mapping_table[1].file_offset, 7);
    assert_eq!(d.mapping_table[1].filename_strindex, i32::MIN);
    assert_eq!(d.function_table[0].start_line, i64::MIN);
    assert_eq!(d.function_table[1].start_line, i64::MAX);
}

#[test]
fn strings_with_escapes_round_trip() {
    let strings: Vec<String> = vec![
        String::new(),
        "plain".into(),
        "quote \" backslash \\ slash /".into(),
        "\u{0}\u{1f}\u{7f}\n\r\t".into(),
        "é漢字😀".into(),
        "\u{2028}\u{2029}".into(),
    ];
    let req = ExportProfilesServiceRequest {
        resource_profiles: vec![],
        dictionary: Some(ProfilesDictionary {
            string_table: strings.clone(),
            ..Default::default()
        }),
    };
    let json = encode_request(&req);
    let v: Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["dictionary"]["stringTable"][3], "\u{0}\u{1f}\u{7f}\n\r\t");
    assert_eq!(decode_request(&json).unwrap(), req);
    // Escaped input, including surrogate pairs and escaped keys.
    let req =
        decode_request(br#"{"dictionary":{"string\u005ftable":["\u00e9\ud83d\ude00\/\b\f"]}}"#)
            .unwrap();
    assert_eq!(req.dictionary.unwrap().string_table, ["é😀/\u{8}\u{c}"]);
}

#[test]
fn response_round_trip() {
    let json = br#"{"partialSuccess":{"rejectedProfiles":"2","errorMessage":"x"}}"#;
    let resp = decode_response(json).unwrap();
    assert_eq!(
        resp,
        ExportProfilesServiceResponse {
            partial_success: Some(ExportProfilesPartialSuccess {
                rejected_profiles: 2,
                error_message: "x".into(),
            }),
        }
    );
    assert_eq!(encode_response(&resp), json);
    assert_eq!(
        encode_response(&ExportProfilesServiceResponse::default()),
        b"{}"
    );
    assert_eq!(
        decode_response(b"{}").unwrap(),
        ExportProfilesServiceResponse::default()
    );
    assert_eq!(
        decode_response(
            br#"{"partial_success":{"rejected_profiles":3,"error_message":"y","z":1}}"#
        )
        .unwrap()
        .partial_success
        .unwrap(),
        ExportProfilesPartialSuccess {
            rejected_profiles: 3,
            error_message: "y".into(),
        }
    );
    let e = decode_response(br#"{"partialSuccess":{"rejectedProfiles":"1.5"}}"#).unwrap_err();
    assert_eq!(e.path, "partialSuccess.rejectedProfiles");
    // A present-but-empty partial success is kept apart from an absent one.
    let resp = ExportProfilesServiceResponse {
        partial_success: Some(ExportProfilesPartialSuccess::default()),
    };
    assert_eq!(encode_response(&resp), br#"{"partialSuccess":{}}"#);
    assert_eq!(decode_response(&encode_response(&resp)).unwrap(), resp);
}

mod prop {
    use super::*;
    use proptest::collection::vec;
    use proptest::option;
    use proptest::prelude::*;

    fn any_value_strategy() -> impl Strategy<Value = AnyValue> {
        use any_value::Value as V;
        let leaf = prop_oneof![
            Just(None),
            ".{0,8}".prop_map(|s| Some(V::StringValue(s))),
            any::<bool>().prop_map(|b| Some(V::BoolValue(b))),
            any::<i64>().prop_map(|i| Some(V::IntValue(i))),
            // NaN is excluded: it is not equal to itself.
            prop_oneof![
                any::<f64>().prop_filter("not NaN", |d| !d.is_nan()),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(-0.0)
            ]
            .prop_map(|d| Some(V::DoubleValue(d))),
            vec(any::<u8>(), 0..6).prop_map(|b| Some(V::BytesValue(b))),
            any::<i32>().prop_map(|i| Some(V::StringValueStrindex(i))),
        ]
        .prop_map(|value| AnyValue { value });
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..3).prop_map(|values| AnyValue {
                    value: Some(any_value::Value::ArrayValue(ArrayValue { values })),
                }),
                vec((".{0,4}", option::of(inner), any::<i32>()), 0..3).prop_map(|kvs| {
                    AnyValue {
                        value: Some(any_value::Value::KvlistValue(KeyValueList {
                            values: kvs
                                .into_iter()
                                .map(|(key, value, key_strindex)| KeyValue {
                                    key,
                                    value,
                                    key_strindex,
                                })
                                .collect(),
                        })),
                    }
                }),
            ]
        })
    }

    fn key_value_strategy() -> impl Strategy<Value = KeyValue> {
        (".{0,6}", option::of(any_value_strategy()), any::<i32>()).prop_map(
            |(key, value, key_strindex)| KeyValue {
                key,
                value,
                key_strindex,
            },
        )
    }

    fn value_type_strategy() -> impl Strategy<Value = ValueType> {
        (any::<i32>(), any::<i32>()).prop_map(|(type_strindex, unit_strindex)| ValueType {
            type_strindex,
            unit_strindex,
        })
    }

    fn bytes_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            vec(any::<u8>(), 16..=16),
            vec(any::<u8>(), 8..=8),
            vec(any::<u8>(), 0..20),
        ]
    }

    fn profile_strategy() -> impl Strategy<Value = Profile> {
        let sample = (
            any::<i32>(),
            vec(any::<i32>(), 0..3),
            any::<i32>(),
            vec(any::<i64>(), 0..3),
            vec(any::<u64>(), 0..3),
        )
            .prop_map(
                |(stack_index, attribute_indices, link_index, values, timestamps_unix_nano)| {
                    Sample {
                        stack_index,
                        attribute_indices,
                        link_index,
                        values,
                        timestamps_unix_nano,
                    }
                },
            );
        (
            option::of(value_type_strategy()),
            vec(sample, 0..3),
            (any::<u64>(), any::<u64>(), any::<i64>()),
            option::of(value_type_strategy()),
            bytes_strategy(),
            any::<u32>(),
            (".{0,5}", vec(any::<u8>(), 0..8)),
            vec(any::<i32>(), 0..3),
        )
            .prop_map(
                |(
                    sample_type,
                    samples,
                    (time_unix_nano, duration_nano, period),
                    period_type,
                    profile_id,
                    dropped_attributes_count,
                    (original_payload_format, original_payload),
                    attribute_indices,
                )| Profile {
                    sample_type,
                    samples,
                    time_unix_nano,
                    duration_nano,
                    period_type,
                    period,
                    profile_id,
                    dropped_attributes_count,
                    original_payload_format,
                    original_payload,
                    attribute_indices,
                },
            )
    }

    fn resource_profiles_strategy() -> impl Strategy<Value = ResourceProfiles> {
        let entity_ref = (".{0,4}", ".{0,4}", vec(".{0,4}", 0..2), vec(".{0,4}", 0..2)).prop_map(
            |(schema_url, r#type, id_keys, description_keys)| {
                opentelemetry_proto::tonic::common::v1::EntityRef {
                    schema_url,
                    r#type,
                    id_keys,
                    description_keys,
                }
            },
        );
        let resource = (
            vec(key_value_strategy(), 0..3),
            any::<u32>(),
            vec(entity_ref, 0..2),
        )
            .prop_map(
                |(attributes, dropped_attributes_count, entity_refs)| Resource {
                    attributes,
                    dropped_attributes_count,
                    entity_refs,
                },
            );
        let scope = (
            ".{0,4}",
            ".{0,4}",
            vec(key_value_strategy(), 0..2),
            any::<u32>(),
        )
            .prop_map(|(name, version, attributes, dropped_attributes_count)| {
                InstrumentationScope {
                    name,
                    version,
                    attributes,
                    dropped_attributes_count,
                }
            });
        let scope_profiles = (option::of(scope), vec(profile_strategy(), 0..3), ".{0,4}").prop_map(
            |(scope, profiles, schema_url)| ScopeProfiles {
                scope,
                profiles,
                schema_url,
            },
        );
        (option::of(resource), vec(scope_profiles, 0..3), ".{0,4}").prop_map(
            |(resource, scope_profiles, schema_url)| ResourceProfiles {
                resource,
                scope_profiles,
                schema_url,
            },
        )
    }

    fn dictionary_strategy() -> impl Strategy<Value = ProfilesDictionary> {
        let mapping = (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<i32>(),
            vec(any::<i32>(), 0..3),
        )
            .prop_map(
                |(
                    memory_start,
                    memory_limit,
                    file_offset,
                    filename_strindex,
                    attribute_indices,
                )| {
                    Mapping {
                        memory_start,
                        memory_limit,
                        file_offset,
                        filename_strindex,
                        attribute_indices,
                    }
                },
            );
        let line = (any::<i32>(), any::<i64>(), any::<i64>()).prop_map(
            |(function_index, line, column)| Line {
                function_index,
                line,
                column,
            },
        );
        let location = (
            any::<i32>(),
            any::<u64>(),
            vec(line, 0..3),
            vec(any::<i32>(), 0..3),
        )
            .prop_map(
                |(mapping_index, address, lines, attribute_indices)| Location {
                    mapping_index,
                    address,
                    lines,
                    attribute_indices,
                },
            );
        let function = (any::<i32>(), any::<i32>(), any::<i32>(), any::<i64>()).prop_map(
            |(name_strindex, system_name_strindex, filename_strindex, start_line)| Function {
                name_strindex,
                system_name_strindex,
                filename_strindex,
                start_line,
            },
        );
        let link = (bytes_strategy(), bytes_strategy())
            .prop_map(|(trace_id, span_id)| Link { trace_id, span_id });
        let kvu = (any::<i32>(), option::of(any_value_strategy()), any::<i32>()).prop_map(
            |(key_strindex, value, unit_strindex)| KeyValueAndUnit {
                key_strindex,
                value,
                unit_strindex,
            },
        );
        let stack = vec(any::<i32>(), 0..4).prop_map(|location_indices| Stack { location_indices });
        (
            vec(mapping, 0..3),
            vec(location, 0..3),
            vec(function, 0..3),
            vec(link, 0..3),
            vec(".{0,6}", 0..4),
            vec(kvu, 0..3),
            vec(stack, 0..3),
        )
            .prop_map(
                |(
                    mapping_table,
                    location_table,
                    function_table,
                    link_table,
                    string_table,
                    attribute_table,
                    stack_table,
                )| ProfilesDictionary {
                    mapping_table,
                    location_table,
                    function_table,
                    link_table,
                    string_table,
                    attribute_table,
                    stack_table,
                },
            )
    }

    fn request_strategy() -> impl Strategy<Value = ExportProfilesServiceRequest> {
        (
            vec(resource_profiles_strategy(), 0..3),
            option::of(dictionary_strategy()),
        )
            .prop_map(
                |(resource_profiles, dictionary)| ExportProfilesServiceRequest {
                    resource_profiles,
                    dictionary,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn requests_round_trip_exactly(req in request_strategy()) {
            let json = encode_request(&req);
            prop_assert!(serde_json::from_slice::<Value>(&json).is_ok());
            let back = decode_request(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &req);
            // Binary protobuf agrees too.
            prop_assert_eq!(back.encode_to_vec(), req.encode_to_vec());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..200)) {
            let _ = decode_request(&bytes);
            let _ = decode_response(&bytes);
        }

        #[test]
        fn arbitrary_json_never_panics(s in r#"[\[\]{}",:0-9a-zA-Z_\\. -]{0,80}"#) {
            let _ = decode_request(s.as_bytes());
            let wrapped = format!(r#"{{"dictionary":{{"attributeTable":[{{"value":{s}}}]}}}}"#);
            let _ = decode_request(wrapped.as_bytes());
        }
    }
}

/// A request with every field of every message set to a non-default value.
fn full_request() -> ExportProfilesServiceRequest {
    use any_value::Value as V;
    let av = |v| Some(AnyValue { value: Some(v) });
    let attrs = vec![
        kv("s", V::StringValue("str".into())),
        kv("b", V::BoolValue(true)),
        kv("i", V::IntValue(-7)),
        kv("d", V::DoubleValue(2.5)),
        kv(
            "a",
            V::ArrayValue(ArrayValue {
                values: vec![AnyValue {
                    value: Some(V::BytesValue(vec![9, 8])),
                }],
            }),
        ),
        kv(
            "k",
            V::KvlistValue(KeyValueList {
                values: vec![KeyValue {
                    key: "inner".into(),
                    value: av(V::StringValueStrindex(3)),
                    key_strindex: 4,
                }],
            }),
        ),
    ];
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: attrs.clone(),
                dropped_attributes_count: 1,
                entity_refs: vec![opentelemetry_proto::tonic::common::v1::EntityRef {
                    schema_url: "su".into(),
                    r#type: "host".into(),
                    id_keys: vec!["host.id".into()],
                    description_keys: vec!["host.name".into()],
                }],
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "n".into(),
                    version: "v".into(),
                    attributes: attrs,
                    dropped_attributes_count: 2,
                }),
                profiles: vec![Profile {
                    sample_type: Some(ValueType {
                        type_strindex: 1,
                        unit_strindex: 2,
                    }),
                    samples: vec![Sample {
                        stack_index: 1,
                        attribute_indices: vec![1],
                        link_index: 1,
                        values: vec![-1, i64::MAX],
                        timestamps_unix_nano: vec![u64::MAX, 1],
                    }],
                    time_unix_nano: u64::MAX,
                    duration_nano: 3,
                    period_type: Some(ValueType {
                        type_strindex: 3,
                        unit_strindex: 4,
                    }),
                    period: i64::MIN,
                    profile_id: vec![0xab; 16],
                    dropped_attributes_count: 5,
                    original_payload_format: "pprof".into(),
                    original_payload: vec![0, 255, 7],
                    attribute_indices: vec![1, 2],
                }],
                schema_url: "s2".into(),
            }],
            schema_url: "s1".into(),
        }],
        dictionary: Some(ProfilesDictionary {
            mapping_table: vec![Mapping {
                memory_start: 1,
                memory_limit: 2,
                file_offset: 3,
                filename_strindex: 4,
                attribute_indices: vec![5],
            }],
            location_table: vec![Location {
                mapping_index: 1,
                address: 2,
                lines: vec![Line {
                    function_index: 3,
                    line: 4,
                    column: 5,
                }],
                attribute_indices: vec![6],
            }],
            function_table: vec![Function {
                name_strindex: 1,
                system_name_strindex: 2,
                filename_strindex: 3,
                start_line: 4,
            }],
            link_table: vec![Link {
                trace_id: vec![0xcd; 16],
                span_id: vec![0xef; 8],
            }],
            string_table: vec!["".into(), "x".into()],
            attribute_table: vec![KeyValueAndUnit {
                key_strindex: 1,
                value: av(V::IntValue(1)),
                unit_strindex: 2,
            }],
            stack_table: vec![Stack {
                location_indices: vec![0, 1],
            }],
        }),
    }
}

fn camel_to_snake(k: &str) -> String {
    let mut out = String::new();
    for c in k.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Rewrites a JSON tree: keys to snake_case, and 64-bit integer strings to JSON numbers.
fn rewrite(v: Value, key: &str) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = rewrite(v, &k);
                    (camel_to_snake(&k), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| rewrite(v, key)).collect()),
        Value::String(s) if INT64.contains(&key) => {
            if let Ok(i) = s.parse::<i64>() {
                Value::from(i)
            } else {
                Value::from(s.parse::<u64>().unwrap())
            }
        }
        other => other,
    }
}

#[test]
fn every_field_round_trips_and_reads_snake_case_and_numbers() {
    let req = full_request();
    let json = encode_request(&req);
    let tree: Value = serde_json::from_slice(&json).unwrap();
    check_conventions(&tree, "", "");
    assert!(decode_request(&json).unwrap() == req);
    // Every field is written (no default value anywhere in `full_request`).
    let text = String::from_utf8(json.clone()).unwrap();
    for key in [
        "resourceProfiles",
        "resource",
        "attributes",
        "droppedAttributesCount",
        "entityRefs",
        "schemaUrl",
        "type",
        "idKeys",
        "descriptionKeys",
        "scopeProfiles",
        "scope",
        "name",
        "version",
        "profiles",
        "sampleType",
        "typeStrindex",
        "unitStrindex",
        "samples",
        "stackIndex",
        "attributeIndices",
        "linkIndex",
        "values",
        "timestampsUnixNano",
        "timeUnixNano",
        "durationNano",
        "periodType",
        "period",
        "profileId",
        "originalPayloadFormat",
        "originalPayload",
        "dictionary",
        "mappingTable",
        "memoryStart",
        "memoryLimit",
        "fileOffset",
        "filenameStrindex",
        "locationTable",
        "mappingIndex",
        "address",
        "lines",
        "functionIndex",
        "line",
        "column",
        "functionTable",
        "nameStrindex",
        "systemNameStrindex",
        "startLine",
        "linkTable",
        "traceId",
        "spanId",
        "stringTable",
        "attributeTable",
        "keyStrindex",
        "value",
        "stackTable",
        "locationIndices",
        "key",
        "stringValue",
        "boolValue",
        "intValue",
        "doubleValue",
        "arrayValue",
        "kvlistValue",
        "bytesValue",
        "stringValueStrindex",
    ] {
        assert!(
            text.contains(&format!("\"{key}\":")),
            "{key} missing in {text}"
        );
    }
    // snake_case keys and 64-bit integers as JSON numbers read the same.
    let snake = serde_json::to_vec(&rewrite(tree, "")).unwrap();
    let snake_text = String::from_utf8(snake.clone()).unwrap();
    assert!(snake_text.contains("\"timestamps_unix_nano\":[18446744073709551615,1]"));
    assert!(decode_request(&snake).unwrap() == req);
    // The fixtures too.
    for (name, req) in fixtures() {
        let tree: Value = serde_json::from_slice(&encode_request(&req)).unwrap();
        let snake = serde_json::to_vec(&rewrite(tree, "")).unwrap();
        assert!(decode_request(&snake).unwrap() == req, "{name}");
    }
}

/// Throughput smoke test on a large synthetic request; run with
/// `cargo test --release -p profilink-proto --test otlp_json -- --ignored --nocapture`.
#[test]
#[ignore]
fn large_request_throughput() {
    let samples: Vec<Sample> = (0..200_000u64)
        .map(|i| Sample {
            stack_index: (i % 5000) as i32,
            attribute_indices: vec![1, 2],
            link_index: (i % 7) as i32,
            values: vec![1],
            timestamps_unix_nano: vec![1_700_000_000_000_000_000 + i * 1_000_000],
        })
        .collect();
    let dictionary = ProfilesDictionary {
        location_table: (0..50_000u64)
            .map(|i| Location {
                mapping_index: 1,
                address: 0x7f00_0000_0000 + i * 16,
                lines: vec![Line {
                    function_index: (i % 20_000) as i32,
                    line: (i % 3000) as i64,
                    column: 0,
                }],
                attribute_indices: vec![],
            })
            .collect(),
        string_table: (0..20_000)
            .map(|i| format!("pkg/module.function_{i}"))
            .collect(),
        stack_table: (0..5000)
            .map(|i| Stack {
                location_indices: (0..20).map(|j| (i * 7 + j) % 50_000).collect(),
            })
            .collect(),
        ..Default::default()
    };
    let req = ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    samples,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(dictionary),
    };
    let t = std::time::Instant::now();
    let json = encode_request(&req);
    let enc = t.elapsed();
    let t = std::time::Instant::now();
    let back = decode_request(&json).unwrap();
    let dec = t.elapsed();
    let t = std::time::Instant::now();
    let _: Value = serde_json::from_slice(&json).unwrap();
    let sj = t.elapsed();
    assert!(back == req);
    let mb = json.len() as f64 / 1e6;
    println!(
        "{mb:.1} MB: encode {enc:?} ({:.0} MB/s), decode {dec:?} ({:.0} MB/s); serde_json::Value parse alone {sj:?}",
        mb / enc.as_secs_f64(),
        mb / dec.as_secs_f64()
    );
}
