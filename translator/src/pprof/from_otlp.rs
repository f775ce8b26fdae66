//! OTLP -> pprof: the CPU and wall profiles of a request aggregated into one pprof profile,
//! `samples/count` per (stack, labels) plus a time type when the period is known.
//!
//! * A sample's observations: its timestamps when it has some (each counts 1, or its value
//!   when values match timestamps one to one under a count unit); else its value under a count
//!   unit; else, under a time unit, `round(value / period)`.
//! * The time type (`cpu` or `wall`, `nanoseconds`): the sample's value in nanoseconds under
//!   a time unit, else observations x period. It is written when some translated profile has
//!   a time unit or a known period.
//! * Sibling profiles (one recording under several sample types, as pprof -> OTLP gives:
//!   same scope, time, duration, and the same sequence of stacks) are translated once,
//!   preferring a count unit; other profiles than CPU and wall are skipped and counted by
//!   `type:unit` in [`PprofOutput::skipped`].
//! * Sample attributes become labels (strings, booleans as text, integers as numeric labels
//!   with their unit); mappings (build id, `pprof.mapping.has_*`), locations with their inline
//!   lines and columns (`pprof.location.is_folded`), functions, and the profile attributes
//!   `pprof.profile.{comment,drop_frames,keep_frames,doc_url}` are carried back.

use super::PprofError;
use super::message::*;
use crate::Dictionary;
use crate::dictionary::AttrValue;
use crate::fx_hash::FxHashMap;
use profilink_proto::otlp::{ExportProfilesServiceRequest, Profile, ResourceProfiles};
use prost::Message;
use std::collections::BTreeMap;
use std::io::Write;

/// Options of the OTLP -> pprof translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToPprofOptions {
    /// Write sample attributes (thread, labels) as pprof labels; samples then aggregate per
    /// stack and labels. Default true.
    pub labels: bool,
}

impl Default for ToPprofOptions {
    fn default() -> Self {
        ToPprofOptions { labels: true }
    }
}

/// The pprof profile made from an OTLP request, and what was left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PprofOutput {
    /// The profile: `samples/count` and, when known, `cpu|wall/nanoseconds`.
    pub profile: PprofProfile,
    /// Profiles skipped because they are neither CPU nor wall (or have no usable values), by
    /// `type:unit`.
    pub skipped: BTreeMap<String, u64>,
    /// Profiles not translated because a sibling (the same recording under another sample
    /// type) was.
    pub siblings: u64,
    /// Observations in the profile (the sum of its `samples/count`).
    pub observations: u64,
}

impl PprofOutput {
    /// The profile as gzipped protobuf, as `go tool pprof` and the Go runtime write it.
    pub fn to_gzip(&self) -> Vec<u8> {
        let raw = self.profile.encode_to_vec();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing into a Vec cannot fail.
        let _ = enc.write_all(&raw);
        enc.finish().unwrap_or_default()
    }
}

/// Translates an export request ([`otlp_to_pprof`] on its dictionary and resources).
pub fn request_to_pprof(
    request: &ExportProfilesServiceRequest,
    opts: &ToPprofOptions,
) -> Result<PprofOutput, PprofError> {
    otlp_to_pprof(
        request.dictionary.as_ref(),
        &request.resource_profiles,
        opts,
    )
}

/// How a profile's values become observations.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Count,
    /// Nanoseconds per unit.
    Time(u64),
}

fn time_unit(unit: &str) -> Option<u64> {
    match unit.to_ascii_lowercase().as_str() {
        "nanoseconds" | "ns" => Some(1),
        "microseconds" | "us" => Some(1_000),
        "milliseconds" | "ms" => Some(1_000_000),
        "seconds" | "s" => Some(1_000_000_000),
        _ => None,
    }
}

/// `(is wall, unit)` of a CPU or wall profile; `None` for other types.
fn classify(ty: &str, unit: &str, period_ty: &str) -> Option<(bool, Unit)> {
    let ty = ty.to_ascii_lowercase();
    let wall = match ty.as_str() {
        "cpu" => false,
        "wall" => true,
        "samples" | "sample" | "" => period_ty.eq_ignore_ascii_case("wall"),
        _ => return None,
    };
    if unit.eq_ignore_ascii_case("count") || (ty.is_empty() && unit.is_empty()) {
        Some((wall, Unit::Count))
    } else {
        time_unit(unit).map(|ns| (wall, Unit::Time(ns)))
    }
}

