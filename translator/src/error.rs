//! Translation errors.

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
    /// A timestamp is not finite or not representable as Unix nanoseconds.
    #[error("invalid timestamp {0}")]
    InvalidTimestamp(String),
    /// The input exceeds a configured bound (stack depth, sample count, …).
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    /// Any other malformed input.
    #[error("{0}")]
    Invalid(String),
}
