//! The sending queue of the OTLP exporters (profiles and traces, `otlp` / `otlp_http`, and the
//! `sentry` traces exporter): a bounded FIFO of export requests between `export` and the
//! `num_consumers` senders, in memory or, with `sending_queue.storage`, durable.
//!
//! * In memory, requests are kept as they are (no encoding); what is queued is lost if the
//!   process dies.
//! * With storage, each request is encoded ([`record`]) and appended to the exporter's segment
//!   log ([`profilink_storage`], the same log the Sentry exporter's queue and the
//!   receiver's upstream forwarder use) and, with `fsync`, synced before `push_all` returns.
//!   A sender claims the oldest record ([`SendQueue::pop`], read back from disk and decoded)
//!   and the record is removed ([`SendQueue::ack`]) only once it was delivered or given up
//!   (counted as dropped with a reason by the exporter). Records left by an earlier run are
//!   replayed first, in order; a record that does not read is refused (logged, counted as
//!   corrupt, removed), never a panic. Delivery is at-least-once: a request whose answer was
//!   lost in a crash (delivered, not yet removed) is sent again after the restart.
//!
//! Bounds ([`QueueLimits`]): requests waiting (`queue_size`) and bytes (in memory: of waiting
//! requests; on disk: of every record not yet removed, in-flight ones included). A push past a
//! bound is refused ([`PushError::Full`], the receivers answer UNAVAILABLE / 503) or, with
//! `block_on_overflow`, waits for room; an empty queue takes any one push so that a request
//! larger than the bound cannot block the exporter for ever. Order: FIFO; with several
//! consumers, requests are sent concurrently in queue order (retries may reorder).

pub mod record;
#[cfg(test)]
mod tests;

use crate::queue_config::QueueLimits;
use profilink_storage::{RecordRef, SegmentLog};
use record::Queued;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Segment files roll over at this size.
const SEGMENT_BYTES: u64 = 16 << 20;

/// Framing bytes the segment log adds to each record (magic, length, CRC, id).
const FRAME: u64 = 20;

/// Where a waiting request is.
#[derive(Debug)]
enum Slot<T> {
    Mem(T),
    Disk(RecordRef),
}

#[derive(Debug)]
struct Entry<T> {
    id: u64,
    bytes: u64,
    items: u64,
    slot: Slot<T>,
}

#[derive(Debug)]
struct State<T> {
    waiting: VecDeque<Entry<T>>,
    waiting_bytes: u64,
    in_flight: HashMap<u64, (u64, u64)>,
    in_flight_bytes: u64,
    next_id: u64,
    closed: bool,
}

/// Why a push was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PushError {
    /// A bound would be exceeded.
    #[error("sending queue full: {requests} requests, {bytes} of {max_bytes} bytes queued")]
    Full {
        /// Requests queued.
        requests: u64,
        /// Bytes counted against the bound.
        bytes: u64,
        /// The byte bound.
        max_bytes: u64,
    },
    /// The queue was closed (shutdown).
    #[error("sending queue closed")]
    Closed,
    /// The request could not be stored.
    #[error("sending queue I/O error: {0}")]
    Io(#[from] io::Error),
}

/// A request claimed by a sender: acknowledge `id` with [`SendQueue::ack`] once it is
/// delivered or given up.
#[derive(Debug)]
pub(crate) struct Claimed<T> {
    /// The record id.
    pub id: u64,
    /// The request.
    pub value: T,
    /// Its items (profiles, spans), as given to [`SendQueue::push_all`].
    pub items: u64,
}

/// A claimed record that could not be read back (to count, log and acknowledge).
#[derive(Debug)]
pub(crate) struct Corrupt {
    /// The record id.
    pub id: u64,
    /// Its items, as its header says (0 when the header does not read).
    pub items: u64,
    /// Why.
    pub error: String,
}

/// What [`SendQueue::open`] found left by an earlier run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Requests to send.
    pub requests: u64,
    /// Their items.
    pub items: u64,
    /// Their bytes (with framing).
    pub bytes: u64,
    /// Records refused as unreadable (bad frame or CRC, or a header of another version or
    /// signal), logged and removed.
    pub corrupt: u64,
}

