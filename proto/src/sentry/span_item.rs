//! Sentry `span` envelope items: what SDKs that stream spans send instead of transactions
//! (the formats and the reading rules are on [`SpanItem`]).

use super::JsonError;
use super::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The `content_type` of a V2 span container item.
pub const SPAN_V2_CONTENT_TYPE: &str = "application/vnd.sentry.items.span.v2+json";

/// The attribute (V2) or `data` key (legacy) of the continuous-profiling session id.
pub const PROFILER_ID_ATTRIBUTE: &str = "sentry.profiler_id";
/// The attribute / `data` key of the thread a span ran on.
pub const THREAD_ID_ATTRIBUTE: &str = "thread.id";
/// The attribute / `data` key of the name of that thread.
pub const THREAD_NAME_ATTRIBUTE: &str = "thread.name";

/// Which payload a span came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanFormat {
    /// A span of a V2 span container (`application/vnd.sentry.items.span.v2+json`).
    V2,
    /// A legacy single-span item (transaction child span shape).
    Legacy,
}

/// One span of a `span` envelope item: what SDKs that stream spans send instead of
/// transactions.
///
/// Two payloads share the item type `span` (Relay `ItemType::Span`), told apart by the item
/// header `content_type`:
///
/// * **V2 span container** (`application/vnd.sentry.items.span.v2+json`, sentry-python's and
///   sentry-javascript's span streaming, sentry-php): `{"items": [span, …]}` with an
///   `item_count` header, each span
///   `{trace_id, span_id, parent_span_id?, name, status, is_segment, start_timestamp,
///   end_timestamp, attributes: {key: {"type": "string"|"integer"|"double"|"boolean"|"array",
///   "value": …}}, links?}`. The profiling link is in the attributes `sentry.profiler_id`,
///   `thread.id` (sentry-python writes it as a string, the conventions as an integer) and
///   `thread.name`.
/// * **Legacy span** (any other content type, usually `application/json` or none; e.g. the
///   JavaScript SDK's standalone spans): one span object shaped like a transaction's child
///   span, `{trace_id, span_id, parent_span_id?, op?, description?, status?, start_timestamp,
///   timestamp, data: {…}, …}`, the profiling link in `data` (`profiler_id`, `thread.id`,
///   `thread.name`).
///
/// # Reading (liberal, like Relay's `Annotated` parsing)
///
/// * Timestamps are float Unix seconds, integers, numeric strings or RFC 3339 strings. The end
///   is `end_timestamp` (V2) or `timestamp` (legacy), each falling back to the other.
/// * Ids are hex in any case, or UUIDs with dashes (trace ids), and are stored as lowercase
///   hex without dashes.
/// * V2 attributes are `{"type": …, "value": …}` objects (the `type` is not checked) or bare
///   values; legacy `data` values are taken as they are. An attribute whose `value` is missing
///   or `null` is left out.
/// * Optional fields of the wrong type (`"name": 5`) are ignored, as Relay drops them with an
///   error annotation; an invalid `parent_span_id` is dropped the same way.
/// * Unknown fields are ignored; `item_count` is not checked against the number of spans.
///
/// A span is **invalid** (skipped and counted by the caller, as Relay drops it with an outcome)
/// when it is not an object, lacks a valid `trace_id` (16 bytes) or `span_id` (8 bytes), lacks
/// a start or end timestamp, or ends before it starts. A V2 payload that is not JSON or has no
/// `items` array, and a legacy payload that is not a JSON object, make the whole item invalid.
/// Relay answers such envelopes with 200 and drops the spans later; never fail the envelope
/// for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanItem {
    /// Which payload format it came from.
    pub format: SpanFormat,
    /// Trace id: 32 lowercase hex characters.
    pub trace_id: String,
    /// Span id: 16 lowercase hex characters.
    pub span_id: String,
    /// Parent span id (16 lowercase hex characters), absent for a root span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// V2 `name`; legacy `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Legacy `op`; V2 attribute `sentry.op`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// `status` (`"ok"`, `"error"`, or a legacy status such as `"internal_error"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `is_segment`: whether the span is the root of its segment (a transaction's root span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_segment: Option<bool>,
    /// When the span started.
    pub start_timestamp: Timestamp,
    /// When the span ended (not before `start_timestamp`).
    pub end_timestamp: Timestamp,
    /// V2 `attributes` with each value unwrapped from its `{"type", "value"}` object, or the
    /// legacy `data` (plus the legacy top-level `profile_id` as `sentry.profile_id` when `data`
    /// lacks it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Value>,
}

