//! An OTLP profile made from a chunk → that exact chunk.
//!
//! # The marker set
//!
//! The OTLP -> Sentry direction restores a profile (instead of translating it) only when it is
//! profilink's own complete encoding of a chunk, i.e. when [`check_marker`] passes:
//!
//! * the mark: the profile attribute [`PROFILINK_FORMAT`] = [`PROFILINK_FORMAT_CHUNK_V1`]
//!   (written since this marker set exists), or, for OTLP written by earlier profilink
//!   versions that lack it, the instrumentation scope named [`SCOPE_NAME`] (`profilink`),
//!   which every version writes;
//! * profile attribute [`SENTRY_CHUNK_ID`]: a string of 32 lowercase hex digits;
//! * profile attribute [`SENTRY_VERSION`] = `"2"`;
//! * resource attribute [`SENTRY_PROFILER_ID`]: 32 lowercase hex digits;
//! * resource attribute [`SENTRY_PLATFORM`]: one of Sentry's platforms ([`SENTRY_PLATFORMS`]);
//! * resource attributes [`TELEMETRY_SDK_NAME`] and [`TELEMETRY_SDK_VERSION`]: non-empty
//!   strings (a chunk's `client_sdk` is required).
//!
//! Anything else that carries `sentry.chunk_id` (another producer's OTLP with partial
//! `sentry.*` marks) is translated like any other profile; see
//! [`crate::otlp_to_sentry`].
//!
//! # Restoring
//!
//! A profile came from a chunk when it has the [`SENTRY_CHUNK_ID`] attribute
//! ([`is_from_chunk`]). [`restore_chunk`] reads back:
//!
//! * from the resource: `profiler_id` ← [`SENTRY_PROFILER_ID`], `platform` ← [`SENTRY_PLATFORM`],
//!   `release` ← [`SERVICE_VERSION`], `environment` ← [`DEPLOYMENT_ENVIRONMENT_NAME`],
//!   `client_sdk` ← [`TELEMETRY_SDK_NAME`]/[`TELEMETRY_SDK_VERSION`] (set when either is present);
//!   the optional fields are `None` when absent; `profiler_id`, `platform` and `version` are
//!   required (an absent one is an error, never filled in), values are kept as they are;
//! * from the profile: `chunk_id`, `version`, `content_type`, `thread_metadata`, `debug_meta`,
//!   `measurements` (see [`super::attributes`]);
//! * samples: one per timestamp of each OTLP `Sample`, `timestamp` = `nanos_to_secs(ns)`,
//!   `thread_id` ← [`THREAD_ID`] (ints in decimal), `stack_id` → the stack of its locations,
//!   each location → one frame ([`super::frames`]). Samples are sorted by time (stable: ties keep
//!   the OTLP order). Frames and stacks are numbered in first-use order.
//!
//! Every index goes through the bounds-checked [`Dictionary`]; malformed input is an error,
//! never a panic. `values` without timestamps have no time and are rejected.
//!
//! [`restore_chunk_with_links`] also returns each linked observation as a [`SampleLink`], so
//! OTLP → chunk → OTLP keeps links (via [`crate::linking::ExactLinks`]).

use super::attributes::*;
use super::{extras, frames};
use crate::SampleLink;
use crate::dictionary::{AttrValue, Dictionary};
use crate::error::{Malformed, TranslateError};
use crate::fx_hash::FxHashMap;
use profilink_proto::otlp::{ExportProfilesServiceRequest, Profile, ResourceProfiles};
use profilink_proto::sentry::CompactString;
use profilink_proto::sentry::is_sentry_id;
use profilink_proto::sentry::{ClientSdk, Frame, ProfileChunk, Sample};
use profilink_proto::sentry::{nanos_to_secs, secs_to_nanos};
use std::collections::HashMap;
use std::sync::Arc;

