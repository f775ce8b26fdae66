//! Lenient binary decoding (`profilink_proto::wire`) on real data: the eBPF fixture valid, with
//! one stray byte, and in the proto 1.9 layout in both detection cases; inputs neither layout
//! fits; random bytes.

use profilink_proto::otlp::{ExportProfilesServiceRequest, any_value};
use profilink_proto::wire::{
    DecodeReport, LayoutReason, SampleLayout, WireDecodeError, consistency, decode_uncounted, v1_9,
};
use prost::Message;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/otlp/ebpf-profile.pb"
);

fn fixture() -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest::decode(std::fs::read(FIXTURE).unwrap().as_slice()).unwrap()
}

/// The fixture with its first thread name replaced by `name` (plain ASCII), and that name.
fn with_thread_name(name: &str) -> (ExportProfilesServiceRequest, usize) {
    let mut r = fixture();
    let d = r.dictionary.as_mut().unwrap();
    let key = d
        .string_table
        .iter()
        .position(|s| s == "thread.name")
        .unwrap() as i32;
    let at = d
        .attribute_table
        .iter()
        .position(|a| a.key_strindex == key)
        .expect("a thread.name attribute");
    let value = d.attribute_table[at].value.as_mut().unwrap();
    match &mut value.value {
        Some(any_value::Value::StringValue(s)) => *s = name.to_owned(),
        Some(any_value::Value::StringValueStrindex(i)) => {
            d.string_table[*i as usize] = name.to_owned()
        }
        other => panic!("thread.name is {other:?}"),
    }
    (r, at)
}

fn thread_name(r: &ExportProfilesServiceRequest, at: usize) -> String {
    let d = r.dictionary.as_ref().unwrap();
    match &d.attribute_table[at].value.as_ref().unwrap().value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::StringValueStrindex(i)) => d.string_table[*i as usize].clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_valid_request_decodes_as_prost_does() {
    let bytes = std::fs::read(FIXTURE).unwrap();
    let (r, report) = decode_uncounted(&bytes).unwrap();
    assert_eq!(r, fixture());
    assert_eq!(report, DecodeReport::default());
    assert_eq!(consistency(&r), Ok(()));
}

#[test]
fn one_stray_byte_in_a_thread_name_is_replaced_and_counted() {
    let (r, at) = with_thread_name("worker-XYZ-1");
    let mut bytes = r.encode_to_vec();
    let pos = bytes
        .windows(12)
        .position(|w| w == b"worker-XYZ-1")
        .unwrap();
    bytes[pos + 8] = 0xff; // "worker-X\xffZ-1": same length, one invalid byte
    let strict = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap_err();
    assert!(strict.to_string().contains("UTF-8"), "{strict}");
    let (decoded, report) = decode_uncounted(&bytes).unwrap();
    assert_eq!(report.utf8_replacements, 1);
    assert_eq!(report.layout, SampleLayout::V1_10);
    assert_eq!(thread_name(&decoded, at), "worker-X\u{FFFD}Z-1");
    // Everything else is as sent.
    let mut expected = r.clone();
    let (fixed, _) = with_thread_name("worker-X\u{FFFD}Z-1");
    expected.dictionary = fixed.dictionary;
    assert_eq!(decoded, expected);
}

#[test]
fn invalid_utf8_everywhere_strings_live_is_replaced() {
    // Truncated multi-byte sequences, lone continuation bytes and overlong forms, each one
    // replacement per maximal invalid sequence (as String::from_utf8_lossy counts them).
    let (r, at) = with_thread_name("ab\u{e9}cd");
    let mut bytes = r.encode_to_vec();
    let pos = bytes
        .windows(6)
        .position(|w| w == "ab\u{e9}cd".as_bytes())
        .unwrap();
    bytes[pos + 3] = b'X'; // "ab\xc3Xcd": a truncated sequence
    let (decoded, report) = decode_uncounted(&bytes).unwrap();
    assert_eq!(report.utf8_replacements, 1);
    assert_eq!(thread_name(&decoded, at), "ab\u{FFFD}Xcd");
    // Resource attribute keys and values, scope name, schema URL, string table.
    let mut r = fixture();
    r.resource_profiles[0].schema_url = "SCHEMA".into();
    r.resource_profiles[0].scope_profiles[0]
        .scope
        .as_mut()
        .unwrap()
        .name = "SCOPE".into();
    r.dictionary
        .as_mut()
        .unwrap()
        .string_table
        .push("TABLE".into());
    let mut bytes = r.encode_to_vec();
    for word in [&b"SCHEMA"[..], b"SCOPE", b"TABLE"] {
        let pos = bytes.windows(word.len()).position(|w| w == word).unwrap();
        bytes[pos] = 0x80;
    }
    let (decoded, report) = decode_uncounted(&bytes).unwrap();
    assert_eq!(report.utf8_replacements, 3);
    assert_eq!(decoded.resource_profiles[0].schema_url, "\u{FFFD}CHEMA");
    assert_eq!(
        decoded.resource_profiles[0].scope_profiles[0]
            .scope
            .as_ref()
            .unwrap()
            .name,
        "\u{FFFD}COPE"
    );
    assert_eq!(
        decoded
            .dictionary
            .as_ref()
            .unwrap()
            .string_table
            .last()
            .unwrap(),
        "\u{FFFD}ABLE"
    );
}

