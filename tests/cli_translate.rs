//! End-to-end: `profilink translate` both ways on real fixtures; outputs are checked with
//! `profilink validate` and, for chunks, with Sentry's own parser (vroomrs).

mod common;

use common::{fixture_files, fixtures, profilink, translate_to_sentry, vroomrs_available};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use prost::Message;
use std::process::Command;

#[test]
fn otlp_fixtures_become_valid_chunks_that_sentry_reads() {
    let dir = tempfile::tempdir().unwrap();
    for input in fixture_files("otlp", "pb") {
        let out = dir.path().join("chunks.ndjson");
        let run = translate_to_sentry(&input, &out);
        assert_eq!(run.code, 0, "{}: {}", input.display(), run.stderr);
        let text = std::fs::read_to_string(&out).unwrap();
        let chunks: Vec<ProfileChunk> = text
            .lines()
            .map(|l| ProfileChunk::from_json(l.as_bytes()).unwrap())
            .collect();
        assert!(!chunks.is_empty(), "{}", input.display());
        let check = profilink(["validate".as_ref(), out.as_os_str()]);
        assert_eq!(check.code, 0, "{}: {}", input.display(), check.stdout);
        if vroomrs_available() {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vroomrs_check.py");
            let res = Command::new("python3")
                .arg(script)
                .arg(&out)
                .output()
                .unwrap();
            let report = String::from_utf8_lossy(&res.stdout);
            assert!(
                res.status.success(),
                "vroomrs rejected {}:\n{report}",
                input.display()
            );
            assert_eq!(report.lines().count(), chunks.len());
        }
    }
}

#[test]
fn envelopes_hold_one_chunk_with_a_matching_platform_header() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixtures().join("otlp/ebpf-profile.pb");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "envelope".as_ref(),
        "--output".as_ref(),
        dir.path().as_os_str(),
        input.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let env = Envelope::parse(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(env.items.len(), 1);
        let item = &env.items[0];
        assert_eq!(item.item_type(), Some("profile_chunk"));
        let chunk = ProfileChunk::from_json(&item.payload).unwrap();
        assert_eq!(item.platform(), Some(chunk.platform.as_str()));
        assert_eq!(
            path.file_name().unwrap().to_string_lossy(),
            format!("{}.envelope", chunk.chunk_id)
        );
        let check = profilink(["validate".as_ref(), path.as_os_str()]);
        assert_eq!(check.code, 0, "{}", check.stdout);
        files += 1;
    }
    assert!(files > 0);
    assert_eq!(
        profilink([
            "translate".as_ref(),
            "--to".as_ref(),
            "envelope".as_ref(),
            input.as_os_str()
        ])
        .code,
        2
    );
}

#[test]
fn sentry_fixtures_become_strictly_valid_otlp_with_links() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.pb");
    let mut args = vec![
        "translate".into(),
        "--to".into(),
        "otlp".into(),
        "--output".into(),
        out.clone().into_os_string(),
    ];
    args.push("--transactions".into());
    args.push(
        fixtures()
            .join("sentry/python/trace-transactions.jsonl")
            .into_os_string(),
    );
    for f in fixture_files("sentry/python", "envelope") {
        args.push(f.into_os_string());
    }
    let run = profilink(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let check = profilink(["validate".as_ref(), "--strict".as_ref(), out.as_os_str()]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    let req =
        ExportProfilesServiceRequest::decode(std::fs::read(&out).unwrap().as_slice()).unwrap();
    let links = req.dictionary.as_ref().map_or(0, |d| d.link_table.len());
    assert!(links > 1, "expected links from the transactions");
    let linked = req
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .flat_map(|p| &p.samples)
        .filter(|s| s.link_index != 0)
        .count();
    assert!(linked > 0);

    let v1 = fixtures().join("sentry/python-v1/v1-0001.envelope");
    let out_json = dir.path().join("v1.json");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "otlp-json".as_ref(),
        "-o".as_ref(),
        out_json.as_os_str(),
        v1.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let check = profilink([
        "validate".as_ref(),
        "--strict".as_ref(),
        out_json.as_os_str(),
    ]);
    assert_eq!(check.code, 0, "{}", check.stdout);
}

#[test]
fn otlp_protobuf_json_round_trip_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    for input in fixture_files("otlp", "pb") {
        let json = dir.path().join("x.json");
        let back = dir.path().join("x.pb");
        assert_eq!(
            profilink([
                "translate".as_ref(),
                "--to".as_ref(),
                "otlp-json".as_ref(),
                "-o".as_ref(),
                json.as_os_str(),
                input.as_os_str()
            ])
            .code,
            0
        );
        assert_eq!(
            profilink([
                "translate".as_ref(),
                "--to".as_ref(),
                "otlp".as_ref(),
                "-o".as_ref(),
                back.as_os_str(),
                json.as_os_str()
            ])
            .code,
            0
        );
        let a = ExportProfilesServiceRequest::decode(std::fs::read(&input).unwrap().as_slice())
            .unwrap();
        let b =
            ExportProfilesServiceRequest::decode(std::fs::read(&back).unwrap().as_slice()).unwrap();
        assert_eq!(a, b, "{}", input.display());
    }
}