/// The value of the profile attribute `key`, if present (unresolvable attributes are skipped).
fn profile_attr<'a>(
    dict: &Dictionary<'a>,
    profile: &'a Profile,
    key: &str,
) -> Option<AttrValue<'a>> {
    profile
        .attribute_indices
        .iter()
        .filter_map(|&i| dict.attribute(i).ok().flatten())
        .find(|a| a.key == key)
        .map(|a| a.value)
}

/// True when `profile` was made from a chunk (has the [`SENTRY_CHUNK_ID`] attribute).
pub fn is_from_chunk(dictionary: &Dictionary<'_>, profile: &Profile) -> bool {
    profile_attr(dictionary, profile, SENTRY_CHUNK_ID).is_some()
}

/// Rebuilds the chunk `profile` was made from (see the module docs).
pub fn restore_chunk(
    dictionary: &Dictionary<'_>,
    resource: &ResourceProfiles,
    profile: &Profile,
) -> Result<ProfileChunk, TranslateError> {
    restore(dictionary, resource, profile, false).map(|(c, _)| c)
}

/// Like [`restore_chunk`], also returning the link of every linked observation.
pub fn restore_chunk_with_links(
    dictionary: &Dictionary<'_>,
    resource: &ResourceProfiles,
    profile: &Profile,
) -> Result<(ProfileChunk, Vec<SampleLink>), TranslateError> {
    restore(dictionary, resource, profile, true)
}

/// Restores every chunk-made profile of `request`, in order.
pub fn restore_request(
    request: &ExportProfilesServiceRequest,
) -> Vec<Result<ProfileChunk, TranslateError>> {
    let dict = Dictionary::new(request.dictionary.as_ref());
    let mut out = Vec::new();
    for rp in &request.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                if is_from_chunk(&dict, p) {
                    out.push(restore_chunk(&dict, rp, p));
                }
            }
        }
    }
    out
}

/// Sentry's platform names (its `VALID_PLATFORMS` that profiling can carry); a restored
/// chunk's `platform` must be one of them.
pub const SENTRY_PLATFORMS: &[&str] = &[
    "android",
    "as3",
    "c",
    "cfml",
    "cocoa",
    "csharp",
    "dart",
    "elixir",
    "go",
    "groovy",
    "haskell",
    "java",
    "javascript",
    "native",
    "node",
    "objc",
    "other",
    "perl",
    "php",
    "python",
    "ruby",
    "rust",
    "swift",
];

/// Checks the marker set (see the module docs): `Ok` when `profile` (in `scope` of
/// `resource`) is profilink's complete encoding of a chunk, else why not.
pub fn check_marker(
    dictionary: &Dictionary<'_>,
    scope_name: &str,
    resource: &ResourceProfiles,
    profile: &Profile,
) -> Result<(), String> {
    let attrs = dictionary
        .attributes(&profile.attribute_indices)
        .map_err(|e| e.to_string())?;
    let get = |key: &str| attrs.iter().rev().find(|a| a.key == key).map(|a| &a.value);
    let marked = get(PROFILINK_FORMAT).and_then(|v| v.as_str()) == Some(PROFILINK_FORMAT_CHUNK_V1);
    if !marked && scope_name != SCOPE_NAME {
        return Err(format!(
            "no {PROFILINK_FORMAT} = {PROFILINK_FORMAT_CHUNK_V1:?} mark and scope {scope_name:?} \
             is not {SCOPE_NAME:?}: not profilink's encoding of a chunk"
        ));
    }
    match get(SENTRY_CHUNK_ID).and_then(|v| v.as_str()) {
        Some(id) if is_sentry_id(id) => {}
        other => {
            return Err(format!(
                "{SENTRY_CHUNK_ID} {other:?} is not 32 lowercase hex"
            ));
        }
    }
    match get(SENTRY_VERSION).and_then(|v| v.as_str()) {
        Some("2") => {}
        other => return Err(format!("{SENTRY_VERSION} {other:?} is not \"2\"")),
    }
    let res = match &resource.resource {
        Some(r) => dictionary
            .key_values(&r.attributes)
            .map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let rget = |key: &str| {
        res.iter()
            .rev()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_str())
    };
    match rget(SENTRY_PROFILER_ID) {
        Some(id) if is_sentry_id(id) => {}
        other => {
            return Err(format!(
                "resource {SENTRY_PROFILER_ID} {other:?} is not 32 lowercase hex"
            ));
        }
    }
    match rget(SENTRY_PLATFORM) {
        Some(p) if SENTRY_PLATFORMS.contains(&p) => {}
        other => {
            return Err(format!(
                "resource {SENTRY_PLATFORM} {other:?} is not a Sentry platform"
            ));
        }
    }
    for key in [TELEMETRY_SDK_NAME, TELEMETRY_SDK_VERSION] {
        if rget(key).is_none_or(str::is_empty) {
            return Err(format!("resource {key} is missing or empty"));
        }
    }
    Ok(())
}

