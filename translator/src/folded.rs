//! Folded (collapsed) stacks -> OTLP: `root;...;leaf COUNT` per line, as flamegraph.pl's
//! stackcollapse tools, py-spy (`--format raw`) and pyroscope (`format=folded`) write them.
//!
//! * A frame written `name (file:line)` (py-spy, pyroscope-rs) is the function `name` in
//!   `file` at `line`; `name (file)` gives no line; any other frame is a function name.
//! * Each line becomes one values-only OTLP sample whose value is its count, under the
//!   sample type of [`FoldedOptions`] (default `samples/count`, period type
//!   `cpu/nanoseconds`), in one `Profile` with the options' time, duration and period.
//! * A line holding only a count is a sample without frames (py-spy writes ` 4` for samples
//!   it could not unwind); it keeps its count.
//! * Blank lines are skipped; any other line that is not `STACK COUNT` is a [`FoldedError`]
//!   naming its line. The output grows linearly with the input (one sample per line, frames
//!   deduplicated).

use crate::fx_hash::FxHashMap;
use crate::sentry_to_otlp::builder::DictionaryBuilder;
use profilink_proto::otlp::{
    Function, Line, Location, Profile, ProfilesData, ResourceProfiles, Sample, ScopeProfiles,
    ValueType,
};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// What the folded input measures and when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedOptions {
    /// Sample type, default `samples`.
    pub sample_type: String,
    /// Sample unit, default `count`.
    pub sample_unit: String,
    /// Period type, default `cpu`.
    pub period_type: String,
    /// Period unit, default `nanoseconds`.
    pub period_unit: String,
    /// Period (e.g. 10 ms = 10_000_000 for py-spy's default 100 Hz); 0 when unknown.
    pub period: i64,
    /// Start of the recording, Unix nanoseconds (0: unknown).
    pub time_unix_nano: u64,
    /// Length of the recording, nanoseconds (0: unknown).
    pub duration_nano: u64,
}

impl Default for FoldedOptions {
    fn default() -> Self {
        FoldedOptions {
            sample_type: "samples".into(),
            sample_unit: "count".into(),
            period_type: "cpu".into(),
            period_unit: "nanoseconds".into(),
            period: 0,
            time_unix_nano: 0,
            duration_nano: 0,
        }
    }
}

/// Folded input that could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FoldedError {
    /// A line that is not UTF-8.
    #[error("line {line}: not UTF-8")]
    Utf8 {
        /// 1-based line number.
        line: usize,
    },
    /// A line that is not `STACK COUNT`.
    #[error("line {line}: {reason}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// A frame's parts: name, file, line.
pub fn parse_frame(frame: &str) -> (&str, &str, i64) {
    if let Some(inner) = frame.strip_suffix(')')
        && let Some((name, location)) = inner.rsplit_once(" (")
        && !name.is_empty()
    {
        if let Some((file, line)) = location.rsplit_once(':')
            && let Ok(line) = line.parse::<i64>()
        {
            return (name, file, line);
        }
        if !location.is_empty() && location.contains(['.', '/', '\\']) {
            return (name, location, 0);
        }
    }
    (frame, "", 0)
}

