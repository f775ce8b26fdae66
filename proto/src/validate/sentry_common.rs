//! Rules shared by Sentry chunks (V2) and V1 profiles: stacks and frames, addresses, debug
//! images, measurements, and the JSON parse finding.

use super::finding::{Sink, join_path};
use crate::sentry::image_space;
use crate::sentry::parse_instruction_addr;
use crate::sentry::{DebugMeta, Frame};
use crate::sentry::{JsonError, from_json_slice};
use serde::Deserialize;
use std::sync::Arc;

/// Relay's limit on one profile or profile chunk (`max_profile_size`, 50 MiB).
pub const MAX_CHUNK_BYTES: usize = 50 * 1024 * 1024;

/// Debug image types Relay accepts (`ImageType`).
pub(crate) const IMAGE_TYPES: [&str; 5] = ["macho", "symbolic", "sourcemap", "proguard", "jvm"];

/// Measurement units Relay accepts (`MeasurementUnit`, with aliases).
pub(crate) const MEASUREMENT_UNITS: [&str; 8] = [
    "ns",
    "nanosecond",
    "hz",
    "hertz",
    "byte",
    "percent",
    "nj",
    "nanojoule",
];

/// Parses `bytes` as `T`, reporting a `json-parse` error with the JSON path on failure.
pub(crate) fn parse<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    prefix: &str,
    sink: &mut Sink,
) -> Option<T> {
    match from_json_slice::<T>(bytes) {
        Ok(v) => Some(v),
        Err(JsonError { path, message }) => {
            sink.error("json-parse", join_path(prefix, &path), message);
            None
        }
    }
}

/// Reports a payload over Relay's profile size limit.
pub(crate) fn size_limit(rule: &'static str, len: usize, prefix: &str, sink: &mut Sink) {
    if len > MAX_CHUNK_BYTES {
        sink.error(
            rule,
            join_path(prefix, "."),
            format_args!(
                "payload is {len} bytes; Relay drops profiles over {MAX_CHUNK_BYTES} bytes \
                 (50 MiB)"
            ),
        );
    }
}

/// The payload `platform` is required (free-form, but not empty).
pub(crate) fn platform(platform: &str, prefix: &str, sink: &mut Sink) {
    if platform.is_empty() {
        sink.error(
            "platform",
            format_args!("{prefix}platform"),
            "platform is missing or empty; Relay requires it and Sentry routes by it",
        );
    }
}

/// Every sample's `stack_id` indexes `stacks`; every frame index in every stack (referenced or
/// not, as Relay checks them all) indexes `frames`.
pub(crate) fn stacks_and_ids(
    stack_ids: impl Iterator<Item = usize>,
    stacks: &[Vec<usize>],
    frames_len: usize,
    prefix: &str,
    sink: &mut Sink,
) {
    for (i, id) in stack_ids.enumerate() {
        if id >= stacks.len() {
            sink.error(
                "stack-id-range",
                format_args!("{prefix}profile.samples[{i}].stack_id"),
                format_args!(
                    "stack_id {id} is out of range ({} stacks); Relay rejects the profile \
                     (malformed samples)",
                    stacks.len()
                ),
            );
        }
    }
    for (i, stack) in stacks.iter().enumerate() {
        for (j, &frame) in stack.iter().enumerate() {
            if frame >= frames_len {
                sink.error(
                    "frame-index-range",
                    format_args!("{prefix}profile.stacks[{i}][{j}]"),
                    format_args!(
                        "frame index {frame} is out of range ({frames_len} frames); Relay \
                         rejects the profile (malformed stacks)"
                    ),
                );
            }
        }
    }
}

/// `instruction_addr` must be a `"0x…"` hex string (or a decimal string).
pub(crate) fn frames(frames: &[Arc<Frame>], prefix: &str, sink: &mut Sink) {
    for (i, f) in frames.iter().enumerate() {
        if let Some(addr) = &f.instruction_addr {
            address(
                addr,
                "instruction-addr-format",
                format_args!("{prefix}profile.frames[{i}].instruction_addr"),
                sink,
            );
        }
    }
}

fn address(addr: &str, rule: &'static str, path: std::fmt::Arguments<'_>, sink: &mut Sink) {
    if parse_instruction_addr(addr).is_none() {
        sink.error(
            rule,
            path,
            format_args!(
                "{addr:?} is not an address; Relay accepts \"0x\" + 1-16 hex digits or a \
                 decimal string and rejects the whole profile otherwise"
            ),
        );
    }
}

