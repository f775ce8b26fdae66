//! Translation errors: why (part of) an input could not be translated, typed by what went
//! wrong ([`TranslateError`] and the details of its kinds: [`TimestampError`], [`Limit`],
//! [`Malformed`], [`JsonError`]), and the `reason` label each kind is counted under
//! ([`TranslateError::reason`]).

use std::sync::Arc;
use thiserror::Error;

/// Why (part of) an input could not be translated. Messages name the table, field and index.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum TranslateError {
    /// A dictionary index points outside its table.
    #[error("{table}[{index}] is out of range (table has {len} entries)")]
    IndexOutOfRange {
        /// The table (`string_table`, `location_table`, …).
        table: &'static str,
        /// The index as sent.
        index: i64,
        /// The table's length.
        len: usize,
    },
    /// A Sentry stack or frame index points outside its list.
    #[error("{what} {index} is out of range ({len} entries)")]
    SentryIndexOutOfRange {
        /// `stack_id` or `frame index`.
        what: &'static str,
        /// The index.
        index: usize,
        /// List length.
        len: usize,
    },
    /// A timestamp is missing, not finite or not representable as Unix nanoseconds.
    #[error("invalid timestamp {0}")]
    InvalidTimestamp(TimestampError),
    /// The input exceeds a bound (value nesting, claimed observations).
    #[error("limit exceeded: {0}")]
    LimitExceeded(Limit),
    /// Any other malformed input.
    #[error(transparent)]
    Invalid(Malformed),
}

impl TranslateError {
    /// The `reason` labels of translation errors, one per kind, in the order the service
    /// counts them (`profilink_translation_errors_total{reason=…}`).
    pub const REASONS: [&'static str; 5] = [
        "index_out_of_range",
        "sentry_index_out_of_range",
        "invalid_timestamp",
        "limit_exceeded",
        "invalid",
    ];

    /// The `reason` label this error is counted under (one of [`TranslateError::REASONS`]).
    pub fn reason(&self) -> &'static str {
        Self::REASONS[match self {
            TranslateError::IndexOutOfRange { .. } => 0,
            TranslateError::SentryIndexOutOfRange { .. } => 1,
            TranslateError::InvalidTimestamp(_) => 2,
            TranslateError::LimitExceeded(_) => 3,
            TranslateError::Invalid(_) => 4,
        }]
    }
}

/// Which timestamp is unusable ([`TranslateError::InvalidTimestamp`]).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum TimestampError {
    /// A chunk sample's time (Unix seconds) is not finite or not representable in Unix ns.
    #[error("samples[{index}].timestamp = {timestamp}")]
    Sample {
        /// The sample's index.
        index: usize,
        /// Its time as sent.
        timestamp: f64,
    },
    /// A V1 profile has no timestamp, nor its transaction a start timestamp.
    #[error("V1 profile has no timestamp")]
    Missing,
    /// A V1 profile's timestamp is not representable in Unix ns.
    #[error("timestamp = {timestamp}")]
    Unrepresentable {
        /// The timestamp as sent (Unix seconds).
        timestamp: f64,
    },
    /// A V1 sample's offset from the profile's start overflows Unix ns.
    #[error("samples[{index}].elapsed_since_start_ns = {elapsed_ns} overflows")]
    Elapsed {
        /// The sample's index.
        index: usize,
        /// Its offset as sent.
        elapsed_ns: u64,
    },
}

/// Which bound the input exceeds ([`TranslateError::LimitExceeded`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Limit {
    /// An attribute value nests arrays or kvlists deeper than `max`.
    #[error("attribute value nested deeper than {max}")]
    ValueDepth {
        /// The deepest nesting read.
        max: usize,
    },
    /// A profile's aggregated samples claim more observations than any profiler makes.
    #[error("aggregated samples claim {total} observations, over {max}")]
    Claim {
        /// The observations claimed.
        total: u128,
        /// The most believed.
        max: u64,
    },
}

