//! chunk → OTLP → `restore_chunk` gives back an equal chunk, for random irregular chunks:
//! duplicate frames, empty vs absent fields, missing or extra thread metadata, repeated
//! timestamps, odd instruction addresses, debug images (including images in profilink's
//! synthetic address space, whose addresses go to OTLP as ELF addresses) and measurements.

use profilink_proto::sentry::image_space::slot_base;
use profilink_proto::sentry::{
    ClientSdk, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue, ProfileChunk,
    ProfileData, Sample, ThreadMetadata,
};
use profilink_proto::validate::validate_otlp;
use profilink_translator::NoLinks;
use profilink_translator::sentry_to_otlp::{OtlpOptions, SentryInput, to_otlp};
use profilink_translator::sentry_to_otlp::{canonical_form, restore_request};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        2 => Just(None),
        1 => Just(Some(String::new())),
        3 => "[a-z_/.<>() ]{1,10}".prop_map(Some),
    ]
}

fn opt_num() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        (1u32..5000).prop_map(Some),
        Just(Some(u32::MAX))
    ]
}

/// Build id of the synthetic image of the generated chunks.
const SYNTHETIC_CODE_ID: &str = "2e5abcee94f3bcbed7bba094f341070a2585a2ba";

/// Its slot base.
fn synthetic_base() -> u64 {
    slot_base(&[
        0x2e, 0x5a, 0xbc, 0xee, 0x94, 0xf3, 0xbc, 0xbe, 0xd7, 0xbb, 0xa0, 0x94, 0xf3, 0x41, 0x07,
        0x0a, 0x25, 0x85, 0xa2, 0xba,
    ])
}

fn addr() -> impl Strategy<Value = Option<String>> {
    let base = synthetic_base();
    prop_oneof![
        // In, at the start of, or around the synthetic image (`0x28000..0x29000`), or its
        // slot base itself (ELF address 0).
        2 => (0x27f00u64..0x29100).prop_map(move |a| Some(format!("{:#x}", base + a))),
        1 => Just(Some(format!("{base:#x}"))),
        1 => Just(Some(format!("{:#X}", base + 0x28010))),
        3 => Just(None),
        1 => Just(Some("0x1a".to_owned())),
        1 => Just(Some("0X1A".to_owned())),
        1 => Just(Some("26".to_owned())),
        1 => Just(Some("0x0".to_owned())),
        1 => Just(Some("zz".to_owned())),
        2 => (0x1000u64..0x1200).prop_map(|a| Some(format!("{a:#x}"))),
        1 => any::<u64>().prop_map(|a| Some(format!("{a:#x}"))),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        (opt_text(), opt_num(), opt_text(), opt_text(), option::of(any::<bool>())),
        (addr(), opt_num(), opt_text(), opt_text()),
        prop_oneof![3 => Just(None), 1 => Just(Some("native".to_owned())), 1 => Just(Some("python".to_owned())), 1 => Just(Some(String::new()))],
    )
        .prop_map(|((abs_path, colno, filename, function, in_app), (instruction_addr, lineno, module, package), platform)| Frame {
            abs_path: abs_path.map(Into::into),
            colno,
            filename: filename.map(Into::into),
            function: function.map(Into::into),
            in_app,
            instruction_addr: instruction_addr.map(Into::into),
            lineno,
            module: module.map(Into::into),
            package: package.map(Into::into),
            platform: platform.map(Into::into),
        })
}

/// An image as profilink places it: in the slot of its build id, from ELF address 0x28000.
fn synthetic_image() -> impl Strategy<Value = DebugImage> {
    (0u64..2, opt_text()).prop_map(|(start, code_file)| DebugImage {
        image_type: "symbolic".to_owned(),
        code_file,
        debug_id: Some("eebc5a2e-f394-bebc-d7bb-a094f341070a".to_owned()),
        code_id: Some(SYNTHETIC_CODE_ID.to_owned()),
        image_addr: Some(format!("{:#x}", synthetic_base() + start * 0x28000)),
        image_vmaddr: None,
        image_size: Some(0x29000 - start * 0x28000),
        other: BTreeMap::new(),
    })
}

fn image() -> impl Strategy<Value = DebugImage> {
    prop_oneof![2 => plain_image(), 1 => synthetic_image()]
}