impl SpanItem {
    /// The continuous-profiling session id: attribute `sentry.profiler_id`, or `profiler_id`
    /// (legacy `data`); a non-empty string, as sent.
    pub fn profiler_id(&self) -> Option<&str> {
        [PROFILER_ID_ATTRIBUTE, "profiler_id"]
            .iter()
            .filter_map(|k| self.attributes.get(*k))
            .filter_map(Value::as_str)
            .map(str::trim)
            .find(|s| !s.is_empty())
    }

    /// The thread the span ran on, as the decimal string Sentry compares with a chunk sample's
    /// `thread_id`: attribute `thread.id` (or the deprecated `sentry.thread.id`), a string as
    /// sent (trimmed) or a non-negative integer (also a float with no fraction) in decimal.
    pub fn thread_id(&self) -> Option<String> {
        [THREAD_ID_ATTRIBUTE, "sentry.thread.id"]
            .iter()
            .filter_map(|k| self.attributes.get(*k))
            .find_map(thread_id_value)
    }

    /// The name of the thread the span ran on (attribute `thread.name`).
    pub fn thread_name(&self) -> Option<&str> {
        self.attributes
            .get(THREAD_NAME_ATTRIBUTE)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// Start in Unix nanoseconds (see [`Timestamp::as_unix_nanos`]).
    pub fn start_unix_nanos(&self) -> Option<u64> {
        self.start_timestamp.as_unix_nanos()
    }

    /// End in Unix nanoseconds (see [`Timestamp::as_unix_nanos`]).
    pub fn end_unix_nanos(&self) -> Option<u64> {
        self.end_timestamp.as_unix_nanos()
    }

    /// Reads one V2 span object (an element of a container's `items`).
    pub fn from_v2_value(value: &Value) -> Result<Self, JsonError> {
        let obj = as_object(value)?;
        let mut attributes = BTreeMap::new();
        if let Some(Value::Object(attrs)) = obj.get("attributes") {
            for (key, attr) in attrs {
                let value = match attr {
                    Value::Object(wrapped) => wrapped.get("value").cloned(),
                    Value::Null => None,
                    bare => Some(bare.clone()),
                };
                if let Some(value) = value.filter(|v| !v.is_null()) {
                    attributes.insert(key.clone(), value);
                }
            }
        }
        let op = attributes
            .get("sentry.op")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (start, end) = times(obj, "end_timestamp", "timestamp")?;
        Ok(SpanItem {
            format: SpanFormat::V2,
            trace_id: required_id(obj, "trace_id", 16)?,
            span_id: required_id(obj, "span_id", 8)?,
            parent_span_id: optional_id(obj, "parent_span_id", 8),
            name: opt_string(obj, "name"),
            op,
            status: opt_string(obj, "status"),
            is_segment: obj.get("is_segment").and_then(Value::as_bool),
            start_timestamp: start,
            end_timestamp: end,
            attributes,
        })
    }

    /// Reads one legacy span object.
    pub fn from_legacy_value(value: &Value) -> Result<Self, JsonError> {
        let obj = as_object(value)?;
        let mut attributes: BTreeMap<String, Value> = match obj.get("data") {
            Some(Value::Object(data)) => data
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            _ => BTreeMap::new(),
        };
        if let Some(profile_id) = opt_string(obj, "profile_id") {
            attributes
                .entry("sentry.profile_id".to_owned())
                .or_insert(Value::String(profile_id));
        }
        let (start, end) = times(obj, "timestamp", "end_timestamp")?;
        Ok(SpanItem {
            format: SpanFormat::Legacy,
            trace_id: required_id(obj, "trace_id", 16)?,
            span_id: required_id(obj, "span_id", 8)?,
            parent_span_id: optional_id(obj, "parent_span_id", 8),
            name: opt_string(obj, "description"),
            op: opt_string(obj, "op"),
            status: opt_string(obj, "status"),
            is_segment: obj.get("is_segment").and_then(Value::as_bool),
            start_timestamp: start,
            end_timestamp: end,
            attributes,
        })
    }
}

/// True when an item `content_type` names a V2 span container (media type compared without
/// case and parameters).
pub fn is_span_container(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case(SPAN_V2_CONTENT_TYPE)
    })
}

