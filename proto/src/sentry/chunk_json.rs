//! A chunk's compact JSON written directly ([`ProfileChunk::write_json`]): the bytes serde
//! writes ([`ProfileChunk::to_json`]), with the samples, stacks and frames, most of a chunk,
//! written without going through serde. serde_json escapes every field name of every sample and
//! formats each value through its serializer; that was most of the time it took to serialize
//! a merged chunk. The values are formatted with serde_json's own formatter, so numbers come
//! out the same, and strings that need escaping are handed to serde_json.

use super::chunk::{Frame, ProfileChunk, ProfileData, Sample};
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use std::sync::Arc;

/// Appends `v` as serde_json writes it.
fn value<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Plain data with string keys always serializes, and a Vec cannot fail to grow.
    let _ = serde_json::to_writer(&mut *out, v);
}

/// Appends `s` as a JSON string (quotes included), escaped as serde_json escapes.
fn string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        value(out, s);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Appends `,"name":` (without the comma for the first field of an object).
fn key(out: &mut Vec<u8>, name: &str, first: bool) {
    if !first {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

fn uint(out: &mut Vec<u8>, v: usize) {
    let _ = CompactFormatter.write_u64(out, v as u64);
}

fn samples(out: &mut Vec<u8>, samples: &[Sample]) {
    out.push(b'[');
    for (i, s) in samples.iter().enumerate() {
        let Sample {
            timestamp,
            stack_id,
            thread_id,
        } = s;
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"timestamp\":");
        super::write_json_f64(out, *timestamp);
        out.extend_from_slice(b",\"stack_id\":");
        uint(out, *stack_id);
        out.extend_from_slice(b",\"thread_id\":");
        string(out, thread_id);
        out.push(b'}');
    }
    out.push(b']');
}

fn stacks(out: &mut Vec<u8>, stacks: &[Vec<usize>]) {
    out.push(b'[');
    for (i, stack) in stacks.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        for (j, &f) in stack.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            uint(out, f);
        }
        out.push(b']');
    }
    out.push(b']');
}

/// Appends `,"name":"value"` when `v` is set (the first field without its comma).
fn opt_string(out: &mut Vec<u8>, name: &str, v: &Option<Arc<str>>, first: &mut bool) {
    if let Some(v) = v {
        key(out, name, *first);
        *first = false;
        string(out, v);
    }
}

fn opt_uint(out: &mut Vec<u8>, name: &str, v: Option<u32>, first: &mut bool) {
    if let Some(v) = v {
        key(out, name, *first);
        *first = false;
        uint(out, v as usize);
    }
}

fn frames(out: &mut Vec<u8>, frames: &[Arc<Frame>]) {
    out.push(b'[');
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Every field, in declaration order (serde's), each skipped when unset.
        let Frame {
            abs_path,
            colno,
            filename,
            function,
            in_app,
            instruction_addr,
            lineno,
            module,
            package,
            platform,
        } = &**f;
        let first = &mut true;
        out.push(b'{');
        opt_string(out, "abs_path", abs_path, first);
        opt_uint(out, "colno", *colno, first);
        opt_string(out, "filename", filename, first);
        opt_string(out, "function", function, first);
        if let Some(b) = in_app {
            key(out, "in_app", *first);
            *first = false;
            out.extend_from_slice(if *b { b"true" } else { b"false" });
        }
        opt_string(out, "instruction_addr", instruction_addr, first);
        opt_uint(out, "lineno", *lineno, first);
        opt_string(out, "module", module, first);
        opt_string(out, "package", package, first);
        opt_string(out, "platform", platform, first);
        out.push(b'}');
    }
    out.push(b']');
}

