//! Sentry profile chunk (Sample Format V2) rules, as Relay's `relay-profiling` parses and
//! normalizes a chunk.

use super::finding::{Finding, Sink};
use super::sentry_common::{self as common, parse, size_limit};
use crate::sentry::{CHUNK_VERSION, ProfileChunk};
use crate::sentry::{is_sentry_id, parse_sentry_id};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::io;

/// Relay's longest accepted chunk: last sample time minus first, in seconds.
pub const MAX_CHUNK_DURATION_SECS: f64 = 66.0;

/// Validates a parsed chunk against Relay's rules, including its serialized size (the chunk is
/// serialized once into a byte counter, no buffer).
pub fn validate_chunk(chunk: &ProfileChunk) -> Vec<Finding> {
    let mut sink = Sink::new(".");
    check_chunk(chunk, "", &mut sink);
    let mut counter = ByteCounter(0);
    if serde_json::to_writer(&mut counter, chunk).is_ok() {
        size_limit("chunk-size", counter.0, "", &mut sink);
    }
    sink.finish()
}

/// The errors of [`validate_chunk`] except the serialized size, without serializing the chunk
/// and without warnings (which cost nothing here): for producers that bound the size
/// themselves (the translator keeps each chunk within its `max_chunk_bytes`, at most Relay's
/// limit) and check every chunk they emit.
pub fn validate_chunk_errors(chunk: &ProfileChunk) -> Vec<Finding> {
    let mut sink = Sink::errors_only(".");
    check_chunk(chunk, "", &mut sink);
    sink.finish()
}

/// Validates a chunk payload: size (at most [`MAX_CHUNK_BYTES`](super::MAX_CHUNK_BYTES)), JSON parse (a `json-parse`
/// error names the JSON path, e.g. `profile.samples[0].thread_id`), the JSON shapes Relay
/// rejects but the model reads liberally (`null` lists, `debug_meta` without `images`), then
/// every rule of [`validate_chunk`].
pub fn validate_chunk_json(bytes: &[u8]) -> Vec<Finding> {
    let mut sink = Sink::new(".");
    chunk_json(bytes, "", &mut sink);
    sink.finish()
}

/// The chunk rules for a payload whose paths start with `prefix` (e.g. `items[0].`); returns the
/// chunk when it parsed.
pub(crate) fn chunk_json(bytes: &[u8], prefix: &str, sink: &mut Sink) -> Option<ProfileChunk> {
    size_limit("chunk-size", bytes.len(), prefix, sink);
    let chunk: ProfileChunk = parse(bytes, prefix, sink)?;
    json_shape(bytes, prefix, sink);
    check_chunk(&chunk, prefix, sink);
    Some(chunk)
}

struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Every chunk rule, paths prefixed with `prefix`.
pub(crate) fn check_chunk(c: &ProfileChunk, prefix: &str, sink: &mut Sink) {
    if c.version != CHUNK_VERSION {
        let why = match c.version.as_str() {
            "" => "version is missing; Relay rejects the chunk (platform not supported)".into(),
            "1" => {
                "version \"1\" is the V1 transaction profile; a profile_chunk must be \"2\"".into()
            }
            v => format!("version {v:?} is not supported; a profile_chunk must be \"2\""),
        };
        sink.error("chunk-version", format_args!("{prefix}version"), why);
    }
    id(&c.chunk_id, "chunk_id", "chunk-id-format", prefix, sink);
    id(
        &c.profiler_id,
        "profiler_id",
        "profiler-id-format",
        prefix,
        sink,
    );
    match &c.client_sdk {
        None => sink.error(
            "client-sdk",
            format_args!("{prefix}client_sdk"),
            "client_sdk is missing; Relay requires {name, version}",
        ),
        Some(sdk) => {
            for (field, value) in [("name", &sdk.name), ("version", &sdk.version)] {
                if value.is_empty() {
                    sink.error(
                        "client-sdk",
                        format_args!("{prefix}client_sdk.{field}"),
                        format_args!("client_sdk.{field} is missing or empty"),
                    );
                }
            }
        }
    }
    common::platform(&c.platform, prefix, sink);
    common::debug_meta(c.debug_meta.as_ref(), prefix, sink);
    common::measurements(
        c.measurements.iter().map(|(name, m)| {
            let values = m
                .values
                .iter()
                .map(|v| (Some(v.timestamp), v.value))
                .collect();
            (name.as_str(), m.unit.as_str(), values)
        }),
        prefix,
        sink,
    );
    let data = &c.profile;
    common::stacks_and_ids(
        data.samples.iter().map(|s| s.stack_id),
        &data.stacks,
        data.frames.len(),
        prefix,
        sink,
    );
    common::frames(&data.frames, prefix, sink);
    common::image_addresses(&data.frames, c.debug_meta.as_ref(), prefix, sink);
    samples(c, prefix, sink);
}