#[test]
fn rejected_input_exits_1_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = common::write(dir.path(), "bad.pb", b"\xff\xff\xff\xff garbage");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "sentry".as_ref(),
        bad.as_os_str(),
    ]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("bad.pb"), "{}", run.stderr);
    // Unknown formats are usage errors (pprof and folded are formats since issue 46).
    assert_eq!(profilink(["translate", "--to", "jfr", "x"]).code, 2);
    assert_eq!(
        profilink(["translate", "--from", "jfr", "--to", "otlp", "x"]).code,
        2
    );
}

/// The chunks `translate --to sentry|envelope` must write for `inputs` (Sentry inputs first,
/// then each OTLP input's chunks in translation order), from the library.
fn expected_chunks(sentry: &[&str], otlp: &[&str]) -> Vec<ProfileChunk> {
    let mut chunks = Vec::new();
    for s in sentry {
        let env = Envelope::parse(&std::fs::read(fixtures().join(s)).unwrap()).unwrap();
        for item in env.profile_chunks() {
            chunks.push(ProfileChunk::from_json(&item.payload).unwrap());
        }
    }
    let options = profilink_translator::otlp_to_sentry::ChunkOptions {
        sparse_thread_policy: profilink_translator::otlp_to_sentry::SparseThreadPolicy::Drop,
        ..Default::default()
    };
    for o in otlp {
        let bytes = std::fs::read(fixtures().join(o)).unwrap();
        let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).unwrap();
        chunks
            .extend(profilink_translator::otlp_to_sentry::request_to_chunks(&req, &options).chunks);
    }
    chunks
}

#[test]
fn streamed_output_is_every_chunk_in_order_byte_for_byte() {
    let sentry = ["sentry/python/trace-chunk-00.envelope"];
    let otlp = ["otlp/ebpf-k8s-0.pb", "otlp/ebpf-profile.pb"];
    let inputs: Vec<_> = [otlp[0], sentry[0], otlp[1]]
        .iter()
        .map(|f| fixtures().join(f))
        .collect();
    let chunks = expected_chunks(&sentry, &otlp);
    assert!(chunks.len() > 2, "expected several chunks");
    let mut ndjson = Vec::new();
    for c in &chunks {
        ndjson.extend_from_slice(&c.to_json());
        ndjson.push(b'\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec!["translate".as_ref()];
        args.extend_from_slice(extra);
        args.extend(inputs.iter().map(|p| p.as_os_str()));
        let run = profilink(args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("{} chunk(s) written", chunks.len())),
            "{}",
            run.stderr
        );
        run
    };

    // Standard output.
    let out = run(&["--to".as_ref(), "sentry".as_ref()]);
    assert!(
        out.raw_stdout == ndjson,
        "stdout differs from the translation"
    );

    // A file, written atomically: only the file itself is left in the directory.
    let file = dir.path().join("ndjson/chunks.ndjson");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    run(&[
        "--to".as_ref(),
        "sentry".as_ref(),
        "--output".as_ref(),
        file.as_os_str(),
    ]);
    assert!(std::fs::read(&file).unwrap() == ndjson, "file differs");
    assert_eq!(
        std::fs::read_dir(file.parent().unwrap()).unwrap().count(),
        1
    );

    // Envelope files: exactly the envelopes of the chunks, and nothing else.
    let envelopes = dir.path().join("envelopes");
    run(&[
        "--to".as_ref(),
        "envelope".as_ref(),
        "--output".as_ref(),
        envelopes.as_os_str(),
    ]);
    let mut names: Vec<String> = std::fs::read_dir(&envelopes)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected_names: Vec<String> = chunks
        .iter()
        .map(|c| format!("{}.envelope", c.chunk_id))
        .collect();
    expected_names.sort();
    assert_eq!(names, expected_names);
    for c in &chunks {
        let bytes = std::fs::read(envelopes.join(format!("{}.envelope", c.chunk_id))).unwrap();
        let expected =
            Envelope::for_chunk(c, profilink_exporter::SDK_NAME, profilink_exporter::VERSION)
                .to_bytes();
        assert!(bytes == expected, "{}: envelope differs", c.chunk_id);
    }
}

