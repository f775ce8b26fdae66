use super::*;
use crate::otlp::{
    AnyValue, ArrayValue, ExportTracePartialSuccess, InstrumentationScope, KeyValue, KeyValueList,
    Resource, ResourceSpans, ScopeSpans, Span, Status, any_value, span, status,
};
use opentelemetry_proto::tonic::common::v1::EntityRef;
use prost::Message;
use serde_json::{Value, json};

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        key_strindex: 0,
    }
}

fn every_value_kind() -> Vec<KeyValue> {
    use any_value::Value as V;
    vec![
        kv("s", V::StringValue("héllo \"q\" \n".into())),
        kv("b", V::BoolValue(false)),
        kv("i", V::IntValue(i64::MIN)),
        kv("d", V::DoubleValue(f64::NEG_INFINITY)),
        kv("x", V::BytesValue(vec![0xfb, 0xff, 0x00])),
        kv(
            "a",
            V::ArrayValue(ArrayValue {
                values: vec![
                    AnyValue {
                        value: Some(V::IntValue(0)),
                    },
                    AnyValue { value: None },
                ],
            }),
        ),
        kv(
            "kv",
            V::KvlistValue(KeyValueList {
                values: vec![kv("inner", V::DoubleValue(0.1))],
            }),
        ),
        KeyValue {
            key: "no value".into(),
            value: None,
            key_strindex: 0,
        },
    ]
}

/// A request with every field of every traces message set, most to non-default values.
fn full_request() -> ExportTraceServiceRequest {
    let trace_id: Vec<u8> = (1..=16).collect();
    let span = Span {
        trace_id: trace_id.clone(),
        span_id: vec![0xa0, 1, 2, 3, 4, 5, 6, 0xff],
        trace_state: "vendor=a,other=b".into(),
        parent_span_id: vec![9, 8, 7, 6, 5, 4, 3, 2],
        flags: u32::MAX,
        name: "GET /users".into(),
        kind: span::SpanKind::Server as i32,
        start_time_unix_nano: 1_795_317_063_000_371_000,
        end_time_unix_nano: u64::MAX,
        attributes: every_value_kind(),
        dropped_attributes_count: 3,
        events: vec![
            span::Event {
                time_unix_nano: 1_795_317_063_500_000_000,
                name: "exception".into(),
                attributes: vec![kv(
                    "exception.type",
                    any_value::Value::StringValue("E".into()),
                )],
                dropped_attributes_count: 1,
            },
            span::Event::default(),
        ],
        dropped_events_count: 4,
        links: vec![
            span::Link {
                trace_id: vec![0xee; 16],
                span_id: vec![0xdd; 8],
                trace_state: "k=v".into(),
                attributes: vec![kv("link.n", any_value::Value::IntValue(7))],
                dropped_attributes_count: 2,
                flags: 0x301,
            },
            span::Link::default(),
        ],
        dropped_links_count: 5,
        status: Some(Status {
            message: "boom".into(),
            code: status::StatusCode::Error as i32,
        }),
    };
    let root = Span {
        trace_id,
        span_id: vec![1; 8],
        name: "root".into(),
        kind: span::SpanKind::Consumer as i32,
        // Present but empty: must stay `Some(default)`.
        status: Some(Status::default()),
        ..Span::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![
            ResourceSpans {
                resource: Some(Resource {
                    attributes: every_value_kind(),
                    dropped_attributes_count: 2,
                    entity_refs: vec![EntityRef {
                        schema_url: "https://s".into(),
                        r#type: "service".into(),
                        id_keys: vec!["service.name".into()],
                        description_keys: vec!["d".into()],
                    }],
                }),
                scope_spans: vec![
                    ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "lib".into(),
                            version: "1.2".into(),
                            attributes: vec![kv("scope.a", any_value::Value::BoolValue(true))],
                            dropped_attributes_count: 9,
                        }),
                        spans: vec![span, root],
                        schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
                    },
                    ScopeSpans::default(),
                ],
                schema_url: "https://r".into(),
            },
            ResourceSpans::default(),
        ],
    }
}

