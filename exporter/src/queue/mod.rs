//! The durable queue between `export` and delivery.
//!
//! # Design
//!
//! Two [`segment`] logs under the queue directory:
//! * `input/`: every chunk accepted by `export`, appended and fsynced **before** `export`
//!   returns `Ok` (so the receiver answers success only for data on disk);
//! * `ready/`: merged chunks produced by the accumulator from inputs.
//!
//! An input is acknowledged once every merged chunk holding its samples is durably in `ready/`;
//! a ready record is acknowledged once delivered (or given up, with a count). After a crash,
//! unacknowledged inputs are replayed into the accumulator and unacknowledged ready records are
//! sent again; merged chunk ids are deterministic, so a replayed duplicate has the same id.
//! Keeping merged chunks on disk (rather than holding them in memory until delivered) bounds
//! memory while Sentry rate-limits or is down: the sender reads one record per request.
//!
//! **Why a hand-written segment log and not an embedded store.** The access pattern is a FIFO
//! with out-of-order acknowledgements and no lookups by key, which is exactly an append-only log
//! plus an ack list; whole segment files are deleted when fully acknowledged, so there is no
//! compaction, no write amplification, and one `fdatasync` per `export` batch. Embedded stores
//! would add a B-tree (`redb`: copy-on-write pages, two syncs per commit) or an LSM tree
//! (`fjall`: background compaction threads) for no benefit here, and `sled` is unmaintained. The
//! format is small enough to audit: length + CRC32 framed records with a magic for resync, so a
//! corrupt record is skipped (logged and counted) and a torn tail is ignored.
//!
//! Capacity is counted in bytes of unacknowledged records of both logs. When full, `export` gets
//! [`QueueError::Full`] (`overflow: backpressure`) or the oldest ready records not being sent are
//! dropped (`overflow: drop_oldest`).
//!
//! With `sending_queue.enabled: false` the same structure lives in memory (no durability).

pub mod segment;

use crate::config::{Overflow, QueueConfig};
use crate::metrics::ExporterMetrics;
use segment::SegmentLog;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use thiserror::Error;

/// Queue failures.
#[derive(Debug, Error)]
pub enum QueueError {
    /// Not enough room (`overflow: backpressure`, or nothing left to drop).
    #[error("queue full: {used} of {capacity} bytes used, {needed} more needed")]
    Full {
        /// Bytes in use.
        used: u64,
        /// Capacity.
        capacity: u64,
        /// Bytes the refused append needed.
        needed: u64,
    },
    /// Disk trouble.
    #[error("queue I/O error: {0}")]
    Io(#[from] io::Error),
}

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
}

/// An accepted input chunk.
#[derive(Debug, Clone)]
pub struct InputRecord {
    /// Queue id.
    pub id: u64,
    /// Routing key.
    pub route: String,
    /// The chunk's JSON.
    pub json: Vec<u8>,
}

/// What was found in the queue directory on open.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Unacknowledged inputs, oldest first.
    pub inputs: Vec<InputRecord>,
    /// Unacknowledged merged chunks, oldest first.
    pub ready: Vec<ReadyMeta>,
    /// Records skipped as corrupt.
    pub corrupt: u64,
}

