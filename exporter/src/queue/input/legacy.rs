//! Legacy records: `route length (u32 LE) | route | chunk JSON`, one chunk per record, as
//! versions before the binary format wrote them. Still read, so an upgrade with a non-empty
//! queue delivers everything.

use super::DecodedInput;
use super::error::DecodeError;
use crate::merge::frame_hash;
use profilink_proto::sentry::ProfileChunk;

/// `route length (u32 LE) | route | chunk JSON` (queues written before the binary format).
pub(super) fn decode_legacy(body: &[u8]) -> Result<DecodedInput, DecodeError> {
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    let len = u32::from_le_bytes(len_bytes) as usize;
    let route = body
        .get(4..4usize.saturating_add(len))
        .ok_or(DecodeError::Truncated)?;
    let json = &body[4 + len..];
    let chunk = ProfileChunk::from_json(json)?;
    Ok(DecodedInput {
        route: String::from_utf8_lossy(route).into_owned(),
        linked_threads: Vec::new(),
        frame_hashes: chunk.profile.frames.iter().map(|f| frame_hash(f)).collect(),
        chunk,
        approx_bytes: json.len() as u64,
    })
}

/// A legacy record, as versions before the binary format wrote them (tests of the upgrade
/// path).
pub fn encode_legacy(route: &str, chunk: &ProfileChunk) -> Vec<u8> {
    let json = chunk.to_json();
    let mut out = Vec::with_capacity(4 + route.len() + json.len());
    out.extend_from_slice(&(route.len() as u32).to_le_bytes());
    out.extend_from_slice(route.as_bytes());
    out.extend_from_slice(&json);
    out
}
