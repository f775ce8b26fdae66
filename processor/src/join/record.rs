//! The join log's record formats: a held chunk, and the spans of one request.
//!
//! Every record starts with a kind byte, a version byte and the wall-clock time it arrived
//! (Unix ns, u64 LE: an `Instant` does not survive a restart):
//!
//! * **chunk** (kind 1): `project id (u64 LE) | the chunk's JSON`;
//! * **spans** (kind 2): `count (u32 LE)`, then per span `profiler id | thread id` (each
//!   `length (u32 LE) | UTF-8`), `start ns | end ns` (u64 LE), `is_root` (one byte, 0 or 1),
//!   the trace id (16 bytes) and the span id (8 bytes).
//!
//! Decoding checks every length against what is left, so a damaged record is an error, never
//! a panic or an allocation its bytes do not back.

use profilink_proto::sentry::ProfileChunk;
use profilink_translator::SpanInterval;

const CHUNK: u8 = 1;
const SPANS: u8 = 2;
const VERSION: u8 = 1;
/// Bytes of a span besides its two strings.
const SPAN_FIXED: usize = 4 + 4 + 8 + 8 + 1 + 16 + 8;

/// Why a record does not decode.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not the kind or version this build writes.
    #[error(
        "join log record of kind {kind} version {version}, expected kind {expected} version {VERSION}"
    )]
    Kind {
        /// The kind byte found.
        kind: u8,
        /// The version byte found.
        version: u8,
        /// The kind expected.
        expected: u8,
    },
    /// The record ends before its fields do.
    #[error("join log record cut short at byte {0}")]
    Short(usize),
    /// A string is not UTF-8, or a flag not 0 or 1.
    #[error("join log record has an invalid field at byte {0}")]
    Invalid(usize),
    /// The chunk's JSON does not parse.
    #[error("join log chunk does not parse: {0}")]
    Chunk(#[source] profilink_proto::sentry::JsonError),
}

/// A held chunk as the join log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRecord {
    /// When it arrived (Unix ns, wall clock).
    pub arrived_unix_ns: u64,
    /// The project it was received for.
    pub project_id: u64,
    /// The chunk.
    pub chunk: ProfileChunk,
}

/// The spans of one request as the join log keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct SpansRecord {
    /// When they arrived (Unix ns, wall clock).
    pub arrived_unix_ns: u64,
    /// The spans.
    pub spans: Vec<SpanInterval>,
}

fn header(kind: u8, arrived_unix_ns: u64, out: &mut Vec<u8>) {
    out.push(kind);
    out.push(VERSION);
    out.extend_from_slice(&arrived_unix_ns.to_le_bytes());
}

/// Encodes a chunk record.
pub fn encode_chunk(arrived_unix_ns: u64, project_id: u64, chunk: &ProfileChunk) -> Vec<u8> {
    let json = chunk.to_json();
    let mut out = Vec::with_capacity(18 + json.len());
    header(CHUNK, arrived_unix_ns, &mut out);
    out.extend_from_slice(&project_id.to_le_bytes());
    out.extend_from_slice(&json);
    out
}

fn put_str(s: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes a spans record.
pub fn encode_spans(arrived_unix_ns: u64, spans: &[SpanInterval]) -> Vec<u8> {
    let strings: usize = spans
        .iter()
        .map(|s| s.profiler_id.len() + s.thread_id.len())
        .sum();
    let mut out = Vec::with_capacity(14 + spans.len() * SPAN_FIXED + strings);
    header(SPANS, arrived_unix_ns, &mut out);
    out.extend_from_slice(&(spans.len() as u32).to_le_bytes());
    for s in spans {
        put_str(&s.profiler_id, &mut out);
        put_str(&s.thread_id, &mut out);
        out.extend_from_slice(&s.start_ns.to_le_bytes());
        out.extend_from_slice(&s.end_ns.to_le_bytes());
        out.push(u8::from(s.is_root));
        out.extend_from_slice(&s.trace_id);
        out.extend_from_slice(&s.span_id);
    }
    out
}

/// A bounds-checked reader over a record.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(RecordError::Short(self.pos))?;
        let b = self
            .buf
            .get(self.pos..end)
            .ok_or(RecordError::Short(self.pos))?;
        self.pos = end;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let at = self.pos;
        self.bytes(N)?
            .try_into()
            .map_err(|_| RecordError::Short(at))
    }

    fn u64(&mut self) -> Result<u64, RecordError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, RecordError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, RecordError> {
        let n = self.u32()? as usize;
        let at = self.pos;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| RecordError::Invalid(at))
    }

    fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos.min(self.buf.len())..]
    }

    fn header(&mut self, expected: u8) -> Result<u64, RecordError> {
        let [kind, version] = self.array()?;
        if kind != expected || version != VERSION {
            return Err(RecordError::Kind {
                kind,
                version,
                expected,
            });
        }
        self.u64()
    }
}