/// NDJSON chunk inputs bound for OTLP are parsed on several threads as the translation takes
/// them: the request is still exactly the library's for the same chunks in input order (here
/// an NDJSON input of 9 chunks between two envelopes, linked through the transactions), and a
/// line that is not a chunk rejects its input, naming the line, with nothing written.
#[test]
fn ndjson_chunks_become_the_same_otlp_request_in_input_order() {
    use profilink_proto::input::InputFormat;
    use profilink_translator::SentryParts;
    let dir = tempfile::tempdir().unwrap();
    let envelopes = [
        fixtures().join("sentry/python/trace-chunk-00.envelope"),
        fixtures().join("sentry/python/trace-chunk-01.envelope"),
    ];
    let transactions = fixtures().join("sentry/python/trace-transactions.jsonl");
    let chunks: Vec<ProfileChunk> = envelopes
        .iter()
        .map(|p| {
            let env = Envelope::parse(&std::fs::read(p).unwrap()).unwrap();
            ProfileChunk::from_json(&env.profile_chunks().next().unwrap().payload).unwrap()
        })
        .collect();
    let mut ndjson = Vec::new();
    for i in 0..9 {
        ndjson.extend_from_slice(&chunks[i % 2].to_json());
        ndjson.extend_from_slice(if i == 4 { b"\n\n" } else { b"\n" });
    }
    let lines = common::write(dir.path(), "chunks.ndjson", &ndjson);
    let out = dir.path().join("request.pb");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "otlp".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
        "--transactions".as_ref(),
        transactions.as_os_str(),
        envelopes[1].as_os_str(),
        lines.as_os_str(),
        envelopes[0].as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let mut parts = SentryParts::default();
    for (bytes, format) in [
        (std::fs::read(&envelopes[1]).unwrap(), InputFormat::Envelope),
        (ndjson.clone(), InputFormat::SentryChunkNdjson),
        (std::fs::read(&envelopes[0]).unwrap(), InputFormat::Envelope),
    ] {
        parts.read(&bytes, format).unwrap();
    }
    parts
        .read_transactions(
            &std::fs::read(&transactions).unwrap(),
            InputFormat::SentryTransactionNdjson,
        )
        .unwrap();
    assert_eq!(parts.chunks.len(), 11);
    let expected = parts
        .to_otlp(&profilink_translator::sentry_to_otlp::OtlpOptions::default())
        .request;
    assert!(
        expected.resource_profiles[0].scope_profiles[0].profiles[1]
            .samples
            .iter()
            .any(|s| s.link_index != 0),
        "the chunks are linked"
    );
    assert!(
        std::fs::read(&out).unwrap() == expected.encode_to_vec(),
        "the request differs from the library's"
    );

    // The last line (10: line 6 is blank) is not a chunk.
    let mut bad = ndjson.clone();
    let at = bad.len() - chunks[0].to_json().len() - 1;
    bad.splice(at..at + 1, *b"x");
    let bad = common::write(dir.path(), "bad.ndjson", &bad);
    let out = dir.path().join("bad.pb");
    let run = profilink([
        "translate".as_ref(),
        "--to".as_ref(),
        "otlp".as_ref(),
        "--output".as_ref(),
        out.as_os_str(),
        bad.as_os_str(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("bad.ndjson: rejected: line 10"),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
}