fn text(v: &AttrValue<'_>, key: &str) -> Result<String, TranslateError> {
    v.as_str().map(str::to_owned).ok_or_else(|| {
        Malformed::AttributeNotAString {
            key: key.to_owned(),
        }
        .into()
    })
}

fn restore(
    dict: &Dictionary<'_>,
    resource: &ResourceProfiles,
    profile: &Profile,
    want_links: bool,
) -> Result<(ProfileChunk, Vec<SampleLink>), TranslateError> {
    let mut chunk = ProfileChunk::default();

    let mut sdk_name = None;
    let mut sdk_version = None;
    let (mut has_profiler_id, mut has_platform, mut has_version) = (false, false, false);
    if let Some(r) = &resource.resource {
        for a in dict.key_values(&r.attributes)? {
            match a.key {
                SENTRY_PROFILER_ID => {
                    chunk.profiler_id = text(&a.value, a.key)?;
                    has_profiler_id = true;
                }
                SENTRY_PLATFORM => {
                    chunk.platform = text(&a.value, a.key)?;
                    has_platform = true;
                }
                SERVICE_VERSION => chunk.release = Some(text(&a.value, a.key)?),
                DEPLOYMENT_ENVIRONMENT_NAME => chunk.environment = Some(text(&a.value, a.key)?),
                TELEMETRY_SDK_NAME => sdk_name = Some(text(&a.value, a.key)?),
                TELEMETRY_SDK_VERSION => sdk_version = Some(text(&a.value, a.key)?),
                _ => {}
            }
        }
    }
    if sdk_name.is_some() || sdk_version.is_some() {
        chunk.client_sdk = Some(ClientSdk {
            name: sdk_name.unwrap_or_default(),
            version: sdk_version.unwrap_or_default(),
        });
    }

    let mut has_chunk_id = false;
    for a in dict.attributes(&profile.attribute_indices)? {
        match a.key {
            SENTRY_CHUNK_ID => {
                chunk.chunk_id = text(&a.value, a.key)?;
                has_chunk_id = true;
            }
            SENTRY_VERSION => {
                chunk.version = text(&a.value, a.key)?;
                has_version = true;
            }
            SENTRY_CONTENT_TYPE => chunk.content_type = Some(text(&a.value, a.key)?),
            SENTRY_THREAD_METADATA => {
                chunk.profile.thread_metadata = extras::decode_thread_metadata(&a.value)?
            }
            SENTRY_DEBUG_META => chunk.debug_meta = Some(extras::decode_debug_meta(&a.value)?),
            SENTRY_MEASUREMENTS => chunk.measurements = extras::decode_measurements(&a.value)?,
            _ => {}
        }
    }
    if !has_chunk_id {
        return Err(Malformed::NotAChunk {
            key: SENTRY_CHUNK_ID,
        }
        .into());
    }
    for (present, key) in [
        (has_profiler_id, SENTRY_PROFILER_ID),
        (has_platform, SENTRY_PLATFORM),
        (has_version, SENTRY_VERSION),
    ] {
        if !present {
            return Err(Malformed::MissingChunkAttribute { key }.into());
        }
    }

    let mut frame_of: FxHashMap<i32, usize> = FxHashMap::default();
    let mut frame_index: HashMap<Frame, usize> = HashMap::new();
    let mut stack_of: FxHashMap<i32, usize> = FxHashMap::default();
    let mut observations: Vec<(u64, Sample)> = Vec::new();
    let mut links = Vec::new();
    for (si, s) in profile.samples.iter().enumerate() {
        let stack_id = match stack_of.get(&s.stack_index) {
            Some(&id) => id,
            None => {
                let mut frame_ids = Vec::new();
                if let Some(stack) = dict.stack(s.stack_index)? {
                    frame_ids.reserve(stack.location_indices.len());
                    for &li in &stack.location_indices {
                        let fid = match frame_of.get(&li) {
                            Some(&f) => f,
                            None => {
                                let loc = dict.location(li)?.ok_or(Malformed::LocationZero {
                                    stack: s.stack_index,
                                })?;
                                let frame = frames::decode_location(dict, loc)?;
                                let next = chunk.profile.frames.len();
                                let f = *frame_index.entry(frame.clone()).or_insert(next);
                                if f == next {
                                    chunk.profile.frames.push(Arc::new(frame));
                                }
                                frame_of.insert(li, f);
                                f
                            }
                        };
                        frame_ids.push(fid);
                    }
                }
                let id = chunk.profile.stacks.len();
                chunk.profile.stacks.push(frame_ids);
                stack_of.insert(s.stack_index, id);
                id
            }
        };
        let mut thread_id = None;
        for a in dict.attributes(&s.attribute_indices)? {
            if a.key == THREAD_ID {
                thread_id = match a.value {
                    AttrValue::Int(v) => Some(v.to_string()),
                    AttrValue::Str(v) => Some(v.to_owned()),
                    _ => None,
                };
            }
        }
        let thread_id = thread_id.ok_or(Malformed::NoThreadId {
            sample: si,
            key: THREAD_ID,
        })?;
        if s.timestamps_unix_nano.is_empty() && !s.values.is_empty() {
            return Err(Malformed::NoTimestamps { sample: si }.into());
        }
        let link = if want_links && s.link_index != 0 {
            dict.link(s.link_index)?.and_then(|l| {
                let trace_id: [u8; 16] = l.trace_id.as_slice().try_into().ok()?;
                let span_id: [u8; 8] = l.span_id.as_slice().try_into().ok()?;
                Some((trace_id, span_id))
            })
        } else {
            None
        };
        for &ts in &s.timestamps_unix_nano {
            if let Some((trace_id, span_id)) = link {
                links.push(SampleLink {
                    profiler_id: chunk.profiler_id.clone(),
                    thread_id: thread_id.clone(),
                    timestamp_ns: ts,
                    trace_id,
                    span_id,
                });
            }
            observations.push((
                ts,
                Sample {
                    timestamp: nanos_to_secs(ts),
                    stack_id,
                    thread_id: CompactString::from(thread_id.as_str()),
                },
            ));
        }
    }
    observations.sort_by_key(|(ts, _)| *ts);
    chunk.profile.samples = observations.into_iter().map(|(_, s)| s).collect();
    Ok((chunk, links))
}

