//! Sentry envelopes: a JSON header line, then items of a JSON header line plus a payload.
//!
//! Reading follows Relay: an item header may carry `length` (the payload is exactly that many
//! bytes, binary-safe, followed by `\n` or the end) or not (the payload runs to the next `\n`).
//! Writing always sets `length`.

use super::chunk::ProfileChunk;
use serde_json::{Map, Value};
use thiserror::Error;

/// Relay's limit on the number of items in one envelope (`MAX_ENVELOPE_ITEMS`).
pub const MAX_ENVELOPE_ITEMS: usize = 500;

/// Why an envelope could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvelopeError {
    /// The input was empty.
    #[error("empty envelope")]
    Empty,
    /// The envelope header line is not a JSON object.
    #[error("envelope header is not a JSON object: {0}")]
    InvalidHeader(String),
    /// An item header line is not a JSON object.
    #[error("item {index}: header is not a JSON object: {message}")]
    InvalidItemHeader {
        /// Item index.
        index: usize,
        /// Parser message.
        message: String,
    },
    /// An item header's `length` is not a non-negative integer.
    #[error("item {index}: `length` is not a non-negative integer")]
    InvalidLength {
        /// Item index.
        index: usize,
    },
    /// The payload is shorter than the header's `length`.
    #[error("item {index}: payload truncated: length {expected} but {available} bytes left")]
    Truncated {
        /// Item index.
        index: usize,
        /// Declared length.
        expected: u64,
        /// Bytes available.
        available: usize,
    },
    /// The payload is not followed by a newline or the end of the envelope.
    #[error("item {index}: payload of declared length is not followed by a newline")]
    MissingNewline {
        /// Item index.
        index: usize,
    },
}

/// One envelope item: its headers and raw payload.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EnvelopeItem {
    /// Item headers (`type`, `length`, `platform`, `content_type`, …).
    pub headers: Map<String, Value>,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

/// An envelope: headers and items.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Envelope {
    /// Envelope headers (`event_id`, `sent_at`, `dsn`, `sdk`, `trace`, …); may be empty (`{}`).
    pub headers: Map<String, Value>,
    /// The items, in order.
    pub items: Vec<EnvelopeItem>,
}

impl EnvelopeItem {
    /// An item of `item_type` with `payload`.
    pub fn new(item_type: &str, payload: Vec<u8>) -> Self {
        let mut headers = Map::new();
        headers.insert("type".into(), Value::String(item_type.into()));
        EnvelopeItem { headers, payload }
    }

    /// A `profile_chunk` item for `chunk`: JSON payload, `content_type`, and `platform` equal to
    /// the payload's platform (Relay rejects a mismatch).
    pub fn profile_chunk(chunk: &ProfileChunk) -> Self {
        Self::profile_chunk_json(chunk.to_json(), &chunk.platform)
    }

    /// A `profile_chunk` item from an already serialized chunk of `platform`.
    pub fn profile_chunk_json(payload: Vec<u8>, platform: &str) -> Self {
        let mut item = Self::new("profile_chunk", payload);
        item.headers.insert(
            "content_type".into(),
            Value::String("application/json".into()),
        );
        item.headers
            .insert("platform".into(), Value::String(platform.into()));
        item
    }

    /// The `type` header.
    pub fn item_type(&self) -> Option<&str> {
        self.headers.get("type").and_then(Value::as_str)
    }

    /// The `platform` header.
    pub fn platform(&self) -> Option<&str> {
        self.headers.get("platform").and_then(Value::as_str)
    }

    /// True for `profile_chunk` items (and Relay's alias `profile_chunk_ui`).
    pub fn is_profile_chunk(&self) -> bool {
        matches!(self.item_type(), Some("profile_chunk" | "profile_chunk_ui"))
    }
}

impl Envelope {
    /// An envelope with the given headers and no items.
    pub fn with_headers(headers: Map<String, Value>) -> Self {
        Envelope {
            headers,
            items: Vec::new(),
        }
    }

    /// The envelope profilink sends for one chunk: header `sdk` naming the sender, one
    /// `profile_chunk` item whose `platform` header equals the payload's (Relay answers 413 to
    /// an envelope with two profile items, so there is exactly one). Senders add `sent_at`.
    pub fn for_chunk(chunk: &ProfileChunk, sdk_name: &str, sdk_version: &str) -> Self {
        Self::for_chunk_json(chunk.to_json(), &chunk.platform, sdk_name, sdk_version)
    }

    /// [`Envelope::for_chunk`] for an already serialized chunk of `platform`.
    pub fn for_chunk_json(
        json: Vec<u8>,
        platform: &str,
        sdk_name: &str,
        sdk_version: &str,
    ) -> Self {
        let mut headers = Map::new();
        headers.insert(
            "sdk".into(),
            serde_json::json!({ "name": sdk_name, "version": sdk_version }),
        );
        Envelope {
            headers,
            items: vec![EnvelopeItem::profile_chunk_json(json, platform)],
        }
    }

