//! The OTLP/JSON readers every signal shares, driven by the pull [`Parser`]: fields and
//! repeated fields, scalars (integers, doubles, strings, `bytes`, ids), the export response and
//! its partial success, the resource and scope envelopes, and the common messages (`Resource`,
//! `InstrumentationScope`, `KeyValue`, `AnyValue`). The signals' own messages are read in
//! [`super::profiles`] and [`super::traces`] with these.
//!
//! Each message function accepts the lowerCamelCase and the snake_case name of every field,
//! skips unknown keys, treats `null` as an absent field and lets the last duplicate key win.

use super::bytes::{decode_base64, decode_id};
use super::numbers::{IntType, parse_double, parse_int};
use super::parser::{MAX_ANY_VALUE_DEPTH, Parser, Result, Scalar};
use super::shape::{EnvelopeShape, PartialShape, ResponseShape};
use crate::otlp::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, Resource, any_value,
};
use opentelemetry_proto::tonic::common::v1::EntityRef;

/// Standard length of trace and profile ids, in bytes.
const TRACE_ID_LEN: usize = 16;

/// Standard length of span ids, in bytes.
const SPAN_ID_LEN: usize = 8;

/// Reads field `key` (pushed on the path) with `f`; `None` when the value is `null`.
#[inline]
pub(super) fn field<'a, T>(
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
        if let Some(v) = $crate::otlp_json::decode::field($p, $key, $f)? {
            $target = v;
        }
    };
}
pub(super) use set;

/// Reads a repeated field: a JSON array whose elements are read with `f`.
pub(super) fn repeated<'a, T>(
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

pub(super) fn i32v(p: &mut Parser<'_>) -> Result<i32> {
    let v = int(p, IntType::I32)?;
    i32::try_from(v).map_err(|_| p.error("out of range for int32"))
}

pub(super) fn u32v(p: &mut Parser<'_>) -> Result<u32> {
    let v = int(p, IntType::U32)?;
    u32::try_from(v).map_err(|_| p.error("out of range for uint32"))
}

pub(super) fn i64v(p: &mut Parser<'_>) -> Result<i64> {
    let v = int(p, IntType::I64)?;
    i64::try_from(v).map_err(|_| p.error("out of range for int64"))
}

pub(super) fn u64v(p: &mut Parser<'_>) -> Result<u64> {
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

pub(super) fn string(p: &mut Parser<'_>) -> Result<String> {
    Ok(p.string()?.into_owned())
}

pub(super) fn base64v(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_base64(&s).map_err(|m| p.error(m))
}

pub(super) fn trace_id(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_id(&s, TRACE_ID_LEN).map_err(|m| p.error(m))
}

pub(super) fn span_id(p: &mut Parser<'_>) -> Result<Vec<u8>> {
    let s = p.string()?;
    decode_id(&s, SPAN_ID_LEN).map_err(|m| p.error(m))
}

/// Reads the `attributes` / `droppedAttributesCount` pair many messages share when `key` is
/// one of them; false for other keys (nothing read).
pub(super) fn attributes_field(
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

/// Decodes a whole `Export…ServiceResponse` document (any signal).
pub(super) fn response<R: ResponseShape>(bytes: &[u8]) -> Result<R> {
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
pub(super) fn envelope<E: EnvelopeShape>(
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

pub(super) fn resource(p: &mut Parser<'_>) -> Result<Resource> {
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

pub(super) fn scope(p: &mut Parser<'_>) -> Result<InstrumentationScope> {
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

pub(super) fn any_value(p: &mut Parser<'_>) -> Result<AnyValue> {
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