/// What is malformed in the input ([`TranslateError::Invalid`]).
#[derive(Debug, Clone, Error, PartialEq)]
pub enum Malformed {
    /// An OTLP sample whose `values` and `timestamps_unix_nano` are both set, of different
    /// lengths.
    #[error("samples[{sample}] has {values} values but {timestamps} timestamps")]
    ValuesAndTimestamps {
        /// The sample's index.
        sample: usize,
        /// Its number of values.
        values: usize,
        /// Its number of timestamps.
        timestamps: usize,
    },
    /// A `sentry.*` attribute of a chunk encoding that should hold a string does not.
    #[error("{key} is not a string")]
    NotAString {
        /// The attribute key.
        key: &'static str,
    },
    /// An attribute restored into a chunk's field is not a string.
    #[error("attribute {key} is not a string")]
    AttributeNotAString {
        /// The attribute key.
        key: String,
    },
    /// A `sentry.*` attribute holding JSON does not parse as its type.
    #[error("{key}: {source}")]
    Json {
        /// The attribute key.
        key: &'static str,
        /// The JSON error.
        #[source]
        source: JsonError,
    },
    /// `sentry.measurements` is not a kvlist.
    #[error("{key} is not a kvlist")]
    NotAKvList {
        /// The attribute key.
        key: &'static str,
    },
    /// A measurement in `sentry.measurements` is not a kvlist.
    #[error("{key}.{name} is not a kvlist")]
    MeasurementNotAKvList {
        /// The attribute key.
        key: &'static str,
        /// The measurement.
        name: String,
    },
    /// A measurement's `timestamps` or `values` is not an array.
    #[error("{key}: {field} is not an array")]
    MeasurementNotAnArray {
        /// The attribute key.
        key: &'static str,
        /// `timestamps` or `values`.
        field: &'static str,
    },
    /// A measurement's `timestamps` or `values` holds something other than a number.
    #[error("{key}: {field} holds a non-number")]
    MeasurementNotANumber {
        /// The attribute key.
        key: &'static str,
        /// `timestamps` or `values`.
        field: &'static str,
    },
    /// A measurement has different numbers of timestamps and values.
    #[error("{key}.{name}: {timestamps} timestamps but {values} values")]
    MeasurementLengths {
        /// The attribute key.
        key: &'static str,
        /// The measurement.
        name: String,
        /// Its number of timestamps.
        timestamps: usize,
        /// Its number of values.
        values: usize,
    },
    /// A line or column number that does not fit a Sentry frame.
    #[error("{field} {value} does not fit a Sentry frame (u32)")]
    FrameField {
        /// `line` or `column`.
        field: &'static str,
        /// The number as sent.
        value: i64,
    },
    /// A mapping's `sentry.debug_image.slot_base` is negative.
    #[error("{key} {value} is negative")]
    NegativeSlotBase {
        /// The attribute key.
        key: &'static str,
        /// The value as sent.
        value: i64,
    },
    /// A profile to restore has no `sentry.chunk_id`: it was not made from a chunk.
    #[error("profile has no {key} attribute: it was not made from a chunk")]
    NotAChunk {
        /// The attribute key (`sentry.chunk_id`).
        key: &'static str,
    },
    /// A profile to restore lacks one of the chunk's required attributes.
    #[error("the chunk's required {key} attribute is missing: not restored")]
    MissingChunkAttribute {
        /// The attribute key.
        key: &'static str,
    },
    /// A stack of a profile to restore refers to location 0 (none).
    #[error("stack_table[{stack}] refers to location 0")]
    LocationZero {
        /// The stack's index.
        stack: i32,
    },
    /// A sample of a profile to restore has no string or int thread id.
    #[error("samples[{sample}] has no string or int {key}")]
    NoThreadId {
        /// The sample's index.
        sample: usize,
        /// The attribute key (`thread.id`).
        key: &'static str,
    },
    /// A sample of a profile to restore has values but no timestamps.
    #[error("samples[{sample}] has values but no timestamps: a chunk sample needs a time")]
    NoTimestamps {
        /// The sample's index.
        sample: usize,
    },
}

/// The parser's error of a `sentry.*` attribute holding JSON ([`Malformed::Json`]): shared,
/// since translation errors are cloned, and compared by its text, as translations are.
#[derive(Debug, Clone, Error)]
#[error(transparent)]
pub struct JsonError(Arc<serde_json::Error>);

impl From<serde_json::Error> for JsonError {
    fn from(e: serde_json::Error) -> Self {
        JsonError(Arc::new(e))
    }
}

impl PartialEq for JsonError {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl From<TimestampError> for TranslateError {
    fn from(e: TimestampError) -> Self {
        TranslateError::InvalidTimestamp(e)
    }
}

impl From<Limit> for TranslateError {
    fn from(e: Limit) -> Self {
        TranslateError::LimitExceeded(e)
    }
}

impl From<Malformed> for TranslateError {
    fn from(e: Malformed) -> Self {
        TranslateError::Invalid(e)
    }
}
