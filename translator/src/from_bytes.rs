//! The common job in one call: encoded bytes in, a translation out, the input format
//! detected ([`profilink_proto::input::detect`]).
//!
//! * [`otlp_bytes_to_chunks`]: an OTLP profiles export request or `ProfilesData` (binary
//!   protobuf or OTLP/JSON) → Sentry profile chunks.
//! * [`sentry_bytes_to_otlp`]: a Sentry chunk, NDJSON of chunks, a V1 profile or an envelope
//!   (its chunks, V1 profiles and transactions, which give the trace links) → one OTLP
//!   request.
//! * [`pprof_bytes_to_chunks`] and [`folded_bytes_to_chunks`]: a pprof profile (raw or
//!   gzipped: pprof is gzipped by its producers, so its decompression is bounded here by
//!   [`PprofOptions`]) or folded stacks → Sentry chunks, through OTLP.
//! * [`decode_otlp`] and [`SentryParts`] are the two halves of those calls, for callers that
//!   gather several inputs first (the `translate` command).
//!
//! The bytes must be uncompressed. Compression belongs to the transport that carried them
//! (HTTP `Content-Encoding`, gRPC message compression, a `.gz` file), and so does the size
//! limit that guards decompression; callers decompress with their own limit first (the
//! `profilink translate` command sniffs gzip and zstd with a 1 GiB cap; the receivers follow
//! their headers).
//!
//! ```
//! use profilink_translator::{otlp_bytes_to_chunks, otlp_to_sentry};
//! let request = br#"{"resourceProfiles":[]}"#;
//! let t = otlp_bytes_to_chunks(request, &otlp_to_sentry::ChunkOptions::default()).unwrap();
//! assert!(t.chunks.is_empty());
//! let error = otlp_bytes_to_chunks(b"\xff\xff", &Default::default()).unwrap_err();
//! assert!(error.to_string().contains("not a binary OTLP profiles"));
//! ```

use crate::folded::{FoldedError, FoldedOptions, folded_to_otlp};
use crate::linking::TransactionLinks;
use crate::otlp_to_sentry;
use crate::pprof::{PprofError, PprofOptions, pprof_bytes_to_otlp};
use crate::sentry_to_otlp::{self, SentryInput, V1WithTransaction};
use profilink_proto::input::{InputFormat, detect};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp_json::{self, OtlpJsonError};
use profilink_proto::sentry::{
    Envelope, EnvelopeError, JsonError, ProfileChunk, SampleProfileV1, Transaction,
};
use profilink_proto::wire::{DecodeReport, WireDecodeError, decode_profiles_request};
use thiserror::Error;

