//! End-to-end: `profilink translate` on OTLP carrying `sentry.*` marks. Another producer's
//! partial marks give valid chunks with its valid ids and every observation; profilink's own
//! OTLP comes back as the exact chunks it came from.

mod common;
#[path = "common/producer.rs"]
mod producer;

use common::{fixtures, profilink, translate_to_sentry, vroomrs_available, write};
use producer::{
    CHUNK_ID, assert_same, assert_valid_chunk, chunk_observations, fixture_chunk_and_invalid_copy,
    other_producer_request,
};
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_translator::sentry_to_otlp::canonical_form;
use prost::Message;
use std::process::Command;

const T0: u64 = 1_795_317_063_000_000_000;

fn read_ndjson(path: &std::path::Path) -> Vec<ProfileChunk> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| ProfileChunk::from_json(l.as_bytes()).unwrap())
        .collect()
}

#[test]
fn another_producers_marks_become_valid_chunks_with_every_observation() {
    let dir = tempfile::tempdir().unwrap();
    let (req, want) = other_producer_request(T0);
    let input = write(dir.path(), "converter.pb", &req.encode_to_vec());
    let out = dir.path().join("chunks.ndjson");
    let run = translate_to_sentry(&input, &out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stderr.contains("rejected"), "{}", run.stderr);
    let chunks = read_ndjson(&out);
    assert_eq!(chunks.len(), 1);
    for c in &chunks {
        assert_valid_chunk(c);
    }
    // A valid producer chunk id is kept when its profile makes exactly one chunk.
    assert_eq!(chunks[0].chunk_id, CHUNK_ID);
    assert_same(chunk_observations(&chunks), want);
    let check = profilink(["validate".as_ref(), "--strict".as_ref(), out.as_os_str()]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    if vroomrs_available() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vroomrs_check.py");
        let res = Command::new("python3")
            .arg(script)
            .arg(&out)
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&res.stdout);
        assert!(res.status.success(), "vroomrs rejected:\n{report}");
        assert_eq!(report.lines().count(), 1);
    }

    // The same as envelope files.
    let env_dir = dir.path().join("envelopes");
    std::fs::create_dir(&env_dir).unwrap();
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "envelope".as_ref(),
        "--output".as_ref(),
        env_dir.as_os_str(),
        input.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bytes = std::fs::read(env_dir.join(format!("{CHUNK_ID}.envelope"))).unwrap();
    let env = Envelope::parse(&bytes).unwrap();
    let chunk = ProfileChunk::from_json(&env.items[0].payload).unwrap();
    assert_eq!(env.items[0].platform(), Some("python"));
    assert_valid_chunk(&chunk);
}

#[test]
fn profilink_otlp_comes_back_as_the_exact_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<_> = ["trace-chunk-00.envelope", "trace-chunk-01.envelope"]
        .iter()
        .map(|n| fixtures().join("sentry/python").join(n))
        .collect();
    let otlp = dir.path().join("chunks.pb");
    let mut args = vec![
        "translate".as_ref(),
        "--to".as_ref(),
        "otlp".as_ref(),
        "--output".as_ref(),
        otlp.as_os_str(),
    ];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    let run = profilink(args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let back = dir.path().join("back.ndjson");
    let run = translate_to_sentry(&otlp, &back);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut got: Vec<ProfileChunk> = read_ndjson(&back).iter().map(canonical_form).collect();
    let mut want: Vec<ProfileChunk> = inputs
        .iter()
        .map(|p| {
            let env = Envelope::parse(&std::fs::read(p).unwrap()).unwrap();
            let item = env.items.iter().find(|i| i.is_profile_chunk()).unwrap();
            canonical_form(&ProfileChunk::from_json(&item.payload).unwrap())
        })
        .collect();
    got.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
    want.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
    assert_eq!(got, want);
}

#[test]
fn invalid_chunks_passed_through_are_reported_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = fixture_chunk_and_invalid_copy(&fixtures(), |c| c.platform = String::new());
    let mut ndjson = good.to_json();
    ndjson.push(b'\n');
    ndjson.extend_from_slice(&bad.to_json());
    ndjson.push(b'\n');
    let input = write(dir.path(), "chunks.ndjson", &ndjson);
    let out = dir.path().join("out.ndjson");
    let run = translate_to_sentry(&input, &out);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "chunk 0123456789abcdef0123456789abcdef: rejected: invalid chunk: error[platform]"
        ),
        "{}",
        run.stderr
    );
    let written = read_ndjson(&out);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].chunk_id, good.chunk_id);
}
