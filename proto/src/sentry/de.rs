//! Liberal deserializers for fields real SDKs send in more than one shape.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;

/// `null` reads as the type's default.
pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

struct U64Visitor;

impl Visitor<'_> for U64Visitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a non-negative integer or a decimal string")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("negative value {v}")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 1.8e19 {
            Ok(v as u64)
        } else {
            Err(E::custom(format!("not a non-negative integer: {v}")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        v.trim()
            .parse::<u64>()
            .map_err(|_| E::custom(format!("not a decimal integer: {v:?}")))
    }
}

/// A `u64` sent as a JSON number or a decimal string (V1 `elapsed_since_start_ns`).
pub fn u64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(U64Visitor)
}

/// An optional `u64` sent as a number, a decimal string or `null`.
pub fn opt_u64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "u64_lenient")] u64);
    Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
}

struct F64Visitor;

impl Visitor<'_> for F64Visitor {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a numeric string")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        v.trim()
            .parse::<f64>()
            .map_err(|_| E::custom(format!("not a number: {v:?}")))
    }
}

/// An `f64` sent as a JSON number or a numeric string (measurement values).
pub fn f64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(F64Visitor)
}

struct StringOrIntVisitor;

impl Visitor<'_> for StringOrIntVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or an integer")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// A string id that some SDKs send as an integer (V1 `thread_id`, `active_thread_id`).
pub fn string_or_int<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    d.deserialize_any(StringOrIntVisitor)
}

/// An optional string id that may arrive as an integer or `null`.
pub fn opt_string_or_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    struct W(#[serde(deserialize_with = "string_or_int")] String);
    Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
}
