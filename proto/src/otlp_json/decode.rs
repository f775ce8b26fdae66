// Over 600 lines on purpose: one idea, one reader per OTLP profiles message; splitting the
// message readers apart would scatter the field tables that mirror profiles.proto.
//! OTLP/JSON → prost messages, one function per message, driven by the pull [`Parser`].
//!
//! Each message function accepts the lowerCamelCase and the snake_case name of every field,
//! skips unknown keys, treats `null` as an absent field and lets the last duplicate key win.

use super::OtlpJsonError;
use super::bytes::{decode_base64, decode_id};
use super::numbers::{IntType, parse_double, parse_int};
use super::parser::{MAX_ANY_VALUE_DEPTH, Parser, Result, Scalar};
use super::shape::{EnvelopeShape, PartialShape, ResponseShape};
use crate::otlp::{
    AnyValue, ArrayValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit, KeyValueList,
    Line, Link, Location, Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample,
    ScopeProfiles, Stack, ValueType, any_value,
};
use opentelemetry_proto::tonic::common::v1::EntityRef;

/// Standard length of trace and profile ids, in bytes.
const TRACE_ID_LEN: usize = 16;
/// Standard length of span ids, in bytes.
const SPAN_ID_LEN: usize = 8;

/// Reads field `key` (pushed on the path) with `f`; `None` when the value is `null`.
#[inline]
fn field<'a, T>(
    p: &mut Parser<'a>,
    key: &'static str,
    f: impl FnOnce(&mut Parser<'a>) -> Result<T>,
) -> Result<Option<T>> {
    p.in_key(key, |p| {
        if p.take_null()? {
            Ok(None)
        } else {
            f(p).map(Some)
        }
    })
}

/// `set!(p, "jsonName", target, reader)`: assigns the field unless it is `null`.
macro_rules! set {
    ($p:expr, $key:literal, $target:expr, $f:expr) => {
        if let Some(v) = field($p, $key, $f)? {
            $target = v;
        }
    };
}

/// Reads a repeated field: a JSON array whose elements are read with `f`.
fn repeated<'a, T>(
    p: &mut Parser<'a>,
    mut f: impl FnMut(&mut Parser<'a>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut it = p.begin_array("an array (repeated field)")?;
    let mut out = Vec::new();
    while p.next_element(&mut it)? {
        out.push(f(p)?);
    }
    Ok(out)
}

fn int(p: &mut Parser<'_>, ty: IntType) -> Result<i128> {
    let what = match ty {
        IntType::I32 | IntType::U32 => "an integer (number or numeric string)",
        IntType::I64 | IntType::U64 => "a 64-bit integer (decimal string or number)",
    };
    let r = match p.scalar(what)? {
        Scalar::Num(t) => parse_int(t, ty),
        Scalar::Str(s) => parse_int(&s, ty),
        Scalar::Bool(_) => Err(format!("expected {what}, found a boolean")),
    };
    r.map_err(|m| p.error(m))
}

fn i32v(p: &mut Parser<'_>) -> Result<i32> {
    let v = int(p, IntType::I32)?;
    i32::try_from(v).map_err(|_| p.error("out of range for int32"))
}

fn u32v(p: &mut Parser<'_>) -> Result<u32> {
    let v = int(p, IntType::U32)?;
    u32::try_from(v).map_err(|_| p.error("out of range for uint32"))
}

fn i64v(p: &mut Parser<'_>) -> Result<i64> {
    let v = int(p, IntType::I64)?;
    i64::try_from(v).map_err(|_| p.error("out of range for int64"))
}

fn u64v(p: &mut Parser<'_>) -> Result<u64> {
    let v = int(p, IntType::U64)?;
    u64::try_from(v).map_err(|_| p.error("out of range for uint64"))
}

fn f64v(p: &mut Parser<'_>) -> Result<f64> {
    let what = "a double (number, numeric string, \"NaN\", \"Infinity\" or \"-Infinity\")";
    let r = match p.scalar(what)? {
        Scalar::Num(t) => parse_double(t, false),
        Scalar::Str(s) => parse_double(&s, true),
        Scalar::Bool(_) => Err(format!("expected {what}, found a boolean")),
    };
    r.map_err(|m| p.error(m))
}

