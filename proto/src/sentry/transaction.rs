//! The parts of a Sentry transaction event that trace linking needs.
//!
//! Sentry links spans to profile chunks by `profiler_id` + `thread.id` + time range. The profiler
//! id is at `contexts.profile.profiler_id`; the root span's thread at
//! `contexts.trace.data["thread.id"]`; child spans carry their own `data["thread.id"]`.

use super::de::null_default;
use super::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A transaction event (only the fields profilink uses; others are ignored when reading).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Transaction {
    /// Event id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Transaction name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<String>,
    /// Start of the root span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Timestamp>,
    /// End of the root span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
    /// Contexts (`trace`, `profile`).
    #[serde(default, deserialize_with = "null_default")]
    pub contexts: Contexts,
    /// Child spans.
    #[serde(default, deserialize_with = "null_default")]
    pub spans: Vec<Span>,
    /// Release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// Platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// The contexts profilink reads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Contexts {
    /// The trace context (root span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    /// The profile context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileContext>,
}

/// `contexts.trace`: the transaction's root span.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TraceContext {
    /// Trace id, 32 hex characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Root span id, 16 hex characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// Parent span id, when the transaction continues a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// Operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Span data (`thread.id`, `thread.name`, `profiler_id`…).
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub data: BTreeMap<String, Value>,
}

/// `contexts.profile`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProfileContext {
    /// Continuous-profiling session id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiler_id: Option<String>,
    /// Transaction-bound (V1) profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<String>,
}

/// A child span of a transaction.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Span {
    /// Span id, 16 hex characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// Parent span id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// Trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// Start time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Timestamp>,
    /// End time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
    /// Operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Span data (`thread.id`, …).
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub data: BTreeMap<String, Value>,
}

/// Reads a thread id from span data: strings as they are, integers in decimal (Sentry compares
/// thread ids as strings).
pub fn thread_id_from_data(data: &BTreeMap<String, Value>) -> Option<String> {
    match data.get("thread.id")? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => n
            .as_u64()
            .map(|v| v.to_string())
            .or_else(|| n.as_i64().map(|v| v.to_string())),
        _ => None,
    }
}

impl Transaction {
    /// Parses a transaction payload, naming the JSON path of the first problem on failure.
    pub fn from_json(bytes: &[u8]) -> Result<Self, super::JsonError> {
        super::from_json_slice(bytes)
    }

    /// The profiler id of the continuous-profiling session, from `contexts.profile.profiler_id`
    /// or, as some SDKs also write it, `contexts.trace.data.profiler_id`.
    pub fn profiler_id(&self) -> Option<&str> {
        self.contexts
            .profile
            .as_ref()
            .and_then(|p| p.profiler_id.as_deref())
            .or_else(|| {
                self.contexts
                    .trace
                    .as_ref()
                    .and_then(|t| t.data.get("profiler_id"))
                    .and_then(Value::as_str)
            })
            .filter(|s| !s.is_empty())
    }

    /// The thread the root span ran on (`contexts.trace.data["thread.id"]`).
    pub fn root_thread_id(&self) -> Option<String> {
        self.contexts
            .trace
            .as_ref()
            .and_then(|t| thread_id_from_data(&t.data))
    }
}

impl Span {
    /// The thread this span ran on (`data["thread.id"]`).
    pub fn thread_id(&self) -> Option<String> {
        thread_id_from_data(&self.data)
    }
}