#[derive(Debug, Default)]
struct MemLog {
    records: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

#[derive(Debug)]
enum Log {
    Disk(SegmentLog),
    Mem(MemLog),
}

impl Log {
    fn append(&mut self, records: &[(u64, &[u8])]) -> io::Result<()> {
        match self {
            Log::Disk(l) => l.append(records),
            Log::Mem(m) => {
                for (id, body) in records {
                    m.bytes += record_size(body.len());
                    m.records.insert(*id, body.to_vec());
                }
                Ok(())
            }
        }
    }
    fn read(&self, id: u64) -> io::Result<Option<Vec<u8>>> {
        match self {
            Log::Disk(l) => l.read(id),
            Log::Mem(m) => Ok(m.records.get(&id).cloned()),
        }
    }
    fn ack(&mut self, ids: &[u64]) -> io::Result<()> {
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
    fn live_bytes(&self) -> u64 {
        match self {
            Log::Disk(l) => l.live_bytes(),
            Log::Mem(m) => m.bytes,
        }
    }
}

fn record_size(body: usize) -> u64 {
    (body + 20) as u64
}

#[derive(Debug)]
struct Inner {
    input: Log,
    ready: Log,
    next_id: u64,
}

/// In-memory index of ready records, under its own lock so the sender never waits on an fsync.
#[derive(Debug, Default)]
struct Index {
    ready_meta: BTreeMap<u64, ReadyMeta>,
    leased: HashSet<u64>,
}

/// The queue. All methods block on disk I/O: call them from `spawn_blocking`.
#[derive(Debug)]
pub struct Queue {
    inner: Mutex<Inner>,
    index: Mutex<Index>,
    capacity: u64,
    overflow: Overflow,
    metrics: Arc<ExporterMetrics>,
}

fn encode_with_prefix(prefix: &[u8], json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + prefix.len() + json.len());
    out.extend_from_slice(&(prefix.len() as u32).to_le_bytes());
    out.extend_from_slice(prefix);
    out.extend_from_slice(json);
    out
}

fn split_prefix(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let prefix = body.get(4..4 + len)?;
    Some((prefix, body.get(4 + len..)?))
}

fn decode_ready(id: u64, body: &[u8]) -> Option<(ReadyMeta, &[u8])> {
    let (meta, json) = split_prefix(body)?;
    let mut meta: ReadyMeta = serde_json::from_slice(meta).ok()?;
    meta.id = id;
    meta.bytes = record_size(body.len());
    Some((meta, json))
}

impl Queue {
    /// Opens the queue: on disk under `dir` when `cfg.enabled`, else in memory.
    pub fn open(
        cfg: &QueueConfig,
        dir: &Path,
        metrics: Arc<ExporterMetrics>,
    ) -> Result<(Queue, Recovery), QueueError> {
        let mut rec = Recovery::default();
        let mut max_id = 0u64;
        let mut bad_inputs: Vec<u64> = Vec::new();
        let mut bad_ready: Vec<u64> = Vec::new();
        let (input, ready) = if cfg.enabled {
            let mut inputs = Vec::new();
            let (input, s1) = SegmentLog::open(
                &dir.join("input"),
                cfg.fsync,
                cfg.segment_bytes,
                |id, body| {
                    max_id = max_id.max(id);
                    match split_prefix(body) {
                        Some((route, json)) => inputs.push(InputRecord {
                            id,
                            route: String::from_utf8_lossy(route).into_owned(),
                            json: json.to_vec(),
                        }),
                        None => {
                            tracing::warn!(
                                id,
                                "queue: input record without a route prefix; skipped"
                            );
                            rec.corrupt += 1;
                            bad_inputs.push(id);
                        }
                    }
                },
            )?;
            let mut ready = Vec::new();
            let (ready_log, s2) = SegmentLog::open(
                &dir.join("ready"),
                cfg.fsync,
                cfg.segment_bytes,
                |id, body| {
                    max_id = max_id.max(id);
                    match decode_ready(id, body) {
                        Some((meta, _)) => ready.push(meta),
                        None => {
                            tracing::warn!(
                                id,
                                "queue: ready record with unreadable metadata; skipped"
                            );
                            rec.corrupt += 1;
                            bad_ready.push(id);
                        }
                    }
                },
            )?;
            rec.corrupt += s1.corrupt + s2.corrupt;
            rec.inputs = inputs;
            rec.ready = ready;
            (Log::Disk(input), Log::Disk(ready_log))
        } else {
            (Log::Mem(MemLog::default()), Log::Mem(MemLog::default()))
        };
        let mut inner = Inner {
            input,
            ready,
            next_id: max_id + 1,
        };
        let mut index = Index::default();
        // Records whose body could not be decoded are acknowledged so they do not linger.
        inner.input.ack(&bad_inputs)?;
        inner.ready.ack(&bad_ready)?;
        for m in &rec.ready {
            index.ready_meta.insert(m.id, m.clone());
        }
        ExporterMetrics::add(&metrics.corrupt_records, rec.corrupt);
        let q = Queue {
            inner: Mutex::new(inner),
            index: Mutex::new(index),
            capacity: cfg.capacity_bytes(),
            overflow: cfg.overflow,
            metrics,
        };
        q.metrics
            .queue_capacity_bytes
            .store(q.capacity, Ordering::Relaxed);
        q.update_size(&q.lock());
        Ok((q, rec))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the logs inconsistent beyond what a crash
        // would, so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update_size(&self, inner: &Inner) {
        let used = inner.input.live_bytes() + inner.ready.live_bytes();
        self.metrics.queue_size_bytes.store(used, Ordering::Relaxed);
    }

