//! Sentry wire models: profile chunks (Sample Format V2), V1 profiles, transactions and envelopes.
//!
//! Reading is liberal where real SDKs bend the specs (numbers sent as strings, `null` for absent
//! fields, RFC 3339 or float timestamps); writing is exactly what Relay accepts.

mod chunk;
mod chunk_json;
mod de;
mod envelope;
mod ids;
pub mod image_space;
mod json_f64;
mod span_item;
mod sparse_loss;
mod thread_groups;
mod timestamp;
mod transaction;
mod v1;

pub use chunk::{
    CHUNK_VERSION, ClientSdk, CompactString, DebugImage, DebugMeta, Frame, Measurement,
    MeasurementValue, ProfileChunk, ProfileData, Sample, ThreadMetadata,
    data_category_for_platform,
};
pub use envelope::{Envelope, EnvelopeError, EnvelopeItem, MAX_ENVELOPE_ITEMS};
pub use ids::{
    format_instruction_addr, hex_lower, is_instruction_addr, is_sentry_id, parse_instruction_addr,
    parse_sentry_id, sentry_id_from_bytes,
};
pub use json_f64::{json_f64_len, write_json_f64};
pub use span_item::{
    PROFILER_ID_ATTRIBUTE, SPAN_V2_CONTENT_TYPE, SpanFormat, SpanItem, THREAD_ID_ATTRIBUTE,
    THREAD_NAME_ATTRIBUTE, is_span_container, parse_span_item,
};
pub use thread_groups::{
    GROUP_ID_MAX, GROUP_ID_MIN, GroupOutcome, OTHER_THREADS_NAME, ThreadGroups, ThreadStat,
    group_id,
};
pub use timestamp::{Timestamp, nanos_to_secs, secs_to_nanos};
pub use transaction::{
    Contexts, ProfileContext, Span, TraceContext, Transaction, thread_id_from_data,
};
pub use v1::{
    SampleProfileV1, V1Measurement, V1MeasurementValue, V1ProfileData, V1Sample, V1Transaction,
};

use thiserror::Error;

/// A JSON payload that could not be read into a Sentry model, with the JSON path of the problem.
#[derive(Debug, Error)]
#[error("{path}: {message}")]
pub struct JsonError {
    /// JSON path of the offending value (e.g. `profile.samples[3].thread_id`), `.` for the root.
    pub path: String,
    /// What was wrong.
    pub message: String,
}

/// Parses JSON into `T`; on failure re-parses with path tracking to name the offending field.
///
/// The fast path costs nothing extra; the slow path only runs for bad input.
pub fn from_json_slice<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, JsonError> {
    match serde_json::from_slice::<T>(bytes) {
        Ok(v) => Ok(v),
        Err(first) => {
            let mut de = serde_json::Deserializer::from_slice(bytes);
            match serde_path_to_error::deserialize::<_, T>(&mut de) {
                Ok(_) => Err(JsonError {
                    path: ".".into(),
                    message: first.to_string(),
                }),
                Err(e) => Err(JsonError {
                    path: e.path().to_string(),
                    message: e.into_inner().to_string(),
                }),
            }
        }
    }
}