/// Ids are UUIDs; Relay reads hyphenated or upper-case forms too but writes 32 lowercase hex.
fn id(value: &str, field: &str, rule: &'static str, prefix: &str, sink: &mut Sink) {
    if is_sentry_id(value) {
        return;
    }
    if parse_sentry_id(value).is_some() {
        sink.warning(
            "id-not-canonical",
            format_args!("{prefix}{field}"),
            format_args!(
                "{field} {value:?} is a UUID but not 32 lowercase hex characters; Relay \
                 accepts it and rewrites it, so other references to it may not match"
            ),
        );
    } else {
        sink.error(
            rule,
            format_args!("{prefix}{field}"),
            format_args!("{field} {value:?} must be 32 lowercase hex characters (a UUID)"),
        );
    }
}

/// The samples of one thread in a chunk.
struct ThreadCount<'a> {
    id: &'a str,
    /// Samples with a non-empty stack.
    active: usize,
    /// Index of the first sample.
    first: usize,
    /// All samples.
    all: usize,
    /// Earliest and latest finite timestamp.
    min: f64,
    max: f64,
}

/// Per-sample rules, then Relay's normalization: threads with fewer than two samples with a
/// non-empty stack are dropped, the rest must not be empty and must span at most 66 s.
///
/// One hash lookup per sample (none when a sample has the previous sample's thread), so
/// validating every emitted chunk stays cheap.
fn samples(c: &ProfileChunk, prefix: &str, sink: &mut Sink) {
    let data = &c.profile;
    let mut threads: Vec<ThreadCount<'_>> = Vec::new();
    let mut index: hashbrown::HashMap<&str, usize> = hashbrown::HashMap::new();
    let mut last: Option<(&str, usize)> = None;
    for (i, s) in data.samples.iter().enumerate() {
        if s.thread_id.is_empty() {
            sink.error(
                "thread-id-type",
                format_args!("{prefix}profile.samples[{i}].thread_id"),
                "thread_id is empty; it must be the thread id as a decimal string",
            );
        } else if !s.thread_id.bytes().all(|b| b.is_ascii_digit()) {
            sink.warning(
                "thread-id-not-decimal",
                format_args!("{prefix}profile.samples[{i}].thread_id"),
                format_args!(
                    "thread_id {:?} is not a decimal number; spans carry thread.id as an \
                     integer and will not link to this thread",
                    s.thread_id
                ),
            );
        }
        if !s.timestamp.is_finite() {
            sink.error(
                "timestamp-not-finite",
                format_args!("{prefix}profile.samples[{i}].timestamp"),
                format_args!("timestamp {} is not a finite number", s.timestamp),
            );
        }
        let tid = s.thread_id.as_str();
        let t = match last {
            Some((l, t)) if l == tid => t,
            _ => *index.entry(tid).or_insert_with(|| {
                threads.push(ThreadCount {
                    id: tid,
                    active: 0,
                    first: i,
                    all: 0,
                    min: f64::INFINITY,
                    max: f64::NEG_INFINITY,
                });
                threads.len() - 1
            }),
        };
        last = Some((tid, t));
        let e = &mut threads[t];
        e.all += 1;
        if data.stacks.get(s.stack_id).is_some_and(|st| !st.is_empty()) {
            e.active += 1;
        }
        if s.timestamp.is_finite() {
            e.min = e.min.min(s.timestamp);
            e.max = e.max.max(s.timestamp);
        }
    }
    threads.sort_unstable_by_key(|t| t.id);
    let mut kept = 0;
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for &ThreadCount {
        id: tid,
        active,
        first,
        all,
        min: tmin,
        max: tmax,
    } in &threads
    {
        if active < 2 {
            sink.warning(
                "thread-too-few-samples",
                format_args!("{prefix}profile.samples[{first}]"),
                format_args!(
                    "thread {tid:?} has {active} sample(s) with a non-empty stack ({all} in \
                     all); Relay drops threads with fewer than 2, with all their samples"
                ),
            );
        } else {
            kept += all;
            min = min.min(tmin);
            max = max.max(tmax);
        }
    }
    if kept == 0 {
        let why = if data.samples.is_empty() {
            "the chunk has no samples; Relay rejects it (not enough samples)"
        } else {
            "no thread has 2 or more samples with a non-empty stack, so Relay drops every \
             thread and rejects the chunk (not enough samples)"
        };
        sink.error("no-samples", format_args!("{prefix}profile.samples"), why);
        return;
    }
    if max - min > MAX_CHUNK_DURATION_SECS {
        sink.error(
            "chunk-duration",
            format_args!("{prefix}profile.samples"),
            format_args!(
                "samples span {:.3} s (from {min} to {max}); Relay rejects chunks longer than \
                 {MAX_CHUNK_DURATION_SECS} s",
                max - min
            ),
        );
    }
}

