//! OTLP/JSON → prost messages for the OTLP profiles protos
//! (`opentelemetry.proto.profiles.v1development` and the profiles collector service), one
//! function per message, with the shared readers of [`crate::otlp_json::decode`].

use crate::otlp::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary,
    ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
use crate::otlp_json::OtlpJsonError;
use crate::otlp_json::decode::{
    any_value, base64v, envelope, i32v, i64v, repeated, resource, scope, set, span_id, string,
    trace_id, u32v, u64v,
};
use crate::otlp_json::parser::{Parser, Result};

/// Decodes a whole `ProfilesData` / `ExportProfilesServiceRequest` document.
pub fn profiles_data(
    bytes: &[u8],
) -> std::result::Result<(Vec<ResourceProfiles>, Option<ProfilesDictionary>), OtlpJsonError> {
    let mut p = Parser::new(bytes);
    let mut resource_profiles = Vec::new();
    let mut dictionary = None;
    let mut it = p.begin_object("a profiles request object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "resourceProfiles" | "resource_profiles" => {
                set!(&mut p, "resourceProfiles", resource_profiles, |p| repeated(
                    p,
                    |p| envelope::<ResourceProfiles>(p, resource, |p| envelope::<ScopeProfiles>(
                        p, scope, profile
                    ))
                ))
            }
            "dictionary" => set!(&mut p, "dictionary", dictionary, |p| {
                dictionary_msg(p).map(Some)
            }),
            _ => p.skip_value()?,
        }
    }
    p.finish()?;
    Ok((resource_profiles, dictionary))
}