/// Debug image types and addresses.
pub(crate) fn debug_meta(meta: Option<&DebugMeta>, prefix: &str, sink: &mut Sink) {
    let Some(meta) = meta else { return };
    for (i, image) in meta.images.iter().enumerate() {
        if !IMAGE_TYPES.contains(&image.image_type.as_str()) {
            let hint = if image.image_type == "elf" {
                "; Relay rejects \"elf\" (use \"symbolic\" for ELF images)"
            } else {
                ""
            };
            sink.error(
                "debug-image-type",
                format_args!("{prefix}debug_meta.images[{i}].type"),
                format_args!(
                    "image type {:?} is not one of macho, symbolic, sourcemap, proguard, \
                     jvm{hint}",
                    image.image_type
                ),
            );
        }
        for (field, value) in [
            ("image_addr", &image.image_addr),
            ("image_vmaddr", &image.image_vmaddr),
        ] {
            if let Some(addr) = value {
                address(
                    addr,
                    "image-addr-format",
                    format_args!("{prefix}debug_meta.images[{i}].{field}"),
                    sink,
                );
            }
        }
    }
}

/// Measurement units from Relay's list, finite timestamps and values.
pub(crate) fn measurements<'a>(
    series: impl Iterator<Item = MeasurementSeries<'a>>,
    prefix: &str,
    sink: &mut Sink,
) {
    for (name, unit, values) in series {
        if !MEASUREMENT_UNITS.contains(&unit) {
            sink.error(
                "measurement-unit",
                format_args!("{prefix}measurements.{name}.unit"),
                format_args!(
                    "unit {unit:?} is not one of ns, nanosecond, hz, hertz, byte, percent, nj, \
                     nanojoule; Relay rejects the whole profile"
                ),
            );
        }
        for (i, (timestamp, value)) in values.into_iter().enumerate() {
            if let Some(t) = timestamp.filter(|t| !t.is_finite()) {
                sink.error(
                    "timestamp-not-finite",
                    format_args!("{prefix}measurements.{name}.values[{i}].timestamp"),
                    format_args!("timestamp {t} is not a finite number"),
                );
            }
            if !value.is_finite() {
                sink.error(
                    "measurement-value-not-finite",
                    format_args!("{prefix}measurements.{name}.values[{i}].value"),
                    format_args!("value {value} is not a finite number"),
                );
            }
        }
    }
}

/// One measurement series as the checks see it: name, unit, and (timestamp if the format has
/// one, value) pairs. Chunks time values in seconds; V1 profiles relative to the start.
pub(crate) type MeasurementSeries<'a> = (&'a str, &'a str, Vec<(Option<f64>, f64)>);

/// An image's address range as Symbolicator sees it.
struct ImageSpan {
    index: usize,
    start: u64,
    end: u64,
}

/// How Symbolicator will read the chunk's native addresses (its `abs` mode: a frame belongs to
/// the last image starting at or below it, within that image's size): images whose ranges
/// overlap (`debug-image-overlap`: frames there can go to the wrong image), and frames in
/// profilink's synthetic image space ([`image_space`]) that lie in no image
/// (`instruction-addr-outside-image`: they were placed for an image the chunk does not list,
/// so they cannot be symbolicated).
pub(crate) fn image_addresses(
    frames: &[Arc<Frame>],
    meta: Option<&DebugMeta>,
    prefix: &str,
    sink: &mut Sink,
) {
    // Warnings only: skipped when they are not recorded (the errors-only check of every chunk
    // profilink emits would parse every frame's address a second time for nothing).
    if !sink.records_warnings() {
        return;
    }
    let mut spans: Vec<ImageSpan> = meta
        .map(|m| &m.images[..])
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter_map(|(index, image)| {
            let start = parse_instruction_addr(image.image_addr.as_deref()?)?;
            let size = image.image_size.filter(|s| *s > 0)?;
            Some(ImageSpan {
                index,
                start,
                end: start.saturating_add(size),
            })
        })
        .collect();
    spans.sort_by_key(|s| (s.start, s.index));
    for pair in spans.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.start < a.end {
            sink.warning(
                "debug-image-overlap",
                format_args!("{prefix}debug_meta.images[{}]", b.index),
                format_args!(
                    "image [{:#x}, {:#x}) overlaps images[{}] [{:#x}, {:#x}); Symbolicator \
                     gives each address to one image only, so frames there may resolve in the \
                     wrong one",
                    b.start, b.end, a.index, a.start, a.end
                ),
            );
        }
    }
    for (i, f) in frames.iter().enumerate() {
        let Some(addr) = f
            .instruction_addr
            .as_deref()
            .and_then(parse_instruction_addr)
        else {
            continue;
        };
        if !image_space::is_synthetic(addr) {
            continue;
        }
        let inside = spans.iter().any(|s| s.start <= addr && addr < s.end);
        if !inside {
            sink.warning(
                "instruction-addr-outside-image",
                format_args!("{prefix}profile.frames[{i}].instruction_addr"),
                format_args!(
                    "{addr:#x} is in profilink's image address space but in no debug image of \
                     the chunk; Sentry cannot symbolicate it"
                ),
            );
        }
    }
}