#[test]
fn every_field_round_trips_exactly() {
    let req = full_request();
    let json = encode_traces_request(&req);
    let back = decode_traces_request(&json).expect("decodes");
    assert_eq!(back, req);
    // protobuf → JSON → protobuf: the same bytes.
    assert_eq!(back.encode_to_vec(), req.encode_to_vec());
    // TracesData has the same layout.
    let data = decode_traces_data(&json).expect("decodes");
    assert_eq!(data.resource_spans, req.resource_spans);
    assert_eq!(encode_traces_data(&data), json);
}

#[test]
fn output_follows_the_otlp_json_conventions() {
    let json: Value = serde_json::from_slice(&encode_traces_request(&full_request())).unwrap();
    let span = &json["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
    assert_eq!(span["traceId"], "0102030405060708090a0b0c0d0e0f10");
    assert_eq!(span["spanId"], "a0010203040506ff");
    assert_eq!(span["parentSpanId"], "0908070605040302");
    assert_eq!(span["kind"], 2);
    assert_eq!(span["flags"], json!(u32::MAX));
    assert_eq!(span["startTimeUnixNano"], "1795317063000371000");
    assert_eq!(span["endTimeUnixNano"], "18446744073709551615");
    assert_eq!(span["droppedAttributesCount"], 3);
    assert_eq!(span["status"], json!({"message": "boom", "code": 2}));
    assert_eq!(span["events"][0]["timeUnixNano"], "1795317063500000000");
    assert_eq!(span["events"][1], json!({}));
    assert_eq!(span["links"][0]["traceId"], "ee".repeat(16));
    assert_eq!(span["links"][0]["spanId"], "dd".repeat(8));
    assert_eq!(span["links"][0]["flags"], 0x301);
    assert_eq!(
        span["attributes"][2]["value"],
        json!({"intValue": "-9223372036854775808"})
    );
    assert_eq!(
        span["attributes"][4]["value"],
        json!({"bytesValue": "+/8A"})
    );
    let root = &json["resourceSpans"][0]["scopeSpans"][0]["spans"][1];
    assert_eq!(root["status"], json!({}));
    assert!(root.get("parentSpanId").is_none());
    assert_eq!(json["resourceSpans"][0]["scopeSpans"][1], json!({}));
    assert_eq!(json["resourceSpans"][1], json!({}));
    // Keys in field-number order (serde_json's map sorts them, so read the text).
    let text = String::from_utf8(encode_traces_request(&full_request())).unwrap();
    let start = text.find("\"spans\":[{").unwrap() + "\"spans\":[".len();
    assert_eq!(
        top_level_keys(&text[start..]),
        [
            "traceId",
            "spanId",
            "traceState",
            "parentSpanId",
            "name",
            "kind",
            "startTimeUnixNano",
            "endTimeUnixNano",
            "attributes",
            "droppedAttributesCount",
            "events",
            "droppedEventsCount",
            "links",
            "droppedLinksCount",
            "status",
            "flags"
        ]
    );
}

/// The keys of the JSON object `text` starts with, in text order.
fn top_level_keys(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let (mut depth, mut i, mut keys) = (0usize, 0usize, Vec::new());
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b'"' => {
                let mut j = i + 1;
                while b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && b[j + 1] == b':' {
                    keys.push(text[i + 1..j].to_string());
                }
                i = j;
            }
            _ => {}
        }
        i += 1;
    }
    keys
}