fn dictionary_msg(p: &mut Parser<'_>) -> Result<ProfilesDictionary> {
    let mut m = ProfilesDictionary::default();
    let mut it = p.begin_object("a ProfilesDictionary object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "mappingTable" | "mapping_table" => {
                set!(p, "mappingTable", m.mapping_table, |p| repeated(p, mapping))
            }
            "locationTable" | "location_table" => {
                set!(p, "locationTable", m.location_table, |p| repeated(
                    p, location
                ))
            }
            "functionTable" | "function_table" => {
                set!(p, "functionTable", m.function_table, |p| repeated(
                    p, function
                ))
            }
            "linkTable" | "link_table" => {
                set!(p, "linkTable", m.link_table, |p| repeated(p, link))
            }
            "stringTable" | "string_table" => {
                set!(p, "stringTable", m.string_table, |p| repeated(p, string))
            }
            "attributeTable" | "attribute_table" => {
                set!(p, "attributeTable", m.attribute_table, |p| repeated(
                    p,
                    key_value_and_unit
                ))
            }
            "stackTable" | "stack_table" => {
                set!(p, "stackTable", m.stack_table, |p| repeated(p, stack))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn profile(p: &mut Parser<'_>) -> Result<Profile> {
    let mut m = Profile::default();
    let mut it = p.begin_object("a Profile object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "sampleType" | "sample_type" => {
                set!(p, "sampleType", m.sample_type, |p| value_type(p).map(Some))
            }
            "samples" => set!(p, "samples", m.samples, |p| repeated(p, sample)),
            "timeUnixNano" | "time_unix_nano" => set!(p, "timeUnixNano", m.time_unix_nano, u64v),
            "durationNano" | "duration_nano" => set!(p, "durationNano", m.duration_nano, u64v),
            "periodType" | "period_type" => {
                set!(p, "periodType", m.period_type, |p| value_type(p).map(Some))
            }
            "period" => set!(p, "period", m.period, i64v),
            "profileId" | "profile_id" => set!(p, "profileId", m.profile_id, trace_id),
            "droppedAttributesCount" | "dropped_attributes_count" => {
                set!(
                    p,
                    "droppedAttributesCount",
                    m.dropped_attributes_count,
                    u32v
                )
            }
            "originalPayloadFormat" | "original_payload_format" => set!(
                p,
                "originalPayloadFormat",
                m.original_payload_format,
                string
            ),
            "originalPayload" | "original_payload" => {
                set!(p, "originalPayload", m.original_payload, base64v)
            }
            "attributeIndices" | "attribute_indices" => {
                set!(p, "attributeIndices", m.attribute_indices, |p| repeated(
                    p, i32v
                ))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn value_type(p: &mut Parser<'_>) -> Result<ValueType> {
    let mut m = ValueType::default();
    let mut it = p.begin_object("a ValueType object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "typeStrindex" | "type_strindex" => set!(p, "typeStrindex", m.type_strindex, i32v),
            "unitStrindex" | "unit_strindex" => set!(p, "unitStrindex", m.unit_strindex, i32v),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn sample(p: &mut Parser<'_>) -> Result<Sample> {
    let mut m = Sample::default();
    let mut it = p.begin_object("a Sample object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "stackIndex" | "stack_index" => set!(p, "stackIndex", m.stack_index, i32v),
            "attributeIndices" | "attribute_indices" => {
                set!(p, "attributeIndices", m.attribute_indices, |p| repeated(
                    p, i32v
                ))
            }
            "linkIndex" | "link_index" => set!(p, "linkIndex", m.link_index, i32v),
            "values" => set!(p, "values", m.values, |p| repeated(p, i64v)),
            "timestampsUnixNano" | "timestamps_unix_nano" => {
                set!(p, "timestampsUnixNano", m.timestamps_unix_nano, |p| {
                    repeated(p, u64v)
                })
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn mapping(p: &mut Parser<'_>) -> Result<Mapping> {
    let mut m = Mapping::default();
    let mut it = p.begin_object("a Mapping object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "memoryStart" | "memory_start" => set!(p, "memoryStart", m.memory_start, u64v),
            "memoryLimit" | "memory_limit" => set!(p, "memoryLimit", m.memory_limit, u64v),
            "fileOffset" | "file_offset" => set!(p, "fileOffset", m.file_offset, u64v),
            "filenameStrindex" | "filename_strindex" => {
                set!(p, "filenameStrindex", m.filename_strindex, i32v)
            }
            "attributeIndices" | "attribute_indices" => {
                set!(p, "attributeIndices", m.attribute_indices, |p| repeated(
                    p, i32v
                ))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn stack(p: &mut Parser<'_>) -> Result<Stack> {
    let mut m = Stack::default();
    let mut it = p.begin_object("a Stack object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "locationIndices" | "location_indices" => {
                set!(p, "locationIndices", m.location_indices, |p| repeated(
                    p, i32v
                ))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn location(p: &mut Parser<'_>) -> Result<Location> {
    let mut m = Location::default();
    let mut it = p.begin_object("a Location object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "mappingIndex" | "mapping_index" => set!(p, "mappingIndex", m.mapping_index, i32v),
            "address" => set!(p, "address", m.address, u64v),
            "lines" => set!(p, "lines", m.lines, |p| repeated(p, line)),
            "attributeIndices" | "attribute_indices" => {
                set!(p, "attributeIndices", m.attribute_indices, |p| repeated(
                    p, i32v
                ))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn line(p: &mut Parser<'_>) -> Result<Line> {
    let mut m = Line::default();
    let mut it = p.begin_object("a Line object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "functionIndex" | "function_index" => {
                set!(p, "functionIndex", m.function_index, i32v)
            }
            "line" => set!(p, "line", m.line, i64v),
            "column" => set!(p, "column", m.column, i64v),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn function(p: &mut Parser<'_>) -> Result<Function> {
    let mut m = Function::default();
    let mut it = p.begin_object("a Function object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "nameStrindex" | "name_strindex" => set!(p, "nameStrindex", m.name_strindex, i32v),
            "systemNameStrindex" | "system_name_strindex" => {
                set!(p, "systemNameStrindex", m.system_name_strindex, i32v)
            }
            "filenameStrindex" | "filename_strindex" => {
                set!(p, "filenameStrindex", m.filename_strindex, i32v)
            }
            "startLine" | "start_line" => set!(p, "startLine", m.start_line, i64v),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn link(p: &mut Parser<'_>) -> Result<Link> {
    let mut m = Link::default();
    let mut it = p.begin_object("a Link object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "traceId" | "trace_id" => set!(p, "traceId", m.trace_id, trace_id),
            "spanId" | "span_id" => set!(p, "spanId", m.span_id, span_id),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn key_value_and_unit(p: &mut Parser<'_>) -> Result<KeyValueAndUnit> {
    let mut m = KeyValueAndUnit::default();
    let mut it = p.begin_object("a KeyValueAndUnit object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "keyStrindex" | "key_strindex" => set!(p, "keyStrindex", m.key_strindex, i32v),
            "value" => set!(p, "value", m.value, |p| any_value(p).map(Some)),
            "unitStrindex" | "unit_strindex" => set!(p, "unitStrindex", m.unit_strindex, i32v),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}