/// The queue. See the module docs.
#[derive(Debug)]
pub(crate) struct SendQueue<T> {
    state: Mutex<State<T>>,
    log: Option<Mutex<SegmentLog>>,
    dir: Option<PathBuf>,
    limits: QueueLimits,
    ready: Notify,
    room: Notify,
}

fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T: Queued> SendQueue<T> {
    /// An in-memory queue (`dir` `None`) or the durable queue in `dir`, replaying what an
    /// earlier run left there. Blocking I/O.
    pub fn open(
        dir: Option<&Path>,
        fsync: bool,
        limits: QueueLimits,
    ) -> io::Result<(Self, Recovered)> {
        let mut rec = Recovered::default();
        let mut waiting = VecDeque::new();
        let mut max_id = 0;
        let log = match dir {
            None => None,
            Some(dir) => {
                let mut found = Vec::new();
                let mut bad = Vec::new();
                let (mut log, stats) = SegmentLog::open(dir, fsync, SEGMENT_BYTES, |id, body| {
                    max_id = max_id.max(id);
                    match record::header::<T>(body) {
                        Ok(items) => found.push((id, body.len() as u64 + FRAME, items)),
                        Err(e) => {
                            tracing::warn!(dir = %dir.display(), id, error = %e, "sending queue: refusing an unreadable record");
                            bad.push(id);
                        }
                    }
                })?;
                rec.corrupt = stats.corrupt + bad.len() as u64;
                log.ack(&bad)?;
                for (id, bytes, items) in found {
                    let Some(at) = log.locate(id) else { continue };
                    rec.requests += 1;
                    rec.items += items;
                    rec.bytes += bytes;
                    waiting.push_back(Entry {
                        id,
                        bytes,
                        items,
                        slot: Slot::Disk(at),
                    });
                }
                Some(Mutex::new(log))
            }
        };
        let q = SendQueue {
            state: Mutex::new(State {
                waiting,
                waiting_bytes: rec.bytes,
                in_flight: HashMap::new(),
                in_flight_bytes: 0,
                next_id: max_id + 1,
                closed: false,
            }),
            log,
            dir: dir.map(Path::to_path_buf),
            limits,
            ready: Notify::new(),
            room: Notify::new(),
        };
        Ok((q, rec))
    }

    /// True for a queue on disk.
    #[cfg(test)]
    pub fn is_durable(&self) -> bool {
        self.log.is_some()
    }

    /// The directory of a durable queue.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Appends every `(request, items)`, or none (see the module docs for the bounds). With
    /// storage, the records are durable (synced with `fsync`) when this returns `Ok`.
    pub async fn push_all(self: &Arc<Self>, values: Vec<(T, u64)>) -> Result<(), PushError> {
        let mut values = values;
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let outcome = if self.log.is_some() {
                let q = self.clone();
                tokio::task::spawn_blocking(move || q.push_now(values))
                    .await
                    .map_err(io::Error::other)?
            } else {
                self.push_now(values)
            };
            match outcome {
                Ok(()) => return Ok(()),
                Err((PushError::Full { .. }, back)) if self.limits.block_on_overflow => {
                    values = back;
                    room.await;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// Refuses a push of `n` requests of `bytes` when the queue is closed or it would go past
    /// a bound.
    fn check(&self, st: &State<T>, n: usize, bytes: u64) -> Result<(), PushError> {
        if st.closed {
            return Err(PushError::Closed);
        }
        let waiting = st.waiting.len() as u64;
        // On disk every record not yet removed counts; in memory only waiting ones.
        let (counted, empty) = if self.log.is_some() {
            (
                st.waiting_bytes + st.in_flight_bytes,
                st.waiting.is_empty() && st.in_flight.is_empty(),
            )
        } else {
            (st.waiting_bytes, st.waiting.is_empty())
        };
        let too_many = self
            .limits
            .max_requests
            .is_some_and(|max| waiting + n as u64 > max && !st.waiting.is_empty());
        let too_big = !empty && counted.saturating_add(bytes) > self.limits.max_bytes;
        if too_many || too_big {
            return Err(PushError::Full {
                requests: waiting,
                bytes: counted,
                max_bytes: self.limits.max_bytes,
            });
        }
        Ok(())
    }

    /// One push attempt (blocking I/O with storage); the values come back when refused.
    #[allow(clippy::type_complexity)]
    fn push_now(&self, values: Vec<(T, u64)>) -> Result<(), (PushError, Vec<(T, u64)>)> {
        let n = values.len();
        let Some(log) = &self.log else {
            let sizes: Vec<u64> = values.iter().map(|(v, _)| v.encoded_len() as u64).collect();
            let mut st = lock(&self.state);
            if let Err(e) = self.check(&st, n, sizes.iter().sum()) {
                return Err((e, values));
            }
            for ((value, items), bytes) in values.into_iter().zip(sizes) {
                let id = st.next_id;
                st.next_id += 1;
                st.waiting_bytes += bytes;
                st.waiting.push_back(Entry {
                    id,
                    bytes,
                    items,
                    slot: Slot::Mem(value),
                });
            }
            drop(st);
            self.wake(n);
            return Ok(());
        };
        let records: Vec<Vec<u8>> = values
            .iter()
            .map(|(v, items)| record::encode(v, *items))
            .collect();
        let total: u64 = records.iter().map(|r| r.len() as u64 + FRAME).sum();
        // The log's lock is held from the check to the queueing, so records are queued in
        // the order they are on disk and concurrent pushes cannot both pass the check.
        let mut log = lock(log);
        let first = {
            let mut st = lock(&self.state);
            if let Err(e) = self.check(&st, n, total) {
                return Err((e, values));
            }
            let first = st.next_id;
            st.next_id += n as u64;
            first
        };
        let batch: Vec<(u64, &[u8])> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (first + i as u64, r.as_slice()))
            .collect();
        if let Err(e) = log.append(&batch) {
            return Err((PushError::Io(e), values));
        }
        let mut st = lock(&self.state);
        for (i, ((_, items), rec)) in values.iter().zip(&records).enumerate() {
            let id = first + i as u64;
            let Some(at) = log.locate(id) else { continue };
            let bytes = rec.len() as u64 + FRAME;
            st.waiting_bytes += bytes;
            st.waiting.push_back(Entry {
                id,
                bytes,
                items: *items,
                slot: Slot::Disk(at),
            });
        }
        drop(st);
        drop(log);
        self.wake(n);
        Ok(())
    }

    fn wake(&self, n: usize) {
        for _ in 0..n {
            self.ready.notify_one();
        }
    }

    /// Claims the oldest waiting request (read back and decoded with storage): `Err` for a
    /// record that does not read (count it, then [`SendQueue::ack`] it); `None` once the
    /// queue is closed and nothing waits.
    pub async fn pop(&self) -> Option<Result<Claimed<T>, Corrupt>> {
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let entry = {
                let mut st = lock(&self.state);
                match st.waiting.pop_front() {
                    Some(e) => {
                        st.waiting_bytes = st.waiting_bytes.saturating_sub(e.bytes);
                        st.in_flight.insert(e.id, (e.bytes, e.items));
                        st.in_flight_bytes += e.bytes;
                        if !st.waiting.is_empty() {
                            // Pass the wake-up on: this call may have taken its permit.
                            self.ready.notify_one();
                        }
                        Some(e)
                    }
                    None if st.closed => return None,
                    None => None,
                }
            };
            if let Some(e) = entry {
                if self.log.is_none() {
                    self.room.notify_waiters();
                }
                return Some(Self::load(e).await);
            }
            notified.await;
        }
    }

    async fn load(e: Entry<T>) -> Result<Claimed<T>, Corrupt> {
        let at = match e.slot {
            Slot::Mem(value) => {
                return Ok(Claimed {
                    id: e.id,
                    value,
                    items: e.items,
                });
            }
            Slot::Disk(at) => at,
        };
        let corrupt = |error: String| Corrupt {
            id: e.id,
            items: e.items,
            error,
        };
        let read = tokio::task::spawn_blocking(move || {
            let body = at
                .read()?
                .ok_or_else(|| io::Error::other("the record's segment is gone"))?;
            record::decode::<T>(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        })
        .await;
        match read {
            Ok(Ok((value, items))) => Ok(Claimed {
                id: e.id,
                value,
                items,
            }),
            Ok(Err(error)) => Err(corrupt(error.to_string())),
            Err(join) => Err(corrupt(join.to_string())),
        }
    }

    /// Removes claimed request `id` (delivered or given up). With storage, an error means it
    /// will come back after a restart (a duplicate, never a loss).
    pub async fn ack(self: &Arc<Self>, id: u64) -> io::Result<()> {
        {
            let mut st = lock(&self.state);
            if let Some((bytes, _)) = st.in_flight.remove(&id) {
                st.in_flight_bytes = st.in_flight_bytes.saturating_sub(bytes);
            }
        }
        let done = match &self.log {
            Some(_) => {
                let q = self.clone();
                tokio::task::spawn_blocking(move || match &q.log {
                    Some(log) => lock(log).ack(&[id]),
                    None => Ok(()),
                })
                .await
                .map_err(io::Error::other)
                .and_then(|r| r)
            }
            None => Ok(()),
        };
        self.room.notify_waiters();
        done
    }

    /// Refuses further pushes (waiting ones fail with [`PushError::Closed`]) and wakes idle
    /// senders so that they drain and stop.
    pub fn close(&self) {
        lock(&self.state).closed = true;
        self.ready.notify_waiters();
        self.room.notify_waiters();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    /// Requests waiting (not claimed).
    pub fn len(&self) -> usize {
        lock(&self.state).waiting.len()
    }

    /// Bytes counted against the bound (see the module docs).
    pub fn bytes(&self) -> u64 {
        let st = lock(&self.state);
        match self.log {
            Some(_) => st.waiting_bytes + st.in_flight_bytes,
            None => st.waiting_bytes,
        }
    }

    /// Bytes of waiting (unclaimed) requests.
    pub fn waiting_bytes(&self) -> u64 {
        lock(&self.state).waiting_bytes
    }

    /// Closes the queue and lets `workers` (its senders) finish within `deadline`; past it they
    /// are aborted. Returns what is then left unacknowledged, `(requests, items)`: `(0, 0)`
    /// when the senders finished in time.
    pub async fn close_and_stop(
        &self,
        workers: Vec<tokio::task::JoinHandle<()>>,
        deadline: std::time::Duration,
    ) -> (u64, u64) {
        self.close();
        let aborts: Vec<_> = workers.iter().map(|w| w.abort_handle()).collect();
        let all = async {
            for w in workers {
                let _ = w.await;
            }
        };
        tokio::pin!(all);
        if tokio::time::timeout(deadline, &mut all).await.is_ok() {
            return (0, 0);
        }
        for a in &aborts {
            a.abort();
        }
        // Wait for the aborted tasks to be gone before counting what they held.
        all.await;
        self.unacknowledged()
    }

    /// Requests not yet removed (waiting and claimed): with storage, what a restart replays.
    pub fn unacknowledged(&self) -> (u64, u64) {
        let st = lock(&self.state);
        let items = st.waiting.iter().map(|e| e.items).sum::<u64>()
            + st.in_flight.values().map(|(_, items)| items).sum::<u64>();
        ((st.waiting.len() + st.in_flight.len()) as u64, items)
    }

    /// Removes every waiting request of an in-memory queue: `(requests, items)`, to count as
    /// dropped. A durable queue keeps its records for the next start and returns `(0, 0)`.
    pub fn drain_memory(&self) -> (u64, u64) {
        if self.log.is_some() {
            return (0, 0);
        }
        let mut st = lock(&self.state);
        let gone = std::mem::take(&mut st.waiting);
        st.waiting_bytes = 0;
        (gone.len() as u64, gone.iter().map(|e| e.items).sum())
    }
}
