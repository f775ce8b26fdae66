//! The join log: what a durable join buffer holds, on disk. Two segment logs
//! ([`SegmentLog`], the exporters' CRC-framed, fsynced, append-only log with
//! acknowledgements) under the pipeline's join directory:
//!
//! * `chunks/`: one record per held chunk ([`record::encode_chunk`]), acknowledged once the
//!   OTLP exporters accepted the translated request that carries it;
//! * `spans/`: one record per request's spans ([`record::encode_spans`]), acknowledged once
//!   every span of it left the buffer (retention or eviction).
//!
//! Two logs rather than one: a spans record lives for `span_retention` (2 min), a chunk for
//! about `join_window` (30 s), and a segment file is deleted only when all its records are
//! acknowledged; mixed, each small spans record would keep megabytes of chunks on disk for
//! minutes. An envelope rarely carries both (SDKs send chunks and transactions apart), so a
//! request costs one fsync; one with both costs two.
//!
//! Appends are synced before they return (the `sentry` receiver answers 200 only after);
//! acknowledgements are written, not synced (a process crash keeps them; a power loss may bring
//! an acknowledged record back once more). Both directories are locked while open: a second
//! pipeline or process on the same directory is refused.

use super::record::{self, ChunkRecord, SpansRecord};
use profilink_storage::SegmentLog;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Segment size of the chunks log.
const CHUNK_SEGMENT_BYTES: u64 = 4 << 20;
/// Segment size of the spans log.
const SPAN_SEGMENT_BYTES: u64 = 1 << 20;

/// One request's encoded records: its chunks' and, if it has spans, its spans record.
pub type Request<'a> = (&'a [Vec<u8>], Option<&'a [u8]>);

/// Record ids of one request: its chunks' in order, and its spans' (0: none).
pub type Written = (Vec<u64>, u64);

/// A pipeline's join log. Blocking I/O: call it off the async runtime's threads.
#[derive(Debug)]
pub struct JoinLog {
    dir: PathBuf,
    chunks: Mutex<SegmentLog>,
    spans: Mutex<SegmentLog>,
    next_id: AtomicU64,
    /// Live bytes of each log after its last write (read without waiting for a sync).
    chunk_bytes: AtomicU64,
    span_bytes: AtomicU64,
}

/// What [`JoinLog::open`] found: the live records in append order, and what did not read.
#[derive(Debug, Default)]
pub struct Replay {
    /// Held chunks, by record id.
    pub chunks: Vec<(u64, ChunkRecord)>,
    /// Kept spans, by record id.
    pub spans: Vec<(u64, SpansRecord)>,
    /// Records skipped: a bad frame or CRC, or a body that does not decode (logged; those
    /// that framed correctly are acknowledged so they do not come back).
    pub corrupt: u64,
    /// Segments that ended in a partial record (a crash mid-append: never acknowledged to a
    /// client, ignored).
    pub torn_tails: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens one of the two logs and decodes its live records; those that do not decode are
/// acknowledged (and counted in `replay`).
fn open_one<T>(
    dir: &Path,
    segment_bytes: u64,
    decode: impl Fn(&[u8]) -> Result<T, record::RecordError>,
    out: &mut Vec<(u64, T)>,
    replay: &mut Replay,
    max_id: &mut u64,
) -> io::Result<SegmentLog> {
    let mut bad = Vec::new();
    let (mut log, stats) = SegmentLog::open(dir, true, segment_bytes, |id, body| {
        *max_id = (*max_id).max(id);
        match decode(body) {
            Ok(r) => out.push((id, r)),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), id, error = %e, "join log: skipping a record that does not decode");
                bad.push(id);
            }
        }
    })?;
    replay.corrupt += stats.corrupt + bad.len() as u64;
    replay.torn_tails += stats.torn_tails;
    log.ack(&bad)?;
    Ok(log)
}