/// Absent, `null`, or present: the JSON shapes Relay is stricter about than the model.
#[derive(Default)]
enum Shape<T> {
    #[default]
    Absent,
    Null,
    Present(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shape<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(d)?.map_or(Shape::Null, Shape::Present))
    }
}

#[derive(Deserialize)]
struct ChunkShape {
    #[serde(default)]
    measurements: Shape<IgnoredAny>,
    #[serde(default)]
    debug_meta: Shape<DebugMetaShape>,
    #[serde(default)]
    profile: Shape<ProfileShape>,
}

#[derive(Deserialize)]
struct DebugMetaShape {
    #[serde(default)]
    images: Shape<IgnoredAny>,
}

#[derive(Deserialize)]
struct ProfileShape {
    #[serde(default)]
    samples: Shape<IgnoredAny>,
    #[serde(default)]
    stacks: Shape<IgnoredAny>,
    #[serde(default)]
    frames: Shape<IgnoredAny>,
    #[serde(default)]
    thread_metadata: Shape<IgnoredAny>,
}

/// Fields Relay requires or does not allow to be `null`, where the model reads defaults.
fn json_shape(bytes: &[u8], prefix: &str, sink: &mut Sink) {
    let Ok(shape) = serde_json::from_slice::<ChunkShape>(bytes) else {
        return;
    };
    let mut report = |field: &str, s: ShapeKind, required: bool| {
        let problem = match s {
            ShapeKind::Null => "is null",
            ShapeKind::Absent if required => "is missing",
            _ => return,
        };
        sink.error(
            "json-shape",
            format_args!("{prefix}{field}"),
            format_args!("{field} {problem}; Relay rejects the chunk (invalid JSON)"),
        );
    };
    report("measurements", shape.measurements.kind(), false);
    match shape.debug_meta {
        Shape::Present(m) => report("debug_meta.images", m.images.kind(), true),
        other => report("debug_meta", other.kind(), false),
    }
    match shape.profile {
        Shape::Present(p) => {
            report("profile.samples", p.samples.kind(), true);
            report("profile.stacks", p.stacks.kind(), true);
            report("profile.frames", p.frames.kind(), true);
            report("profile.thread_metadata", p.thread_metadata.kind(), false);
        }
        other => report("profile", other.kind(), false),
    }
}

#[derive(Clone, Copy)]
enum ShapeKind {
    Absent,
    Null,
    Present,
}

impl<T> Shape<T> {
    fn kind(&self) -> ShapeKind {
        match self {
            Shape::Absent => ShapeKind::Absent,
            Shape::Null => ShapeKind::Null,
            Shape::Present(_) => ShapeKind::Present,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_like_to_json() {
        let c = ProfileChunk::default();
        let mut counter = ByteCounter(0);
        serde_json::to_writer(&mut counter, &c).unwrap();
        assert_eq!(counter.0, c.to_json().len());
        assert!(super::super::MAX_CHUNK_BYTES > counter.0);
    }

    #[test]
    fn errors_only_are_the_errors_of_the_full_validation() {
        use crate::sentry::Sample;
        let mut c = ProfileChunk {
            version: "1".into(),
            chunk_id: "x".into(),
            ..Default::default()
        };
        // One sparse thread (a warning), one with an empty id (an error).
        for (t, tid) in [(1.0, "7"), (2.0, ""), (3.0, "")] {
            c.profile.samples.push(Sample {
                timestamp: t,
                stack_id: 0,
                thread_id: tid.into(),
            });
        }
        c.profile.stacks.push(vec![]);
        let all = validate_chunk(&c);
        assert!(all.iter().any(|f| !f.is_error()), "{all:?}");
        let want: Vec<Finding> = all.into_iter().filter(Finding::is_error).collect();
        assert!(want.len() >= 4, "{want:?}");
        assert_eq!(validate_chunk_errors(&c), want);
    }
}
