//! Bad input never panics: it is rejected with a clear error, and never sinks the good items.

use profilink_proto::otlp::{ExportProfilesServiceRequest, any_value};
use profilink_proto::sentry::{
    Frame, ProfileChunk, ProfileData, Sample, SampleProfileV1, V1Sample,
};
use profilink_proto::validate::validate_otlp;
use profilink_translator::Dictionary;
use profilink_translator::NoLinks;
use profilink_translator::TranslateError;
use profilink_translator::sentry_to_otlp::{
    OtlpOptions, SentryInput, V1WithTransaction, to_otlp, try_to_otlp,
};
use profilink_translator::sentry_to_otlp::{restore_chunk, restore_request};

fn good(chunk_id: &str) -> ProfileChunk {
    ProfileChunk {
        chunk_id: chunk_id.into(),
        profiler_id: "87b148781b0a4a5284a3e3f9cc93e1ec".into(),
        platform: "python".into(),
        version: "2".into(),
        profile: ProfileData {
            frames: vec![std::sync::Arc::new(Frame {
                function: Some("main".into()),
                lineno: Some(3),
                ..Default::default()
            })],
            stacks: vec![vec![0], vec![]],
            samples: vec![
                Sample {
                    timestamp: 1795317063.001,
                    stack_id: 0,
                    thread_id: "1".into(),
                },
                Sample {
                    timestamp: 1795317063.011,
                    stack_id: 1,
                    thread_id: "1".into(),
                },
            ],
            ..Default::default()
        },
        ..Default::default()
    }
}

fn with_timestamp(t: f64) -> ProfileChunk {
    let mut c = good("ffffffffffffffffffffffffffffffff");
    c.profile.samples[1].timestamp = t;
    c
}

fn translate_one(c: ProfileChunk) -> Result<ExportProfilesServiceRequest, TranslateError> {
    try_to_otlp(
        &SentryInput {
            chunks: &[c],
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    )
}

#[test]
fn non_finite_and_negative_timestamps_are_rejected() {
    for t in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 1e300] {
        match translate_one(with_timestamp(t)) {
            Err(TranslateError::InvalidTimestamp(msg)) => {
                assert!(msg.to_string().contains("samples[1].timestamp"), "{msg}")
            }
            other => panic!("{t}: {other:?}"),
        }
    }
}

#[test]
fn a_bad_chunk_does_not_sink_the_others_nor_leave_anything_behind() {
    let ok = good("0123456789abcdef0123456789abcdef");
    let mut bad = with_timestamp(f64::NAN);
    bad.profile.frames.push(std::sync::Arc::new(Frame {
        function: Some("only-in-the-bad-chunk".into()),
        ..Default::default()
    }));
    bad.profile.stacks.push(vec![1]);
    bad.profile.samples.insert(
        0,
        Sample {
            timestamp: 1795317063.0,
            stack_id: 2,
            thread_id: "9".into(),
        },
    );
    let chunks = [bad, ok.clone()];
    let t = to_otlp(
        &SentryInput {
            chunks: &chunks,
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    );
    assert_eq!(t.rejected.len(), 1);
    assert_eq!(
        t.rejected[0].item,
        "chunk[0] ffffffffffffffffffffffffffffffff"
    );
    assert!(matches!(
        t.rejected[0].error,
        TranslateError::InvalidTimestamp(_)
    ));
    let alone = translate_one(ok).unwrap();
    assert_eq!(
        t.request, alone,
        "the rejected chunk left entries in the dictionary"
    );
    assert!(validate_otlp(t.request.dictionary.as_ref(), &t.request.resource_profiles).is_empty());
}

#[test]
fn stack_and_frame_indices_out_of_range_are_rejected() {
    let mut c = good("0123456789abcdef0123456789abcdef");
    c.profile.samples[0].stack_id = 7;
    assert_eq!(
        translate_one(c).unwrap_err(),
        TranslateError::SentryIndexOutOfRange {
            what: "stack_id",
            index: 7,
            len: 2
        }
    );
    let mut c = good("0123456789abcdef0123456789abcdef");
    c.profile.stacks.push(vec![0, 5]);
    let e = translate_one(c).unwrap_err();
    assert_eq!(
        e,
        TranslateError::SentryIndexOutOfRange {
            what: "frame index",
            index: 5,
            len: 1
        }
    );
    assert_eq!(e.to_string(), "frame index 5 is out of range (1 entries)");
    let mut c = good("0123456789abcdef0123456789abcdef");
    c.profile.stacks[0] = vec![usize::MAX];
    assert!(translate_one(c).is_err());
}

#[test]
fn integer_thread_ids_in_json_are_an_error_with_a_path() {
    let json = br#"{"chunk_id":"0123456789abcdef0123456789abcdef","profiler_id":"87b148781b0a4a5284a3e3f9cc93e1ec",
        "platform":"python","version":"2","client_sdk":{"name":"x","version":"1"},
        "profile":{"frames":[{}],"stacks":[[0]],"samples":[{"timestamp":1.5,"stack_id":0,"thread_id":"1"},
        {"timestamp":1.6,"stack_id":0,"thread_id":259}]}}"#;
    let e = ProfileChunk::from_json(json).unwrap_err();
    assert_eq!(e.path, "profile.samples[1].thread_id", "{e}");
}

