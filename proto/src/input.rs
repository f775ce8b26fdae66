//! Detection of what a byte buffer holds, for tools that accept any profile format.
//!
//! JSON inputs are told apart by their top-level keys; anything that is not JSON is taken to be
//! binary OTLP protobuf, whose decoder then gives the precise error for bytes that are not.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// A profile input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputFormat {
    /// Binary protobuf `ExportProfilesServiceRequest` / `ProfilesData` (same layout).
    OtlpProtobuf,
    /// OTLP/JSON `ExportProfilesServiceRequest` / `ProfilesData`.
    OtlpJson,
    /// One Sentry profile chunk (Sample Format V2) as JSON.
    SentryChunk,
    /// Newline-delimited Sentry profile chunks.
    SentryChunkNdjson,
    /// One deprecated V1 (transaction-bound) Sentry profile as JSON.
    SentryV1Profile,
    /// One Sentry transaction as JSON.
    SentryTransaction,
    /// Newline-delimited Sentry transactions.
    SentryTransactionNdjson,
    /// A Sentry envelope.
    Envelope,
    /// A pprof profile (`perftools.profiles.Profile` protobuf; gzip is taken off first).
    Pprof,
    /// Folded (collapsed) stacks: `root;...;leaf COUNT` per line.
    Folded,
}

impl InputFormat {
    /// All formats with their command-line names.
    pub const ALL: [(InputFormat, &'static str); 10] = [
        (InputFormat::OtlpProtobuf, "otlp"),
        (InputFormat::OtlpJson, "otlp-json"),
        (InputFormat::SentryChunk, "chunk"),
        (InputFormat::SentryChunkNdjson, "chunk-ndjson"),
        (InputFormat::SentryV1Profile, "v1"),
        (InputFormat::SentryTransaction, "transaction"),
        (InputFormat::SentryTransactionNdjson, "transaction-ndjson"),
        (InputFormat::Envelope, "envelope"),
        (InputFormat::Pprof, "pprof"),
        (InputFormat::Folded, "folded"),
    ];

    /// The command-line name of the format.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("?", |(_, n)| n)
    }

    /// True for the OTLP formats.
    pub fn is_otlp(self) -> bool {
        matches!(self, InputFormat::OtlpProtobuf | InputFormat::OtlpJson)
    }
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for InputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(f, _)| *f)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(_, n)| *n).collect();
                format!("unknown format {s:?} (one of: {})", names.join(", "))
            })
    }
}

/// The top-level keys that tell JSON inputs apart; everything else is skipped unparsed.
#[derive(Deserialize, Default)]
struct Probe {
    version: Option<Value>,
    chunk_id: Option<IgnoredAny>,
    profiler_id: Option<IgnoredAny>,
    profile: Option<IgnoredAny>,
    transactions: Option<IgnoredAny>,
    #[serde(rename = "type")]
    event_type: Option<Value>,
    contexts: Option<IgnoredAny>,
    spans: Option<IgnoredAny>,
    #[serde(rename = "resourceProfiles", alias = "resource_profiles")]
    resource_profiles: Option<IgnoredAny>,
    dictionary: Option<IgnoredAny>,
}

enum JsonKind {
    Otlp,
    Chunk,
    V1,
    Transaction,
    Other,
}

impl Probe {
    fn kind(&self) -> JsonKind {
        let version = self.version.as_ref().and_then(Value::as_str);
        if self.resource_profiles.is_some() || self.dictionary.is_some() {
            JsonKind::Otlp
        } else if self.event_type.as_ref().and_then(Value::as_str) == Some("transaction")
            || (self.spans.is_some() && self.contexts.is_some())
        {
            JsonKind::Transaction
        } else if self.transactions.is_some() || version == Some("1") {
            JsonKind::V1
        } else if self.chunk_id.is_some() || self.profiler_id.is_some() || self.profile.is_some() {
            JsonKind::Chunk
        } else {
            JsonKind::Other
        }
    }
}

/// Guesses the format of `bytes` (uncompressed). Never fails: unknown data is reported as
/// [`InputFormat::OtlpProtobuf`], whose decoder names what is wrong.
///
/// Binary input is told apart by its top-level protobuf fields: an OTLP profiles message has
/// only fields 1 and 2, while a pprof profile has its string table (field 6) and usually
/// more (3..=15). Text whose lines end in a count is folded stacks ([`looks_like_folded`]).
pub fn detect(bytes: &[u8]) -> InputFormat {
    let trimmed = bytes.trim_ascii_start();
    if trimmed.first() != Some(&b'{') {
        if looks_like_folded(bytes) {
            return InputFormat::Folded;
        }
        if looks_like_pprof(bytes) {
            return InputFormat::Pprof;
        }
        return InputFormat::OtlpProtobuf;
    }
    if let Ok(probe) = serde_json::from_slice::<Probe>(trimmed) {
        return match probe.kind() {
            JsonKind::Otlp | JsonKind::Other => InputFormat::OtlpJson,
            JsonKind::Chunk => InputFormat::SentryChunk,
            JsonKind::V1 => InputFormat::SentryV1Profile,
            JsonKind::Transaction => InputFormat::SentryTransaction,
        };
    }
    // Several lines: NDJSON of chunks/transactions, or an envelope (header line, item header).
    let mut lines = trimmed
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty());
    let first = lines
        .next()
        .and_then(|l| serde_json::from_slice::<Probe>(l).ok());
    match first.map(|p| p.kind()) {
        Some(JsonKind::Chunk) => InputFormat::SentryChunkNdjson,
        Some(JsonKind::Transaction) => InputFormat::SentryTransactionNdjson,
        Some(JsonKind::Otlp) => InputFormat::OtlpJson,
        _ => InputFormat::Envelope,
    }
}

