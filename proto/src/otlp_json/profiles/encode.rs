//! prost messages → OTLP/JSON for the OTLP profiles protos, one function per message, with
//! the shared writers of [`crate::otlp_json::encode`]: keys in field-number order, ids as
//! lowercase hex, other `bytes` as base64, 64-bit integers as strings, defaults omitted,
//! present messages written (as `{}` when empty).

use crate::otlp::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesDictionary,
    ResourceProfiles, Sample, Stack, ValueType,
};
use crate::otlp_json::encode::{Obj, any_value_msg, envelope, resource, scope};

/// Encodes a `ProfilesData` / `ExportProfilesServiceRequest` document.
pub fn profiles_data(
    resource_profiles: &[ResourceProfiles],
    dictionary: Option<&ProfilesDictionary>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096);
    let mut o = Obj::new(&mut out);
    o.list("resourceProfiles", resource_profiles, |out, m| {
        envelope(out, m, resource, |out, m| envelope(out, m, scope, profile))
    });
    o.msg("dictionary", dictionary, dictionary_msg);
    o.end();
    out
}

fn dictionary_msg(out: &mut Vec<u8>, m: &ProfilesDictionary) {
    let mut o = Obj::new(out);
    o.list("mappingTable", &m.mapping_table, mapping);
    o.list("locationTable", &m.location_table, location);
    o.list("functionTable", &m.function_table, function);
    o.list("linkTable", &m.link_table, link);
    o.strings("stringTable", &m.string_table);
    o.list("attributeTable", &m.attribute_table, key_value_and_unit);
    o.list("stackTable", &m.stack_table, stack);
    o.end();
}

fn profile(out: &mut Vec<u8>, m: &Profile) {
    let mut o = Obj::new(out);
    o.msg("sampleType", m.sample_type.as_ref(), value_type);
    o.list("samples", &m.samples, sample);
    o.u64("timeUnixNano", m.time_unix_nano);
    o.u64("durationNano", m.duration_nano);
    o.msg("periodType", m.period_type.as_ref(), value_type);
    o.i64("period", m.period);
    o.hex("profileId", &m.profile_id);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.string("originalPayloadFormat", &m.original_payload_format);
    o.base64("originalPayload", &m.original_payload);
    o.i32s("attributeIndices", &m.attribute_indices);
    o.end();
}

fn value_type(out: &mut Vec<u8>, m: &ValueType) {
    let mut o = Obj::new(out);
    o.i32("typeStrindex", m.type_strindex);
    o.i32("unitStrindex", m.unit_strindex);
    o.end();
}

fn sample(out: &mut Vec<u8>, m: &Sample) {
    let mut o = Obj::new(out);
    o.i32("stackIndex", m.stack_index);
    o.i32s("attributeIndices", &m.attribute_indices);
    o.i32("linkIndex", m.link_index);
    o.i64s("values", &m.values);
    o.u64s("timestampsUnixNano", &m.timestamps_unix_nano);
    o.end();
}

fn mapping(out: &mut Vec<u8>, m: &Mapping) {
    let mut o = Obj::new(out);
    o.u64("memoryStart", m.memory_start);
    o.u64("memoryLimit", m.memory_limit);
    o.u64("fileOffset", m.file_offset);
    o.i32("filenameStrindex", m.filename_strindex);
    o.i32s("attributeIndices", &m.attribute_indices);
    o.end();
}

fn stack(out: &mut Vec<u8>, m: &Stack) {
    let mut o = Obj::new(out);
    o.i32s("locationIndices", &m.location_indices);
    o.end();
}

fn location(out: &mut Vec<u8>, m: &Location) {
    let mut o = Obj::new(out);
    o.i32("mappingIndex", m.mapping_index);
    o.u64("address", m.address);
    o.list("lines", &m.lines, line);
    o.i32s("attributeIndices", &m.attribute_indices);
    o.end();
}

fn line(out: &mut Vec<u8>, m: &Line) {
    let mut o = Obj::new(out);
    o.i32("functionIndex", m.function_index);
    o.i64("line", m.line);
    o.i64("column", m.column);
    o.end();
}

fn function(out: &mut Vec<u8>, m: &Function) {
    let mut o = Obj::new(out);
    o.i32("nameStrindex", m.name_strindex);
    o.i32("systemNameStrindex", m.system_name_strindex);
    o.i32("filenameStrindex", m.filename_strindex);
    o.i64("startLine", m.start_line);
    o.end();
}

fn link(out: &mut Vec<u8>, m: &Link) {
    let mut o = Obj::new(out);
    o.hex("traceId", &m.trace_id);
    o.hex("spanId", &m.span_id);
    o.end();
}

fn key_value_and_unit(out: &mut Vec<u8>, m: &KeyValueAndUnit) {
    let mut o = Obj::new(out);
    o.i32("keyStrindex", m.key_strindex);
    o.msg("value", m.value.as_ref(), any_value_msg);
    o.i32("unitStrindex", m.unit_strindex);
    o.end();
}
