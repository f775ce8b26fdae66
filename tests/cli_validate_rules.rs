//! End-to-end: one hand-made invalid input per validation rule; `profilink validate` names the
//! rule and exits 1 (warnings: with `--strict`).

mod common;

use common::{fixtures, profilink, write};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::Envelope;
use prost::Message;
use serde_json::{Value, json};
use std::path::Path;

fn ebpf() -> ExportProfilesServiceRequest {
    let bytes = std::fs::read(fixtures().join("otlp/python-sdk-trace-chunk-00.pb")).unwrap();
    ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap()
}

fn chunk() -> Value {
    let bytes = std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
    let env = Envelope::parse(&bytes).unwrap();
    serde_json::from_slice(&env.items[0].payload).unwrap()
}

fn envelope_of(items: &[(Value, &Value)]) -> Vec<u8> {
    let mut out = b"{}\n".to_vec();
    for (header, payload) in items {
        let body = serde_json::to_vec(payload).unwrap();
        let mut header = header.clone();
        header["length"] = json!(body.len());
        out.extend_from_slice(&serde_json::to_vec(&header).unwrap());
        out.push(b'\n');
        out.extend_from_slice(&body);
        out.push(b'\n');
    }
    out
}

fn assert_rule(dir: &Path, name: &str, bytes: &[u8], rule: &str, strict: bool) {
    let path = write(dir, name, bytes);
    let mut args = vec!["validate".as_ref(), path.as_os_str()];
    if strict {
        args.insert(1, "--strict".as_ref());
    }
    let run = profilink(args);
    assert_eq!(run.code, 1, "{name}: expected exit 1\n{}", run.stdout);
    let tag = format!("[{rule}]");
    assert!(
        run.stdout.contains(&tag),
        "{name}: expected {tag} in\n{}",
        run.stdout
    );
}

type OtlpEdit = fn(&mut ExportProfilesServiceRequest);

#[test]
fn otlp_rules() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, OtlpEdit, bool)> = vec![
        (
            "string-table-zero",
            // A warning now (index 0 is read as that entry, as pdata does): --strict fails.
            |r| r.dictionary.as_mut().unwrap().string_table[0] = "x".into(),
            true,
        ),
        (
            "table-zero",
            |r| r.dictionary.as_mut().unwrap().location_table[0].address = 7,
            true,
        ),
        (
            "index-out-of-range",
            |r| sample(r).stack_index = 1 << 30,
            false,
        ),
        (
            "link-id-length",
            |r| r.dictionary.as_mut().unwrap().link_table[1].span_id = vec![1; 3],
            false,
        ),
        (
            "mapping-range",
            |r| {
                let d = r.dictionary.as_mut().unwrap();
                d.mapping_table.push(Default::default());
                let m = d.mapping_table.last_mut().unwrap();
                m.memory_start = 10;
                m.memory_limit = 5;
            },
            false,
        ),
        (
            "sample-empty",
            |r| {
                let s = sample(r);
                s.values.clear();
                s.timestamps_unix_nano.clear();
            },
            false,
        ),
        (
            "sample-length-mismatch",
            |r| {
                let s = sample(r);
                s.values = vec![1; s.timestamps_unix_nano.len() + 1];
            },
            false,
        ),
        (
            "timestamp-outside-profile",
            |r| sample(r).timestamps_unix_nano[0] = 1,
            true,
        ),
        (
            "duplicate-attribute-key",
            |r| {
                let s = sample(r);
                let first = s.attribute_indices[0];
                s.attribute_indices.push(first);
            },
            false,
        ),
    ];
    for (rule, edit, strict) in cases {
        let mut req = ebpf();
        edit(&mut req);
        assert_rule(
            dir.path(),
            &format!("{rule}.pb"),
            &req.encode_to_vec(),
            rule,
            strict,
        );
    }
}

fn sample(r: &mut ExportProfilesServiceRequest) -> &mut profilink_proto::otlp::Sample {
    &mut r.resource_profiles[0].scope_profiles[0].profiles[0].samples[0]
}

type ChunkEdit = fn(&mut Value);

#[test]
fn chunk_rules() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, ChunkEdit, bool)> = vec![
        ("chunk-version", |c| c["version"] = json!("3"), false),
        ("json-parse", |c| c["version"] = json!(2), false),
        (
            "chunk-id-format",
            |c| c["chunk_id"] = json!("not-an-id"),
            false,
        ),
        (
            "profiler-id-format",
            |c| c["profiler_id"] = json!(""),
            false,
        ),
        (
            "client-sdk",
            |c| c["client_sdk"] = json!({"name": "sentry.python"}),
            false,
        ),
        (
            "json-parse",
            |c| c["profile"]["samples"][0]["thread_id"] = json!(5),
            false,
        ),
        (
            "stack-id-range",
            |c| c["profile"]["samples"][0]["stack_id"] = json!(100000),
            false,
        ),
        (
            "frame-index-range",
            |c| c["profile"]["stacks"][0][0] = json!(100000),
            false,
        ),
        (
            "json-parse",
            |c| c["profile"]["samples"][0]["timestamp"] = json!("NaN"),
            false,
        ),
        (
            "chunk-duration",
            |c| c["profile"]["samples"][0]["timestamp"] = json!(1.0e9),
            false,
        ),
        (
            "thread-too-few-samples",
            |c| {
                let s = c["profile"]["samples"][0].clone();
                let mut lone = s.clone();
                lone["thread_id"] = json!("42");
                c["profile"]["samples"].as_array_mut().unwrap().push(lone);
            },
            true,
        ),
        (
            "no-samples",
            |c| {
                let first = c["profile"]["samples"][0].clone();
                c["profile"]["samples"] = json!([first]);
            },
            false,
        ),
        (
            "instruction-addr-format",
            |c| c["profile"]["frames"][0]["instruction_addr"] = json!("12ab"),
            false,
        ),
        (
            "debug-image-type",
            |c| c["debug_meta"] = json!({"images": [{"type": "elf", "debug_id": "c0bcc3f1-9827-fe65-3058-404b2831d9e6"}]}),
            false,
        ),
        (
            "measurement-unit",
            |c| {
                c["measurements"] = json!({"cpu": {"unit": "millisecond", "values": [{"timestamp": 1.0, "value": 1}]}})
            },
            false,
        ),
        (
            "chunk-size",
            |c| c["profile"]["frames"][0]["function"] = json!("x".repeat(51 << 20)),
            false,
        ),
    ];
    for (i, (rule, edit, strict)) in cases.into_iter().enumerate() {
        let mut c = chunk();
        edit(&mut c);
        let name = format!("{i}-{rule}.json");
        assert_rule(
            dir.path(),
            &name,
            &serde_json::to_vec(&c).unwrap(),
            rule,
            strict,
        );
    }
}

#[test]
fn envelope_rules() {
    let dir = tempfile::tempdir().unwrap();
    let c = chunk();
    let header = json!({"type": "profile_chunk", "platform": "python"});
    let two = envelope_of(&[(header.clone(), &c), (header.clone(), &c)]);
    assert_rule(
        dir.path(),
        "two.envelope",
        &two,
        "envelope-profile-items",
        false,
    );
    let mismatch = envelope_of(&[(json!({"type": "profile_chunk", "platform": "rust"}), &c)]);
    assert_rule(
        dir.path(),
        "mismatch.envelope",
        &mismatch,
        "item-platform-mismatch",
        false,
    );
}