#[test]
fn deeply_nested_json_is_an_error_not_a_crash() {
    let depth = 100_000;
    let nest = |open: &str, close: &str| format!("{}{}", open.repeat(depth), close.repeat(depth));
    // Where any JSON value is accepted (extra debug image fields, span data), serde_json's
    // recursion limit (128) stops the parser.
    let json = format!(
        r#"{{"debug_meta":{{"images":[{{"type":"symbolic","extra":{}}}]}}}}"#,
        nest("[", "]")
    );
    let e = ProfileChunk::from_json(json.as_bytes()).unwrap_err();
    assert!(e.message.contains("recursion limit"), "{e}");
    let json = format!(
        r#"{{"spans":[{{"data":{{"thread.id":{}}}}}]}}"#,
        nest("[", "]")
    );
    let e = profilink_proto::sentry::Transaction::from_json(json.as_bytes()).unwrap_err();
    assert!(e.message.contains("recursion limit"), "{e}");
    // Where a string is expected, the type error comes first.
    let json = format!(
        r#"{{"profile":{{"frames":[{{"function":{}}}]}}}}"#,
        nest("[", "]")
    );
    let e = ProfileChunk::from_json(json.as_bytes()).unwrap_err();
    assert_eq!(e.path, "profile.frames[0].function");
    // Inside an unknown field: serde_json skips ignored values without recursing, so this is
    // bounded too (it just parses).
    let json = format!(r#"{{"unknown":{}}}"#, nest("[", "]"));
    assert_eq!(
        ProfileChunk::from_json(json.as_bytes()).unwrap(),
        ProfileChunk::default()
    );
}

#[test]
fn duplicate_keys_are_an_error() {
    let json = br#"{"chunk_id":"a","chunk_id":"b","profile":{}}"#;
    let e = ProfileChunk::from_json(json).unwrap_err();
    assert!(e.message.contains("duplicate field"), "{e}");
}

#[test]
fn a_100_mb_payload_just_works() {
    let big = "x".repeat(100 * 1024 * 1024);
    let mut c = good("0123456789abcdef0123456789abcdef");
    std::sync::Arc::make_mut(&mut c.profile.frames[0]).function = Some(big.into());
    let json = c.to_json();
    assert!(json.len() > 100 * 1024 * 1024);
    let parsed = ProfileChunk::from_json(&json).unwrap();
    drop(json);
    let req = translate_one(parsed).unwrap();
    let back = restore_request(&req).remove(0).unwrap();
    assert_eq!(back, c);
}

#[test]
fn empty_chunks_are_fine() {
    let mut c = good("0123456789abcdef0123456789abcdef");
    c.profile = ProfileData::default();
    let req = translate_one(c.clone()).unwrap();
    assert!(validate_otlp(req.dictionary.as_ref(), &req.resource_profiles).is_empty());
    assert_eq!(restore_request(&req).remove(0).unwrap(), c);
}

#[test]
fn bad_v1_profiles_are_rejected() {
    let p = SampleProfileV1 {
        event_id: Some("602ceef10d9343188ba85d4052a5e23f".into()),
        profile: profilink_proto::sentry::V1ProfileData {
            frames: vec![std::sync::Arc::new(Frame::default())],
            stacks: vec![vec![0]],
            samples: vec![V1Sample {
                elapsed_since_start_ns: u64::MAX,
                thread_id: "1".into(),
                stack_id: 0,
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    let no_ts = V1WithTransaction {
        profile: p.clone(),
        transaction: None,
    };
    let mut overflow = no_ts.clone();
    overflow.profile.timestamp = Some(profilink_proto::sentry::Timestamp(1795317063.0));
    let mut bad_stack = overflow.clone();
    bad_stack.profile.profile.samples[0] = V1Sample {
        elapsed_since_start_ns: 5,
        thread_id: "1".into(),
        stack_id: 3,
    };
    let v = [no_ts, overflow, bad_stack];
    let t = to_otlp(
        &SentryInput {
            chunks: &[],
            v1_profiles: &v,
        },
        &NoLinks,
        &OtlpOptions::default(),
    );
    assert_eq!(t.rejected.len(), 3);
    assert!(matches!(
        t.rejected[0].error,
        TranslateError::InvalidTimestamp(_)
    ));
    assert!(matches!(
        t.rejected[1].error,
        TranslateError::InvalidTimestamp(_)
    ));
    assert!(matches!(
        t.rejected[2].error,
        TranslateError::SentryIndexOutOfRange {
            what: "stack_id",
            ..
        }
    ));
    assert!(t.request.resource_profiles.is_empty());
}

fn p0(r: &mut ExportProfilesServiceRequest) -> &mut profilink_proto::otlp::Profile {
    &mut r.resource_profiles[0].scope_profiles[0].profiles[0]
}

/// Tampered OTLP given to `restore_chunk`: errors, never panics.
#[test]
fn restore_rejects_malformed_otlp() {
    let req = translate_one(good("0123456789abcdef0123456789abcdef")).unwrap();
    let check = |f: &dyn Fn(&mut ExportProfilesServiceRequest)| {
        let mut r = req.clone();
        f(&mut r);
        let d = Dictionary::new(r.dictionary.as_ref());
        let rp = &r.resource_profiles[0];
        restore_chunk(&d, rp, &rp.scope_profiles[0].profiles[0])
    };
    assert!(check(&|_| ()).is_ok());
    assert!(matches!(
        check(&|r| { p0(r).samples[0].stack_index = 999 }),
        Err(TranslateError::IndexOutOfRange {
            table: "stack_table",
            ..
        })
    ));
    assert!(check(&|r| { p0(r).samples[0].attribute_indices = vec![-4] }).is_err());
    assert!(check(&|r| { p0(r).samples[0].attribute_indices.clear() }).is_err());
    assert!(check(&|r| { p0(r).attribute_indices.clear() }).is_err());
    assert!(
        check(&|r| r.dictionary.as_mut().unwrap().stack_table[1].location_indices = vec![0])
            .is_err()
    );
    assert!(
        check(&|r| r.dictionary.as_mut().unwrap().stack_table[1].location_indices = vec![77])
            .is_err()
    );
    assert!(
        check(&|r| r.dictionary.as_mut().unwrap().location_table[1].lines[0].line = -1).is_err()
    );
    assert!(
        check(&|r| r.dictionary.as_mut().unwrap().location_table[1].lines[0].function_index = 50)
            .is_err()
    );
    assert!(check(&|r| r.dictionary = None).is_err());
    // A non-JSON sentry.thread_metadata.
    let mut c = good("0123456789abcdef0123456789abcdef");
    c.profile
        .thread_metadata
        .insert("1".into(), Default::default());
    let req2 = translate_one(c).unwrap();
    let mut r = req2.clone();
    for a in &mut r.dictionary.as_mut().unwrap().attribute_table {
        if let Some(any_value::Value::StringValue(s)) =
            a.value.as_mut().and_then(|v| v.value.as_mut())
            && s.starts_with('{')
        {
            *s = "{not json".into();
        }
    }
    let d = Dictionary::new(r.dictionary.as_ref());
    let rp = &r.resource_profiles[0];
    let e = restore_chunk(&d, rp, &rp.scope_profiles[0].profiles[0]).unwrap_err();
    assert!(e.to_string().contains("sentry.thread_metadata"), "{e}");
}