fn string(p: &mut Parser<'_>) -> Result<String> {
    Ok(p.string()?.into_owned())
}

fn base64v(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_base64(&s).map_err(|m| p.error(m))
}

fn trace_id(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_id(&s, TRACE_ID_LEN).map_err(|m| p.error(m))
}

fn span_id(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_id(&s, SPAN_ID_LEN).map_err(|m| p.error(m))
}

/// Reads the `attributes` / `droppedAttributesCount` pair many messages share when `key` is
/// one of them; false for other keys (nothing read).
fn attributes_field(
    p: &mut Parser<'_>,
    key: &str,
    attributes: &mut Vec<KeyValue>,
    dropped: &mut u32,
) -> Result<bool> {
    match key {
        "attributes" => set!(p, "attributes", *attributes, |p| repeated(p, key_value)),
        "droppedAttributesCount" | "dropped_attributes_count" => {
            set!(p, "droppedAttributesCount", *dropped, u32v)
        }
        _ => return Ok(false),
    }
    Ok(true)
}

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

/// Decodes a whole `Export…ServiceResponse` document (any signal).
pub fn response<R: ResponseShape>(bytes: &[u8]) -> Result<R> {
    let mut p = Parser::new(bytes);
    let mut resp = R::default();
    let mut it = p.begin_object(R::WHAT)?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "partialSuccess" | "partial_success" => {
                set!(&mut p, "partialSuccess", *resp.partial_mut(), |p| {
                    partial_success(p).map(Some)
                })
            }
            _ => p.skip_value()?,
        }
    }
    p.finish()?;
    Ok(resp)
}

fn partial_success<P: PartialShape>(p: &mut Parser<'_>) -> Result<P> {
    let mut m = P::default();
    let mut it = p.begin_object(P::WHAT)?;
    while let Some(key) = p.next_key(&mut it)? {
        let (rejected, message) = m.parts_mut();
        if P::REJECTED.iter().any(|name| **name == *key) {
            if let Some(v) = field(p, P::REJECTED[0], i64v)? {
                *rejected = v;
            }
        } else if matches!(&*key, "errorMessage" | "error_message") {
            set!(p, "errorMessage", *message, string)
        } else {
            p.skip_value()?
        }
    }
    Ok(m)
}