impl JoinLog {
    /// Opens (creating) the join log in `dir` and reads what an earlier run left there.
    pub fn open(dir: &Path) -> io::Result<(JoinLog, Replay)> {
        let mut replay = Replay::default();
        let mut max_id = 0;
        let mut chunks = Vec::new();
        let mut spans = Vec::new();
        let chunks_log = open_one(
            &dir.join("chunks"),
            CHUNK_SEGMENT_BYTES,
            record::decode_chunk,
            &mut chunks,
            &mut replay,
            &mut max_id,
        )?;
        let spans_log = open_one(
            &dir.join("spans"),
            SPAN_SEGMENT_BYTES,
            record::decode_spans,
            &mut spans,
            &mut replay,
            &mut max_id,
        )?;
        replay.chunks = chunks;
        replay.spans = spans;
        let log = JoinLog {
            chunk_bytes: AtomicU64::new(chunks_log.live_bytes()),
            span_bytes: AtomicU64::new(spans_log.live_bytes()),
            dir: dir.to_path_buf(),
            chunks: Mutex::new(chunks_log),
            spans: Mutex::new(spans_log),
            next_id: AtomicU64::new(max_id + 1),
        };
        Ok((log, replay))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One request's records, appended alone (tests).
    #[cfg(test)]
    pub fn append(&self, chunks: &[Vec<u8>], spans: Option<&[u8]>) -> io::Result<Written> {
        let mut ids = self.append_group(&[(chunks, spans)])?;
        Ok(ids.pop().unwrap_or_default())
    }

    /// Appends the encoded records of several requests (a group commit: one write and one
    /// sync per log for all of them) and returns each request's record ids, in order. An error
    /// fails them all, and nothing stays: chunk records already written when the spans log
    /// fails are acknowledged again.
    pub fn append_group(&self, group: &[Request<'_>]) -> io::Result<Vec<Written>> {
        let n: usize = group
            .iter()
            .map(|(c, s)| c.len() + usize::from(s.is_some()))
            .sum();
        let mut next = self.next_id.fetch_add(n as u64, Ordering::Relaxed);
        let mut out = Vec::with_capacity(group.len());
        let mut chunk_records: Vec<(u64, &[u8])> = Vec::new();
        let mut span_records: Vec<(u64, &[u8])> = Vec::new();
        for (chunks, spans) in group {
            let mut ids = Vec::with_capacity(chunks.len());
            for body in chunks.iter() {
                ids.push(next);
                chunk_records.push((next, body.as_slice()));
                next += 1;
            }
            let span_id = match spans {
                Some(body) => {
                    span_records.push((next, body));
                    next += 1;
                    next - 1
                }
                None => 0,
            };
            out.push((ids, span_id));
        }
        if !chunk_records.is_empty() {
            let mut log = lock(&self.chunks);
            let r = log.append(&chunk_records);
            self.chunk_bytes.store(log.live_bytes(), Ordering::Relaxed);
            r?;
        }
        if !span_records.is_empty() {
            let mut log = lock(&self.spans);
            let r = log.append(&span_records);
            self.span_bytes.store(log.live_bytes(), Ordering::Relaxed);
            drop(log);
            if let Err(e) = r {
                let written: Vec<u64> = chunk_records.iter().map(|(id, _)| *id).collect();
                if let Err(undo) = self.ack_chunks(&written) {
                    tracing::warn!(dir = %self.dir.display(), error = %undo, "join log: could not take back the chunks of refused requests; they may come back once after a restart");
                }
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Acknowledges chunk records (their chunks reached the exporters, or were refused with
    /// their request).
    pub fn ack_chunks(&self, ids: &[u64]) -> io::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut log = lock(&self.chunks);
        let r = log.ack(ids);
        self.chunk_bytes.store(log.live_bytes(), Ordering::Relaxed);
        r
    }

    /// Acknowledges spans records (their spans all left the buffer).
    pub fn ack_spans(&self, ids: &[u64]) -> io::Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut log = lock(&self.spans);
        let r = log.ack(ids);
        self.span_bytes.store(log.live_bytes(), Ordering::Relaxed);
        r
    }

    /// Bytes of live records on disk (frames included). Never waits for a write.
    pub fn live_bytes(&self) -> u64 {
        self.chunk_bytes.load(Ordering::Relaxed) + self.span_bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