/// Reads the payload of one `span` envelope item with the item header `content_type`.
///
/// `Err` means the whole item is unreadable (not JSON, not an object, no `items` array); `Ok`
/// holds one result per span, in order: each span is valid or says why not (with its path,
/// e.g. `items[2].span_id`).
pub fn parse_span_item(
    payload: &[u8],
    content_type: Option<&str>,
) -> Result<Vec<Result<SpanItem, JsonError>>, JsonError> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| JsonError {
        path: ".".into(),
        message: format!("invalid JSON: {e}"),
    })?;
    if !is_span_container(content_type) {
        return Ok(vec![SpanItem::from_legacy_value(&value)]);
    }
    let Some(items) = value.get("items") else {
        return Err(JsonError {
            path: "items".into(),
            message: "missing field `items`".into(),
        });
    };
    let Value::Array(items) = items else {
        return Err(JsonError {
            path: "items".into(),
            message: format!("expected an array, found {}", kind(items)),
        });
    };
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            SpanItem::from_v2_value(item).map_err(|e| JsonError {
                path: if e.path == "." {
                    format!("items[{i}]")
                } else {
                    format!("items[{i}].{}", e.path)
                },
                message: e.message,
            })
        })
        .collect())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid(path: &str, message: impl Into<String>) -> JsonError {
    JsonError {
        path: path.into(),
        message: message.into(),
    }
}

fn as_object(value: &Value) -> Result<&Map<String, Value>, JsonError> {
    value.as_object().ok_or_else(|| {
        invalid(
            ".",
            format!("expected a span object, found {}", kind(value)),
        )
    })
}

fn opt_string(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// Lowercase hex of an id of `len` bytes: hex in any case, or (for 16-byte ids) a hyphenated
/// UUID.
fn normalize_id(s: &str, len: usize) -> Option<String> {
    let s = s.trim();
    let compact: String = if len == 16 && s.len() == 36 {
        let b = s.as_bytes();
        if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        s.chars().filter(|&c| c != '-').collect()
    } else {
        s.to_owned()
    };
    (compact.len() == len * 2 && compact.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| compact.to_ascii_lowercase())
}

fn required_id(obj: &Map<String, Value>, key: &str, len: usize) -> Result<String, JsonError> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(invalid(key, format!("missing field `{key}`"))),
        Some(Value::String(s)) => normalize_id(s, len)
            .ok_or_else(|| invalid(key, format!("{s:?} is not an id of {} hex digits", len * 2))),
        Some(other) => Err(invalid(
            key,
            format!("expected a hex string, found {}", kind(other)),
        )),
    }
}

fn optional_id(obj: &Map<String, Value>, key: &str, len: usize) -> Option<String> {
    obj.get(key)
        .and_then(Value::as_str)
        .and_then(|s| normalize_id(s, len))
}

fn timestamp(obj: &Map<String, Value>, key: &str) -> Option<Timestamp> {
    let ts = match obj.get(key)? {
        Value::Number(n) => Timestamp(n.as_f64()?),
        Value::String(s) => {
            Timestamp::parse_rfc3339(s).or_else(|| s.trim().parse().ok().map(Timestamp))?
        }
        _ => return None,
    };
    ts.0.is_finite().then_some(ts)
}

/// Start and end; `end` is read from `end_key`, falling back to `fallback_end_key`.
fn times(
    obj: &Map<String, Value>,
    end_key: &str,
    fallback_end_key: &str,
) -> Result<(Timestamp, Timestamp), JsonError> {
    let start = timestamp(obj, "start_timestamp").ok_or_else(|| {
        invalid(
            "start_timestamp",
            "missing or invalid start timestamp (Unix seconds or RFC 3339)",
        )
    })?;
    let end = timestamp(obj, end_key)
        .or_else(|| timestamp(obj, fallback_end_key))
        .ok_or_else(|| {
            invalid(
                end_key,
                "missing or invalid end timestamp (Unix seconds or RFC 3339)",
            )
        })?;
    if end.0 < start.0 {
        return Err(invalid(
            end_key,
            format!("the span ends ({}) before it starts ({})", end.0, start.0),
        ));
    }
    Ok((start, end))
}