fn profile(out: &mut Vec<u8>, p: &ProfileData) {
    // Every field, so that a new one does not compile until it is written here too.
    let ProfileData {
        samples: s,
        stacks: st,
        frames,
        thread_metadata,
    } = p;
    out.push(b'{');
    key(out, "samples", true);
    samples(out, s);
    key(out, "stacks", false);
    stacks(out, st);
    key(out, "frames", false);
    self::frames(out, frames);
    if !thread_metadata.is_empty() {
        key(out, "thread_metadata", false);
        value(out, thread_metadata);
    }
    out.push(b'}');
}

impl ProfileChunk {
    /// Appends the chunk's compact JSON to `out`: byte for byte what
    /// [`ProfileChunk::to_json`] writes, in less time (the samples, stacks and frames are written
    /// directly). For the paths that serialize every chunk they send.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Every field, in declaration order (serde's), with serde's skip rules.
        let ProfileChunk {
            chunk_id,
            profiler_id,
            debug_meta,
            environment,
            platform,
            release,
            content_type,
            client_sdk,
            measurements,
            version,
            profile: p,
        } = self;
        out.push(b'{');
        key(out, "chunk_id", true);
        string(out, chunk_id);
        key(out, "profiler_id", false);
        string(out, profiler_id);
        if let Some(dm) = debug_meta {
            key(out, "debug_meta", false);
            value(out, dm);
        }
        if let Some(e) = environment {
            key(out, "environment", false);
            string(out, e);
        }
        key(out, "platform", false);
        string(out, platform);
        if let Some(r) = release {
            key(out, "release", false);
            string(out, r);
        }
        if let Some(c) = content_type {
            key(out, "content_type", false);
            string(out, c);
        }
        if let Some(sdk) = client_sdk {
            key(out, "client_sdk", false);
            value(out, sdk);
        }
        if !measurements.is_empty() {
            key(out, "measurements", false);
            value(out, measurements);
        }
        key(out, "version", false);
        string(out, version);
        key(out, "profile", false);
        profile(out, p);
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::super::chunk::{
        ClientSdk, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue, ThreadMetadata,
    };
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn direct(c: &ProfileChunk) -> Vec<u8> {
        let mut out = b"prefix".to_vec();
        c.write_json(&mut out);
        out.split_off(6)
    }

    fn full() -> ProfileChunk {
        let mut other = BTreeMap::new();
        other.insert("arch".to_string(), serde_json::json!("x86_64"));
        ProfileChunk {
            chunk_id: "0123456789abcdef0123456789abcdef".into(),
            profiler_id: "fedcba9876543210fedcba9876543210".into(),
            debug_meta: Some(DebugMeta {
                images: vec![DebugImage {
                    image_type: "symbolic".into(),
                    code_file: Some("/usr/lib/libc.so.6".into()),
                    debug_id: Some("b3a1c2d4-0000-0000-0000-000000000000".into()),
                    image_addr: Some("0x7f0000000000".into()),
                    image_size: Some(4096),
                    other,
                    ..Default::default()
                }],
            }),
            environment: Some("prod\u{1}\"uction\"".into()),
            platform: "python".into(),
            release: Some("app@1.0 é".into()),
            content_type: Some("text/x\\y".into()),
            client_sdk: Some(ClientSdk {
                name: "profilink".into(),
                version: "0.1.0".into(),
            }),
            measurements: BTreeMap::from([(
                "cpu_usage".to_string(),
                Measurement {
                    unit: "percent".into(),
                    values: vec![MeasurementValue {
                        timestamp: 1.5,
                        value: 0.25,
                    }],
                },
            )]),
            version: "2".into(),
            profile: ProfileData {
                samples: vec![
                    Sample {
                        timestamp: 1_700_000_000.123456,
                        stack_id: 0,
                        thread_id: "123".into(),
                    },
                    Sample {
                        timestamp: f64::NAN,
                        stack_id: 12345678901,
                        thread_id: "t\n\"x\"".into(),
                    },
                    Sample {
                        timestamp: -0.0,
                        stack_id: 1,
                        thread_id: "".into(),
                    },
                    Sample {
                        timestamp: f64::INFINITY,
                        stack_id: 1,
                        thread_id: "1".into(),
                    },
                ],
                stacks: vec![vec![0, 1, 2], vec![], vec![usize::MAX]],
                frames: vec![
                    Arc::new(Frame {
                        function: Some("main\t\u{7f}".into()),
                        lineno: Some(3),
                        ..Default::default()
                    }),
                    Arc::new(Frame {
                        abs_path: Some("/src/app \"x\".py".into()),
                        colno: Some(u32::MAX),
                        filename: Some("app.py".into()),
                        function: Some("handler".into()),
                        in_app: Some(true),
                        instruction_addr: Some("0x7f00001234".into()),
                        lineno: Some(0),
                        module: Some("app\\mod".into()),
                        package: Some("/usr/lib/libc.so.6".into()),
                        platform: Some("native".into()),
                    }),
                    Arc::new(Frame {
                        in_app: Some(false),
                        ..Default::default()
                    }),
                    Arc::new(Frame::default()),
                ],
                thread_metadata: BTreeMap::from([(
                    "123".to_string(),
                    ThreadMetadata {
                        name: Some("MainThread".into()),
                        priority: Some(1),
                    },
                )]),
            },
        }
    }

