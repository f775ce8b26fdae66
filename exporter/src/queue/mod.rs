//! The durable queue between `export` and delivery.
//!
//! # Design
//!
//! Two segment logs ([`profilink_storage`]) under the queue directory:
//! * `input/`: every batch of chunks accepted by `export`, appended and fsynced **before**
//!   `export` returns `Ok` (so the receiver answers success only for data on disk). One record
//!   holds a whole batch in a compact binary format ([`input`]): a version byte, the batch's
//!   distinct frames and their strings once, then each chunk with its route, its exact JSON
//!   size and its samples as fixed-size numbers. (Before, each chunk was a record of its own,
//!   `route length | route | chunk JSON`; such records are still read, so a queue left by an
//!   older version is delivered after an upgrade.)
//! * `ready/`: merged chunks produced by the accumulator from inputs, each
//!   `metadata length (u32 LE) | metadata JSON | chunk JSON` (the payload sent as is).
//!
//! An input record is acknowledged once every merged chunk holding samples of any of its
//! chunks is durably in `ready/`;
//! a ready record is acknowledged once delivered (or given up, with a count). After a crash,
//! unacknowledged inputs are replayed into the accumulator and unacknowledged ready records are
//! sent again; merged chunk ids are deterministic, so a replayed duplicate has the same id.
//! Records are fsynced before an append returns; acknowledgements are written without a sync,
//! so after a power loss (not a process crash) a few delivered chunks may be sent again.
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
//! Capacity is counted in bytes of unacknowledged records of both logs, as they take on disk
//! ([`input::charge`]). When full, `export` gets [`QueueError::Full`] (`overflow:
//! backpressure`) or the oldest ready records not being sent are dropped (`overflow:
//! drop_oldest`). Merged chunks are appended whatever the fill (their samples were accepted
//! already), so the windows open when the queue fills may take it past its capacity by what
//! they hold once merged (less than `max_open_bytes`, which bounds their estimate).
//!
//! With `sending_queue.enabled: false` the same structure lives in memory (no durability).

//!
//! Files: this one holds the [`Queue`]; `log` where a log's records live (disk or memory);
//! `ready` the ready record format; [`input`] the input record format; [`consumed`] the
//! consumption records; [`input_writer`] the input log's group-commit writer. The segment
//! logs themselves are `profilink_storage`'s (shared with the processor's join log).

pub mod consumed;
pub mod input;
pub mod input_writer;
mod log;
mod ready;
#[cfg(test)]
mod tests;

pub use ready::{ReadyMeta, decode_ready};

use crate::metrics::ExporterMetrics;
use crate::queue_config::{Overflow, QueueConfig};
use log::{InputLog, Located, Log, MemLog, record_size};
use profilink_consumer::{DEFAULT_RETRY_AFTER, ExportError};
use profilink_storage::SegmentLog;
use ready::{prefix_len, record_parts};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
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

impl From<QueueError> for ExportError {
    /// A full queue asks the producer to come back after the contract's
    /// [`DEFAULT_RETRY_AFTER`]; disk trouble is an I/O failure of the queue.
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Full { .. } => ExportError::Full {
                retry_after: DEFAULT_RETRY_AFTER,
            },
            QueueError::Io(e) => e.into(),
        }
    }
}

/// An accepted input record: one `export` batch ([`input`] format, or a legacy single-chunk
/// JSON record).
#[derive(Debug, Clone)]
pub struct InputRecord {
    /// Queue id.
    pub id: u64,
    /// The record body; decode with [`input::decode`].
    pub body: Vec<u8>,
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

/// In-memory index of ready records, under its own lock so the sender never waits on an fsync.
#[derive(Debug, Default)]
struct Index {
    ready_meta: BTreeMap<u64, ReadyMeta>,
    leased: HashSet<u64>,
}

/// The queue. All methods block on disk I/O: call them from `spawn_blocking`.
///
/// The two logs have their own locks (an `export` syncing the input log does not hold up the
/// engine appending merged chunks or recording acknowledgements), and a ready record is read
/// without holding either.
#[derive(Debug)]
pub struct Queue {
    input: Mutex<InputLog>,
    ready: Mutex<Log>,
    next_id: AtomicU64,
    input_bytes: AtomicU64,
    ready_bytes: AtomicU64,
    index: Mutex<Index>,
    capacity: u64,
    overflow: Overflow,
    metrics: Arc<ExporterMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock cannot leave the logs inconsistent beyond what a crash
    // would, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Queue {
    /// [`Queue::open`] in tests that simulate a crash inside one process: the dropped queue's
    /// last holders (engine tasks, the input writer's thread) end asynchronously, and until
    /// then its directory lock is held, as a dying process's would be. Waits up to 10 s.
    #[cfg(test)]
    pub(crate) fn open_when_free(
        cfg: &QueueConfig,
        dir: &Path,
        metrics: Arc<ExporterMetrics>,
    ) -> Result<(Queue, Recovery), QueueError> {
        let start = std::time::Instant::now();
        loop {
            match Queue::open(cfg, dir, metrics.clone()) {
                Err(QueueError::Io(e))
                    if e.kind() == std::io::ErrorKind::ResourceBusy
                        && start.elapsed() < std::time::Duration::from_secs(10) =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => return r,
            }
        }
    }

