use super::error::DecodeError;
use super::json_length::{digits, frame_json_len, json_len, json_str_len};
use super::*;
use crate::merge::frame_hash;
use profilink_proto::sentry::{
    ClientSdk, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue, Sample, ThreadMetadata,
};
use std::collections::BTreeMap;
use std::sync::Arc;

fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
    Frame {
        function: Some(function.into()),
        filename: file.map(Into::into),
        lineno: line,
        in_app: Some(line.is_some()),
        ..Default::default()
    }
}

/// A chunk that sets every field, with strings that need escaping.
fn rich(seed: u32) -> ProfileChunk {
    let shared: Arc<str> = Arc::from("lib/\"shared\".rs");
    let mut other = BTreeMap::new();
    other.insert("arch".to_string(), serde_json::json!("x86_64"));
    other.insert("n".to_string(), serde_json::json!([1, 2.5, {"k": null}]));
    let mut c = ProfileChunk {
        chunk_id: format!("{seed:032x}"),
        profiler_id: "p\u{1}\u{1f}\\\n\t".into(),
        environment: Some("prod".into()),
        platform: "python".into(),
        release: Some("app@1.0 \u{e9}".into()),
        content_type: Some("text/x".into()),
        client_sdk: Some(ClientSdk {
            name: "sdk".into(),
            version: "1".into(),
        }),
        version: "2".into(),
        debug_meta: Some(DebugMeta {
            images: vec![
                DebugImage {
                    image_type: "symbolic".into(),
                    code_file: Some("/lib/libc.so".into()),
                    debug_id: Some("abc".into()),
                    code_id: Some("c0de".into()),
                    image_addr: Some("0x1000".into()),
                    image_vmaddr: Some("0x0".into()),
                    image_size: Some(u64::MAX),
                    other,
                },
                DebugImage::default(),
            ],
        }),
        ..Default::default()
    };
    c.measurements.insert(
        "cpu \"usage\"".into(),
        Measurement {
            unit: "percent".into(),
            values: vec![
                MeasurementValue {
                    timestamp: 1.5,
                    value: f64::MAX,
                },
                MeasurementValue {
                    timestamp: 2.0,
                    value: -0.0,
                },
            ],
        },
    );
    c.measurements
        .insert("empty".into(), Measurement::default());
    let p = &mut c.profile;
    p.frames = vec![
        frame("main", Some("main.rs"), Some(seed)).into(),
        std::sync::Arc::new(Frame {
            abs_path: Some(shared.clone()),
            filename: Some(shared),
            colno: Some(7),
            instruction_addr: Some("0xff".into()),
            module: Some("m".into()),
            package: Some("pkg".into()),
            platform: Some("native".into()),
            in_app: Some(false),
            ..Default::default()
        }),
        std::sync::Arc::new(Frame::default()),
    ];
    p.stacks = vec![vec![0, 1, 2], vec![], vec![1, 99, 123_456]];
    for i in 0..40u32 {
        p.samples.push(Sample {
            timestamp: 1_761_887_343.253_558_9 + f64::from(i) * 0.01 + f64::from(seed),
            stack_id: (i % 4) as usize,
            thread_id: if i % 3 == 0 { "1\"2" } else { "237382" }.into(),
        });
    }
    p.samples.push(Sample {
        timestamp: f64::NAN,
        stack_id: usize::MAX,
        thread_id: "".into(),
    });
    p.thread_metadata.insert(
        "237382".into(),
        ThreadMetadata {
            name: Some("main".into()),
            priority: Some(3),
        },
    );
    p.thread_metadata
        .insert("x\n".into(), ThreadMetadata::default());
    c
}

fn minimal() -> ProfileChunk {
    ProfileChunk::default()
}

