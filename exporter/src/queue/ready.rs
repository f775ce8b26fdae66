//! The ready log's record format: `metadata length (u32 LE) | metadata JSON | chunk JSON`.

use super::consumed;
use super::log::record_size;
use serde::{Deserialize, Serialize};

/// Metadata of a merged chunk in the ready log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyMeta {
    /// Queue id (assigned on append).
    #[serde(skip)]
    pub id: u64,
    /// Routing key (empty: the default destination).
    pub route: String,
    /// Sentry data category (`profile_chunk` / `profile_chunk_ui`).
    pub category: String,
    /// The merged chunk's id.
    pub chunk_id: String,
    /// The chunk's platform (the item header repeats it).
    pub platform: String,
    /// Record size in bytes.
    #[serde(skip)]
    pub bytes: u64,
    /// Samples in the chunk (0 in records of older versions).
    #[serde(default)]
    pub samples: u64,
    /// The timestamp range taken from each input part (see [`consumed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumed: Vec<consumed::Consumed>,
}

/// A ready record's body in its three parts: `prefix` (the metadata JSON)'s length (u32 LE),
/// `prefix`, then the chunk JSON. Given as parts so the log writes them without a copy.
pub(super) fn record_parts<'a>(
    len: &'a [u8; 4],
    prefix: &'a [u8],
    json: &'a [u8],
) -> [&'a [u8]; 3] {
    [len, prefix, json]
}

/// The length field of a ready record with this `prefix` (see [`record_parts`]).
pub(super) fn prefix_len(prefix: &[u8]) -> [u8; 4] {
    (prefix.len() as u32).to_le_bytes()
}

/// The metadata JSON and the chunk JSON of a ready record; `None` when the record is corrupt.
pub(super) fn split_prefix(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let end = 4usize.checked_add(len)?;
    Some((body.get(4..end)?, body.get(end..)?))
}

/// Reads a ready-log record body: its [`ReadyMeta`] (with `id` and `bytes` set) and the
/// chunk JSON after it; `None` when the record is corrupt. Public for the fuzz targets only.
#[doc(hidden)]
pub fn decode_ready(id: u64, body: &[u8]) -> Option<(ReadyMeta, &[u8])> {
    let (meta, json) = split_prefix(body)?;
    let mut meta: ReadyMeta = serde_json::from_slice(meta).ok()?;
    meta.id = id;
    meta.bytes = record_size(body.len());
    Some((meta, json))
}