    /// Opens the queue: on disk under `dir` when `cfg.enabled`, else in memory.
    pub fn open(
        cfg: &QueueConfig,
        dir: &Path,
        metrics: Arc<ExporterMetrics>,
    ) -> Result<(Queue, Recovery), QueueError> {
        let mut rec = Recovery::default();
        let mut max_id = 0u64;
        let mut bad_ready: Vec<u64> = Vec::new();
        let mut input_log = InputLog {
            log: Log::Mem(MemLog::default()),
            charges: HashMap::new(),
            charged: 0,
        };
        let (input, mut ready) = if cfg.enabled {
            let mut inputs = Vec::new();
            let (input, s1) = SegmentLog::open(
                &dir.join("input"),
                cfg.fsync,
                cfg.segment_bytes(),
                |id, body| {
                    max_id = max_id.max(id);
                    input_log.add(id, body);
                    inputs.push(InputRecord {
                        id,
                        body: body.to_vec(),
                    });
                },
            )?;
            let mut ready = Vec::new();
            let (ready_log, s2) = SegmentLog::open(
                &dir.join("ready"),
                cfg.fsync,
                cfg.segment_bytes(),
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
        let mut index = Index::default();
        // Records whose body could not be decoded are acknowledged so they do not linger
        // (undecodable inputs are acknowledged by the engine, which decodes them).
        ready.ack(&bad_ready)?;
        for m in &rec.ready {
            index.ready_meta.insert(m.id, m.clone());
        }
        ExporterMetrics::add(&metrics.corrupt_records, rec.corrupt);
        input_log.log = input;
        let q = Queue {
            input_bytes: AtomicU64::new(input_log.charged),
            ready_bytes: AtomicU64::new(ready.live_bytes()),
            input: Mutex::new(input_log),
            ready: Mutex::new(ready),
            next_id: AtomicU64::new(max_id + 1),
            index: Mutex::new(index),
            capacity: cfg.capacity_bytes(),
            overflow: cfg.overflow(),
            metrics,
        };
        q.metrics
            .queue_capacity_bytes
            .store(q.capacity, Ordering::Relaxed);
        q.update_size();
        Ok((q, rec))
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        lock(&self.index)
    }

    fn used(&self) -> u64 {
        self.input_bytes.load(Ordering::Acquire) + self.ready_bytes.load(Ordering::Acquire)
    }

    fn update_size(&self) {
        self.metrics
            .queue_size_bytes
            .store(self.used(), Ordering::Relaxed);
    }

    fn ids(&self, n: usize) -> u64 {
        self.next_id.fetch_add(n as u64, Ordering::Relaxed)
    }

    /// Bytes of unacknowledged records (inputs counted as [`input::charge`]).
    #[cfg(test)]
    pub fn size_bytes(&self) -> u64 {
        self.used()
    }

    /// Capacity in bytes.
    #[cfg(test)]
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Durably appends input records (see [`input`]); returns their ids, plus the ready
    /// records dropped to make room (`overflow: drop_oldest`).
    pub fn append_inputs(
        &self,
        bodies: &[Vec<u8>],
    ) -> Result<(Vec<u64>, Vec<ReadyMeta>), QueueError> {
        let needed: u64 = bodies
            .iter()
            .map(|b| record_size(0) + input::charge(b))
            .sum();
        let input = lock(&self.input);
        let mut dropped = Vec::new();
        let used = self.used();
        if used + needed > self.capacity {
            if self.overflow == Overflow::DropOldest {
                // The queue may already be over capacity: a merged chunk is appended before
                // its inputs are acknowledged. Free the whole overshoot, not just `needed`.
                let deficit = used + needed - self.capacity;
                let mut freed = 0;
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
                    if freed >= deficit {
                        break;
                    }
                    freed += m.bytes;
                    dropped.push(m);
                }
                if freed >= deficit {
                    let ids: Vec<u64> = dropped.iter().map(|m| m.id).collect();
                    let mut ready = lock(&self.ready);
                    ready.ack(&ids)?;
                    self.ready_bytes
                        .store(ready.live_bytes(), Ordering::Release);
                    let mut index = self.index();
                    for id in &ids {
                        index.ready_meta.remove(id);
                    }
                } else {
                    dropped.clear();
                }
            }
            let used = self.used();
            if used + needed > self.capacity {
                return Err(QueueError::Full {
                    used,
                    capacity: self.capacity,
                    needed,
                });
            }
        }
        let ids = self.append_to_input(input, bodies)?;
        Ok((ids, dropped))
    }

    /// Appends `bodies` to the input log (held locked as `input`) under new ids.
    fn append_to_input(
        &self,
        mut input: MutexGuard<'_, InputLog>,
        bodies: &[Vec<u8>],
    ) -> Result<Vec<u64>, QueueError> {
        let first = self.ids(bodies.len());
        let records: Vec<(u64, &[u8])> = (first..).zip(bodies.iter().map(Vec::as_slice)).collect();
        input.log.append(&records)?;
        for (id, body) in &records {
            input.add(*id, body);
        }
        self.input_bytes.store(input.charged, Ordering::Release);
        drop(input);
        self.update_size();
        Ok(records.iter().map(|(id, _)| *id).collect())
    }

    /// True when the queue is on disk (`sending_queue.enabled`).
    pub fn is_durable(&self) -> bool {
        matches!(lock(&self.input).log, Log::Disk(_))
    }

    /// Durably appends consumption records ([`consumed`]) to the input log, whatever the
    /// capacity (they are a few bytes and stand for samples already counted); returns their
    /// ids.
    pub fn append_consumed(&self, bodies: &[Vec<u8>]) -> Result<Vec<u64>, QueueError> {
        if bodies.is_empty() {
            return Ok(Vec::new());
        }
        self.append_to_input(lock(&self.input), bodies)
    }

    /// Durably appends merged chunks; fills in and returns their metadata (the tests' form of
    /// [`Queue::append_ready_keep`]).
    #[cfg(test)]
    pub fn append_ready(
        &self,
        items: Vec<(ReadyMeta, Vec<u8>)>,
    ) -> Result<Vec<ReadyMeta>, QueueError> {
        Ok(self
            .append_ready_keep(items)?
            .into_iter()
            .map(|(meta, _)| meta)
            .collect())
    }

    /// Durably appends merged chunks; fills in their metadata and hands each back with the
    /// chunk's JSON (so a sender can deliver it without reading the record it was just
    /// written to).
    pub fn append_ready_keep(
        &self,
        items: Vec<(ReadyMeta, Vec<u8>)>,
    ) -> Result<Vec<(ReadyMeta, Vec<u8>)>, QueueError> {
        let mut metas = Vec::with_capacity(items.len());
        let mut jsons = Vec::with_capacity(items.len());
        let mut prefixes = Vec::with_capacity(items.len());
        let first = self.ids(items.len());
        for (i, (mut meta, json)) in items.into_iter().enumerate() {
            let prefix = serde_json::to_vec(&meta).map_err(io::Error::other)?;
            let len = prefix_len(&prefix);
            meta.id = first + i as u64;
            meta.bytes = record_size(len.len() + prefix.len() + json.len());
            metas.push(meta);
            jsons.push(json);
            prefixes.push((len, prefix));
        }
        // Written from its parts, so the chunk JSON is not copied.
        let parts: Vec<[&[u8]; 3]> = prefixes
            .iter()
            .zip(&jsons)
            .map(|((len, prefix), json)| record_parts(len, prefix, json))
            .collect();
        let records: Vec<(u64, &[&[u8]])> = metas
            .iter()
            .map(|m| m.id)
            .zip(parts.iter().map(|p| &p[..]))
            .collect();
        let mut ready = lock(&self.ready);
        ready.append_parts(&records)?;
        self.ready_bytes
            .store(ready.live_bytes(), Ordering::Release);
        let mut index = self.index();
        for m in &metas {
            index.ready_meta.insert(m.id, m.clone());
        }
        drop(index);
        drop(ready);
        self.update_size();
        Ok(metas.into_iter().zip(jsons).collect())
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

    /// Reads a ready record: its metadata and chunk JSON. The file is read without holding
    /// the log's lock.
    pub fn read_ready(&self, id: u64) -> Result<Option<(ReadyMeta, Vec<u8>)>, QueueError> {
        let located = lock(&self.ready).locate(id);
        let body = match located {
            None => return Ok(None),
            Some(Located::Mem(b)) => b,
            Some(Located::Disk(r)) => match r.read()? {
                Some(b) => b,
                None => return Ok(None),
            },
        };
        let Some((meta, json)) = decode_ready(id, &body) else {
            return Err(QueueError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("queue record {id} has unreadable metadata"),
            )));
        };
        let prefix = body.len() - json.len();
        let mut json = body;
        json.drain(..prefix);
        Ok(Some((meta, json)))
    }

    /// Acknowledges inputs.
    pub fn ack_inputs(&self, ids: &[u64]) -> Result<(), QueueError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut input = lock(&self.input);
        input.log.ack(ids)?;
        for id in ids {
            if let Some(c) = input.charges.remove(id) {
                input.charged = input.charged.saturating_sub(c);
            }
        }
        self.input_bytes.store(input.charged, Ordering::Release);
        drop(input);
        self.update_size();
        Ok(())
    }

    /// Acknowledges ready records.
    pub fn ack_ready(&self, ids: &[u64]) -> Result<(), QueueError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut ready = lock(&self.ready);
        ready.ack(ids)?;
        self.ready_bytes
            .store(ready.live_bytes(), Ordering::Release);
        let mut index = self.index();
        for id in ids {
            index.ready_meta.remove(id);
            index.leased.remove(id);
        }
        drop(index);
        drop(ready);
        self.update_size();
        Ok(())
    }
}
