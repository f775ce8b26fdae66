//! Why an input record could not be decoded.

/// Why a record could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The record ends early or a length runs past its end.
    #[error("input record truncated")]
    Truncated,
    /// A varint is longer than 10 bytes or overflows, or bytes are left over.
    #[error("input record has a bad number")]
    BadNumber,
    /// A string is not UTF-8.
    #[error("input record has a string that is not UTF-8")]
    BadUtf8,
    /// A string or frame index is out of range.
    #[error("input record refers to a missing string or frame")]
    BadIndex,
    /// Unknown version or tag.
    #[error("input record has an unknown version or tag {0}")]
    BadTag(u8),
    /// A legacy record's chunk JSON does not parse.
    #[error("input record JSON: {0}")]
    Json(#[from] profilink_proto::sentry::JsonError),
    /// A debug image's extra fields (kept as a JSON object) do not parse.
    #[error("input record JSON: {0}")]
    ImageJson(#[source] serde_json::Error),
}
