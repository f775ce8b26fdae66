//! pprof -> OTLP: one OTLP `Profile` per pprof sample type (the Collector contrib's
//! `pkg/translator/pprof` mapping), every id and string index checked.

use super::{PprofError, PprofOptions, PprofProfile};
use crate::fx_hash::FxHashMap;
use crate::sentry_to_otlp::builder::{DictionaryBuilder, array_value, int_value, str_value};
use profilink_proto::otlp::{
    Function, InstrumentationScope, KeyValue, Line, Location, Mapping, Profile, ProfilesData,
    ResourceProfiles, Sample, ScopeProfiles, ValueType,
};
use sha2::{Digest, Sha256};

/// The semconv schema the attribute names come from.
pub(crate) const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.39.0";

/// Bounds-checked access to the pprof string table.
struct Strings<'a>(&'a [String]);

impl<'a> Strings<'a> {
    fn get(&self, what: &'static str, index: i64) -> Result<&'a str, PprofError> {
        if index == 0 {
            return Ok("");
        }
        usize::try_from(index)
            .ok()
            .and_then(|i| self.0.get(i))
            .map(String::as_str)
            .ok_or(PprofError::StringIndex {
                what,
                index,
                len: self.0.len(),
            })
    }
}

/// A table from pprof ids to OTLP indices; ids must be non-zero and unique.
fn insert_id(
    table: &mut FxHashMap<u64, i32>,
    what: &'static str,
    id: u64,
    index: i32,
) -> Result<(), PprofError> {
    if id == 0 {
        return Err(PprofError::Id {
            what,
            id,
            problem: "zero",
        });
    }
    if table.insert(id, index).is_some() {
        return Err(PprofError::Id {
            what,
            id,
            problem: "defined twice",
        });
    }
    Ok(())
}

fn lookup(table: &FxHashMap<u64, i32>, what: &'static str, id: u64) -> Result<i32, PprofError> {
    table.get(&id).copied().ok_or(PprofError::Id {
        what,
        id,
        problem: "not defined",
    })
}

/// Translates a decoded pprof profile into OTLP (see the [module docs](super)).
pub fn pprof_to_otlp(p: &PprofProfile, opts: &PprofOptions) -> Result<ProfilesData, PprofError> {
    if p.string_table.first().is_some_and(|s| !s.is_empty()) {
        return Err(PprofError::StringTable);
    }
    let s = Strings(&p.string_table);
    let types = p.sample_type.len();
    let mut items: u64 = 0;
    for (i, sample) in p.sample.iter().enumerate() {
        if sample.value.len() != types {
            return Err(PprofError::ValueCount {
                sample: i,
                got: sample.value.len(),
                expected: types,
            });
        }
        let per_type = 1 + sample.label.len() as u64;
        items = items.saturating_add(per_type.saturating_mul(types as u64));
    }
    if items > opts.max_expanded_items {
        return Err(PprofError::Expansion {
            items,
            limit: opts.max_expanded_items,
        });
    }

    let mut b = DictionaryBuilder::new();
    let mut mappings = FxHashMap::default();
    for m in &p.mapping {
        let mut attribute_indices = Vec::new();
        let build_id = s.get("mapping.build_id", m.build_id)?;
        if !build_id.is_empty() {
            attribute_indices.push(b.attribute_str("process.executable.build_id.gnu", build_id));
        }
        for (set, key) in [
            (m.has_functions, "pprof.mapping.has_functions"),
            (m.has_filenames, "pprof.mapping.has_filenames"),
            (m.has_line_numbers, "pprof.mapping.has_line_numbers"),
            (m.has_inline_frames, "pprof.mapping.has_inline_frames"),
        ] {
            if set {
                attribute_indices.push(b.attribute_bool(key, true));
            }
        }
        let filename_strindex = b.string(s.get("mapping.filename", m.filename)?);
        let index = b.mapping(Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename_strindex,
            attribute_indices,
        });
        insert_id(&mut mappings, "mapping", m.id, index)?;
    }
    let mut functions = FxHashMap::default();
    for f in &p.function {
        let function = Function {
            name_strindex: b.string(s.get("function.name", f.name)?),
            system_name_strindex: b.string(s.get("function.system_name", f.system_name)?),
            filename_strindex: b.string(s.get("function.filename", f.filename)?),
            start_line: f.start_line,
        };
        let index = b.function(function);
        insert_id(&mut functions, "function", f.id, index)?;
    }
    let mut locations = FxHashMap::default();
    for l in &p.location {
        let mapping_index = match l.mapping_id {
            0 => 0,
            id => lookup(&mappings, "mapping", id)?,
        };
        let mut lines = Vec::with_capacity(l.line.len());
        for line in &l.line {
            lines.push(Line {
                function_index: lookup(&functions, "function", line.function_id)?,
                line: line.line,
                column: line.column,
            });
        }
        let attribute_indices = if l.is_folded {
            vec![b.attribute_bool("pprof.location.is_folded", true)]
        } else {
            Vec::new()
        };
        let index = b.location(Location {
            mapping_index,
            address: l.address,
            lines,
            attribute_indices,
        });
        insert_id(&mut locations, "location", l.id, index)?;
    }