/// Interns the output profile's strings, functions, mappings and locations.
struct Out<'a> {
    d: Dictionary<'a>,
    p: PprofProfile,
    strings: FxHashMap<String, i64>,
    functions: FxHashMap<i32, u64>,
    mappings: FxHashMap<i32, u64>,
    locations: FxHashMap<i32, u64>,
    samples: FxHashMap<(i32, Vec<i32>), usize>,
}

impl<'a> Out<'a> {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.p.string_table.len() as i64;
        self.p.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn otlp_string(&mut self, index: i32) -> Result<i64, PprofError> {
        let s = self.d.string(index).map_err(PprofError::Otlp)?;
        Ok(self.string(s))
    }

    fn function(&mut self, index: i32) -> Result<u64, PprofError> {
        if let Some(&id) = self.functions.get(&index) {
            return Ok(id);
        }
        let f = self.d.function(index).map_err(PprofError::Otlp)?.copied();
        let f = f.unwrap_or_default();
        let id = self.p.function.len() as u64 + 1;
        let function = PprofFunction {
            id,
            name: self.otlp_string(f.name_strindex)?,
            system_name: self.otlp_string(f.system_name_strindex)?,
            filename: self.otlp_string(f.filename_strindex)?,
            start_line: f.start_line,
        };
        self.p.function.push(function);
        self.functions.insert(index, id);
        Ok(id)
    }

    fn mapping(&mut self, index: i32) -> Result<u64, PprofError> {
        if index == 0 {
            return Ok(0);
        }
        if let Some(&id) = self.mappings.get(&index) {
            return Ok(id);
        }
        let Some(m) = self.d.mapping(index).map_err(PprofError::Otlp)? else {
            return Ok(0);
        };
        let id = self.p.mapping.len() as u64 + 1;
        let mut out = PprofMapping {
            id,
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename: self.otlp_string(m.filename_strindex)?,
            ..Default::default()
        };
        for a in self
            .d
            .attributes(&m.attribute_indices)
            .map_err(PprofError::Otlp)?
        {
            let on = a.value == AttrValue::Bool(true);
            match a.key {
                "process.executable.build_id.gnu"
                | "process.executable.build_id.go"
                | "process.executable.build_id.htlhash" => {
                    if let Some(s) = a.value.as_str() {
                        out.build_id = self.string(s);
                    }
                }
                "pprof.mapping.has_functions" => out.has_functions = on,
                "pprof.mapping.has_filenames" => out.has_filenames = on,
                "pprof.mapping.has_line_numbers" => out.has_line_numbers = on,
                "pprof.mapping.has_inline_frames" => out.has_inline_frames = on,
                _ => {}
            }
        }
        self.p.mapping.push(out);
        self.mappings.insert(index, id);
        Ok(id)
    }

    fn location(&mut self, index: i32) -> Result<u64, PprofError> {
        if let Some(&id) = self.locations.get(&index) {
            return Ok(id);
        }
        let l = self.d.location(index).map_err(PprofError::Otlp)?;
        let id = self.p.location.len() as u64 + 1;
        let mut out = PprofLocation {
            id,
            ..Default::default()
        };
        if let Some(l) = l {
            out.mapping_id = self.mapping(l.mapping_index)?;
            out.address = l.address;
            for line in &l.lines {
                out.line.push(PprofLine {
                    function_id: self.function(line.function_index)?,
                    line: line.line,
                    column: line.column,
                });
            }
            for a in self
                .d
                .attributes(&l.attribute_indices)
                .map_err(PprofError::Otlp)?
            {
                if a.key == "pprof.location.is_folded" {
                    out.is_folded = a.value == AttrValue::Bool(true);
                }
            }
        }
        self.p.location.push(out);
        self.locations.insert(index, id);
        Ok(id)
    }

    fn labels(&mut self, indices: &[i32]) -> Result<Vec<PprofLabel>, PprofError> {
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            let Some(kvu) = usize::try_from(i)
                .ok()
                .filter(|&i| i > 0)
                .and_then(|i| self.d.raw()?.attribute_table.get(i))
            else {
                // Out of range: the same error the dictionary gives.
                self.d.attribute(i).map_err(PprofError::Otlp)?;
                continue;
            };
            let a = self.d.key_value_and_unit(kvu).map_err(PprofError::Otlp)?;
            let key = self.string(a.key);
            let label = match a.value {
                AttrValue::Int(num) => PprofLabel {
                    key,
                    str: 0,
                    num,
                    num_unit: self.otlp_string(kvu.unit_strindex)?,
                },
                AttrValue::Str(s) => PprofLabel {
                    key,
                    str: self.string(s),
                    ..Default::default()
                },
                AttrValue::Bool(b) => PprofLabel {
                    key,
                    str: self.string(if b { "true" } else { "false" }),
                    ..Default::default()
                },
                _ => continue,
            };
            labels.push(label);
        }
        Ok(labels)
    }
}