type FrameKey<'a> = (
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<u32>,
    Option<u32>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    Option<bool>,
);

fn frame_key(f: &Frame) -> FrameKey<'_> {
    (
        f.function.as_deref(),
        f.abs_path.as_deref(),
        f.filename.as_deref(),
        f.lineno,
        f.colno,
        f.module.as_deref(),
        f.package.as_deref(),
        f.platform.as_deref(),
        f.instruction_addr.as_deref(),
        f.in_app,
    )
}

/// A canonical form of a chunk for comparisons: every sample resolved to its frames, then
/// samples sorted by (time in ns, thread id, frames), frames and stacks deduplicated and
/// numbered in first-use order, and timestamps at nanosecond resolution (what OTLP carries:
/// an f64 of a time in the first weeks after 1970 holds digits below the nanosecond, which no
/// translation keeps). Two chunks with the same observations and metadata have equal
/// canonical forms however their frames, stacks and samples were numbered and ordered.
/// Samples whose stack or frames are out of range are dropped (check them first).
pub fn canonical_form(chunk: &ProfileChunk) -> ProfileChunk {
    let p = &chunk.profile;
    // The frame table in content classes (equal frames share one), each hashed once, and the
    // classes ranked by `frame_key` (equal keys share a rank): samples then compare by rank
    // vectors, which order exactly as their frame keys would, without touching the frames
    // again per sample.
    let mut class_of: Vec<usize> = Vec::with_capacity(p.frames.len());
    let mut classes: Vec<&Arc<Frame>> = Vec::new();
    {
        let mut by_content: FxHashMap<&Frame, usize> = FxHashMap::default();
        for f in &p.frames {
            let next = classes.len();
            let c = *by_content.entry(f.as_ref()).or_insert(next);
            if c == next {
                classes.push(f);
            }
            class_of.push(c);
        }
    }
    let mut by_key: Vec<usize> = (0..classes.len()).collect();
    by_key.sort_by(|&a, &b| frame_key(classes[a]).cmp(&frame_key(classes[b])));
    let mut rank = vec![0u32; classes.len()];
    for pair in by_key.windows(2) {
        let same = frame_key(classes[pair[0]]) == frame_key(classes[pair[1]]);
        rank[pair[1]] = rank[pair[0]] + u32::from(!same);
    }

    struct Resolved<'a> {
        ns: u64,
        thread_id: &'a str,
        classes: Vec<usize>,
        ranks: Vec<u32>,
        timestamp: f64,
    }
    let mut resolved: Vec<Resolved> = p
        .samples
        .iter()
        .filter_map(|s| {
            let stack = p.stacks.get(s.stack_id)?;
            let classes = stack
                .iter()
                .map(|&f| class_of.get(f).copied())
                .collect::<Option<Vec<_>>>()?;
            let ranks = classes.iter().map(|&c| rank[c]).collect();
            let ns = secs_to_nanos(s.timestamp);
            Some(Resolved {
                ns: ns.unwrap_or(0),
                thread_id: s.thread_id.as_str(),
                classes,
                ranks,
                timestamp: ns.map_or(s.timestamp, nanos_to_secs),
            })
        })
        .collect();
    resolved.sort_by(|a, b| {
        (a.ns, a.thread_id, &a.ranks)
            .cmp(&(b.ns, b.thread_id, &b.ranks))
            .then(a.timestamp.total_cmp(&b.timestamp))
    });
    let mut out = chunk.clone();
    out.profile.samples.clear();
    out.profile.stacks.clear();
    out.profile.frames.clear();
    let mut frame_ix: Vec<Option<usize>> = vec![None; classes.len()];
    let mut stack_ix: HashMap<Vec<usize>, usize> = HashMap::new();
    for r in resolved {
        let ids: Vec<usize> = r
            .classes
            .iter()
            .map(|&c| {
                *frame_ix[c].get_or_insert_with(|| {
                    out.profile.frames.push(Arc::clone(classes[c]));
                    out.profile.frames.len() - 1
                })
            })
            .collect();
        let next = stack_ix.len();
        let stack_id = *stack_ix.entry(ids.clone()).or_insert(next);
        if stack_id == next {
            out.profile.stacks.push(ids);
        }
        out.profile.samples.push(Sample {
            timestamp: r.timestamp,
            stack_id,
            thread_id: CompactString::from(r.thread_id),
        });
    }
    out
}
