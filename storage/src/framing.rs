//! The record frame of a segment file, `magic (4 bytes, FF 50 4C 51) | length (u32 LE) |
//! CRC32 of payload (u32 LE) | payload` with the record id (u64 LE) starting the payload: how
//! one record is written, checked when read back, and found again in a segment after garbage.

use super::ScanStats;

const MAGIC: [u8; 4] = [0xFF, 0x50, 0x4C, 0x51];
/// Bytes before the payload (magic, length, CRC).
pub(super) const HEADER: usize = 12;
/// Largest record accepted (a sanity bound on the length field).
pub const MAX_RECORD: usize = 256 << 20;

/// Bytes a record of `body_len` takes in its segment, frame and id included.
pub(super) fn framed_len(body_len: usize) -> u32 {
    (HEADER + 8 + body_len) as u32
}

fn find_magic(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(MAGIC.len())
        .position(|w| w == MAGIC)
        .map(|p| p + from)
}

/// The little-endian `u32` at `at`, if `buf` holds one there.
pub(super) fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// The little-endian `u64` at `at`, if `buf` holds one there.
pub(super) fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The header of one record (magic, length, CRC, id) whose body is `parts` concatenated: the
/// frame is this header followed by the parts, so the body is never copied to be framed.
pub(super) fn header(id: u64, parts: &[&[u8]]) -> [u8; HEADER + 8] {
    let body_len: usize = parts.iter().map(|p| p.len()).sum();
    let len = (8 + body_len) as u32;
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    for p in parts {
        h.update(p);
    }
    let mut out = [0u8; HEADER + 8];
    out[..4].copy_from_slice(&MAGIC);
    out[4..8].copy_from_slice(&len.to_le_bytes());
    out[8..12].copy_from_slice(&h.finalize().to_le_bytes());
    out[12..].copy_from_slice(&id.to_le_bytes());
    out
}

/// Frames one record into `out` (its [`header`], then its body).
#[cfg(test)]
pub(super) fn frame(id: u64, body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&header(id, &[body]));
    out.extend_from_slice(body);
}

/// The body of record `id` from its whole frame `buf` (as [`frame`] wrote it), or `None` when
/// the magic, the CRC or the id does not match.
pub(super) fn body(mut buf: Vec<u8>, id: u64) -> Option<Vec<u8>> {
    let ok = buf.get(..4) == Some(&MAGIC[..])
        && u32_at(&buf, 8).is_some_and(|crc| crc32fast::hash(&buf[HEADER..]) == crc)
        && u64_at(&buf, HEADER) == Some(id);
    if !ok {
        return None;
    }
    buf.drain(..HEADER + 8);
    Some(buf)
}

/// Parses every valid record of `buf`, calling `f(id, offset of frame, body)`.
pub(super) fn scan(
    buf: &[u8],
    stats: &mut ScanStats,
    name: &str,
    mut f: impl FnMut(u64, u64, &[u8]),
) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let mut torn = false;
        if rest.len() < HEADER {
            // A header cut short by a crash starts like the magic.
            torn = rest.iter().zip(MAGIC.iter()).all(|(a, b)| a == b);
        } else if rest[..4] == MAGIC {
            let len = u32_at(rest, 4).unwrap_or(0) as usize;
            let crc = u32_at(rest, 8).unwrap_or(0);
            let len_ok = (8..=MAX_RECORD).contains(&len);
            if len_ok && HEADER + len <= rest.len() {
                let payload = &rest[HEADER..HEADER + len];
                if crc32fast::hash(payload) == crc {
                    let id = u64_at(payload, 0).unwrap_or(0);
                    f(id, pos as u64, &payload[8..]);
                    pos += HEADER + len;
                    continue;
                }
            } else if len_ok {
                torn = true;
            }
        }
        match find_magic(buf, pos + 1) {
            Some(next) => {
                tracing::warn!(
                    segment = name,
                    offset = pos,
                    "queue: skipping a corrupt record"
                );
                stats.corrupt += 1;
                pos = next;
            }
            None => {
                if torn {
                    stats.torn_tails += 1;
                    tracing::warn!(
                        segment = name,
                        offset = pos,
                        "queue: ignoring a partial record at the end of a segment (crash mid-append)"
                    );
                } else {
                    stats.corrupt += 1;
                    tracing::warn!(
                        segment = name,
                        offset = pos,
                        "queue: skipping a corrupt record"
                    );
                }
                return;
            }
        }
    }
}