/// The profiles worth translating in one scope: CPU or wall, one per sibling group.
fn choose<'p>(
    d: &Dictionary,
    profiles: &'p [Profile],
    out: &mut PprofOutput,
) -> Result<Vec<(&'p Profile, bool, Unit)>, PprofError> {
    let mut chosen: Vec<(&Profile, bool, Unit)> = Vec::new();
    for p in profiles {
        let st = p.sample_type.unwrap_or_default();
        let pt = p.period_type.unwrap_or_default();
        let ty = d.string(st.type_strindex).map_err(PprofError::Otlp)?;
        let unit = d.string(st.unit_strindex).map_err(PprofError::Otlp)?;
        let period_ty = d.string(pt.type_strindex).map_err(PprofError::Otlp)?;
        let Some((wall, u)) = classify(ty, unit, period_ty) else {
            *out.skipped.entry(format!("{ty}:{unit}")).or_default() += 1;
            continue;
        };
        let sibling = chosen.iter().position(|(q, _, _)| {
            q.time_unix_nano == p.time_unix_nano
                && q.duration_nano == p.duration_nano
                && q.samples.len() == p.samples.len()
                && q.samples
                    .iter()
                    .zip(&p.samples)
                    .all(|(a, b)| a.stack_index == b.stack_index)
        });
        match sibling {
            Some(i) => {
                out.siblings += 1;
                if u == Unit::Count && chosen[i].2 != Unit::Count {
                    chosen[i] = (p, wall, u);
                }
            }
            None => chosen.push((p, wall, u)),
        }
    }
    Ok(chosen)
}

/// The period in nanoseconds, when the period type has a time unit.
fn period_ns(d: &Dictionary, p: &Profile) -> Result<Option<u64>, PprofError> {
    let pt = p.period_type.unwrap_or_default();
    let unit = d.string(pt.unit_strindex).map_err(PprofError::Otlp)?;
    Ok(match (time_unit(unit), u64::try_from(p.period)) {
        (Some(ns), Ok(period)) if period > 0 => Some(period.saturating_mul(ns)),
        _ => None,
    })
}