    #[test]
    fn writes_what_serde_writes_with_every_field_set() {
        let c = full();
        assert_eq!(
            String::from_utf8(direct(&c)).unwrap(),
            String::from_utf8(c.to_json()).unwrap()
        );
    }

    #[test]
    fn writes_what_serde_writes_with_every_optional_field_left_out() {
        let c = ProfileChunk::default();
        assert_eq!(direct(&c), c.to_json());
        let mut c = full();
        c.profile.samples.clear();
        c.profile.stacks.clear();
        c.profile.frames.clear();
        assert_eq!(direct(&c), c.to_json());
    }

    fn any_frame() -> impl Strategy<Value = Frame> {
        let s = || proptest::option::of("\\PC{0,6}|[\\x00-\\x7f]{0,6}");
        let n = || proptest::option::of(any::<u32>());
        (
            (s(), n(), s(), s(), proptest::option::of(any::<bool>())),
            (s(), n(), s(), s(), s()),
        )
            .prop_map(
                |(
                    (abs_path, colno, filename, function, in_app),
                    (instruction_addr, lineno, module, package, platform),
                )| {
                    let a = |v: Option<String>| v.map(|v| Arc::<str>::from(v.as_str()));
                    Frame {
                        abs_path: a(abs_path),
                        colno,
                        filename: a(filename),
                        function: a(function),
                        in_app,
                        instruction_addr: a(instruction_addr),
                        lineno,
                        module: a(module),
                        package: a(package),
                        platform: a(platform),
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn writes_what_serde_writes_for_any_frames(
            frames in proptest::collection::vec(any_frame(), 0..8),
        ) {
            let mut c = full();
            c.profile.frames = frames.into_iter().map(Arc::new).collect();
            prop_assert_eq!(direct(&c), c.to_json());
        }

        #[test]
        fn writes_what_serde_writes_for_any_samples_and_strings(
            ids in proptest::collection::vec(
                (any::<f64>(), any::<usize>(), "\\PC{0,6}|[\\x00-\\x7f]{0,6}"), 0..20),
            stacks in proptest::collection::vec(proptest::collection::vec(any::<usize>(), 0..5), 0..6),
            chunk_id in "\\PC{0,8}|[\\x00-\\x7f]{0,8}",
            release in proptest::option::of("[\\x00-\\x7f]{0,8}"),
        ) {
            let mut c = full();
            c.chunk_id = chunk_id;
            c.release = release;
            c.profile.stacks = stacks;
            c.profile.samples = ids
                .into_iter()
                .map(|(timestamp, stack_id, tid)| Sample {
                    timestamp,
                    stack_id,
                    thread_id: tid.as_str().into(),
                })
                .collect();
            prop_assert_eq!(direct(&c), c.to_json());
        }
    }
}
