//! The input log's record format: a compact binary encoding of one `export` batch.
//!
//! Every `export` call appends one record (or a few, see [`MAX_BATCH_RECORD`]) holding all of
//! its chunks, instead of one JSON document per chunk: chunks of one request share their
//! frames, so the record keeps every distinct frame (and its strings) once, and samples are
//! fixed-size numbers rather than text.
//!
//! Layout (all integers LEB128 varints unless noted, strings are `varint length | UTF-8`):
//!
//! ```text
//! FF FF FF FF                 marker: an impossible route length of the legacy format
//! 02                          version
//! json_bytes (u64 LE)         the chunks' JSON size in all (informative: [`charge`] is the size)
//! strings:  n | n × string                         shared frame strings
//! frames:   n | n × (mask | present fields)         shared frames; string fields are indices
//! chunks:   n | n × chunk
//! chunk:    route | approx_json_bytes | chunk_id | profiler_id | environment? | platform |
//!           release? | content_type? | client_sdk? (name, version) | version | debug_meta? |
//!           measurements | frames (indices into the shared frames) | stacks |
//!           threads (distinct thread ids) | samples (f64 bits, 8 bytes LE | stack_id | thread) |
//!           thread_metadata | linked threads (n | n × string)
//! ```
//!
//! The linked threads (version 2) are the chunk's thread ids that spans may reference
//! ([`profilink_consumer::ExportChunk::linked_threads`]): the accumulator never groups them, and a replay
//! must know them to merge as the first run did. Version 1 records (written before them) are
//! read with no linked threads.
//!
//! `x?` is a tag byte (0 absent, 1 present) followed by the value. A debug image's fields
//! other than the known ones (`DebugImage::other`) are kept as a JSON object, as before.
//! Floats are stored as their exact bits. Decoding checks every length, index and UTF-8
//! string, so a corrupt record is reported, never a panic.
//!
//! `approx_json_bytes` is the exact length of the chunk's JSON ([`json_len`]), which the
//! accumulator uses as its size estimate: replaying a record merges exactly as the first run
//! did.
//!
//! **Legacy records.** Queues written before this format hold one record per chunk:
//! `route length (u32 LE) | route | chunk JSON`. They are still read ([`decode`]), so an
//! upgrade with a non-empty queue delivers everything.
//!
//! Files: `json_length` the JSON length estimate, `encode` the encoder, `decode` the decoder,
//! `legacy` the legacy single-chunk records.

mod decode;
mod encode;
mod error;
mod json_length;
mod legacy;
#[cfg(test)]
mod tests;

pub use decode::decode;
pub use encode::{charge, encode_batch, encode_batch_linked};
pub use legacy::encode_legacy;

use profilink_proto::sentry::{CompactString, ProfileChunk};

/// The first four bytes of a record in this format.
pub const MARKER: [u8; 4] = [0xFF; 4];
/// The format version written.
pub const VERSION: u8 = 2;
/// The previous version (no linked threads), still read.
pub const VERSION_1: u8 = 1;
/// Records are closed (and a new one started) once they pass this size, far below the
/// segment log's record limit.
pub const MAX_BATCH_RECORD: usize = 32 << 20;

/// Frame field mask bits: which optional fields a shared frame has.
const F_ABS_PATH: u64 = 1;
const F_COLNO: u64 = 1 << 1;
const F_FILENAME: u64 = 1 << 2;
const F_FUNCTION: u64 = 1 << 3;
const F_IN_APP: u64 = 1 << 4;
const F_IN_APP_TRUE: u64 = 1 << 5;
const F_INSTRUCTION_ADDR: u64 = 1 << 6;
const F_LINENO: u64 = 1 << 7;
const F_MODULE: u64 = 1 << 8;
const F_PACKAGE: u64 = 1 << 9;
const F_PLATFORM: u64 = 1 << 10;
const F_ALL: u64 = (1 << 11) - 1;

/// One chunk of a decoded record, with what the accumulator needs besides the chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedInput {
    /// Routing key.
    pub route: String,
    /// The chunk.
    pub chunk: ProfileChunk,
    /// Exact length of the chunk's JSON (the size estimate).
    pub approx_bytes: u64,
    /// `merge::frame_hash` of each of the chunk's frames.
    pub frame_hashes: Vec<u64>,
    /// Thread ids spans may reference (never grouped).
    pub linked_threads: Vec<CompactString>,
}

/// An encoded record and the chunks (indices into the batch) it holds.
#[derive(Debug)]
pub struct EncodedRecord {
    /// The record body.
    pub body: Vec<u8>,
    /// Indices of the batch's chunks in this record.
    pub chunks: std::ops::Range<usize>,
}

/// What encoding found out about a chunk, for the accumulator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunkInfo {
    /// Exact length of the chunk's JSON (the size estimate).
    pub approx_bytes: u64,
    /// `merge::frame_hash` of each of the chunk's frames (computed once per distinct frame).
    pub frame_hashes: Vec<u64>,
}