fn plain_image() -> impl Strategy<Value = DebugImage> {
    (
        prop_oneof![Just("symbolic"), Just("macho"), Just("")],
        opt_text(),
        opt_text(),
        opt_text(),
        prop_oneof![
            Just(None),
            Just(Some("0x1000".to_owned())),
            Just(Some("0x1100".to_owned())),
            Just(Some("junk".to_owned()))
        ],
        option::of(0u64..0x200),
        option::of("[a-z0-9]{1,6}"),
    )
        .prop_map(
            |(t, code_file, debug_id, code_id, image_addr, image_size, arch)| {
                let mut other = BTreeMap::new();
                if let Some(a) = arch {
                    other.insert("arch".to_owned(), serde_json::Value::String(a));
                }
                DebugImage {
                    image_type: t.to_owned(),
                    code_file,
                    debug_id,
                    code_id,
                    image_addr,
                    image_vmaddr: None,
                    image_size,
                    other,
                }
            },
        )
}

fn measurement() -> impl Strategy<Value = Measurement> {
    (
        prop_oneof![Just("percent"), Just("byte"), Just("")],
        vec(
            (
                1_795_000_000.0f64..1_795_000_100.0,
                prop::num::f64::NORMAL | prop::num::f64::ZERO,
            ),
            0..5,
        ),
    )
        .prop_map(|(unit, values)| Measurement {
            unit: unit.to_owned(),
            values: values
                .into_iter()
                .map(|(timestamp, value)| MeasurementValue { timestamp, value })
                .collect(),
        })
}

const THREADS: &[&str] = &[
    "1",
    "42",
    "140357056605056",
    "042",
    "main",
    "-3",
    "18446744073709551615",
];

