//! Rules for the deprecated V1 sample profile (`profile` envelope item).

use super::finding::{Finding, Sink};
use super::sentry_common::{self as common, parse, size_limit};
use crate::sentry::SampleProfileV1;

/// Validates a V1 profile payload: size, JSON parse (`json-parse` with the JSON path), samples
/// present, stack and frame index ranges, thread ids, addresses, debug images, measurement
/// units.
pub fn validate_v1_profile_json(bytes: &[u8]) -> Vec<Finding> {
    let mut sink = Sink::new(".");
    v1_json(bytes, "", &mut sink);
    sink.finish()
}

/// Validates a parsed V1 profile (every rule of [`validate_v1_profile_json`] but size and parse).
pub fn validate_v1_profile(profile: &SampleProfileV1) -> Vec<Finding> {
    let mut sink = Sink::new(".");
    check_v1(profile, "", &mut sink);
    sink.finish()
}

/// The V1 rules for a payload whose paths start with `prefix`.
pub(crate) fn v1_json(bytes: &[u8], prefix: &str, sink: &mut Sink) {
    size_limit("profile-size", bytes.len(), prefix, sink);
    if let Some(profile) = parse::<SampleProfileV1>(bytes, prefix, sink) {
        check_v1(&profile, prefix, sink);
    }
}

fn check_v1(p: &SampleProfileV1, prefix: &str, sink: &mut Sink) {
    common::platform(&p.platform, prefix, sink);
    let data = &p.profile;
    if data.samples.is_empty() {
        sink.error(
            "no-samples",
            format_args!("{prefix}profile.samples"),
            "the profile has no samples; Relay rejects it (not enough samples)",
        );
    }
    for (i, s) in data.samples.iter().enumerate() {
        if s.thread_id.parse::<u64>().is_err() {
            sink.error(
                "thread-id-type",
                format_args!("{prefix}profile.samples[{i}].thread_id"),
                format_args!(
                    "thread_id {:?} is not an unsigned integer; V1 thread ids are numbers or \
                     decimal strings",
                    s.thread_id
                ),
            );
        }
    }
    common::stacks_and_ids(
        data.samples.iter().map(|s| s.stack_id),
        &data.stacks,
        data.frames.len(),
        prefix,
        sink,
    );
    common::frames(&data.frames, prefix, sink);
    common::debug_meta(p.debug_meta.as_ref(), prefix, sink);
    common::image_addresses(&data.frames, p.debug_meta.as_ref(), prefix, sink);
    common::measurements(
        p.measurements.iter().map(|(name, m)| {
            let values = m.values.iter().map(|v| (None, v.value)).collect();
            (name.as_str(), m.unit.as_str(), values)
        }),
        prefix,
        sink,
    );
}
