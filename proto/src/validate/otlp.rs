//! OTLP profile rules (the profiling SIG's `profcheck` conformance rules, with the exceptions
//! real producers need): index ranges, sample shapes, timestamp windows, attribute keys.

use super::dictionary::validate_dictionary;
use super::finding::{Elem, Finding};
use super::otlp_refs::{RefChecker, Table};
use crate::otlp::{KeyValue, Profile, ProfilesDictionary, ResourceProfiles, Sample};
use std::collections::HashSet;

/// Validates a whole request: the dictionary ([`validate_dictionary`]), resource and scope
/// attributes, and every profile ([`validate_profile`]), with paths such as
/// `resource_profiles[0].scope_profiles[0].profiles[2].samples[7].stack_index`.
pub fn validate_otlp(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
) -> Vec<Finding> {
    let empty = ProfilesDictionary::default();
    let d = dictionary.unwrap_or(&empty);
    let mut out = validate_dictionary(dictionary);
    for (r, rp) in resource_profiles.iter().enumerate() {
        let rpath = format!("resource_profiles[{r}]");
        let mut c = RefChecker::new(d, rpath.clone());
        if let Some(resource) = &rp.resource {
            key_values(&mut c, &resource.attributes, &format!("{rpath}.resource"));
        }
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            if let Some(scope) = &sp.scope {
                let base = format!("{rpath}.scope_profiles[{s}].scope");
                key_values(&mut c, &scope.attributes, &base);
            }
        }
        out.extend(c.finish());
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            for (p, profile) in sp.profiles.iter().enumerate() {
                let path = format!("{rpath}.scope_profiles[{s}].profiles[{p}]");
                out.extend(validate_profile(dictionary, profile, &path));
            }
        }
    }
    // Every object that references an empty table reports it; keep one.
    let mut seen = HashSet::new();
    out.retain(|f| f.rule != "table-zero-missing" || seen.insert((f.rule, f.path.clone())));
    out
}

fn key_values(c: &mut RefChecker<'_>, attributes: &[KeyValue], base: &str) {
    for (j, kv) in attributes.iter().enumerate() {
        c.key_value(kv, &format!("{base}.attributes[{j}]"));
    }
}

/// Validates one profile against the dictionary: its own fields and every index it holds into
/// the dictionary (not the dictionary's internal consistency: see [`validate_dictionary`]).
///
/// `path` names the profile in findings, e.g. `resource_profiles[0].scope_profiles[0].profiles[2]`.
pub fn validate_profile(
    dictionary: Option<&ProfilesDictionary>,
    profile: &Profile,
    path: &str,
) -> Vec<Finding> {
    let empty = ProfilesDictionary::default();
    let d = dictionary.unwrap_or(&empty);
    let mut c = RefChecker::new(d, path);
    match &profile.sample_type {
        Some(vt) => c.value_type(vt, &format_args!("{path}.sample_type")),
        None => c.sink.warning(
            "sample-type-missing",
            format_args!("{path}.sample_type"),
            "sample_type is not set; the meaning of sample values is unknown",
        ),
    }
    if let Some(vt) = &profile.period_type {
        c.value_type(vt, &format_args!("{path}.period_type"));
    }
    c.attribute_indices(&profile.attribute_indices, &path);
    if !matches!(profile.profile_id.len(), 0 | 16) {
        c.sink.error(
            "profile-id-length",
            format_args!("{path}.profile_id"),
            format_args!(
                "profile_id is {} bytes; must be 16 or empty",
                profile.profile_id.len()
            ),
        );
    }
    let window = (profile.duration_nano > 0).then(|| {
        let start = u128::from(profile.time_unix_nano);
        (start, start + u128::from(profile.duration_nano))
    });
    for (i, sample) in profile.samples.iter().enumerate() {
        let base = Elem(path, "samples", i);
        c.index(
            Table::Stack,
            sample.stack_index,
            format_args!("{base}.stack_index"),
        );
        c.attribute_indices(&sample.attribute_indices, &base);
        c.index(
            Table::Link,
            sample.link_index,
            format_args!("{base}.link_index"),
        );
        sample_shape(&mut c, sample, base);
        if let Some(window) = window {
            sample_window(&mut c, sample, base, window);
        }
    }
    c.finish()
}

/// A sample has values, timestamps or both; when both, one value per timestamp.
fn sample_shape(c: &mut RefChecker<'_>, s: &Sample, base: Elem<'_>) {
    let (nv, nt) = (s.values.len(), s.timestamps_unix_nano.len());
    if nv == 0 && nt == 0 {
        c.sink.error(
            "sample-empty",
            base,
            "sample has neither values nor timestamps_unix_nano",
        );
    } else if nv > 0 && nt > 0 && nv != nt {
        c.sink.error(
            "sample-length-mismatch",
            format_args!("{base}.values"),
            format_args!(
                "{nv} values but {nt} timestamps_unix_nano; when both are set they must have \
                 the same length"
            ),
        );
    }
}

/// Timestamps SHOULD fall in `[time_unix_nano, time_unix_nano + duration_nano)`. One finding
/// per sample at most: the first timestamp outside the window, else the first one exactly at
/// its end (which the eBPF profiler writes for the last sample).
fn sample_window(c: &mut RefChecker<'_>, s: &Sample, base: Elem<'_>, (start, end): (u128, u128)) {
    let mut at_end = None;
    let mut outside = None;
    let mut count = 0usize;
    for (k, &ts) in s.timestamps_unix_nano.iter().enumerate() {
        let t = u128::from(ts);
        if t == end {
            at_end.get_or_insert(k);
            count += 1;
        } else if t < start || t > end {
            outside.get_or_insert(k);
            count += 1;
        }
    }
    let n = s.timestamps_unix_nano.len();
    if let Some(k) = outside {
        let t = u128::from(s.timestamps_unix_nano[k]);
        let (side, by) = if t < start {
            ("before", start - t)
        } else {
            ("after", t - end)
        };
        c.sink.warning(
            "timestamp-outside-profile",
            format_args!("{base}.timestamps_unix_nano[{k}]"),
            format_args!(
                "timestamp {t} is {by} ns {side} the profile window [{start}, {end}) \
                 ({count} of {n} timestamps of this sample outside or at the end); timestamps \
                 SHOULD fall in the window"
            ),
        );
    } else if let Some(k) = at_end {
        c.sink.warning(
            "timestamp-at-window-end",
            format_args!("{base}.timestamps_unix_nano[{k}]"),
            format_args!(
                "timestamp {end} equals time_unix_nano + duration_nano, the exclusive end of \
                 the profile window ({count} of {n} timestamps of this sample); the eBPF \
                 profiler does this, the data is usable"
            ),
        );
    }
}