#[test]
fn json_len_matches_serde() {
    for c in [rich(1), rich(77), minimal()] {
        assert_eq!(json_len(&c), c.to_json().len());
    }
    let mut c = rich(3);
    c.profile.samples.truncate(1);
    c.profile.stacks.truncate(1);
    c.profile.frames.truncate(1);
    c.measurements.clear();
    c.debug_meta = Some(DebugMeta::default());
    assert_eq!(json_len(&c), c.to_json().len());
    for s in [
        "",
        "a",
        "\"",
        "\\",
        "\u{0}",
        "\u{7f}",
        "\u{2028}",
        "\r\n\u{8}\u{c}",
    ] {
        assert_eq!(
            json_str_len(s),
            serde_json::to_vec(s).unwrap().len(),
            "{s:?}"
        );
    }
    for v in [
        0.0,
        -0.0,
        1e300,
        1.5e-300,
        123.456,
        f64::INFINITY,
        f64::NAN,
        1e21,
        1e-7,
    ] {
        let mut c = minimal();
        c.profile.samples.push(Sample {
            timestamp: v,
            stack_id: 12345,
            thread_id: "9".into(),
        });
        assert_eq!(json_len(&c), c.to_json().len(), "{v}");
    }
    for v in [0, 9, 10, 99, 100, 999, 1000, 9999, 10_000, u64::MAX] {
        assert_eq!(digits(v), v.to_string().len());
    }
    let full = Frame {
        abs_path: Some("/a/\"b\".py".into()),
        colno: Some(0),
        filename: Some("b.py".into()),
        function: Some("f\u{1}".into()),
        in_app: Some(true),
        instruction_addr: Some("0x10".into()),
        lineno: Some(u32::MAX),
        module: Some("m".into()),
        package: Some("p".into()),
        platform: Some("python".into()),
    };
    for f in rich(1)
        .profile
        .frames
        .iter()
        .map(|f| &**f)
        .chain([&full, &Frame::default()])
    {
        assert_eq!(
            frame_json_len(f),
            serde_json::to_vec(f).unwrap().len(),
            "{f:?}"
        );
    }
}

fn same(a: &ProfileChunk, b: &ProfileChunk) {
    // NaN != NaN: compare the JSON and the timestamps' bits.
    assert_eq!(a.to_json(), b.to_json());
    let bits = |c: &ProfileChunk| -> Vec<u64> {
        c.profile
            .samples
            .iter()
            .map(|s| s.timestamp.to_bits())
            .collect()
    };
    assert_eq!(bits(a), bits(b));
}

#[test]
fn batch_round_trips_and_shares_frames() {
    let base = rich(5);
    // Chunks of one request share frames (same strings), as the translator makes them.
    let mut items: Vec<(String, ProfileChunk)> = (0..20)
        .map(|i| {
            let mut c = base.clone();
            c.chunk_id = format!("{i:032x}");
            (if i % 2 == 0 { "" } else { "route-b" }.to_string(), c)
        })
        .collect();
    items.push(("".into(), minimal()));
    let (records, infos) = encode_batch(&items);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].chunks, 0..21);
    for ((_, c), i) in items.iter().zip(&infos) {
        assert_eq!(i.approx_bytes as usize, c.to_json().len());
        let hashes: Vec<u64> = c.profile.frames.iter().map(|f| frame_hash(f)).collect();
        assert_eq!(i.frame_hashes, hashes);
    }
    // An input counts for what it takes on disk, a fraction of its chunks' JSON.
    let json: u64 = infos.iter().map(|i| i.approx_bytes).sum();
    assert_eq!(charge(&records[0].body), records[0].body.len() as u64);
    assert!(charge(&records[0].body) < json / 2, "{json}");
    let decoded = decode(&records[0].body).unwrap();
    assert_eq!(decoded.len(), 21);
    for ((route, c), d) in items.iter().zip(&decoded) {
        assert_eq!(&d.route, route);
        same(c, &d.chunk);
        assert_eq!(d.approx_bytes as usize, c.to_json().len());
        let hashes: Vec<u64> = c.profile.frames.iter().map(|f| frame_hash(f)).collect();
        assert_eq!(d.frame_hashes, hashes);
    }
    // Shared frames are stored once: far smaller than 20 JSON chunks.
    let json: usize = items.iter().map(|(_, c)| c.to_json().len()).sum();
    assert!(
        records[0].body.len() * 3 < json,
        "{} vs {json}",
        records[0].body.len()
    );
}

#[test]
fn equal_frames_with_different_strings_are_stored_once() {
    // Many frames, one sample: the record is mostly its frames and strings.
    let mut a = rich(1);
    a.profile.samples.truncate(1);
    a.profile.frames = (0..200)
        .map(|i| {
            frame(
                &format!("module::function_{i}"),
                Some("src/lib.rs"),
                Some(i),
            )
            .into()
        })
        .collect();
    // The same content in freshly allocated strings (as from another translation).
    let b: ProfileChunk = ProfileChunk::from_json(&a.to_json()).unwrap();
    let (records, infos) = encode_batch(&[("".to_string(), a.clone()), ("".to_string(), b)]);
    let (single, _) = encode_batch(&[("".to_string(), a)]);
    assert_eq!(infos[0].frame_hashes, infos[1].frame_hashes);
    let d = decode(&records[0].body).unwrap();
    assert_eq!(d[0].chunk.profile.frames, d[1].chunk.profile.frames);
    // The second chunk adds only its frame indices, not its frames and strings again.
    let (one, two) = (single[0].body.len(), records[0].body.len());
    assert!(two * 10 < one * 13, "{two} vs {one}");
}