#[test]
fn reads_snake_case_numbers_enum_names_and_ignores_unknown_fields() {
    let json = br#"{
            "resource_spans": [{
                "resource": {"attributes": [{"key": "service.name", "value": {"string_value": "api"}}]},
                "scope_spans": [{
                    "scope": {"name": "lib"},
                    "spans": [{
                        "trace_id": "0102030405060708090A0B0C0D0E0F10",
                        "span_id": "AQIDBAUGBwg=",
                        "parent_span_id": null,
                        "trace_state": "",
                        "flags": "257",
                        "name": "n",
                        "kind": "SPAN_KIND_CLIENT",
                        "start_time_unix_nano": 1000,
                        "end_time_unix_nano": "2.5e3",
                        "dropped_attributes_count": "1",
                        "events": [{"time_unix_nano": "5", "name": "e", "dropped_attributes_count": 2}],
                        "dropped_events_count": 3,
                        "links": [{"trace_id": "", "span_id": "0101010101010101", "flags": 1,
                                   "trace_state": "t", "dropped_attributes_count": 4, "future": [1, {"x": 2}]}],
                        "dropped_links_count": 6,
                        "status": {"code": "STATUS_CODE_OK", "message": "fine"},
                        "unknownField": {"deep": [[[]]]}
                    }, {
                        "traceId": "0102030405060708090a0b0c0d0e0f10",
                        "spanId": "0101010101010101",
                        "kind": 99,
                        "status": {"code": "2"}
                    }]
                }]
            }],
            "extra": true
        }"#;
    let req = decode_traces_request(json).expect("decodes");
    let rs = &req.resource_spans[0];
    assert_eq!(
        rs.resource.as_ref().unwrap().attributes[0],
        kv("service.name", any_value::Value::StringValue("api".into()))
    );
    assert_eq!(rs.scope_spans[0].scope.as_ref().unwrap().name, "lib");
    let s = &rs.scope_spans[0].spans[0];
    assert_eq!(s.trace_id, (1..=16).collect::<Vec<u8>>());
    assert_eq!(s.span_id, vec![1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(s.parent_span_id.is_empty());
    assert_eq!(s.flags, 257);
    assert_eq!(s.kind, span::SpanKind::Client as i32);
    assert_eq!((s.start_time_unix_nano, s.end_time_unix_nano), (1000, 2500));
    assert_eq!(s.dropped_attributes_count, 1);
    assert_eq!(
        s.events,
        vec![span::Event {
            time_unix_nano: 5,
            name: "e".into(),
            attributes: vec![],
            dropped_attributes_count: 2,
        }]
    );
    assert_eq!(s.dropped_events_count, 3);
    assert_eq!(
        s.links,
        vec![span::Link {
            trace_id: vec![],
            span_id: vec![1; 8],
            trace_state: "t".into(),
            attributes: vec![],
            dropped_attributes_count: 4,
            flags: 1,
        }]
    );
    assert_eq!(s.dropped_links_count, 6);
    assert_eq!(
        s.status,
        Some(Status {
            message: "fine".into(),
            code: status::StatusCode::Ok as i32
        })
    );
    let second = &rs.scope_spans[0].spans[1];
    // Unknown enum numbers are kept, as protobuf keeps them.
    assert_eq!(second.kind, 99);
    assert_eq!(second.status.as_ref().unwrap().code, 2);
}

#[test]
fn errors_name_the_path() {
    let cases: [(&[u8], &str, &str); 6] = [
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{},{"traceId":"xyz"}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[1].traceId",
            "neither hex nor base64",
        ),
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_NOPE"}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].kind",
            "unknown enum value",
        ),
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"-1"}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano",
            "negative",
        ),
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"flags":4294967296}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].flags",
            "out of range",
        ),
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":true}}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].status.code",
            "boolean",
        ),
        (
            br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{"timeUnixNano":1.5}]}]}]}]}"#,
            "resourceSpans[0].scopeSpans[0].spans[0].events[0].timeUnixNano",
            "fractional",
        ),
    ];
    for (json, path, message) in cases {
        let e = decode_traces_request(json).expect_err("invalid");
        assert_eq!(e.path, path, "{e}");
        assert!(e.message.contains(message), "{e}");
    }
    assert!(decode_traces_request(b"[]").is_err());
    assert!(decode_traces_request(b"{} x").is_err());
    assert_eq!(
        decode_traces_request(b" {} ").unwrap(),
        ExportTraceServiceRequest::default()
    );
}

#[test]
fn responses_round_trip() {
    assert_eq!(
        encode_traces_response(&ExportTraceServiceResponse::default()),
        b"{}"
    );
    let resp = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 2,
            error_message: "2 invalid span(s)".into(),
        }),
    };
    let json = encode_traces_response(&resp);
    assert_eq!(
        serde_json::from_slice::<Value>(&json).unwrap(),
        json!({"partialSuccess": {"rejectedSpans": "2", "errorMessage": "2 invalid span(s)"}})
    );
    assert_eq!(decode_traces_response(&json).unwrap(), resp);
    assert_eq!(
        decode_traces_response(br#"{"partial_success":{"rejected_spans":3}}"#)
            .unwrap()
            .partial_success
            .unwrap()
            .rejected_spans,
        3
    );
    // Present but empty partial success stays present.
    let empty = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess::default()),
    };
    assert_eq!(
        decode_traces_response(&encode_traces_response(&empty)).unwrap(),
        empty
    );
}