fn thread_id_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => {
            let s = s.trim();
            (!s.is_empty()).then(|| s.to_owned())
        }
        Value::Number(n) => n
            .as_i64()
            .map(|v| v.to_string())
            .or_else(|| n.as_u64().map(|v| v.to_string()))
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
                    .map(|f| (f as u64).to_string())
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A V2 container as sentry-python's span streaming writes it.
    fn python_container() -> Vec<u8> {
        json!({"items": [
            {
                "trace_id": "6cf173d587eb48568a9b2e12dcfbea52",
                "span_id": "438f40bd3b4a41ee",
                "name": "GET /users",
                "status": "ok",
                "is_segment": true,
                "start_timestamp": 1795317063.000371,
                "end_timestamp": 1795317063.25,
                "attributes": {
                    "sentry.origin": {"type": "string", "value": "manual"},
                    "sentry.op": {"type": "string", "value": "http.server"},
                    "sentry.profiler_id": {"type": "string", "value": "7ffb3319b3ff432ebf7a635f28b29a80"},
                    "thread.id": {"type": "string", "value": "140234"},
                    "thread.name": {"type": "string", "value": "MainThread"},
                    "process.command_args": {"type": "array", "value": ["app.py"]},
                    "http.response.status_code": {"type": "integer", "value": 200},
                    "dropped": {"type": "string", "value": null}
                }
            },
            {
                "trace_id": "6CF173D5-87EB-4856-8A9B-2E12DCFBEA52",
                "parent_span_id": "438F40BD3B4A41EE",
                "span_id": "f1196292f76e45c0",
                "name": 5,
                "start_timestamp": "2026-11-22T03:11:03.1Z",
                "end_timestamp": "2026-11-22T03:11:03.2Z",
                "attributes": {"thread.id": {"type": "integer", "value": 140235}, "bare": 1.5}
            },
            {"trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "short",
             "start_timestamp": 1.0, "end_timestamp": 2.0},
            {"trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "438f40bd3b4a41ef",
             "start_timestamp": 3.0, "end_timestamp": 2.0},
            [],
            {"span_id": "438f40bd3b4a41ef", "start_timestamp": 1.0, "end_timestamp": 2.0}
        ]})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn v2_container_spans_and_their_links() {
        let spans = parse_span_item(&python_container(), Some(SPAN_V2_CONTENT_TYPE)).unwrap();
        assert_eq!(spans.len(), 6);
        let first = spans[0].as_ref().unwrap();
        assert_eq!(first.format, SpanFormat::V2);
        assert_eq!(first.trace_id, "6cf173d587eb48568a9b2e12dcfbea52");
        assert_eq!(first.span_id, "438f40bd3b4a41ee");
        assert_eq!(first.parent_span_id, None);
        assert_eq!(first.name.as_deref(), Some("GET /users"));
        assert_eq!(first.op.as_deref(), Some("http.server"));
        assert_eq!(first.status.as_deref(), Some("ok"));
        assert_eq!(first.is_segment, Some(true));
        assert_eq!(
            first.profiler_id(),
            Some("7ffb3319b3ff432ebf7a635f28b29a80")
        );
        assert_eq!(first.thread_id().as_deref(), Some("140234"));
        assert_eq!(first.thread_name(), Some("MainThread"));
        assert_eq!(first.start_unix_nanos(), Some(1_795_317_063_000_371_000));
        assert_eq!(first.end_unix_nanos(), Some(1_795_317_063_250_000_000));
        assert_eq!(first.attributes["process.command_args"], json!(["app.py"]));
        assert_eq!(first.attributes["http.response.status_code"], json!(200));
        assert!(!first.attributes.contains_key("dropped"));

        let second = spans[1].as_ref().unwrap();
        assert_eq!(second.trace_id, "6cf173d587eb48568a9b2e12dcfbea52");
        assert_eq!(second.parent_span_id.as_deref(), Some("438f40bd3b4a41ee"));
        assert_eq!(second.name, None);
        assert_eq!(second.thread_id().as_deref(), Some("140235"));
        assert_eq!(second.profiler_id(), None);
        assert_eq!(second.attributes["bare"], json!(1.5));
        assert_eq!(second.start_unix_nanos(), Some(1_795_317_063_100_000_000));

        let errors: Vec<(String, String)> = spans[2..]
            .iter()
            .map(|r| {
                let e = r.as_ref().unwrap_err();
                (e.path.clone(), e.message.clone())
            })
            .collect();
        assert_eq!(errors[0].0, "items[2].span_id");
        assert!(errors[0].1.contains("16 hex digits"), "{errors:?}");
        assert_eq!(errors[1].0, "items[3].end_timestamp");
        assert!(errors[1].1.contains("before it starts"), "{errors:?}");
        assert_eq!(errors[2].0, "items[4]");
        assert!(errors[2].1.contains("found an array"), "{errors:?}");
        assert_eq!(errors[3].0, "items[5].trace_id");
        assert!(errors[3].1.contains("missing"), "{errors:?}");
    }

    #[test]
    fn legacy_span_reads_data() {
        let payload = json!({
            "trace_id": "4c79f60c11214eb38604f4ae0781bfb2",
            "parent_span_id": "not-an-id",
            "span_id": "FA90FDEAD5F74052",
            "op": "db",
            "description": "SELECT 1",
            "status": "internal_error",
            "start_timestamp": 1724777211.5,
            "timestamp": 1724777211.75,
            "profile_id": "4c79f60c11214eb38604f4ae0781bfb0",
            "data": {"profiler_id": "aa".repeat(16), "thread.id": 77, "thread.name": "worker", "n": null}
        })
        .to_string();
        for content_type in [None, Some("application/json")] {
            let spans = parse_span_item(payload.as_bytes(), content_type).unwrap();
            assert_eq!(spans.len(), 1);
            let span = spans[0].as_ref().unwrap();
            assert_eq!(span.format, SpanFormat::Legacy);
            assert_eq!(span.span_id, "fa90fdead5f74052");
            // An invalid parent id is dropped, as Relay drops it.
            assert_eq!(span.parent_span_id, None);
            assert_eq!(span.name.as_deref(), Some("SELECT 1"));
            assert_eq!(span.op.as_deref(), Some("db"));
            assert_eq!(span.status.as_deref(), Some("internal_error"));
            assert_eq!(span.profiler_id(), Some("aa".repeat(16).as_str()));
            assert_eq!(span.thread_id().as_deref(), Some("77"));
            assert_eq!(span.thread_name(), Some("worker"));
            assert_eq!(span.end_unix_nanos(), Some(1_724_777_211_750_000_000));
            assert_eq!(
                span.attributes["sentry.profile_id"],
                json!("4c79f60c11214eb38604f4ae0781bfb0")
            );
            assert!(!span.attributes.contains_key("n"));
        }
        // The end may also be called `end_timestamp`.
        let alt = br#"{"trace_id":"4c79f60c11214eb38604f4ae0781bfb2","span_id":"fa90fdead5f74052",
                       "start_timestamp":"1.5","end_timestamp":2}"#;
        let span = parse_span_item(alt, None).unwrap().remove(0).unwrap();
        assert_eq!(span.end_unix_nanos(), Some(2_000_000_000));
    }

    #[test]
    fn unreadable_items() {
        let ct = Some("Application/Vnd.Sentry.Items.Span.V2+JSON; charset=utf-8");
        assert!(is_span_container(ct));
        assert!(!is_span_container(Some("application/json")));
        assert!(!is_span_container(None));
        assert_eq!(parse_span_item(b"{\"items\":[]}", ct).unwrap().len(), 0);
        let e = parse_span_item(b"{\"items\":{}}", ct).unwrap_err();
        assert_eq!(e.path, "items");
        assert_eq!(parse_span_item(b"{}", ct).unwrap_err().path, "items");
        assert!(parse_span_item(b"not json", ct).is_err());
        assert!(parse_span_item(b"not json", None).is_err());
        // A legacy payload that is JSON but not an object is one invalid span.
        let spans = parse_span_item(b"[1]", None).unwrap();
        assert!(spans[0].is_err());
    }

    #[test]
    fn thread_ids_stringify_like_chunk_thread_ids() {
        for (v, want) in [
            (json!("12345"), Some("12345")),
            (json!(" 7 "), Some("7")),
            (json!(12345), Some("12345")),
            (json!(u64::MAX), Some("18446744073709551615")),
            (json!(-3), Some("-3")),
            (json!(42.0), Some("42")),
            (json!(42.5), None),
            (json!(""), None),
            (json!(true), None),
        ] {
            assert_eq!(thread_id_value(&v).as_deref(), want, "{v}");
        }
        let mut span = SpanItem::from_v2_value(&json!({
            "trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "438f40bd3b4a41ee",
            "start_timestamp": 1, "end_timestamp": 1,
            "attributes": {"sentry.thread.id": {"value": 9}}
        }))
        .unwrap();
        assert_eq!(span.thread_id().as_deref(), Some("9"));
        span.attributes.insert("thread.id".into(), json!("10"));
        assert_eq!(span.thread_id().as_deref(), Some("10"));
        // Serde round trip for queues.
        let text = serde_json::to_string(&span).unwrap();
        assert_eq!(serde_json::from_str::<SpanItem>(&text).unwrap(), span);
    }
}