/// Translates folded stacks into OTLP (see the [module docs](self)).
///
/// ```
/// use profilink_translator::folded::{FoldedOptions, folded_to_otlp};
/// let data = folded_to_otlp(b"main (app.py:9);work (app.py:4) 3\nmain (app.py:9) 1\n", &FoldedOptions::default()).unwrap();
/// let profile = &data.resource_profiles[0].scope_profiles[0].profiles[0];
/// assert_eq!(profile.samples.len(), 2);
/// assert_eq!(profile.samples[0].values, vec![3]);
/// assert!(folded_to_otlp(b"main three\n", &FoldedOptions::default()).is_err());
/// ```
pub fn folded_to_otlp(text: &[u8], opts: &FoldedOptions) -> Result<ProfilesData, FoldedError> {
    let mut b = DictionaryBuilder::new();
    let mut frames: FxHashMap<&str, i32> = FxHashMap::default();
    let mut samples = Vec::new();
    let mut digest = Sha256::new();
    for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
        let line = i + 1;
        let raw = raw.trim_ascii();
        if raw.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(raw).map_err(|_| FoldedError::Utf8 { line })?;
        // A count alone is a sample without frames (py-spy writes ` 4` for them).
        let (stack, count) = match text.rsplit_once([' ', '\t']) {
            Some(parts) => parts,
            None if text.bytes().all(|b| b.is_ascii_digit()) => ("", text),
            None => {
                return Err(FoldedError::Syntax {
                    line,
                    reason: "expected `STACK COUNT`",
                });
            }
        };
        let count: i64 = count.parse().map_err(|_| FoldedError::Syntax {
            line,
            reason: "the count is not a non-negative integer",
        })?;
        if count < 0 {
            return Err(FoldedError::Syntax {
                line,
                reason: "the count is not a non-negative integer",
            });
        }
        let stack = stack.trim_end();
        digest.update(raw);
        // Folded stacks are root first; OTLP stacks are leaf first.
        let mut locations = Vec::new();
        for frame in stack.rsplit(';') {
            if frame.is_empty() {
                continue;
            }
            let index = match frames.get(frame) {
                Some(&i) => i,
                None => {
                    let (name, file, line) = parse_frame(frame);
                    let function = Function {
                        name_strindex: b.string(name),
                        system_name_strindex: 0,
                        filename_strindex: b.string(file),
                        start_line: 0,
                    };
                    let function_index = b.function(function);
                    let i = b.location(Location {
                        mapping_index: 0,
                        address: 0,
                        lines: vec![Line {
                            function_index,
                            line,
                            column: 0,
                        }],
                        attribute_indices: Vec::new(),
                    });
                    frames.insert(frame, i);
                    i
                }
            };
            locations.push(index);
        }
        samples.push(Sample {
            stack_index: b.stack(locations),
            attribute_indices: Vec::new(),
            link_index: 0,
            values: vec![count],
            timestamps_unix_nano: Vec::new(),
        });
    }
    digest.update(opts.time_unix_nano.to_le_bytes());
    let profile = Profile {
        sample_type: Some(ValueType {
            type_strindex: b.string(&opts.sample_type),
            unit_strindex: b.string(&opts.sample_unit),
        }),
        samples,
        time_unix_nano: opts.time_unix_nano,
        duration_nano: opts.duration_nano,
        period_type: Some(ValueType {
            type_strindex: b.string(&opts.period_type),
            unit_strindex: b.string(&opts.period_unit),
        }),
        period: opts.period,
        profile_id: digest.finalize()[..16].to_vec(),
        dropped_attributes_count: 0,
        original_payload_format: String::new(),
        original_payload: Vec::new(),
        attribute_indices: Vec::new(),
    };
    Ok(ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: None,
            scope_profiles: vec![ScopeProfiles {
                scope: None,
                profiles: vec![profile],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(b.finish()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_with_file_and_line() {
        assert_eq!(parse_frame("work (app.py:12)"), ("work", "app.py", 12));
        assert_eq!(
            parse_frame("<module> (/x/a b.py:1)"),
            ("<module>", "/x/a b.py", 1)
        );
        assert_eq!(parse_frame("f (lib.rs)"), ("f", "lib.rs", 0));
        assert_eq!(parse_frame("f (closure)"), ("f (closure)", "", 0));
        assert_eq!(parse_frame("main"), ("main", "", 0));
    }

    #[test]
    fn errors_name_the_line() {
        let e = folded_to_otlp(b"a 1\n\nb;c -2\n", &FoldedOptions::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3: the count is not a non-negative integer"
        );
        let e = folded_to_otlp(b"nocount\n", &FoldedOptions::default()).unwrap_err();
        assert!(matches!(e, FoldedError::Syntax { line: 1, .. }));
        let e = folded_to_otlp(b"a \xff 1\n", &FoldedOptions::default()).unwrap_err();
        assert_eq!(e, FoldedError::Utf8 { line: 1 });
    }

    #[test]
    fn stacks_are_leaf_first_and_deduplicated() {
        let data =
            folded_to_otlp(b"root;mid;leaf 2\nroot;mid;leaf 5\n", &Default::default()).unwrap();
        let d = data.dictionary.unwrap();
        let p = &data.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(p.samples[0].stack_index, p.samples[1].stack_index);
        let stack = &d.stack_table[p.samples[0].stack_index as usize];
        let name = |l: i32| {
            let f = d.location_table[l as usize].lines[0].function_index;
            d.string_table[d.function_table[f as usize].name_strindex as usize].clone()
        };
        let names: Vec<String> = stack.location_indices.iter().map(|&l| name(l)).collect();
        assert_eq!(names, ["leaf", "mid", "root"]);
    }
}