fn chunk() -> impl Strategy<Value = ProfileChunk> {
    let meta = (
        prop_oneof![
            Just("0123456789abcdef0123456789abcdef".to_owned()),
            "[0-9a-f]{32}",
            Just("not-an-id".to_owned())
        ],
        prop_oneof![
            Just("87b148781b0a4a5284a3e3f9cc93e1ec".to_owned()),
            Just("70d8b2131d7e4d50b13ecc8060c975a2".to_owned())
        ],
        prop_oneof![Just("python"), Just("cocoa"), Just("")],
        opt_text(),
        opt_text(),
        opt_text(),
        option::of(("[a-z.]{0,8}", "[0-9.]{0,5}")),
        prop_oneof![Just("2"), Just("")],
    );
    let body = (
        vec(frame(), 1..8),
        vec(0usize..8, 0..4),
        vec(vec(any::<usize>(), 0..6), 1..6),
        vec(
            (0u64..30, any::<usize>(), 0usize..THREADS.len(), 0u64..3),
            0..40,
        ),
        btree_map(
            0usize..THREADS.len() + 2,
            (opt_text(), option::of(0u32..100)),
            0..6,
        ),
        option::of(vec(image(), 0..3)),
        btree_map("[a-z_]{1,8}", measurement(), 0..3),
    );
    (meta, body).prop_map(
        |(
            (chunk_id, profiler_id, platform, release, environment, content_type, sdk, version),
            (mut frames, dups, stacks, samples, metadata, images, measurements),
        )| {
            // Non-deduplicated frames: copies of existing ones.
            let n = frames.len();
            for d in dups {
                frames.push(frames[d % n].clone());
            }
            let nf = frames.len();
            let stacks: Vec<Vec<usize>> = stacks
                .into_iter()
                .map(|s| s.into_iter().map(|f| f % nf).collect())
                .collect();
            let ns = stacks.len();
            let base_micros: u64 = 1_795_317_063_000_000;
            let samples = samples
                .into_iter()
                .map(|(tick, stack, thread, jitter)| Sample {
                    // Microsecond timestamps; ticks repeat, so timestamps repeat across threads.
                    timestamp: (base_micros + tick * 10_101 + jitter * 7) as f64 / 1e6,
                    stack_id: stack % ns,
                    thread_id: THREADS[thread].into(),
                })
                .collect();
            let thread_metadata = metadata
                .into_iter()
                .map(|(t, (name, priority))| {
                    let id = THREADS
                        .get(t)
                        .map_or_else(|| format!("exited-{t}"), |s| (*s).to_owned());
                    (id, ThreadMetadata { name, priority })
                })
                .collect();
            ProfileChunk {
                chunk_id,
                profiler_id,
                debug_meta: images.map(|images| DebugMeta { images }),
                environment,
                platform: platform.to_owned(),
                release,
                content_type,
                client_sdk: sdk.map(|(name, version)| ClientSdk { name, version }),
                measurements,
                version: version.to_owned(),
                profile: ProfileData {
                    samples,
                    stacks,
                    frames: frames.into_iter().map(Into::into).collect(),
                    thread_metadata,
                },
            }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn chunks_round_trip_through_otlp(chunks in vec(chunk(), 1..4)) {
        let t = to_otlp(&SentryInput { chunks: &chunks, v1_profiles: &[] }, &NoLinks, &OtlpOptions::default());
        prop_assert!(t.rejected.is_empty(), "{:?}", t.rejected);
        // Strictly valid: no errors and no warnings.
        let findings = validate_otlp(t.request.dictionary.as_ref(), &t.request.resource_profiles);
        prop_assert!(findings.is_empty(), "{findings:#?}");
        let restored: Vec<ProfileChunk> = restore_request(&t.request).into_iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(restored.len(), chunks.len());
        // Resources group profiles by session, so match restored chunks by chunk id + content.
        let mut want: Vec<ProfileChunk> = chunks.iter().map(canonical_form).collect();
        let mut got: Vec<ProfileChunk> = restored.iter().map(canonical_form).collect();
        let key = |c: &ProfileChunk| format!("{c:?}");
        want.sort_by_key(key);
        got.sort_by_key(key);
        prop_assert_eq!(got, want);
        for r in &restored {
            prop_assert!(r.profile.samples.is_sorted_by(|a, b| a.timestamp <= b.timestamp));
        }
    }
}

/// A permutation of `0..n` from `seed` (a small LCG Fisher-Yates; the test needs many orders,
/// not good randomness).
fn permutation(n: usize, mut seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        p.swap(i, (seed >> 33) as usize % (i + 1));
    }
    p
}

/// The same chunk with its frame table, stacks and samples in other orders (numbering
/// changed accordingly), and every frame duplicated once more.
fn renumbered(c: &ProfileChunk, seed: u64) -> ProfileChunk {
    let p = &c.profile;
    let mut frames = p.frames.clone();
    frames.extend(p.frames.iter().cloned());
    let fperm = permutation(frames.len(), seed);
    // New position of old frame i: where fperm put it; old frames use their copy half the time.
    let mut new_of = vec![0; frames.len()];
    for (new, &old) in fperm.iter().enumerate() {
        new_of[old] = new;
    }
    let frames_out = fperm.iter().map(|&old| frames[old].clone()).collect();
    let sperm = permutation(p.stacks.len(), seed ^ 0x5eed);
    let mut stack_new_of = vec![0; p.stacks.len()];
    for (new, &old) in sperm.iter().enumerate() {
        stack_new_of[old] = new;
    }
    let stacks = sperm
        .iter()
        .enumerate()
        .map(|(k, &old)| {
            p.stacks[old]
                .iter()
                .map(|&f| new_of[f + p.frames.len() * (k % 2)])
                .collect()
        })
        .collect();
    let samples = permutation(p.samples.len(), seed ^ 0xa11)
        .into_iter()
        .map(|i| {
            let s = &p.samples[i];
            Sample {
                stack_id: stack_new_of[s.stack_id],
                ..s.clone()
            }
        })
        .collect();
    let mut out = c.clone();
    out.profile.frames = frames_out;
    out.profile.stacks = stacks;
    out.profile.samples = samples;
    out
}

/// The chunk's observations by content: (timestamp bits, thread, frames), sorted.
fn resolved(c: &ProfileChunk) -> Vec<(u64, String, Vec<Frame>)> {
    let p = &c.profile;
    let mut v: Vec<_> = p
        .samples
        .iter()
        .map(|s| {
            let frames = p.stacks[s.stack_id]
                .iter()
                .map(|&f| (*p.frames[f]).clone())
                .collect();
            (s.timestamp.to_bits(), s.thread_id.to_string(), frames)
        })
        .collect();
    v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `canonical_form` keeps a chunk's observations, does not depend on how frames, stacks
    /// and samples are numbered and ordered, and tells chunks with other frames apart.
    #[test]
    fn canonical_form_is_the_observations_whatever_the_numbering(c in chunk(), seed in any::<u64>()) {
        let canon = canonical_form(&c);
        prop_assert_eq!(resolved(&canon), resolved(&c));
        prop_assert_eq!(&canonical_form(&renumbered(&c, seed)), &canon);
        // Frames and stacks deduplicated.
        let mut frames = canon.profile.frames.clone();
        frames.sort_by_key(|f| format!("{f:?}"));
        frames.dedup();
        prop_assert_eq!(frames.len(), canon.profile.frames.len());
        // A used frame with another line is another chunk.
        if let Some(s) = c.profile.samples.first()
            && let Some(&f) = c.profile.stacks[s.stack_id].first()
        {
            let mut other = c.clone();
            let mut frame = (*other.profile.frames[f]).clone();
            frame.lineno = Some(frame.lineno.map_or(0, |l| l.wrapping_add(1)));
            other.profile.frames[f] = frame.into();
            prop_assert_ne!(canonical_form(&other), canon);
        }
    }
}

/// Samples in time order with distinct timestamps and deduplicated frames/stacks in first-use
/// order come back *equal as they are*, not just canonically.
#[test]
fn a_canonical_chunk_comes_back_identical() {
    let f = |name: &str, line| Frame {
        function: Some(name.into()),
        abs_path: Some(format!("/app/{name}.py").into()),
        filename: Some(format!("{name}.py").into()),
        lineno: Some(line),
        in_app: Some(true),
        module: Some(name.into()),
        ..Default::default()
    };
    let chunk = ProfileChunk {
        chunk_id: "0123456789abcdef0123456789abcdef".into(),
        profiler_id: "87b148781b0a4a5284a3e3f9cc93e1ec".into(),
        platform: "python".into(),
        version: "2".into(),
        client_sdk: Some(ClientSdk {
            name: "sentry.python".into(),
            version: "2.75.0".into(),
        }),
        release: Some("app@1".into()),
        environment: None,
        profile: ProfileData {
            frames: vec![f("a", 1).into(), f("b", 2).into(), f("c", 3).into()],
            stacks: vec![vec![0, 1], vec![2, 1]],
            samples: vec![
                Sample {
                    timestamp: 1795317063.0011497,
                    stack_id: 0,
                    thread_id: "1".into(),
                },
                Sample {
                    timestamp: 1795317063.0161164,
                    stack_id: 1,
                    thread_id: "1".into(),
                },
                Sample {
                    timestamp: 1795317063.031,
                    stack_id: 0,
                    thread_id: "1".into(),
                },
            ],
            thread_metadata: [(
                "1".to_owned(),
                ThreadMetadata {
                    name: Some("MainThread".into()),
                    priority: Some(5),
                },
            )]
            .into_iter()
            .collect(),
        },
        ..Default::default()
    };
    let t = to_otlp(
        &SentryInput {
            chunks: std::slice::from_ref(&chunk),
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    );
    let back = restore_request(&t.request).remove(0).unwrap();
    assert_eq!(back, chunk);
    assert_eq!(back.to_json(), chunk.to_json());
}

/// An f64 holding a time in the first weeks after 1970 has digits below the nanosecond, which
/// OTLP (integer nanoseconds) cannot carry: the sample comes back at nanosecond resolution,
/// and the canonical forms, which compare at that resolution, are equal. Found by the
/// `chunk_roundtrip` fuzz target (finding 6 in fuzz/README.md).
#[test]
fn sub_nanosecond_digits_are_not_part_of_the_observation() {
    let frame = Frame {
        function: Some("main".into()),
        ..Default::default()
    };
    let sample = |timestamp| Sample {
        timestamp,
        stack_id: 0,
        thread_id: "1".into(),
    };
    let chunk = ProfileChunk {
        chunk_id: "0123456789abcdef0123456789abcdef".into(),
        profiler_id: "87b148781b0a4a5284a3e3f9cc93e1ec".into(),
        platform: "python".into(),
        version: "2".into(),
        profile: ProfileData {
            frames: vec![frame.into()],
            stacks: vec![vec![0]],
            samples: vec![sample(179530.17174558146), sample(179530.181)],
            ..Default::default()
        },
        ..Default::default()
    };
    let t = to_otlp(
        &SentryInput {
            chunks: std::slice::from_ref(&chunk),
            v1_profiles: &[],
        },
        &NoLinks,
        &OtlpOptions::default(),
    );
    assert!(t.rejected.is_empty(), "{:?}", t.rejected);
    let back = restore_request(&t.request).remove(0).unwrap();
    let times: Vec<f64> = back.profile.samples.iter().map(|s| s.timestamp).collect();
    assert_eq!(times, [179530.171745581, 179530.181]);
    assert_eq!(canonical_form(&back), canonical_form(&chunk));
    // The canonical form itself is at nanosecond resolution.
    assert_eq!(
        canonical_form(&chunk).profile.samples[0].timestamp,
        179530.171745581
    );
}
