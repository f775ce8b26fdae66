//! End-to-end: `profilink validate` on real fixtures and on broken inputs.

mod common;

use common::{fixture_files, fixtures, profilink, write};

#[test]
fn every_fixture_validates() {
    let mut inputs = fixture_files("otlp", "pb");
    inputs.extend(fixture_files("sentry/python", "envelope"));
    inputs.extend(fixture_files("sentry/python-v1", "envelope"));
    inputs.push(fixtures().join("sentry/python/trace-transactions.jsonl"));
    let run =
        profilink(std::iter::once("validate".as_ref()).chain(inputs.iter().map(|p| p.as_os_str())));
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert!(!run.stdout.contains("error["), "{}", run.stdout);
}

#[test]
fn ebpf_quirks_are_warnings_that_strict_refuses() {
    let input = fixtures().join("otlp/ebpf-profile.pb");
    let run = profilink(["validate".as_ref(), input.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("warning["), "{}", run.stdout);
    assert!(run.stdout.contains("attribute_table[0]"), "{}", run.stdout);
    let strict = profilink(["validate".as_ref(), "--strict".as_ref(), input.as_os_str()]);
    assert_eq!(strict.code, 1, "{}", strict.stdout);
}

/// Length-delimited protobuf field.
fn ld(field: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![(field << 3) | 2];
    let mut len = body.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(body);
    out
}

/// A request as a proto 1.8 producer wrote it: the sample's `attribute_indices` at field 3,
/// where 1.10 has the varint `link_index`.
fn proto_1_8_request() -> Vec<u8> {
    let sample = [&[0x08, 0x01][..], &ld(3, &[1, 2])].concat();
    let profile = ld(2, &sample);
    let scope = ld(2, &profile);
    let resource = ld(2, &scope);
    ld(1, &resource)
}

#[test]
fn broken_inputs_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read(fixtures().join("otlp/ebpf-profile.pb")).unwrap();
    let chunk_env =
        std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
    let mut random = vec![0u8; 4096];
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut random {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated.pb",
            fixture[..fixture.len() / 2].to_vec(),
            "error[decode]",
        ),
        // Read as 1.10 it does not decode; as 1.9 its attribute indices have no table.
        ("proto18.pb", proto_1_8_request(), "as proto 1.9"),
        ("random.bin", random, "error[decode]"),
        (
            "badutf8.json",
            b"{\"resourceProfiles\":[{\"schemaUrl\":\"\xff\xfe\"}]}".to_vec(),
            "error[",
        ),
        (
            "truncated.envelope",
            chunk_env[..chunk_env.len() - 500].to_vec(),
            "error[envelope]",
        ),
        ("notjson.chunk.json", b"{\"chunk_id\": ".to_vec(), "error["),
    ];
    for (name, bytes, expected) in cases {
        let path = write(dir.path(), name, &bytes);
        let run = profilink(["validate".as_ref(), path.as_os_str()]);
        assert_eq!(run.code, 1, "{name}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains(expected),
            "{name}: expected {expected:?} in\n{}",
            run.stdout
        );
    }
}

#[test]
fn missing_file_is_an_error_and_usage_errors_exit_2() {
    let run = profilink(["validate", "/nonexistent/profile.pb"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("error[read]"), "{}", run.stdout);
    assert_eq!(profilink(["validate"]).code, 2);
    assert_eq!(profilink(["validate", "--bogus", "x"]).code, 2);
    assert_eq!(profilink(["frobnicate"]).code, 2);
    assert_eq!(profilink(["--help"]).code, 0);
}
