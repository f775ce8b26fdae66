//! Where a log's records live: a [`SegmentLog`] on disk, or a map in memory
//! (`sending_queue.enabled: false`); and the input log's capacity charges.

use super::input;
use profilink_storage::{RecordRef, SegmentLog};
use std::collections::{BTreeMap, HashMap};
use std::io;

/// A log in memory (`sending_queue.enabled: false`).
#[derive(Debug, Default)]
pub(super) struct MemLog {
    records: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl MemLog {
    fn insert(&mut self, id: u64, body: Vec<u8>) {
        self.bytes += record_size(body.len());
        self.records.insert(id, body);
    }
}

#[derive(Debug)]
pub(super) enum Log {
    Disk(SegmentLog),
    Mem(MemLog),
}

/// Where a record is: read outside the log's lock.
pub(super) enum Located {
    Disk(RecordRef),
    Mem(Vec<u8>),
}

impl Log {
    pub(super) fn append(&mut self, records: &[(u64, &[u8])]) -> io::Result<()> {
        match self {
            Log::Disk(l) => l.append(records),
            Log::Mem(m) => {
                for (id, body) in records {
                    m.insert(*id, body.to_vec());
                }
                Ok(())
            }
        }
    }
    /// [`Log::append`] with each body given as parts to concatenate (written as they are on
    /// disk: [`SegmentLog::append_parts`]).
    pub(super) fn append_parts(&mut self, records: &[(u64, &[&[u8]])]) -> io::Result<()> {
        match self {
            Log::Disk(l) => l.append_parts(records),
            Log::Mem(m) => {
                for (id, parts) in records {
                    m.insert(*id, parts.concat());
                }
                Ok(())
            }
        }
    }
    pub(super) fn locate(&self, id: u64) -> Option<Located> {
        match self {
            Log::Disk(l) => l.locate(id).map(Located::Disk),
            Log::Mem(m) => m.records.get(&id).cloned().map(Located::Mem),
        }
    }
    pub(super) fn ack(&mut self, ids: &[u64]) -> io::Result<()> {
        match self {
            Log::Disk(l) => l.ack(ids),
            Log::Mem(m) => {
                for id in ids {
                    if let Some(b) = m.records.remove(id) {
                        m.bytes = m.bytes.saturating_sub(record_size(b.len()));
                    }
                }
                Ok(())
            }
        }
    }
    pub(super) fn live_bytes(&self) -> u64 {
        match self {
            Log::Disk(l) => l.live_bytes(),
            Log::Mem(m) => m.bytes,
        }
    }
}

/// What a record of `body` bytes takes in a log (framing included).
pub(super) fn record_size(body: usize) -> u64 {
    (body + 20) as u64
}

/// The input log with what each live record counts for ([`input::charge`]).
#[derive(Debug)]
pub(super) struct InputLog {
    pub(super) log: Log,
    pub(super) charges: HashMap<u64, u64>,
    pub(super) charged: u64,
}

impl InputLog {
    pub(super) fn add(&mut self, id: u64, body: &[u8]) {
        let c = record_size(0) + input::charge(body);
        self.charges.insert(id, c);
        self.charged += c;
    }
}