/// Decodes a resource or scope envelope (`ResourceProfiles`, `ScopeSpans`…): its head with
/// `head`, its children with `child`.
fn envelope<E: EnvelopeShape>(
    p: &mut Parser<'_>,
    head: fn(&mut Parser<'_>) -> Result<E::Head>,
    child: fn(&mut Parser<'_>) -> Result<E::Child>,
) -> Result<E> {
    let mut m = E::default();
    let mut it = p.begin_object(E::WHAT)?;
    while let Some(key) = p.next_key(&mut it)? {
        let (head_field, children, schema_url) = m.parts_mut();
        if *key == *E::HEAD {
            if let Some(v) = field(p, E::HEAD, head)? {
                *head_field = Some(v);
            }
        } else if E::CHILDREN.iter().any(|name| **name == *key) {
            if let Some(v) = field(p, E::CHILDREN[0], |p| repeated(p, child))? {
                *children = v;
            }
        } else if matches!(&*key, "schemaUrl" | "schema_url") {
            set!(p, "schemaUrl", *schema_url, string)
        } else {
            p.skip_value()?
        }
    }
    Ok(m)
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

fn resource(p: &mut Parser<'_>) -> Result<Resource> {
    let mut m = Resource::default();
    let mut it = p.begin_object("a Resource object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "entityRefs" | "entity_refs" => {
                set!(p, "entityRefs", m.entity_refs, |p| repeated(p, entity_ref))
            }
            k if attributes_field(p, k, &mut m.attributes, &mut m.dropped_attributes_count)? => {}
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn entity_ref(p: &mut Parser<'_>) -> Result<EntityRef> {
    let mut m = EntityRef::default();
    let mut it = p.begin_object("an EntityRef object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "schemaUrl" | "schema_url" => set!(p, "schemaUrl", m.schema_url, string),
            "type" => set!(p, "type", m.r#type, string),
            "idKeys" | "id_keys" => set!(p, "idKeys", m.id_keys, |p| repeated(p, string)),
            "descriptionKeys" | "description_keys" => {
                set!(p, "descriptionKeys", m.description_keys, |p| repeated(
                    p, string
                ))
            }
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn scope(p: &mut Parser<'_>) -> Result<InstrumentationScope> {
    let mut m = InstrumentationScope::default();
    let mut it = p.begin_object("an InstrumentationScope object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "name" => set!(p, "name", m.name, string),
            "version" => set!(p, "version", m.version, string),
            k if attributes_field(p, k, &mut m.attributes, &mut m.dropped_attributes_count)? => {}
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

fn key_value(p: &mut Parser<'_>) -> Result<KeyValue> {
    let mut m = KeyValue::default();
    let mut it = p.begin_object("a KeyValue object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "key" => set!(p, "key", m.key, string),
            "value" => set!(p, "value", m.value, |p| any_value(p).map(Some)),
            "keyStrindex" | "key_strindex" => set!(p, "keyStrindex", m.key_strindex, i32v),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn any_value(p: &mut Parser<'_>) -> Result<AnyValue> {
    use any_value::Value;
    if p.any_depth >= MAX_ANY_VALUE_DEPTH {
        return Err(p.error(format!(
            "AnyValue nesting is deeper than the limit of {MAX_ANY_VALUE_DEPTH} levels"
        )));
    }
    p.any_depth += 1;
    let mut m = AnyValue::default();
    let mut it = p.begin_object("an AnyValue object")?;
    while let Some(key) = p.next_key(&mut it)? {
        let v = match &*key {
            "stringValue" | "string_value" => {
                field(p, "stringValue", |p| string(p).map(Value::StringValue))?
            }
            "boolValue" | "bool_value" => {
                field(p, "boolValue", |p| p.boolean().map(Value::BoolValue))?
            }
            "intValue" | "int_value" => field(p, "intValue", |p| i64v(p).map(Value::IntValue))?,
            "doubleValue" | "double_value" => {
                field(p, "doubleValue", |p| f64v(p).map(Value::DoubleValue))?
            }
            "arrayValue" | "array_value" => {
                field(p, "arrayValue", |p| array_value(p).map(Value::ArrayValue))?
            }
            "kvlistValue" | "kvlist_value" => field(p, "kvlistValue", |p| {
                kvlist_value(p).map(Value::KvlistValue)
            })?,
            "bytesValue" | "bytes_value" => {
                field(p, "bytesValue", |p| base64v(p).map(Value::BytesValue))?
            }
            "stringValueStrindex" | "string_value_strindex" => {
                field(p, "stringValueStrindex", |p| {
                    i32v(p).map(Value::StringValueStrindex)
                })?
            }
            _ => {
                p.skip_value()?;
                None
            }
        };
        if v.is_some() {
            m.value = v;
        }
    }
    p.any_depth -= 1;
    Ok(m)
}

fn array_value(p: &mut Parser<'_>) -> Result<ArrayValue> {
    let mut m = ArrayValue::default();
    let mut it = p.begin_object("an ArrayValue object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "values" => set!(p, "values", m.values, |p| repeated(p, any_value)),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

fn kvlist_value(p: &mut Parser<'_>) -> Result<KeyValueList> {
    let mut m = KeyValueList::default();
    let mut it = p.begin_object("a KeyValueList object")?;
    while let Some(key) = p.next_key(&mut it)? {
        match &*key {
            "values" => set!(p, "values", m.values, |p| repeated(p, key_value)),
            _ => p.skip_value()?,
        }
    }
    Ok(m)
}

// The OTLP traces messages, decoded with the helpers above.
#[path = "traces_decode.rs"]
pub(super) mod traces;
