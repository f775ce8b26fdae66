//! The deprecated, transaction-bound V1 sample profile (`profile` envelope item), read side.
//!
//! Real SDKs still send it beside its `transaction` item. Sample times are the profile's
//! `timestamp` plus `elapsed_since_start_ns`; numbers often arrive as decimal strings.

use super::chunk::{DebugMeta, Frame, ThreadMetadata};
use super::de::{f64_lenient, null_default, opt_string_or_int, string_or_int, u64_lenient};
use super::timestamp::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A V1 profile payload.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SampleProfileV1 {
    /// Format version, `"1"` (or absent in old SDKs).
    #[serde(default)]
    pub version: String,
    /// SDK platform.
    #[serde(default)]
    pub platform: String,
    /// Profile start (equals the transaction's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Timestamp>,
    /// Profile id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The transactions this profile covers.
    #[serde(default, deserialize_with = "null_default")]
    pub transactions: Vec<V1Transaction>,
    /// Older SDKs send one `transaction` object instead of the list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<V1Transaction>,
    /// Samples, stacks, frames, thread metadata.
    #[serde(default)]
    pub profile: V1ProfileData,
    /// Debug images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_meta: Option<DebugMeta>,
    /// Measurements.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub measurements: BTreeMap<String, V1Measurement>,
    /// Device context (`architecture`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<Value>,
    /// OS context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<Value>,
    /// Runtime context (`name`, `version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Value>,
    /// SDK, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_sdk: Option<super::chunk::ClientSdk>,
}

/// A V1 measurement series: like a chunk's, but timed relative to the profile's start.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct V1Measurement {
    /// Unit: `ns`/`nanosecond`, `hz`/`hertz`, `byte`, `percent`, `nj`/`nanojoule`.
    #[serde(default)]
    pub unit: String,
    /// The values.
    #[serde(default, deserialize_with = "null_default")]
    pub values: Vec<V1MeasurementValue>,
}

/// One V1 measured value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct V1MeasurementValue {
    /// Nanoseconds since the profile's `timestamp`.
    #[serde(deserialize_with = "u64_lenient")]
    pub elapsed_since_start_ns: u64,
    /// The value (numeric strings accepted).
    #[serde(deserialize_with = "f64_lenient")]
    pub value: f64,
}

/// A transaction entry of a V1 profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct V1Transaction {
    /// Transaction event id.
    #[serde(default)]
    pub id: String,
    /// Transaction name.
    #[serde(default)]
    pub name: String,
    /// Trace id.
    #[serde(default)]
    pub trace_id: String,
    /// The thread the transaction's root span ran on.
    #[serde(default, deserialize_with = "opt_string_or_int")]
    pub active_thread_id: Option<String>,
    /// Start relative to the profile's timestamp, in ns.
    #[serde(default, deserialize_with = "u64_lenient")]
    pub relative_start_ns: u64,
    /// End relative to the profile's timestamp, in ns.
    #[serde(default, deserialize_with = "u64_lenient")]
    pub relative_end_ns: u64,
}

/// The `profile` object of a V1 profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct V1ProfileData {
    /// Samples.
    #[serde(default, deserialize_with = "null_default")]
    pub samples: Vec<V1Sample>,
    /// Stacks, leaf first.
    #[serde(default, deserialize_with = "null_default")]
    pub stacks: Vec<Vec<usize>>,
    /// Frames (shared, as in [`super::ProfileData::frames`]).
    #[serde(default, deserialize_with = "null_default")]
    pub frames: Vec<Arc<Frame>>,
    /// Thread metadata keyed by thread id.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub thread_metadata: BTreeMap<String, ThreadMetadata>,
}

/// A V1 sample.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct V1Sample {
    /// Nanoseconds since the profile's `timestamp`.
    #[serde(deserialize_with = "u64_lenient")]
    pub elapsed_since_start_ns: u64,
    /// Thread id (string or integer on the wire).
    #[serde(deserialize_with = "string_or_int")]
    pub thread_id: String,
    /// Index into stacks.
    pub stack_id: usize,
}

impl SampleProfileV1 {
    /// Parses a V1 profile payload, naming the JSON path of the first problem on failure.
    pub fn from_json(bytes: &[u8]) -> Result<Self, super::JsonError> {
        super::from_json_slice(bytes)
    }

    /// The transactions of this profile: the `transactions` list, else the single `transaction`.
    pub fn all_transactions(&self) -> Vec<&V1Transaction> {
        if self.transactions.is_empty() {
            self.transaction.iter().collect()
        } else {
            self.transactions.iter().collect()
        }
    }
}
