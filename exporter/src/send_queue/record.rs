//! The record format of the OTLP exporters' durable queue ([`super::SendQueue`] with
//! `storage`): one export request per record, as the segment log's opaque body
//! ([`profilink_storage`] adds the frame, id and CRC):
//!
//! `version (u8, 1) | kind (u8: b'P' profiles, b'T' traces) | items (u64 LE) | protobuf request`
//!
//! `items` (profiles or spans of the request) is read at start without decoding the request,
//! so that a replayed queue is counted without parsing every request. A record whose header
//! or protobuf does not read is refused with a [`RecordError`], never a panic.

use prost::Message;

/// The current record version.
pub const VERSION: u8 = 1;

/// Bytes before the protobuf request.
pub const HEADER: usize = 10;

/// A request type the queue can hold: a protobuf message with a record kind.
pub trait Queued: Message + Default + Send + 'static {
    /// The record kind byte (`b'P'` profiles, `b'T'` traces): a directory of one signal's
    /// records is never read as another's.
    const KIND: u8;
}

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Shorter than its header.
    #[error("queue record too short ({0} bytes)")]
    Short(usize),
    /// Written by another version of profilink.
    #[error("queue record version {0} is unknown (this version reads {VERSION})")]
    Version(u8),
    /// Another signal's record.
    #[error("queue record of kind {found:?} where {expected:?} was expected")]
    Kind {
        /// The kind found.
        found: char,
        /// The kind of this queue.
        expected: char,
    },
    /// The request does not decode.
    #[error("queue record request does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// Encodes `value` (with its `items`) as a record.
pub fn encode<T: Queued>(value: &T, items: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + value.encoded_len());
    out.push(VERSION);
    out.push(T::KIND);
    out.extend_from_slice(&items.to_le_bytes());
    // Encoding into a Vec cannot fail (it grows as needed).
    let _ = value.encode(&mut out);
    out
}

/// The item count of a record of kind `T`, from its header only.
pub fn header<T: Queued>(record: &[u8]) -> Result<u64, RecordError> {
    let Some((head, _)) = record.split_first_chunk::<HEADER>() else {
        return Err(RecordError::Short(record.len()));
    };
    if head[0] != VERSION {
        return Err(RecordError::Version(head[0]));
    }
    if head[1] != T::KIND {
        return Err(RecordError::Kind {
            found: char::from(head[1]),
            expected: char::from(T::KIND),
        });
    }
    let mut items = [0u8; 8];
    items.copy_from_slice(&head[2..]);
    Ok(u64::from_le_bytes(items))
}

/// Decodes a record of kind `T`: the request and its item count.
pub fn decode<T: Queued>(record: &[u8]) -> Result<(T, u64), RecordError> {
    let items = header::<T>(record)?;
    let value = T::decode(&record[HEADER..])?;
    Ok((value, items))
}