#[test]
fn proto_1_9_that_fails_as_1_10_is_read_as_1_9() {
    // The fixture's samples have attribute indices: packed at field 3 in 1.9, where 1.10 has
    // the varint link_index.
    let r = fixture();
    let old = v1_9::encode(&r);
    assert!(ExportProfilesServiceRequest::decode(old.as_slice()).is_err());
    let (decoded, report) = decode_uncounted(&old).unwrap();
    assert_eq!(decoded, r);
    assert_eq!(report.layout, SampleLayout::V1_9);
    assert_eq!(report.layout_reason, Some(LayoutReason::DecodeError));
}

/// The fixture without sample attributes (what decodes as 1.10 from 1.9 bytes).
fn without_sample_attributes(values: bool, timestamps: bool) -> ExportProfilesServiceRequest {
    let mut r = fixture();
    for s in r
        .resource_profiles
        .iter_mut()
        .flat_map(|rp| &mut rp.scope_profiles)
        .flat_map(|sp| &mut sp.profiles)
        .flat_map(|p| &mut p.samples)
    {
        s.attribute_indices.clear();
        let n = s.timestamps_unix_nano.len().max(s.values.len());
        if values && s.values.is_empty() {
            s.values = vec![1; n];
        }
        if !timestamps {
            s.values = vec![s.values.iter().sum::<i64>().max(n as i64)];
            s.timestamps_unix_nano.clear();
        }
    }
    r
}

#[test]
fn proto_1_9_that_decodes_as_1_10_is_detected_by_its_inconsistency() {
    // Values and timestamps: the values ([1, 1, …]) read as repeated attribute indices.
    // Values only (async-profiler's shape): samples left with neither values nor timestamps.
    for r in [
        without_sample_attributes(true, true),
        without_sample_attributes(true, false),
    ] {
        let old = v1_9::encode(&r);
        let as_1_10 = ExportProfilesServiceRequest::decode(old.as_slice()).unwrap();
        assert_ne!(as_1_10, r);
        assert!(consistency(&as_1_10).is_err());
        let (decoded, report) = decode_uncounted(&old).unwrap();
        assert_eq!(decoded, r);
        assert_eq!(report.layout, SampleLayout::V1_9);
        assert_eq!(report.layout_reason, Some(LayoutReason::Inconsistent));
        // Its 1.10 encoding is read as 1.10.
        let (same, report) = decode_uncounted(&r.encode_to_vec()).unwrap();
        assert_eq!(same, r);
        assert_eq!(report, DecodeReport::default());
    }
}

#[test]
fn a_stray_byte_in_a_1_9_request_is_replaced_too() {
    let (r, at) = with_thread_name("worker-XYZ-1");
    let mut old = v1_9::encode(&r);
    let pos = old.windows(12).position(|w| w == b"worker-XYZ-1").unwrap();
    old[pos + 8] = 0xff;
    let (decoded, report) = decode_uncounted(&old).unwrap();
    assert_eq!(report.layout, SampleLayout::V1_9);
    assert_eq!(report.utf8_replacements, 1);
    assert_eq!(thread_name(&decoded, at), "worker-X\u{FFFD}Z-1");
}

#[test]
fn a_request_neither_layout_fits_is_refused_naming_both() {
    // 1.10: an attribute index past the table; 1.9: one value for two timestamps.
    let mut r = fixture();
    let attrs = r.dictionary.as_ref().unwrap().attribute_table.len() as i32;
    let s = &mut r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
    s.attribute_indices = vec![attrs + 5];
    s.timestamps_unix_nano = vec![1, 2];
    s.values.clear();
    let e = decode_uncounted(&r.encode_to_vec()).unwrap_err();
    assert!(matches!(e, WireDecodeError::NeitherLayout { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("proto 1.10") && text.contains("proto 1.9"),
        "{text}"
    );
    assert!(text.contains("outside attribute_table"), "{text}");
    assert!(text.contains("1 values but 2 timestamps"), "{text}");
}

#[test]
fn a_1_10_request_with_one_bad_sample_is_left_to_validation() {
    // Nothing renumbered (no field 2-4 in its samples): both readings are the same, so it is
    // read as 1.10 and validation reports the sample.
    let mut r = fixture();
    let s = &mut r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0];
    s.attribute_indices.clear();
    s.link_index = 0;
    s.values.clear();
    s.timestamps_unix_nano.clear();
    let (decoded, report) = decode_uncounted(&r.encode_to_vec()).unwrap();
    assert_eq!(decoded, r);
    assert_eq!(report, DecodeReport::default());
}

#[test]
fn garbage_is_undecodable_in_both_layouts() {
    let e = decode_uncounted(b"\xff\xff\xff").unwrap_err();
    assert!(matches!(e, WireDecodeError::Undecodable { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("not a binary OTLP profiles message")
    );
}

#[test]
fn random_bytes_never_panic() {
    // A deterministic xorshift: mutations of the fixture in both encodings.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let bases = [std::fs::read(FIXTURE).unwrap(), v1_9::encode(&fixture())];
    for i in 0..600 {
        let mut b = bases[i % 2].clone();
        for _ in 0..(1 + next() % 8) {
            let at = (next() as usize) % b.len();
            b[at] = next() as u8;
        }
        if i % 3 == 0 {
            b.truncate((next() as usize) % b.len());
        }
        if let Ok((r, _)) = decode_uncounted(&b) {
            // Whatever is accepted re-encodes and decodes as itself.
            let again = ExportProfilesServiceRequest::decode(r.encode_to_vec().as_slice()).unwrap();
            assert_eq!(again, r);
        }
    }
}
