//! OTLP/JSON codec for the OTLP profiles messages (proto 1.10, `v1development`), and for the
//! OTLP traces messages ([`decode_traces_request`] and the other `*_traces_*` functions).
//!
//! Rooms by signal: `profiles/` and `traces/` hold each signal's messages (their readers and
//! writers); what every signal shares sits beside them: the pull parser (`parser/`), exact
//! numbers (`numbers`), `bytes` and ids (`bytes`), the shared message shapes (`shape`), and the
//! readers and writers of the common messages and scalars (`decode`, `encode`).
//!
//! [OTLP/JSON] is the proto3 JSON mapping with OTLP's exceptions. This codec reads and writes it
//! directly (no `serde` derive on the prost types — the `with-serde` feature of
//! `opentelemetry-proto` is not compliant), field by field, so every message and field of the
//! profiles protos is covered, including `Resource.entityRefs`, `Profile.originalPayload(Format)`
//! and `AnyValue.stringValueStrindex`.
//!
//! # Writing
//!
//! * Keys are lowerCamelCase, in field-number order; output is compact.
//! * `Link.traceId`, `Link.spanId` and `Profile.profileId` are lowercase hex; other `bytes`
//!   (`originalPayload`, `AnyValue.bytesValue`) are padded standard base64.
//! * 64-bit integers (`int64`, `uint64`, `fixed64`) are decimal strings; 32-bit integers are
//!   JSON numbers.
//! * `doubleValue` is a JSON number, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
//! * Default scalars (0, `""`), empty repeated fields and absent messages are omitted. A message
//!   that is present but empty is written as `{}` (e.g. the dictionary's
//!   `attributeTable[0].value`, an `AnyValue` with no value set), and a set `AnyValue` oneof is
//!   written even if its value is the default (`{"intValue":"0"}`), so that
//!   protobuf → JSON → protobuf gives back an equal message.
//!
//! # Reading
//!
//! * Keys may be lowerCamelCase or the original snake_case proto names.
//! * Integers may be JSON numbers or strings, in decimal with optional fraction and exponent as
//!   long as the value is integral (`"12"`, `12`, `1.2e1`); parsing is exact. Fractions, values
//!   out of range and negative values for unsigned fields are errors.
//! * Doubles may be numbers, numeric strings, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
//! * Ids are hex in any case; as a fallback, base64 (what Python's `MessageToJson`, which
//!   follows plain proto3 JSON, writes) is accepted when the string is not hex of the id's
//!   length. Exactly, the first rule that fits wins:
//!   1. hex that decodes to the id's standard length (16 bytes for trace and profile ids, 8 for
//!      span ids);
//!   2. base64 (standard or URL-safe, padded or not) that decodes to the standard length;
//!   3. hex of any other even length (non-standard ids, which this encoder writes as hex).
//!
//!   Base64 of a non-standard length is an error (so a mistyped hex id is reported, not read
//!   as base64).
//!
//!   The empty string is an empty id. Other `bytes` accept standard and URL-safe base64, padded
//!   or not.
//! * Unknown fields are ignored, whatever their value. `null` for a field means the field is
//!   absent (a `null` does not reset a value set earlier by a duplicate key). `null` as an
//!   element of a repeated field is an error.
//! * Duplicate keys (including the camelCase and snake_case spelling of the same field): the
//!   last one wins; for repeated fields the last array replaces earlier ones; for the
//!   `AnyValue` oneof the last member present wins.
//! * Strings must be valid UTF-8 (escapes are resolved; lone surrogates are errors). A leading
//!   UTF-8 byte order mark is skipped; anything but whitespace after the top-level value is an
//!   error.
//! * `AnyValue` nesting (`arrayValue` / `kvlistValue`) is limited to
//!   [`MAX_ANY_VALUE_DEPTH`] levels. Unknown values are skipped without recursion, so no input
//!   can overflow the stack. No input makes the decoder panic.
//!
//! Every error carries the JSON path of the offending value, with canonical (camelCase) names
//! whatever the input used, e.g.
//! `resourceProfiles[0].scopeProfiles[1].profiles[0].samples[3].timestampsUnixNano[2]`;
//! the root is `.`.
//!
//! [OTLP/JSON]: https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding

mod bytes;
mod decode;
mod encode;
mod numbers;
mod parser;
mod profiles;
mod shape;
mod traces;

pub use parser::MAX_ANY_VALUE_DEPTH;
pub use profiles::{
    decode_profiles_data, decode_request, decode_response, encode_profiles_data, encode_request,
    encode_response,
};
pub use traces::{
    decode_traces_data, decode_traces_request, decode_traces_response, encode_traces_data,
    encode_traces_request, encode_traces_response,
};

use thiserror::Error;

/// An OTLP/JSON payload that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {message}")]
pub struct OtlpJsonError {
    /// JSON path of the offending value, e.g.
    /// `resourceProfiles[0].scopeProfiles[1].profiles[0].samples[3].timestampsUnixNano[2]`;
    /// `.` for the root.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// Quotes `text` for an error message, shortened to about 40 bytes.
fn shown(text: &str) -> String {
    const MAX: usize = 40;
    if text.len() <= MAX {
        format!("{text:?}")
    } else {
        let cut = (0..=MAX)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{:?}…", &text[..cut])
    }
}