mod prop {
    use super::*;
    use proptest::collection::vec;
    use proptest::option;
    use proptest::prelude::*;

    fn id(len: usize) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![Just(Vec::new()), vec(any::<u8>(), len..=len)]
    }

    fn attrs() -> impl Strategy<Value = Vec<KeyValue>> {
        vec(
            (".{0,6}", any::<i64>(), ".{0,6}").prop_map(|(k, i, s)| {
                if i % 2 == 0 {
                    kv(&k, any_value::Value::IntValue(i))
                } else {
                    kv(&k, any_value::Value::StringValue(s))
                }
            }),
            0..3,
        )
    }

    fn span_strategy() -> impl Strategy<Value = Span> {
        let event = (any::<u64>(), ".{0,6}", attrs(), any::<u32>()).prop_map(
            |(time_unix_nano, name, attributes, dropped_attributes_count)| span::Event {
                time_unix_nano,
                name,
                attributes,
                dropped_attributes_count,
            },
        );
        let link = (id(16), id(8), ".{0,6}", attrs(), any::<u32>(), any::<u32>()).prop_map(
            |(trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags)| {
                span::Link {
                    trace_id,
                    span_id,
                    trace_state,
                    attributes,
                    dropped_attributes_count,
                    flags,
                }
            },
        );
        let status = option::of(
            (".{0,6}", any::<i32>()).prop_map(|(message, code)| Status { message, code }),
        );
        (
            (
                id(16),
                id(8),
                ".{0,6}",
                id(8),
                any::<u32>(),
                ".{0,8}",
                any::<i32>(),
            ),
            (any::<u64>(), any::<u64>(), attrs(), any::<u32>()),
            (
                vec(event, 0..2),
                any::<u32>(),
                vec(link, 0..2),
                any::<u32>(),
                status,
            ),
        )
            .prop_map(
                |(
                    (trace_id, span_id, trace_state, parent_span_id, flags, name, kind),
                    (
                        start_time_unix_nano,
                        end_time_unix_nano,
                        attributes,
                        dropped_attributes_count,
                    ),
                    (events, dropped_events_count, links, dropped_links_count, status),
                )| Span {
                    trace_id,
                    span_id,
                    trace_state,
                    parent_span_id,
                    flags,
                    name,
                    kind,
                    start_time_unix_nano,
                    end_time_unix_nano,
                    attributes,
                    dropped_attributes_count,
                    events,
                    dropped_events_count,
                    links,
                    dropped_links_count,
                    status,
                },
            )
    }

    fn request_strategy() -> impl Strategy<Value = ExportTraceServiceRequest> {
        let scope_spans = (
            option::of(
                (".{0,4}", ".{0,4}").prop_map(|(name, version)| InstrumentationScope {
                    name,
                    version,
                    ..InstrumentationScope::default()
                }),
            ),
            vec(span_strategy(), 0..3),
            ".{0,4}",
        )
            .prop_map(|(scope, spans, schema_url)| ScopeSpans {
                scope,
                spans,
                schema_url,
            });
        let resource_spans = (
            option::of(attrs().prop_map(|attributes| Resource {
                attributes,
                ..Resource::default()
            })),
            vec(scope_spans, 0..3),
            ".{0,4}",
        )
            .prop_map(|(resource, scope_spans, schema_url)| ResourceSpans {
                resource,
                scope_spans,
                schema_url,
            });
        vec(resource_spans, 0..3)
            .prop_map(|resource_spans| ExportTraceServiceRequest { resource_spans })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn requests_round_trip_exactly(req in request_strategy()) {
            let json = encode_traces_request(&req);
            let back = decode_traces_request(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, req);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..200)) {
            let _ = decode_traces_request(&bytes);
            let _ = decode_traces_response(&bytes);
        }
    }
}