/// Decodes a chunk record.
pub fn decode_chunk(buf: &[u8]) -> Result<ChunkRecord, RecordError> {
    let mut r = Reader { buf, pos: 0 };
    let arrived_unix_ns = r.header(CHUNK)?;
    let project_id = r.u64()?;
    let chunk = ProfileChunk::from_json(r.rest()).map_err(RecordError::Chunk)?;
    Ok(ChunkRecord {
        arrived_unix_ns,
        project_id,
        chunk,
    })
}

/// Decodes a spans record.
pub fn decode_spans(buf: &[u8]) -> Result<SpansRecord, RecordError> {
    let mut r = Reader { buf, pos: 0 };
    let arrived_unix_ns = r.header(SPANS)?;
    let count = r.u32()? as usize;
    // Every span takes at least SPAN_FIXED bytes: a count its bytes cannot back is refused
    // before anything is allocated for it.
    if count > r.rest().len() / SPAN_FIXED {
        return Err(RecordError::Short(r.pos));
    }
    let mut spans = Vec::with_capacity(count);
    for _ in 0..count {
        let profiler_id = r.string()?;
        let thread_id = r.string()?;
        let start_ns = r.u64()?;
        let end_ns = r.u64()?;
        let at = r.pos;
        let is_root = match r.array::<1>()? {
            [0] => false,
            [1] => true,
            _ => return Err(RecordError::Invalid(at)),
        };
        let trace_id = r.array()?;
        let span_id = r.array()?;
        spans.push(SpanInterval {
            profiler_id,
            thread_id,
            start_ns,
            end_ns,
            is_root,
            trace_id,
            span_id,
        });
    }
    if !r.rest().is_empty() {
        return Err(RecordError::Invalid(r.pos));
    }
    Ok(SpansRecord {
        arrived_unix_ns,
        spans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::{Frame, ProfileData, Sample};

    fn chunk() -> ProfileChunk {
        ProfileChunk {
            chunk_id: "0123456789abcdef0123456789abcdef".into(),
            profiler_id: "fedcba9876543210fedcba9876543210".into(),
            platform: "python".into(),
            version: "2".into(),
            profile: ProfileData {
                frames: vec![std::sync::Arc::new(Frame {
                    function: Some("f".into()),
                    ..Default::default()
                })],
                stacks: vec![vec![0]],
                samples: vec![Sample {
                    stack_id: 0,
                    thread_id: "7".into(),
                    timestamp: 1_795_317_066.123_456,
                }],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn spans() -> Vec<SpanInterval> {
        vec![
            SpanInterval {
                profiler_id: "p".into(),
                thread_id: "140357000971968".into(),
                start_ns: 1,
                end_ns: u64::MAX,
                is_root: true,
                trace_id: [3; 16],
                span_id: [4; 8],
            },
            SpanInterval {
                profiler_id: String::new(),
                thread_id: "é".into(),
                start_ns: 5,
                end_ns: 6,
                is_root: false,
                trace_id: [0; 16],
                span_id: [9; 8],
            },
        ]
    }

    #[test]
    fn chunks_and_spans_come_back_as_they_went_in() {
        let c = chunk();
        let got = decode_chunk(&encode_chunk(42, 7, &c)).unwrap();
        assert_eq!(
            got,
            ChunkRecord {
                arrived_unix_ns: 42,
                project_id: 7,
                chunk: c
            }
        );
        let s = spans();
        let got = decode_spans(&encode_spans(u64::MAX, &s)).unwrap();
        assert_eq!(got.arrived_unix_ns, u64::MAX);
        assert_eq!(got.spans, s);
        assert!(
            decode_spans(&encode_spans(1, &[]))
                .unwrap()
                .spans
                .is_empty()
        );
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let chunk_rec = encode_chunk(1, 2, &chunk());
        let spans_rec = encode_spans(1, &spans());
        // Every prefix of a record is refused.
        for n in 0..spans_rec.len() {
            assert!(
                decode_spans(&spans_rec[..n]).is_err(),
                "prefix of {n} bytes"
            );
        }
        for n in 0..chunk_rec.len() {
            assert!(
                decode_chunk(&chunk_rec[..n]).is_err(),
                "prefix of {n} bytes"
            );
        }
        // The wrong kind, a future version.
        assert!(matches!(
            decode_chunk(&spans_rec),
            Err(RecordError::Kind { kind: 2, .. })
        ));
        let mut v2 = chunk_rec.clone();
        v2[1] = 2;
        assert!(matches!(
            decode_chunk(&v2),
            Err(RecordError::Kind { version: 2, .. })
        ));
        // A count its bytes cannot back, a length past the end, a bad flag, trailing bytes.
        let mut huge = spans_rec.clone();
        huge[10..14].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode_spans(&huge), Err(RecordError::Short(_))));
        let mut long = spans_rec.clone();
        long[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode_spans(&long), Err(RecordError::Short(_))));
        let mut flag = encode_spans(1, &spans()[1..]);
        let at = 14 + 4 + 4 + 2 + 16;
        flag[at] = 2;
        assert!(matches!(decode_spans(&flag), Err(RecordError::Invalid(_))));
        let mut trailing = spans_rec;
        trailing.push(0);
        assert!(matches!(
            decode_spans(&trailing),
            Err(RecordError::Invalid(_))
        ));
    }
}