/// Translates the CPU and wall profiles of `resource_profiles` (with their request's
/// `dictionary`) into one pprof profile (see the [module docs](self)).
pub fn otlp_to_pprof(
    dictionary: Option<&profilink_proto::otlp::ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    opts: &ToPprofOptions,
) -> Result<PprofOutput, PprofError> {
    let d = Dictionary::new(dictionary);
    let mut output = PprofOutput::default();
    let mut o = Out {
        d,
        p: PprofProfile::default(),
        strings: FxHashMap::default(),
        functions: FxHashMap::default(),
        mappings: FxHashMap::default(),
        locations: FxHashMap::default(),
        samples: FxHashMap::default(),
    };
    o.string("");
    // (count, time ns) per output sample.
    let mut values: Vec<(i64, i64)> = Vec::new();
    let mut any_wall = false;
    let mut any_cpu = false;
    let mut with_time = false;
    let mut period: Option<u64> = None;
    let (mut start, mut end) = (u64::MAX, 0u64);
    let mut first_attributes: Option<&[i32]> = None;
    for rp in resource_profiles {
        for sp in &rp.scope_profiles {
            for (p, wall, unit) in choose(&d, &sp.profiles, &mut output)? {
                let pns = period_ns(&d, p)?;
                if matches!(unit, Unit::Time(_))
                    && pns.is_none()
                    && p.samples.iter().all(|s| s.timestamps_unix_nano.is_empty())
                {
                    // Time values without a period give no observation count.
                    let st = p.sample_type.unwrap_or_default();
                    let key = format!(
                        "{}:{} (no period)",
                        d.string(st.type_strindex).map_err(PprofError::Otlp)?,
                        d.string(st.unit_strindex).map_err(PprofError::Otlp)?
                    );
                    *output.skipped.entry(key).or_default() += 1;
                    continue;
                }
                any_wall |= wall;
                any_cpu |= !wall;
                with_time |= pns.is_some() || matches!(unit, Unit::Time(_));
                period = period.or(pns);
                first_attributes.get_or_insert(&p.attribute_indices);
                if p.time_unix_nano > 0 {
                    start = start.min(p.time_unix_nano);
                    end = end.max(p.time_unix_nano.saturating_add(p.duration_nano));
                }
                for s in &p.samples {
                    let value_sum = s
                        .values
                        .iter()
                        .fold(0i64, |a, &v| a.saturating_add(v.max(0)));
                    let (count, time) = if !s.timestamps_unix_nano.is_empty() {
                        let n = s.timestamps_unix_nano.len() as i64;
                        let count = if unit == Unit::Count
                            && s.values.len() == s.timestamps_unix_nano.len()
                        {
                            value_sum
                        } else {
                            n
                        };
                        let time = match unit {
                            Unit::Time(ns) if s.values.len() == s.timestamps_unix_nano.len() => {
                                value_sum.saturating_mul(ns as i64)
                            }
                            _ => count.saturating_mul(pns.unwrap_or(0) as i64),
                        };
                        (count, time)
                    } else {
                        match unit {
                            Unit::Count => {
                                (value_sum, value_sum.saturating_mul(pns.unwrap_or(0) as i64))
                            }
                            Unit::Time(ns) => {
                                let t = value_sum.saturating_mul(ns as i64);
                                let p = pns.unwrap_or(1).max(1) as i64;
                                ((t + p / 2) / p, t)
                            }
                        }
                    };
                    if count == 0 && time == 0 {
                        continue;
                    }
                    let labels = if opts.labels {
                        s.attribute_indices.clone()
                    } else {
                        Vec::new()
                    };
                    let key = (s.stack_index, labels);
                    let index = match o.samples.get(&key) {
                        Some(&i) => i,
                        None => {
                            let mut location_id = Vec::new();
                            if let Some(stack) = d.stack(s.stack_index).map_err(PprofError::Otlp)? {
                                for &l in &stack.location_indices {
                                    location_id.push(o.location(l)?);
                                }
                            }
                            let label = o.labels(&key.1)?;
                            o.p.sample.push(PprofSample {
                                location_id,
                                value: Vec::new(),
                                label,
                            });
                            values.push((0, 0));
                            o.samples.insert(key, values.len() - 1);
                            values.len() - 1
                        }
                    };
                    let v = &mut values[index];
                    v.0 = v.0.saturating_add(count);
                    v.1 = v.1.saturating_add(time);
                    output.observations = output.observations.saturating_add(count.max(0) as u64);
                }
            }
        }
    }
    let time_type = if any_wall && !any_cpu { "wall" } else { "cpu" };
    let count = PprofValueType {
        r#type: o.string("samples"),
        unit: o.string("count"),
    };
    o.p.sample_type.push(count);
    if with_time {
        let time = PprofValueType {
            r#type: o.string(time_type),
            unit: o.string("nanoseconds"),
        };
        o.p.sample_type.push(time);
        o.p.period_type = Some(time);
        o.p.period = period.map_or(0, |p| i64::try_from(p).unwrap_or(i64::MAX));
    }
    for (sample, (count, time)) in o.p.sample.iter_mut().zip(&values) {
        sample.value.push(*count);
        if with_time {
            sample.value.push(*time);
        }
    }
    if start != u64::MAX {
        o.p.time_nanos = i64::try_from(start).unwrap_or(i64::MAX);
        o.p.duration_nanos = i64::try_from(end - start).unwrap_or(i64::MAX);
    }
    if let Some(indices) = first_attributes {
        for a in d.attributes(indices).map_err(PprofError::Otlp)? {
            match (a.key, &a.value) {
                ("pprof.profile.comment", AttrValue::Array(items)) => {
                    for item in items {
                        if let Some(s) = item.as_str() {
                            let i = o.string(s);
                            o.p.comment.push(i);
                        }
                    }
                }
                ("pprof.profile.drop_frames", AttrValue::Str(s)) => o.p.drop_frames = o.string(s),
                ("pprof.profile.keep_frames", AttrValue::Str(s)) => o.p.keep_frames = o.string(s),
                ("pprof.profile.doc_url", AttrValue::Str(s)) => o.p.doc_url = o.string(s),
                _ => {}
            }
        }
    }
    output.profile = o.p;
    Ok(output)
}
