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

/// A ready record: `prefix` (the metadata JSON) with its length, then the chunk JSON.
pub(super) fn encode_with_prefix(prefix: &[u8], json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + prefix.len() + json.len());
    out.extend_from_slice(&(prefix.len() as u32).to_le_bytes());
    out.extend_from_slice(prefix);
    out.extend_from_slice(json);
    out
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