#[test]
fn big_batches_are_split_into_records() {
    let mut c = rich(1);
    let s = c.profile.samples[0].clone();
    c.profile.samples = vec![s; (MAX_BATCH_RECORD / 10) + 1000];
    let items = vec![("".to_string(), c.clone()), ("".to_string(), c)];
    let (records, infos) = encode_batch(&items);
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].chunks, 0..1);
    assert_eq!(records[1].chunks, 1..2);
    assert_eq!(infos.len(), 2);
    assert_eq!(decode(&records[1].body).unwrap().len(), 1);
}

#[test]
fn legacy_records_are_read() {
    let mut c = rich(2);
    // JSON has no NaN (it writes null, which does not read back as a timestamp).
    c.profile.samples.retain(|s| s.timestamp.is_finite());
    let body = encode_legacy("r", &c);
    let d = decode(&body).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].route, "r");
    assert_eq!(d[0].approx_bytes as usize, c.to_json().len());
    assert_eq!(d[0].chunk.profile.frames, c.profile.frames);
    assert_eq!(charge(&body), body.len() as u64);
}

#[test]
fn linked_threads_round_trip() {
    let items = vec![("".to_string(), rich(4)), ("r".to_string(), rich(5))];
    let linked = vec![vec![
        CompactString::from("237382"),
        CompactString::from("1"),
    ]];
    let (records, _) = encode_batch_linked(&items, &linked);
    let d = decode(&records[0].body).unwrap();
    assert_eq!(d[0].linked_threads, linked[0]);
    assert!(d[1].linked_threads.is_empty());
    same(&items[0].1, &d[0].chunk);
}

#[test]
fn version_1_records_are_read_without_linked_threads() {
    // A record as version 1 wrote it (before linked threads), byte by byte: one chunk of
    // two samples on thread 7, one frame `main`.
    let mut b: Vec<u8> = vec![0xff, 0xff, 0xff, 0xff, 1];
    b.extend_from_slice(&100u64.to_le_bytes()); // json_bytes
    b.extend_from_slice(&[1, 4, b'm', b'a', b'i', b'n']); // strings
    b.extend_from_slice(&[1, 0x08, 0]); // frames: function = string 0
    b.push(1); // chunks
    b.extend_from_slice(&[0, 100]); // route "", approx_json_bytes
    b.push(32);
    b.extend_from_slice(&[b'c'; 32]); // chunk_id
    b.push(32);
    b.extend_from_slice(&[b'p'; 32]); // profiler_id
    b.push(0); // environment
    b.extend_from_slice(&[4, b'r', b'u', b's', b't']); // platform
    b.extend_from_slice(&[0, 0, 0]); // release, content_type, client_sdk
    b.extend_from_slice(&[1, b'2']); // version
    b.extend_from_slice(&[0, 0]); // debug_meta, measurements
    b.extend_from_slice(&[1, 0]); // frames: record frame 0
    b.extend_from_slice(&[1, 1, 0]); // stacks: [[0]]
    b.extend_from_slice(&[1, 1, b'7']); // threads: "7"
    b.push(2); // samples
    for t in [1.0f64, 2.0] {
        b.extend_from_slice(&t.to_bits().to_le_bytes());
        b.extend_from_slice(&[0, 0]);
    }
    b.extend_from_slice(&[1, 1, b'7', 1, 4, b'm', b'a', b'i', b'n', 0]); // thread_metadata
    let d = decode(&b).unwrap();
    assert_eq!(d.len(), 1);
    let c = &d[0].chunk;
    assert!(d[0].linked_threads.is_empty());
    assert_eq!(c.chunk_id, "c".repeat(32));
    assert_eq!(c.profile.samples.len(), 2);
    assert_eq!(c.profile.samples[1].timestamp, 2.0);
    assert_eq!(c.profile.frames[0].function.as_deref(), Some("main"));
    assert_eq!(c.profile.thread_metadata["7"].name.as_deref(), Some("main"));
    assert_eq!(charge(&b), b.len() as u64);
}

#[test]
fn corrupt_records_are_errors_not_panics() {
    let (records, _) = encode_batch(&[("r".to_string(), rich(9))]);
    let body = &records[0].body;
    // Every truncation is an error; byte flips decode to an error or to something, but
    // never panic.
    for cut in 0..body.len() {
        assert!(decode(&body[..cut]).is_err(), "cut at {cut}");
    }
    for i in 4..body.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut b = body.clone();
            b[i] ^= x;
            let _ = decode(&b);
        }
    }
    assert!(matches!(
        decode(&[0xff, 0xff, 0xff, 0xff, 9]),
        Err(DecodeError::BadTag(9))
    ));
    assert!(matches!(
        decode(&[
            0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0x7f
        ]),
        Err(DecodeError::BadNumber | DecodeError::Truncated)
    ));
}
