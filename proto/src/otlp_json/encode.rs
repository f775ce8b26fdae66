//! prost messages → OTLP/JSON, written straight into a `Vec<u8>` (no intermediate `Value`).
//!
//! Default scalars and empty repeated fields are omitted; present messages are always written
//! (as `{}` when empty) so that round trips keep `Some(default)` apart from `None`.

use super::bytes::{write_base64, write_hex};
use super::numbers::{write_f64, write_i64, write_u64};
use super::shape::{EnvelopeShape, PartialShape, ResponseShape};
use crate::otlp::{
    AnyValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit, Line, Link, Location,
    Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample, Stack, ValueType,
    any_value,
};
use opentelemetry_proto::tonic::common::v1::EntityRef;

/// Appends `s` as a JSON string, escaped by `serde_json`.
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Serializing a `str` into a `Vec<u8>` cannot fail.
    let r = serde_json::to_writer(&mut *out, s);
    debug_assert!(r.is_ok());
}

/// Writes the members of one JSON object; `key` inserts the separating commas.
struct Obj<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Obj<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    fn end(self) {
        self.out.push(b'}');
    }

    /// Writes `"key":` (keys are static ASCII identifiers, no escaping needed).
    #[inline]
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn string(&mut self, key: &str, v: &str) {
        if !v.is_empty() {
            write_str(self.key(key), v);
        }
    }

    /// 64-bit unsigned integer, as a decimal string.
    fn u64(&mut self, key: &str, v: u64) {
        if v != 0 {
            let out = self.key(key);
            out.push(b'"');
            write_u64(out, v);
            out.push(b'"');
        }
    }

    /// 64-bit signed integer, as a decimal string.
    fn i64(&mut self, key: &str, v: i64) {
        if v != 0 {
            let out = self.key(key);
            out.push(b'"');
            write_i64(out, v);
            out.push(b'"');
        }
    }

    fn i32(&mut self, key: &str, v: i32) {
        if v != 0 {
            write_i64(self.key(key), i64::from(v));
        }
    }

    fn u32(&mut self, key: &str, v: u32) {
        if v != 0 {
            write_u64(self.key(key), u64::from(v));
        }
    }

    fn hex(&mut self, key: &str, v: &[u8]) {
        if !v.is_empty() {
            write_hex(self.key(key), v);
        }
    }

    fn base64(&mut self, key: &str, v: &[u8]) {
        if !v.is_empty() {
            write_base64(self.key(key), v);
        }
    }

    fn i32s(&mut self, key: &str, v: &[i32]) {
        self.list(key, v, |out, &x| write_i64(out, i64::from(x)));
    }

    fn i64s(&mut self, key: &str, v: &[i64]) {
        self.list(key, v, |out, &x| {
            out.push(b'"');
            write_i64(out, x);
            out.push(b'"');
        });
    }

    fn u64s(&mut self, key: &str, v: &[u64]) {
        self.list(key, v, |out, &x| {
            out.push(b'"');
            write_u64(out, x);
            out.push(b'"');
        });
    }

    fn strings(&mut self, key: &str, v: &[String]) {
        self.list(key, v, |out, s| write_str(out, s));
    }

    /// A present message field (written even when empty).
    fn msg<T>(&mut self, key: &str, v: Option<&T>, f: fn(&mut Vec<u8>, &T)) {
        if let Some(v) = v {
            f(self.key(key), v);
        }
    }

    /// A repeated field, omitted when empty.
    fn list<T>(&mut self, key: &str, v: &[T], mut f: impl FnMut(&mut Vec<u8>, &T)) {
        if v.is_empty() {
            return;
        }
        let out = self.key(key);
        out.push(b'[');
        for (i, x) in v.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            f(out, x);
        }
        out.push(b']');
    }
}

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

/// Encodes an `Export…ServiceResponse` document (any signal).
pub fn response<R: ResponseShape>(resp: &R) -> Vec<u8> {
    let mut out = Vec::new();
    let mut o = Obj::new(&mut out);
    o.msg("partialSuccess", resp.partial(), partial_success);
    o.end();
    out
}

fn partial_success<P: PartialShape>(out: &mut Vec<u8>, m: &P) {
    let (rejected, message) = m.parts();
    let mut o = Obj::new(out);
    o.i64(P::REJECTED[0], rejected);
    o.string("errorMessage", message);
    o.end();
}

/// Encodes a resource or scope envelope (`ResourceProfiles`, `ScopeSpans`…): its head with
/// `head`, its children with `child`.
fn envelope<E: EnvelopeShape>(
    out: &mut Vec<u8>,
    m: &E,
    head: fn(&mut Vec<u8>, &E::Head),
    child: fn(&mut Vec<u8>, &E::Child),
) {
    let (head_value, children, schema_url) = m.parts();
    let mut o = Obj::new(out);
    o.msg(E::HEAD, head_value, head);
    o.list(E::CHILDREN[0], children, child);
    o.string("schemaUrl", schema_url);
    o.end();
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

fn resource(out: &mut Vec<u8>, m: &Resource) {
    let mut o = Obj::new(out);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.list("entityRefs", &m.entity_refs, entity_ref);
    o.end();
}

fn entity_ref(out: &mut Vec<u8>, m: &EntityRef) {
    let mut o = Obj::new(out);
    o.string("schemaUrl", &m.schema_url);
    o.string("type", &m.r#type);
    o.strings("idKeys", &m.id_keys);
    o.strings("descriptionKeys", &m.description_keys);
    o.end();
}

fn scope(out: &mut Vec<u8>, m: &InstrumentationScope) {
    let mut o = Obj::new(out);
    o.string("name", &m.name);
    o.string("version", &m.version);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
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

fn key_value(out: &mut Vec<u8>, m: &KeyValue) {
    let mut o = Obj::new(out);
    o.string("key", &m.key);
    o.msg("value", m.value.as_ref(), any_value_msg);
    o.i32("keyStrindex", m.key_strindex);
    o.end();
}

/// An `AnyValue`: the set oneof member is written even when it holds a default value.
fn any_value_msg(out: &mut Vec<u8>, m: &AnyValue) {
    use any_value::Value;
    let mut o = Obj::new(out);
    match &m.value {
        None => {}
        Some(Value::StringValue(s)) => write_str(o.key("stringValue"), s),
        Some(Value::BoolValue(b)) => {
            o.key("boolValue")
                .extend_from_slice(if *b { b"true" } else { b"false" })
        }
        Some(Value::IntValue(i)) => {
            let out = o.key("intValue");
            out.push(b'"');
            write_i64(out, *i);
            out.push(b'"');
        }
        Some(Value::DoubleValue(d)) => write_f64(o.key("doubleValue"), *d),
        Some(Value::ArrayValue(a)) => {
            let out = o.key("arrayValue");
            let mut inner = Obj::new(out);
            inner.list("values", &a.values, any_value_msg);
            inner.end();
        }
        Some(Value::KvlistValue(kv)) => {
            let out = o.key("kvlistValue");
            let mut inner = Obj::new(out);
            inner.list("values", &kv.values, key_value);
            inner.end();
        }
        Some(Value::BytesValue(b)) => write_base64(o.key("bytesValue"), b),
        Some(Value::StringValueStrindex(i)) => {
            write_i64(o.key("stringValueStrindex"), i64::from(*i))
        }
    }
    o.end();
}

// The OTLP traces messages, encoded with the helpers above.
#[path = "traces_encode.rs"]
pub(super) mod traces;