/// How many lines [`looks_like_folded`] checks.
const FOLDED_PROBE_LINES: usize = 16;

/// True when the first non-blank lines (up to 16) of `bytes` are text of the form
/// `frame;frame;... COUNT`: printable UTF-8, a non-empty stack, a space or tab, a decimal count
/// (lines of a count alone are allowed, but at least one line must have a stack).
pub fn looks_like_folded(bytes: &[u8]) -> bool {
    let mut seen = 0;
    for line in bytes.split(|&b| b == b'\n') {
        let line = line.trim_ascii();
        if line.is_empty() {
            continue;
        }
        if seen == FOLDED_PROBE_LINES {
            break;
        }
        // The last line checked may be cut by a probe of a prefix; only whole lines count.
        let Ok(text) = std::str::from_utf8(line) else {
            return false;
        };
        if text.chars().any(|c| c.is_control() && c != '\t') {
            return false;
        }
        let Some((stack, count)) = text.rsplit_once([' ', '\t']) else {
            // A count alone: a sample without frames (py-spy writes ` 4`); not evidence alone.
            if text.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            return false;
        };
        if stack.trim().is_empty() || count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit())
        {
            return false;
        }
        seen += 1;
    }
    seen > 0
}

/// True when `bytes` parse as a sequence of top-level protobuf fields that includes a field
/// numbered 3..=15 (pprof's; an OTLP profiles message has only 1 and 2).
pub fn looks_like_pprof(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    let mut pprof_field = false;
    while !rest.is_empty() {
        let Some(tag) = varint(&mut rest) else {
            return false;
        };
        let field = tag >> 3;
        match tag & 7 {
            0 => {
                if varint(&mut rest).is_none() {
                    return false;
                }
            }
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                if rest.len() < n {
                    return false;
                }
                rest = &rest[n..];
            }
            2 => {
                let Some(len) = varint(&mut rest) else {
                    return false;
                };
                match usize::try_from(len) {
                    Ok(len) if len <= rest.len() => rest = &rest[len..],
                    _ => return false,
                }
            }
            _ => return false,
        }
        if field == 0 || field > 15 {
            return false;
        }
        pprof_field |= field >= 3;
    }
    pprof_field
}

/// Reads a protobuf varint from the front of `rest`.
fn varint(rest: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &b) in rest.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *rest = &rest[i + 1..];
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_json_kinds() {
        assert_eq!(detect(b"{\"resourceProfiles\":[]}"), InputFormat::OtlpJson);
        assert_eq!(
            detect(b" {\"resource_profiles\":[]}\n"),
            InputFormat::OtlpJson
        );
        assert_eq!(
            detect(b"{\"version\":\"2\",\"chunk_id\":\"a\",\"profile\":{}}"),
            InputFormat::SentryChunk
        );
        assert_eq!(
            detect(b"{\"chunk_id\":\"a\"}\n{\"chunk_id\":\"b\"}\n"),
            InputFormat::SentryChunkNdjson
        );
        assert_eq!(
            detect(b"{\"version\":\"1\",\"profile\":{},\"transactions\":[]}"),
            InputFormat::SentryV1Profile
        );
        assert_eq!(
            detect(b"{\"type\":\"transaction\",\"spans\":[]}\n{\"type\":\"transaction\"}"),
            InputFormat::SentryTransactionNdjson
        );
        assert_eq!(
            detect(b"{}\n{\"type\":\"profile_chunk\",\"length\":2}\n{}\n"),
            InputFormat::Envelope
        );
        assert_eq!(detect(b"\x0a\x02\x08\x01"), InputFormat::OtlpProtobuf);
        assert_eq!(detect(b""), InputFormat::OtlpProtobuf);
    }

    #[test]
    fn names_round_trip() {
        for (f, n) in InputFormat::ALL {
            assert_eq!(n.parse::<InputFormat>(), Ok(f));
        }
        assert!("jfr".parse::<InputFormat>().is_err());
    }

    #[test]
    fn detects_pprof_and_folded() {
        // sample_type {type: 1, unit: 2}, string_table "", "samples", "count".
        let pprof = b"\x0a\x04\x08\x01\x10\x02\x32\x00\x32\x07samples\x32\x05count";
        assert_eq!(detect(pprof), InputFormat::Pprof);
        assert!(!looks_like_pprof(b"\x0a\x02\x08\x01\x12\x00"));
        assert!(!looks_like_pprof(b"\x32\x09ab"));
        assert_eq!(
            detect(b"main;foo (x.py:3) 12\nmain 1\n"),
            InputFormat::Folded
        );
        assert_eq!(detect(b"a;b 1"), InputFormat::Folded);
        assert_ne!(detect(b"a;b x\n"), InputFormat::Folded);
        assert_ne!(detect(b"12\n"), InputFormat::Folded);
    }
}
