//! Sentry profile-level fields kept as profile attributes, and back.
//!
//! * `thread_metadata` → [`SENTRY_THREAD_METADATA`]: the whole map as a JSON object string
//!   (names, priorities, and threads that have no samples). Not written when the map is empty.
//! * `debug_meta` → [`SENTRY_DEBUG_META`]: the whole object as a JSON string, images in order
//!   with all their fields. Not written when `None`.
//! * `measurements` → [`SENTRY_MEASUREMENTS`]: a kvlist `{name: {unit, timestamps, values}}`
//!   with doubles, so every value comes back bit for bit. Not written when empty. V1
//!   measurements, timed relative to the profile start, use `elapsed_since_start_ns` (ints)
//!   instead of `timestamps`.

use super::attributes::{
    SENTRY_DEBUG_META, SENTRY_MEASUREMENTS, SENTRY_THREAD_METADATA, measurement,
};
use super::builder::{
    DictionaryBuilder, array_value, double_value, int_value, kvlist_value, str_value,
};
use crate::dictionary::AttrValue;
use crate::error::{Malformed, TranslateError};
use profilink_proto::otlp::AnyValue;
use profilink_proto::sentry::V1Measurement;
use profilink_proto::sentry::{DebugMeta, Measurement, MeasurementValue, ThreadMetadata};
use std::collections::BTreeMap;

/// Appends the attributes for `thread_metadata` and `debug_meta` to `attrs`.
pub(crate) fn encode(
    b: &mut DictionaryBuilder,
    attrs: &mut Vec<i32>,
    thread_metadata: &BTreeMap<String, ThreadMetadata>,
    debug_meta: Option<&DebugMeta>,
) {
    if !thread_metadata.is_empty() {
        let json = serde_json::to_string(thread_metadata).unwrap_or_default();
        attrs.push(b.attribute_str(SENTRY_THREAD_METADATA, &json));
    }
    if let Some(dm) = debug_meta {
        let json = serde_json::to_string(dm).unwrap_or_default();
        attrs.push(b.attribute_str(SENTRY_DEBUG_META, &json));
    }
}

fn push_measurements(
    b: &mut DictionaryBuilder,
    attrs: &mut Vec<i32>,
    entries: Vec<(String, AnyValue)>,
) {
    if !entries.is_empty() {
        attrs.push(b.attribute(SENTRY_MEASUREMENTS, kvlist_value(entries)));
    }
}

/// Appends the attribute for chunk `measurements` to `attrs` (when not empty).
pub(crate) fn encode_measurements(
    b: &mut DictionaryBuilder,
    attrs: &mut Vec<i32>,
    measurements: &BTreeMap<String, Measurement>,
) {
    let entries = measurements
        .iter()
        .map(|(name, m)| {
            let ts = m.values.iter().map(|v| double_value(v.timestamp)).collect();
            let vs = m.values.iter().map(|v| double_value(v.value)).collect();
            (
                name.clone(),
                kvlist_value(vec![
                    (measurement::UNIT.to_owned(), str_value(&m.unit)),
                    (measurement::TIMESTAMPS.to_owned(), array_value(ts)),
                    (measurement::VALUES.to_owned(), array_value(vs)),
                ]),
            )
        })
        .collect();
    push_measurements(b, attrs, entries);
}

/// Appends the attribute for V1 `measurements` to `attrs` (when not empty).
pub(crate) fn encode_v1_measurements(
    b: &mut DictionaryBuilder,
    attrs: &mut Vec<i32>,
    measurements: &BTreeMap<String, V1Measurement>,
) {
    let entries = measurements
        .iter()
        .map(|(name, m)| {
            let el = m
                .values
                .iter()
                .map(|v| int_value(i64::try_from(v.elapsed_since_start_ns).unwrap_or(i64::MAX)))
                .collect();
            let vs = m.values.iter().map(|v| double_value(v.value)).collect();
            (
                name.clone(),
                kvlist_value(vec![
                    (measurement::UNIT.to_owned(), str_value(&m.unit)),
                    (
                        measurement::ELAPSED_SINCE_START_NS.to_owned(),
                        array_value(el),
                    ),
                    (measurement::VALUES.to_owned(), array_value(vs)),
                ]),
            )
        })
        .collect();
    push_measurements(b, attrs, entries);
}

/// Reads `thread_metadata` back from its attribute value.
pub(crate) fn decode_thread_metadata(
    v: &AttrValue<'_>,
) -> Result<BTreeMap<String, ThreadMetadata>, TranslateError> {
    let s = v.as_str().ok_or(Malformed::NotAString {
        key: SENTRY_THREAD_METADATA,
    })?;
    serde_json::from_str(s).map_err(|e| json(SENTRY_THREAD_METADATA, e))
}

/// Reads `debug_meta` back from its attribute value.
pub(crate) fn decode_debug_meta(v: &AttrValue<'_>) -> Result<DebugMeta, TranslateError> {
    let s = v.as_str().ok_or(Malformed::NotAString {
        key: SENTRY_DEBUG_META,
    })?;
    serde_json::from_str(s).map_err(|e| json(SENTRY_DEBUG_META, e))
}

/// The error of a `key` attribute that does not parse as JSON of its type.
fn json(key: &'static str, e: serde_json::Error) -> TranslateError {
    Malformed::Json {
        key,
        source: e.into(),
    }
    .into()
}

fn doubles(v: Option<&AttrValue<'_>>, field: &'static str) -> Result<Vec<f64>, TranslateError> {
    match v {
        None => Ok(Vec::new()),
        Some(AttrValue::Array(items)) => items
            .iter()
            .map(|x| match x {
                AttrValue::Double(d) => Ok(*d),
                AttrValue::Int(i) => Ok(*i as f64),
                _ => Err(Malformed::MeasurementNotANumber {
                    key: SENTRY_MEASUREMENTS,
                    field,
                }
                .into()),
            })
            .collect(),
        Some(_) => Err(Malformed::MeasurementNotAnArray {
            key: SENTRY_MEASUREMENTS,
            field,
        }
        .into()),
    }
}

/// Reads `measurements` back from their attribute value.
pub(crate) fn decode_measurements(
    v: &AttrValue<'_>,
) -> Result<BTreeMap<String, Measurement>, TranslateError> {
    let AttrValue::KvList(entries) = v else {
        return Err(Malformed::NotAKvList {
            key: SENTRY_MEASUREMENTS,
        }
        .into());
    };
    let mut out = BTreeMap::new();
    for (name, m) in entries {
        let AttrValue::KvList(fields) = m else {
            return Err(Malformed::MeasurementNotAKvList {
                key: SENTRY_MEASUREMENTS,
                name: name.to_string(),
            }
            .into());
        };
        let get = |k: &str| fields.iter().find(|(fk, _)| *fk == k).map(|(_, v)| v);
        let unit = get(measurement::UNIT)
            .and_then(AttrValue::as_str)
            .unwrap_or("")
            .to_owned();
        let ts = doubles(get(measurement::TIMESTAMPS), measurement::TIMESTAMPS)?;
        let vs = doubles(get(measurement::VALUES), measurement::VALUES)?;
        if ts.len() != vs.len() {
            return Err(Malformed::MeasurementLengths {
                key: SENTRY_MEASUREMENTS,
                name: name.to_string(),
                timestamps: ts.len(),
                values: vs.len(),
            }
            .into());
        }
        let values = ts
            .into_iter()
            .zip(vs)
            .map(|(timestamp, value)| MeasurementValue { timestamp, value })
            .collect();
        out.insert((*name).to_owned(), Measurement { unit, values });
    }
    Ok(out)
}
