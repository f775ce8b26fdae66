//! The acknowledgement file of a segment, `seg-<seq:016x>.ack`: acknowledged ids, each
//! `id (u64 LE) | CRC32 of the id (u32 LE)`, kept a whole number of entries.

use super::framing::{u32_at, u64_at};
use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Bytes of one entry.
const ACK_LEN: usize = 12;

/// The entries acknowledging `ids`, to append to the segment's file.
pub(super) fn entries(ids: &[u64]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(ids.len() * ACK_LEN);
    for id in ids {
        buf.extend_from_slice(&id.to_le_bytes());
        buf.extend_from_slice(&crc32fast::hash(&id.to_le_bytes()).to_le_bytes());
    }
    buf
}

/// Cuts an acknowledgement file back to a whole number of entries. Entries are read in
/// steps of [`ACK_LEN`] from the start, so a partial one (a write cut short by a full disk,
/// or a crash mid-write) would put every entry appended after it out of step: their ids
/// would not read, and their records would come back after a restart.
pub(super) fn whole_entries(file: &File) -> io::Result<()> {
    let len = file.metadata()?.len();
    let extra = len % ACK_LEN as u64;
    if extra != 0 {
        file.set_len(len - extra)?;
    }
    Ok(())
}

/// The ids acknowledged in the file at `path` (none when it does not exist); entries whose
/// CRC does not match are left out.
pub(super) fn read_acks(path: &Path) -> io::Result<HashSet<u64>> {
    let mut acked = HashSet::new();
    let buf = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(acked),
        Err(e) => return Err(e),
    };
    for rec in buf.chunks_exact(ACK_LEN) {
        let (Some(id), Some(crc)) = (u64_at(rec, 0), u32_at(rec, 8)) else {
            continue;
        };
        if crc32fast::hash(&id.to_le_bytes()) == crc {
            acked.insert(id);
        }
    }
    Ok(acked)
}