    // Each sample's stack and attributes, shared by the profiles of every sample type.
    let mut resolved = Vec::with_capacity(p.sample.len());
    for sample in &p.sample {
        let mut stack = Vec::with_capacity(sample.location_id.len());
        for &id in &sample.location_id {
            stack.push(lookup(&locations, "location", id)?);
        }
        let stack_index = b.stack(stack);
        let mut attribute_indices = Vec::with_capacity(sample.label.len());
        for label in &sample.label {
            let key = s.get("label.key", label.key)?;
            let index = if label.str != 0 {
                b.attribute_str(key, s.get("label.str", label.str)?)
            } else {
                let unit = s.get("label.num_unit", label.num_unit)?;
                b.attribute_with_unit(key, int_value(label.num), unit)
            };
            attribute_indices.push(index);
        }
        resolved.push((stack_index, attribute_indices));
    }

    let mut profile_attributes = Vec::new();
    if !p.comment.is_empty() {
        let mut comments = Vec::with_capacity(p.comment.len());
        for &c in &p.comment {
            comments.push(str_value(s.get("comment", c)?));
        }
        profile_attributes.push(b.attribute("pprof.profile.comment", array_value(comments)));
    }
    for (what, key, index) in [
        ("drop_frames", "pprof.profile.drop_frames", p.drop_frames),
        ("keep_frames", "pprof.profile.keep_frames", p.keep_frames),
        ("doc_url", "pprof.profile.doc_url", p.doc_url),
    ] {
        let value = s.get(what, index)?;
        if !value.is_empty() {
            profile_attributes.push(b.attribute_str(key, value));
        }
    }
    let period_type = match &p.period_type {
        Some(pt) => Some(ValueType {
            type_strindex: b.string(s.get("period_type.type", pt.r#type)?),
            unit_strindex: b.string(s.get("period_type.unit", pt.unit)?),
        }),
        None => None,
    };
    let default_sample_type = s.get("default_sample_type", p.default_sample_type)?;

    let mut profiles = Vec::with_capacity(types);
    for (t, st) in p.sample_type.iter().enumerate() {
        let sample_type = ValueType {
            type_strindex: b.string(s.get("sample_type.type", st.r#type)?),
            unit_strindex: b.string(s.get("sample_type.unit", st.unit)?),
        };
        let samples = p
            .sample
            .iter()
            .zip(&resolved)
            .map(|(sample, (stack_index, attribute_indices))| Sample {
                stack_index: *stack_index,
                attribute_indices: attribute_indices.clone(),
                link_index: 0,
                values: vec![sample.value[t]],
                timestamps_unix_nano: Vec::new(),
            })
            .collect();
        profiles.push(Profile {
            sample_type: Some(sample_type),
            samples,
            time_unix_nano: u64::try_from(p.time_nanos).unwrap_or(0),
            duration_nano: u64::try_from(p.duration_nanos).unwrap_or(0),
            period_type,
            period: p.period,
            profile_id: profile_id(p, t),
            dropped_attributes_count: 0,
            original_payload_format: String::new(),
            original_payload: Vec::new(),
            attribute_indices: profile_attributes.clone(),
        });
    }
    let mut scope = InstrumentationScope::default();
    if !default_sample_type.is_empty() {
        scope.attributes.push(KeyValue {
            key: "pprof.scope.default_sample_type".into(),
            value: Some(str_value(default_sample_type)),
            key_strindex: 0,
        });
    }
    Ok(ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: None,
            scope_profiles: vec![ScopeProfiles {
                scope: Some(scope),
                profiles,
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: SCHEMA_URL.into(),
        }],
        dictionary: Some(b.finish()),
    })
}

/// A deterministic 16-byte id for the profile of sample type `t`: a digest of the profile's
/// time, duration, period, sample count and values of that type (never all zeros in practice).
fn profile_id(p: &PprofProfile, t: usize) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(p.time_nanos.to_le_bytes());
    h.update(p.duration_nanos.to_le_bytes());
    h.update(p.period.to_le_bytes());
    h.update((t as u64).to_le_bytes());
    h.update((p.sample.len() as u64).to_le_bytes());
    for sample in &p.sample {
        h.update(sample.value[t].to_le_bytes());
    }
    h.finalize()[..16].to_vec()
}