    /// Reads an envelope. Blank lines between items and a missing final newline are tolerated.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(EnvelopeError::Empty);
        }
        let (header_line, mut rest) = split_line(bytes);
        let headers = parse_object(header_line).map_err(EnvelopeError::InvalidHeader)?;
        let mut items = Vec::new();
        loop {
            // Skip blank separator lines (some SDKs write a trailing `\n` twice).
            while let Some((&b, tail)) = rest.split_first() {
                if b == b'\n' || b == b'\r' {
                    rest = tail;
                } else {
                    break;
                }
            }
            if rest.is_empty() {
                break;
            }
            let index = items.len();
            let (line, after) = split_line(rest);
            let item_headers = parse_object(line)
                .map_err(|message| EnvelopeError::InvalidItemHeader { index, message })?;
            let payload;
            match item_headers.get("length") {
                None | Some(Value::Null) => {
                    let (p, tail) = split_line(after);
                    payload = p.to_vec();
                    rest = tail;
                }
                Some(v) => {
                    let len = v.as_u64().ok_or(EnvelopeError::InvalidLength { index })?;
                    if (after.len() as u64) < len {
                        return Err(EnvelopeError::Truncated {
                            index,
                            expected: len,
                            available: after.len(),
                        });
                    }
                    let len = len as usize;
                    payload = after[..len].to_vec();
                    let tail = &after[len..];
                    rest = match tail.first() {
                        None => tail,
                        Some(b'\n') => &tail[1..],
                        Some(b'\r') if tail.get(1) == Some(&b'\n') => &tail[2..],
                        Some(_) => return Err(EnvelopeError::MissingNewline { index }),
                    };
                }
            }
            items.push(EnvelopeItem {
                headers: item_headers,
                payload,
            });
        }
        Ok(Envelope { headers, items })
    }

    /// Writes the envelope; every item header gets the payload's exact `length`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size_hint());
        // Writing into a `Vec` cannot fail.
        let _ = self.write_to(&mut out);
        out
    }

    /// About the length of [`Envelope::to_bytes`]: the payloads' lengths and room for the
    /// header lines (a buffer of this size seldom grows).
    pub fn size_hint(&self) -> usize {
        self.items
            .iter()
            .map(|i| i.payload.len() + 96)
            .sum::<usize>()
            + 128
    }

    /// Writes the envelope as [`Envelope::to_bytes`] does, straight into `out` (a file, a
    /// socket): the payloads are not copied into one buffer first.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut line = Vec::with_capacity(128);
        write_object(&mut line, &self.headers);
        line.push(b'\n');
        out.write_all(&line)?;
        for item in &self.items {
            let mut headers = item.headers.clone();
            headers.insert("length".into(), Value::from(item.payload.len() as u64));
            line.clear();
            write_object(&mut line, &headers);
            line.push(b'\n');
            out.write_all(&line)?;
            out.write_all(&item.payload)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The `profile_chunk` items.
    pub fn profile_chunks(&self) -> impl Iterator<Item = &EnvelopeItem> {
        self.items.iter().filter(|i| i.is_profile_chunk())
    }

    /// The items of `item_type`.
    pub fn items_of<'a>(&'a self, item_type: &'a str) -> impl Iterator<Item = &'a EnvelopeItem> {
        self.items
            .iter()
            .filter(move |i| i.item_type() == Some(item_type))
    }
}

fn split_line(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => {
            let line = &bytes[..i];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            (line, &bytes[i + 1..])
        }
        None => (bytes, &[]),
    }
}

fn parse_object(line: &[u8]) -> Result<Map<String, Value>, String> {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(trimmed) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("expected an object, found {}", json_kind(&other))),
        Err(e) => Err(e.to_string()),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    // A map of JSON values always serializes.
    if serde_json::to_writer(&mut *out, map).is_err() {
        out.extend_from_slice(b"{}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_items_with_and_without_length() {
        let raw = b"{}\n{\"type\":\"a\",\"length\":3}\nx\ny\n{\"type\":\"b\"}\nhello\n{\"type\":\"c\",\"length\":0}\n";
        let env = Envelope::parse(raw).unwrap();
        assert_eq!(env.items.len(), 3);
        assert_eq!(env.items[0].payload, b"x\ny");
        assert_eq!(env.items[1].payload, b"hello");
        assert_eq!(env.items[2].payload, b"");
        let again = Envelope::parse(&env.to_bytes()).unwrap();
        assert_eq!(again.items.len(), 3);
        assert_eq!(again.items[0].payload, env.items[0].payload);
        assert_eq!(again.items[1].item_type(), Some("b"));
    }

    #[test]
    fn binary_payload_survives() {
        let payload: Vec<u8> = (0..=255u8).collect();
        let mut env = Envelope::default();
        env.items
            .push(EnvelopeItem::new("attachment", payload.clone()));
        let again = Envelope::parse(&env.to_bytes()).unwrap();
        assert_eq!(again.items[0].payload, payload);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Envelope::parse(b""), Err(EnvelopeError::Empty));
        assert!(matches!(
            Envelope::parse(b"[1]\n"),
            Err(EnvelopeError::InvalidHeader(_))
        ));
        assert!(matches!(
            Envelope::parse(b"{}\n{\"type\":\"a\",\"length\":10}\nabc\n"),
            Err(EnvelopeError::Truncated { index: 0, .. })
        ));
        assert_eq!(
            Envelope::parse(b"{}\n{\"type\":\"a\",\"length\":2}\nabc\n"),
            Err(EnvelopeError::MissingNewline { index: 0 })
        );
        assert_eq!(
            Envelope::parse(b"{}\n{\"type\":\"a\",\"length\":-1}\nabc\n"),
            Err(EnvelopeError::InvalidLength { index: 0 })
        );
        assert!(matches!(
            Envelope::parse(b"{}\nnot json\n"),
            Err(EnvelopeError::InvalidItemHeader { index: 0, .. })
        ));
    }
}