    /// Bytes of unacknowledged records.
    pub fn size_bytes(&self) -> u64 {
        let inner = self.lock();
        inner.input.live_bytes() + inner.ready.live_bytes()
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Durably appends input chunks `(route, json)`; returns their ids, plus the ready records
    /// dropped to make room (`overflow: drop_oldest`).
    pub fn append_inputs(
        &self,
        items: &[(String, Vec<u8>)],
    ) -> Result<(Vec<u64>, Vec<ReadyMeta>), QueueError> {
        let bodies: Vec<Vec<u8>> = items
            .iter()
            .map(|(route, json)| encode_with_prefix(route.as_bytes(), json))
            .collect();
        let needed: u64 = bodies.iter().map(|b| record_size(b.len())).sum();
        let mut inner = self.lock();
        let mut dropped = Vec::new();
        let used = inner.input.live_bytes() + inner.ready.live_bytes();
        if used + needed > self.capacity {
            if self.overflow == Overflow::DropOldest {
                let mut free = self.capacity.saturating_sub(used);
                let candidates: Vec<ReadyMeta> = {
                    let index = self.index();
                    index
                        .ready_meta
                        .values()
                        .filter(|m| !index.leased.contains(&m.id))
                        .cloned()
                        .collect()
                };
                for m in candidates {
                    if free >= needed {
                        break;
                    }
                    free += m.bytes;
                    dropped.push(m);
                }
                if free >= needed {
                    let ids: Vec<u64> = dropped.iter().map(|m| m.id).collect();
                    inner.ready.ack(&ids)?;
                    let mut index = self.index();
                    for id in &ids {
                        index.ready_meta.remove(id);
                    }
                } else {
                    dropped.clear();
                }
            }
            let used = inner.input.live_bytes() + inner.ready.live_bytes();
            if used + needed > self.capacity {
                return Err(QueueError::Full {
                    used,
                    capacity: self.capacity,
                    needed,
                });
            }
        }
        let first = inner.next_id;
        inner.next_id += bodies.len() as u64;
        let ids: Vec<u64> = (first..first + bodies.len() as u64).collect();
        let records: Vec<(u64, &[u8])> = ids
            .iter()
            .copied()
            .zip(bodies.iter().map(Vec::as_slice))
            .collect();
        inner.input.append(&records)?;
        self.update_size(&inner);
        Ok((ids, dropped))
    }

    /// Durably appends merged chunks; fills in and returns their metadata.
    pub fn append_ready(
        &self,
        items: Vec<(ReadyMeta, Vec<u8>)>,
    ) -> Result<Vec<ReadyMeta>, QueueError> {
        let mut inner = self.lock();
        let mut metas = Vec::with_capacity(items.len());
        let mut bodies = Vec::with_capacity(items.len());
        for (mut meta, json) in items {
            let prefix = serde_json::to_vec(&meta).map_err(io::Error::other)?;
            let body = encode_with_prefix(&prefix, &json);
            meta.id = inner.next_id;
            inner.next_id += 1;
            meta.bytes = record_size(body.len());
            metas.push(meta);
            bodies.push(body);
        }
        let records: Vec<(u64, &[u8])> = metas
            .iter()
            .map(|m| m.id)
            .zip(bodies.iter().map(Vec::as_slice))
            .collect();
        inner.ready.append(&records)?;
        let mut index = self.index();
        for m in &metas {
            index.ready_meta.insert(m.id, m.clone());
        }
        self.update_size(&inner);
        Ok(metas)
    }

    /// Marks a ready record as being sent (so `drop_oldest` leaves it alone). False when the
    /// record is gone (dropped).
    pub fn lease(&self, id: u64) -> bool {
        let mut index = self.index();
        if index.ready_meta.contains_key(&id) {
            index.leased.insert(id);
            true
        } else {
            false
        }
    }

    /// Ends a lease.
    pub fn unlease(&self, id: u64) {
        self.index().leased.remove(&id);
    }

    /// Reads a ready record: its metadata and chunk JSON.
    pub fn read_ready(&self, id: u64) -> Result<Option<(ReadyMeta, Vec<u8>)>, QueueError> {
        let inner = self.lock();
        let Some(body) = inner.ready.read(id)? else {
            return Ok(None);
        };
        match decode_ready(id, &body) {
            Some((meta, json)) => Ok(Some((meta, json.to_vec()))),
            None => Err(QueueError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("queue record {id} has unreadable metadata"),
            ))),
        }
    }

