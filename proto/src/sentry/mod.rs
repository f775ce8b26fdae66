//! Sentry wire models: profile chunks (Sample Format V2), V1 profiles, transactions and envelopes.
//!
//! Reading is liberal where real SDKs bend the specs (numbers sent as strings, `null` for absent
//! fields, RFC 3339 or float timestamps); writing is exactly what Relay accepts.

pub mod chunk;
mod de;
pub mod envelope;
pub mod ids;
pub mod image_space;
pub mod span_item;
pub mod thread_groups;
pub mod timestamp;
pub mod transaction;
pub mod v1;

pub use chunk::{
    ClientSdk, CompactString, DebugImage, DebugMeta, Frame, Measurement, MeasurementValue,
    ProfileChunk, ProfileData, Sample, ThreadMetadata,
};
pub use envelope::{Envelope, EnvelopeError, EnvelopeItem};
pub use span_item::{SpanFormat, SpanItem, is_span_container, parse_span_item};
pub use thread_groups::{GroupOutcome, ThreadGroups, ThreadStat};
pub use timestamp::Timestamp;
pub use transaction::{ProfileContext, Span, TraceContext, Transaction};
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
