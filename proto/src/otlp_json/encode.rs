//! The OTLP/JSON writers every signal shares: a JSON object's members (`Obj`, written straight
//! into a `Vec<u8>`, no intermediate `Value`), the export response and its partial success, the
//! resource and scope envelopes, and the common messages (`Resource`, `InstrumentationScope`,
//! `KeyValue`, `AnyValue`). The signals' own messages are written in [`super::profiles`] and
//! [`super::traces`] with these.
//!
//! Default scalars and empty repeated fields are omitted; present messages are always written
//! (as `{}` when empty) so that round trips keep `Some(default)` apart from `None`.

use super::bytes::{write_base64, write_hex};
use super::numbers::{write_f64, write_i64, write_u64};
use super::shape::{EnvelopeShape, PartialShape, ResponseShape};
use crate::otlp::{AnyValue, InstrumentationScope, KeyValue, Resource, any_value};
use opentelemetry_proto::tonic::common::v1::EntityRef;

/// Appends `s` as a JSON string, escaped by `serde_json`.
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Serializing a `str` into a `Vec<u8>` cannot fail.
    let r = serde_json::to_writer(&mut *out, s);
    debug_assert!(r.is_ok());
}

/// Writes the members of one JSON object; `key` inserts the separating commas.
pub(super) struct Obj<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Obj<'o> {
    pub(super) fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    pub(super) fn end(self) {
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

    pub(super) fn string(&mut self, key: &str, v: &str) {
        if !v.is_empty() {
            write_str(self.key(key), v);
        }
    }

    /// 64-bit unsigned integer, as a decimal string.
    pub(super) fn u64(&mut self, key: &str, v: u64) {
        if v != 0 {
            let out = self.key(key);
            out.push(b'"');
            write_u64(out, v);
            out.push(b'"');
        }
    }

    /// 64-bit signed integer, as a decimal string.
    pub(super) fn i64(&mut self, key: &str, v: i64) {
        if v != 0 {
            let out = self.key(key);
            out.push(b'"');
            write_i64(out, v);
            out.push(b'"');
        }
    }

    pub(super) fn i32(&mut self, key: &str, v: i32) {
        if v != 0 {
            write_i64(self.key(key), i64::from(v));
        }
    }

    pub(super) fn u32(&mut self, key: &str, v: u32) {
        if v != 0 {
            write_u64(self.key(key), u64::from(v));
        }
    }

    pub(super) fn hex(&mut self, key: &str, v: &[u8]) {
        if !v.is_empty() {
            write_hex(self.key(key), v);
        }
    }

    pub(super) fn base64(&mut self, key: &str, v: &[u8]) {
        if !v.is_empty() {
            write_base64(self.key(key), v);
        }
    }

    pub(super) fn i32s(&mut self, key: &str, v: &[i32]) {
        self.list(key, v, |out, &x| write_i64(out, i64::from(x)));
    }

    pub(super) fn i64s(&mut self, key: &str, v: &[i64]) {
        self.list(key, v, |out, &x| {
            out.push(b'"');
            write_i64(out, x);
            out.push(b'"');
        });
    }

    pub(super) fn u64s(&mut self, key: &str, v: &[u64]) {
        self.list(key, v, |out, &x| {
            out.push(b'"');
            write_u64(out, x);
            out.push(b'"');
        });
    }

    pub(super) fn strings(&mut self, key: &str, v: &[String]) {
        self.list(key, v, |out, s| write_str(out, s));
    }

    /// A present message field (written even when empty).
    pub(super) fn msg<T>(&mut self, key: &str, v: Option<&T>, f: fn(&mut Vec<u8>, &T)) {
        if let Some(v) = v {
            f(self.key(key), v);
        }
    }

    /// A repeated field, omitted when empty.
    pub(super) fn list<T>(&mut self, key: &str, v: &[T], mut f: impl FnMut(&mut Vec<u8>, &T)) {
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

/// Encodes an `Export…ServiceResponse` document (any signal).
pub(super) fn response<R: ResponseShape>(resp: &R) -> Vec<u8> {
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
pub(super) fn envelope<E: EnvelopeShape>(
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

pub(super) fn resource(out: &mut Vec<u8>, m: &Resource) {
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

pub(super) fn scope(out: &mut Vec<u8>, m: &InstrumentationScope) {
    let mut o = Obj::new(out);
    o.string("name", &m.name);
    o.string("version", &m.version);
    o.list("attributes", &m.attributes, key_value);
    o.u32("droppedAttributesCount", m.dropped_attributes_count);
    o.end();
}

pub(super) fn key_value(out: &mut Vec<u8>, m: &KeyValue) {
    let mut o = Obj::new(out);
    o.string("key", &m.key);
    o.msg("value", m.value.as_ref(), any_value_msg);
    o.i32("keyStrindex", m.key_strindex);
    o.end();
}

/// An `AnyValue`: the set oneof member is written even when it holds a default value.
pub(super) fn any_value_msg(out: &mut Vec<u8>, m: &AnyValue) {
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