/// Bytes that could not be read as the profile input they were meant to be.
#[derive(Debug, Error)]
pub enum InputError {
    /// Not a protobuf OTLP profiles message in either layout (proto 1.10 or 1.9).
    #[error("{0}")]
    OtlpProtobuf(#[source] WireDecodeError),
    /// Not valid OTLP/JSON.
    #[error("invalid OTLP/JSON")]
    OtlpJson(#[source] OtlpJsonError),
    /// The bytes hold another kind of input than the call takes.
    #[error("the input is {found}, expected {expected}")]
    WrongFormat {
        /// What the bytes hold.
        found: InputFormat,
        /// What the call takes.
        expected: &'static str,
    },
    /// A Sentry chunk, V1 profile or transaction that is not valid JSON for its type.
    #[error(transparent)]
    Json(#[from] JsonError),
    /// The same, in a line of NDJSON or an item of an envelope (`at` says which).
    #[error("{at}")]
    JsonAt {
        /// `line 3`, `item 1`, `transaction item 0`.
        at: String,
        /// What is wrong with it.
        #[source]
        source: JsonError,
    },
    /// A malformed envelope.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
}

/// Decodes an OTLP profiles request of `format` (detected when `None`): binary protobuf
/// (leniently: invalid UTF-8 replaced, the proto 1.9 `Sample` layout detected; see
/// [`profilink_proto::wire`]) or OTLP/JSON. A `ProfilesData` decodes too (same fields).
pub fn decode_otlp(
    bytes: &[u8],
    format: Option<InputFormat>,
) -> Result<ExportProfilesServiceRequest, InputError> {
    decode_otlp_report(bytes, format).map(|(request, _)| request)
}

/// [`decode_otlp`] with what lenient decoding did (replacements, layout; the default report
/// for OTLP/JSON, which serde reads as valid UTF-8 text).
pub fn decode_otlp_report(
    bytes: &[u8],
    format: Option<InputFormat>,
) -> Result<(ExportProfilesServiceRequest, DecodeReport), InputError> {
    match format.unwrap_or_else(|| detect(bytes)) {
        InputFormat::OtlpProtobuf => {
            decode_profiles_request(bytes).map_err(InputError::OtlpProtobuf)
        }
        InputFormat::OtlpJson => otlp_json::decode_request(bytes)
            .map(|r| (r, DecodeReport::default()))
            .map_err(InputError::OtlpJson),
        found => Err(InputError::WrongFormat {
            found,
            expected: "OTLP profiles (protobuf or OTLP/JSON)",
        }),
    }
}

/// Translates an OTLP profiles request (protobuf or OTLP/JSON, detected) into Sentry chunks
/// ([`otlp_to_sentry::request_to_chunks`]); profiles that cannot be translated are in the
/// translation's `rejected`.
pub fn otlp_bytes_to_chunks(
    bytes: &[u8],
    options: &otlp_to_sentry::ChunkOptions,
) -> Result<otlp_to_sentry::ChunkTranslation, InputError> {
    let request = decode_otlp(bytes, None)?;
    Ok(otlp_to_sentry::request_to_chunks(&request, options))
}

/// Translates a pprof profile (raw or gzipped, inflated within
/// [`PprofOptions::max_inflated_bytes`]) into Sentry chunks, through OTLP
/// ([`pprof_bytes_to_otlp`], then [`otlp_to_sentry::to_chunks`]).
///
/// ```
/// use profilink_translator::{pprof_bytes_to_chunks, PprofOptions};
/// let error = pprof_bytes_to_chunks(b"\x1f\x8b junk", &PprofOptions::default(), &Default::default());
/// assert!(error.unwrap_err().to_string().contains("gzip"));
/// ```
pub fn pprof_bytes_to_chunks(
    bytes: &[u8],
    pprof: &PprofOptions,
    options: &otlp_to_sentry::ChunkOptions,
) -> Result<otlp_to_sentry::ChunkTranslation, PprofError> {
    let data = pprof_bytes_to_otlp(bytes, pprof)?;
    Ok(otlp_to_sentry::to_chunks(
        data.dictionary.as_ref(),
        &data.resource_profiles,
        options,
    ))
}

/// Translates folded stacks into Sentry chunks, through OTLP ([`folded_to_otlp`], then
/// [`otlp_to_sentry::to_chunks`]).
pub fn folded_bytes_to_chunks(
    text: &[u8],
    folded: &FoldedOptions,
    options: &otlp_to_sentry::ChunkOptions,
) -> Result<otlp_to_sentry::ChunkTranslation, FoldedError> {
    let data = folded_to_otlp(text, folded)?;
    Ok(otlp_to_sentry::to_chunks(
        data.dictionary.as_ref(),
        &data.resource_profiles,
        options,
    ))
}

/// Translates Sentry profiles (a chunk, NDJSON of chunks, a V1 profile or an envelope,
/// detected) into one OTLP request, linked to the transactions found beside them; items that
/// cannot be translated are in the translation's `rejected`.
pub fn sentry_bytes_to_otlp(
    bytes: &[u8],
    options: &sentry_to_otlp::OtlpOptions,
) -> Result<sentry_to_otlp::OtlpTranslation, InputError> {
    let mut parts = SentryParts::default();
    parts.read(bytes, detect(bytes))?;
    Ok(parts.to_otlp(options))
}

/// Sentry inputs gathered from one or more byte buffers, ready for [`sentry_to_otlp`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SentryParts {
    /// Profile chunks.
    pub chunks: Vec<ProfileChunk>,
    /// V1 profiles, with the transaction of their envelope when there is one.
    pub v1_profiles: Vec<V1WithTransaction>,
    /// Transactions (the trace links of the chunks).
    pub transactions: Vec<Transaction>,
}

impl SentryParts {
    /// Adds what `bytes` of `format` hold: chunks, V1 profiles, transactions; an envelope's
    /// `profile_chunk`/`profile_chunk_ui`, `profile` and `transaction` items (other items are
    /// skipped). OTLP formats are [`InputError::WrongFormat`].
    pub fn read(&mut self, bytes: &[u8], format: InputFormat) -> Result<(), InputError> {
        match format {
            InputFormat::SentryChunk => self.chunks.push(ProfileChunk::from_json(bytes)?),
            InputFormat::SentryChunkNdjson => {
                for (line, text) in ndjson_lines(bytes) {
                    self.chunks.push(ndjson_chunk(line, text)?);
                }
            }
            InputFormat::SentryV1Profile => self.v1_profiles.push(V1WithTransaction {
                profile: SampleProfileV1::from_json(bytes)?,
                transaction: None,
            }),
            InputFormat::SentryTransaction | InputFormat::SentryTransactionNdjson => {
                self.read_transactions(bytes, format)?
            }
            InputFormat::Envelope => self.read_envelope(bytes)?,
            found @ (InputFormat::OtlpProtobuf
            | InputFormat::OtlpJson
            | InputFormat::Pprof
            | InputFormat::Folded) => {
                return Err(InputError::WrongFormat {
                    found,
                    expected: "Sentry profiles (chunk, V1 profile, transaction or envelope)",
                });
            }
        }
        Ok(())
    }

    /// Adds the transactions of `bytes`: the `transaction` items of an envelope, else one
    /// transaction per non-blank line.
    pub fn read_transactions(
        &mut self,
        bytes: &[u8],
        format: InputFormat,
    ) -> Result<(), InputError> {
        if format == InputFormat::Envelope {
            let envelope = Envelope::parse(bytes)?;
            for (i, item) in envelope.items_of("transaction").enumerate() {
                let t = Transaction::from_json(&item.payload)
                    .map_err(at(format!("transaction item {i}")))?;
                self.transactions.push(t);
            }
        } else {
            for (line, text) in ndjson_lines(bytes) {
                let t = Transaction::from_json(text).map_err(at(format!("line {line}")))?;
                self.transactions.push(t);
            }
        }
        Ok(())
    }

    fn read_envelope(&mut self, bytes: &[u8]) -> Result<(), InputError> {
        let envelope = Envelope::parse(bytes)?;
        let mut transaction = None;
        let mut profiles = Vec::new();
        for (i, item) in envelope.items.iter().enumerate() {
            let item_at = || at(format!("item {i}"));
            match item.item_type() {
                Some("profile_chunk" | "profile_chunk_ui") => self
                    .chunks
                    .push(ProfileChunk::from_json(&item.payload).map_err(item_at())?),
                Some("profile") => {
                    profiles.push(SampleProfileV1::from_json(&item.payload).map_err(item_at())?)
                }
                Some("transaction") => {
                    let t = Transaction::from_json(&item.payload).map_err(item_at())?;
                    self.transactions.push(t.clone());
                    transaction = Some(t);
                }
                _ => {}
            }
        }
        self.v1_profiles
            .extend(profiles.into_iter().map(|profile| V1WithTransaction {
                profile,
                transaction: transaction.clone(),
            }));
        Ok(())
    }

    /// Translates the chunks and V1 profiles into one OTLP request, linked through the
    /// transactions ([`sentry_to_otlp::to_otlp`]).
    pub fn to_otlp(
        &self,
        options: &sentry_to_otlp::OtlpOptions,
    ) -> sentry_to_otlp::OtlpTranslation {
        let links = TransactionLinks::new(&self.transactions);
        let input = SentryInput {
            chunks: &self.chunks,
            v1_profiles: &self.v1_profiles,
        };
        sentry_to_otlp::to_otlp(&input, &links, options)
    }
}

fn at(at: String) -> impl FnOnce(JsonError) -> InputError {
    move |source| InputError::JsonAt { at, source }
}

/// The chunk on line `line` (1-based, for the error) of NDJSON of chunks, as
/// [`SentryParts::read`] reads it: for callers that parse the lines of [`ndjson_lines`]
/// themselves (e.g. on several threads).
pub fn ndjson_chunk(line: usize, text: &[u8]) -> Result<ProfileChunk, InputError> {
    ProfileChunk::from_json(text).map_err(at(format!("line {line}")))
}

/// The non-blank lines of NDJSON with their 1-based line numbers.
pub fn ndjson_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim_ascii().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn otlp_formats_are_detected_and_others_refused() {
        let request = ExportProfilesServiceRequest::default();
        assert_eq!(
            decode_otlp(&request.encode_to_vec(), None).unwrap(),
            request
        );
        assert_eq!(
            decode_otlp(&otlp_json::encode_request(&request), None).unwrap(),
            request
        );
        let chunk = br#"{"version":"2","chunk_id":"a","profile":{}}"#;
        assert!(matches!(
            decode_otlp(chunk, None),
            Err(InputError::WrongFormat {
                found: InputFormat::SentryChunk,
                ..
            })
        ));
        let json = decode_otlp(b"{\"resourceProfiles\":7}", None).unwrap_err();
        assert!(matches!(json, InputError::OtlpJson(_)), "{json:?}");
        assert!(std::error::Error::source(&json).is_some());
    }

    #[test]
    fn sentry_errors_say_where() {
        let mut parts = SentryParts::default();
        let error = parts
            .read(
                b"{\"chunk_id\":\"a\"}\n\n{\"chunk_id\":7}\n",
                InputFormat::SentryChunkNdjson,
            )
            .unwrap_err();
        // Line numbers count blank lines; the chunks before the bad line are kept.
        assert_eq!(error.to_string(), "line 3");
        assert_eq!(parts.chunks.len(), 1);
        assert!(std::error::Error::source(&error).is_some());
        let error =
            sentry_bytes_to_otlp(b"{\"resourceProfiles\":[]}", &Default::default()).unwrap_err();
        assert!(matches!(error, InputError::WrongFormat { .. }), "{error:?}");
    }
}