    /// Acknowledges inputs.
    pub fn ack_inputs(&self, ids: &[u64]) -> Result<(), QueueError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        inner.input.ack(ids)?;
        self.update_size(&inner);
        Ok(())
    }

    /// Acknowledges ready records.
    pub fn ack_ready(&self, ids: &[u64]) -> Result<(), QueueError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut inner = self.lock();
        inner.ready.ack(ids)?;
        let mut index = self.index();
        for id in ids {
            index.ready_meta.remove(id);
            index.leased.remove(id);
        }
        self.update_size(&inner);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(max_mib: u64, overflow: Overflow) -> QueueConfig {
        QueueConfig {
            max_size_mib: max_mib,
            overflow,
            ..Default::default()
        }
    }

    fn meta(route: &str) -> ReadyMeta {
        ReadyMeta {
            id: 0,
            route: route.into(),
            category: "profile_chunk".into(),
            chunk_id: "c".repeat(32),
            platform: "rust".into(),
            bytes: 0,
        }
    }

    #[test]
    fn inputs_and_ready_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let m = Arc::new(ExporterMetrics::default());
        let (q, rec) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m.clone()).unwrap();
        assert!(rec.inputs.is_empty());
        let (ids, _) = q
            .append_inputs(&[
                ("a".into(), b"{}".to_vec()),
                ("".into(), b"{\"x\":1}".to_vec()),
            ])
            .unwrap();
        let metas = q
            .append_ready(vec![(meta("a"), b"{\"chunk\":1}".to_vec())])
            .unwrap();
        q.ack_inputs(&ids[..1]).unwrap();
        assert!(m.snapshot().queue_size_bytes > 0);
        drop(q);
        let (q, rec) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m).unwrap();
        assert_eq!(rec.inputs.len(), 1);
        assert_eq!(rec.inputs[0].route, "");
        assert_eq!(rec.inputs[0].json, b"{\"x\":1}");
        assert_eq!(rec.ready.len(), 1);
        assert_eq!(rec.ready[0].route, "a");
        let (m2, json) = q.read_ready(metas[0].id).unwrap().unwrap();
        assert_eq!(m2.chunk_id, "c".repeat(32));
        assert_eq!(json, b"{\"chunk\":1}");
        // New ids do not collide with recovered ones.
        let (ids2, _) = q.append_inputs(&[("".into(), b"{}".to_vec())]).unwrap();
        assert!(ids2[0] > metas[0].id);
    }

    #[test]
    fn full_queue_backpressures_or_drops_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let m = Arc::new(ExporterMetrics::default());
        let big = vec![b'x'; 400 << 10];
        let (q, _) = Queue::open(&cfg(1, Overflow::Backpressure), dir.path(), m.clone()).unwrap();
        q.append_inputs(&[("".into(), big.clone())]).unwrap();
        q.append_inputs(&[("".into(), big.clone())]).unwrap();
        assert!(matches!(
            q.append_inputs(&[("".into(), big.clone())]),
            Err(QueueError::Full { .. })
        ));
        drop(q);

        let dir = tempfile::tempdir().unwrap();
        let (q, _) = Queue::open(&cfg(1, Overflow::DropOldest), dir.path(), m).unwrap();
        let r = q
            .append_ready(vec![(meta(""), big.clone()), (meta(""), big.clone())])
            .unwrap();
        assert!(q.lease(r[1].id));
        let (_, dropped) = q.append_inputs(&[("".into(), big.clone())]).unwrap();
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].id, r[0].id);
        assert!(!q.lease(r[0].id));
        // Only the leased one is left to drop: refused.
        assert!(q.append_inputs(&[("".into(), big)]).is_err());
    }

    #[test]
    fn memory_queue_works_without_disk() {
        let m = Arc::new(ExporterMetrics::default());
        let c = QueueConfig {
            enabled: false,
            ..Default::default()
        };
        let (q, _) = Queue::open(&c, Path::new("/nonexistent/never-created"), m).unwrap();
        let (ids, _) = q.append_inputs(&[("".into(), b"{}".to_vec())]).unwrap();
        q.ack_inputs(&ids).unwrap();
        assert_eq!(q.size_bytes(), 0);
    }
}
