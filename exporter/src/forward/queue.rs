//! The durable queue of forwarded requests: the exporter's segment log
//! ([`profilink_storage`]) holding each request as received, with one FIFO lane per
//! project in memory so that a project's requests go out in order while projects do not wait
//! for each other. Bounded in bytes of unacknowledged records: a push past the bound is
//! refused (the receiver answers 503). With `sending_queue.enabled: false` the records live in
//! memory only.
//!
//! Record: `meta length (u32 LE) | meta JSON | body`.

use crate::queue_config::QueueConfig;
use bytes::Bytes;
use profilink_consumer::ForwardRequest;
use profilink_storage::{RecordRef, SegmentLog};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::sync::{Mutex, MutexGuard};

/// Segment files roll over at this size.
const SEGMENT_BYTES: u64 = 16 << 20;

/// Framing overhead counted per record (the segment log's frame and id).
const FRAME: u64 = 20;

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    #[serde(rename = "p")]
    project_id: u64,
    #[serde(rename = "k")]
    public_key: String,
    path: String,
    #[serde(rename = "q", default, skip_serializing_if = "Option::is_none")]
    query: Option<String>,
    #[serde(rename = "h", default)]
    headers: Vec<(String, String)>,
}

/// Encodes a request as a queue record.
pub fn encode(r: &ForwardRequest) -> Vec<u8> {
    let meta = Meta {
        project_id: r.project_id,
        public_key: r.public_key.clone(),
        path: r.path.clone(),
        query: r.query.clone(),
        headers: r.headers.clone(),
    };
    let json = serde_json::to_vec(&meta).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + json.len() + r.body.len());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&r.body);
    out
}

/// Decodes a queue record.
pub fn decode(record: Vec<u8>) -> io::Result<ForwardRequest> {
    let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, format!("forward record: {m}"));
    let len = record
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| bad("too short"))?;
    let meta_bytes = record
        .get(4..4 + len)
        .ok_or_else(|| bad("meta past the end"))?;
    let meta: Meta = serde_json::from_slice(meta_bytes).map_err(|e| bad(&e.to_string()))?;
    let mut record = record;
    let body = Bytes::from(record.split_off(4 + len));
    Ok(ForwardRequest {
        project_id: meta.project_id,
        public_key: meta.public_key,
        path: meta.path,
        query: meta.query,
        headers: meta.headers,
        body,
    })
}

fn project_of(record: &[u8]) -> Option<u64> {
    let len = u32::from_le_bytes(record.get(..4)?.try_into().ok()?) as usize;
    #[derive(Deserialize)]
    struct P {
        p: u64,
    }
    serde_json::from_slice::<P>(record.get(4..4 + len)?)
        .ok()
        .map(|p| p.p)
}

#[derive(Debug)]
enum Store {
    Disk(SegmentLog),
    Mem(HashMap<u64, Vec<u8>>),
}

#[derive(Debug)]
struct State {
    store: Store,
    lanes: BTreeMap<u64, VecDeque<(u64, u64)>>,
    next_id: u64,
    bytes: u64,
    records: usize,
}

/// Why a push was refused.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The bound would be exceeded.
    #[error("forward queue full: {used} of {capacity} bytes used")]
    Full {
        /// Bytes in use.
        used: u64,
        /// The bound.
        capacity: u64,
    },
    /// The record could not be written.
    #[error("forward queue I/O error: {0}")]
    Io(#[from] io::Error),
}

/// What [`ForwardQueue::open`] found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Recovered {
    /// Requests left from an earlier run, to send.
    pub records: u64,
    /// Records skipped as corrupt.
    pub corrupt: u64,
}

/// The queue.
#[derive(Debug)]
pub struct ForwardQueue {
    state: Mutex<State>,
    capacity: u64,
}

impl ForwardQueue {
    /// Opens the queue (replaying what an earlier run left) or an in-memory one.
    pub fn open(cfg: &QueueConfig) -> io::Result<(ForwardQueue, Recovered)> {
        let mut lanes: BTreeMap<u64, VecDeque<(u64, u64)>> = BTreeMap::new();
        let mut rec = Recovered::default();
        let mut max_id = 0;
        let mut bytes = 0;
        let store = if cfg.enabled {
            let (log, stats) =
                SegmentLog::open(&cfg.forward_dir(), cfg.fsync, SEGMENT_BYTES, |id, body| {
                    max_id = max_id.max(id);
                    match project_of(body) {
                        Some(p) => {
                            let size = body.len() as u64 + FRAME;
                            bytes += size;
                            lanes.entry(p).or_default().push_back((id, size));
                            rec.records += 1;
                        }
                        None => rec.corrupt += 1,
                    }
                })?;
            rec.corrupt += stats.corrupt;
            Store::Disk(log)
        } else {
            Store::Mem(HashMap::new())
        };
        let records = lanes.values().map(VecDeque::len).sum();
        let q = ForwardQueue {
            state: Mutex::new(State {
                store,
                lanes,
                next_id: max_id + 1,
                bytes,
                records,
            }),
            capacity: cfg.capacity_bytes(),
        };
        Ok((q, rec))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True when a record of `size` bytes fits now.
    pub fn has_room(&self, size: u64) -> bool {
        let st = self.lock();
        st.records == 0 || st.bytes + size + FRAME <= self.capacity
    }

    /// Appends a record (durably, on disk) to `project`'s lane. Blocking I/O.
    pub fn push(&self, project: u64, record: &[u8]) -> Result<(), PushError> {
        let size = record.len() as u64 + FRAME;
        let mut st = self.lock();
        if st.records > 0 && st.bytes + size > self.capacity {
            return Err(PushError::Full {
                used: st.bytes,
                capacity: self.capacity,
            });
        }
        let id = st.next_id;
        match &mut st.store {
            Store::Disk(log) => log.append(&[(id, record)])?,
            Store::Mem(m) => {
                m.insert(id, record.to_vec());
            }
        }
        st.next_id += 1;
        st.bytes += size;
        st.records += 1;
        st.lanes.entry(project).or_default().push_back((id, size));
        Ok(())
    }

    /// The head record of every lane whose project `ready` accepts: `(project, id)`.
    pub fn heads(&self, mut ready: impl FnMut(u64) -> bool) -> Vec<(u64, u64)> {
        let st = self.lock();
        st.lanes
            .iter()
            .filter_map(|(p, lane)| Some((*p, lane.front()?.0)))
            .filter(|(p, _)| ready(*p))
            .collect()
    }

    /// Reads record `id` (the disk read happens outside the lock).
    pub fn read(&self, id: u64) -> io::Result<Option<Vec<u8>>> {
        enum Where {
            Disk(RecordRef),
            Mem(Vec<u8>),
        }
        let at = {
            let st = self.lock();
            match &st.store {
                Store::Disk(log) => log.locate(id).map(Where::Disk),
                Store::Mem(m) => m.get(&id).cloned().map(Where::Mem),
            }
        };
        match at {
            Some(Where::Disk(r)) => r.read(),
            Some(Where::Mem(b)) => Ok(Some(b)),
            None => Ok(None),
        }
    }

    /// Removes the head `id` of `project`'s lane (delivered or given up). Blocking I/O.
    pub fn ack(&self, project: u64, id: u64) -> io::Result<()> {
        let mut st = self.lock();
        let Some(lane) = st.lanes.get_mut(&project) else {
            return Ok(());
        };
        let Some(pos) = lane.iter().position(|(i, _)| *i == id) else {
            return Ok(());
        };
        let (_, size) = lane.remove(pos).unwrap_or_default();
        if lane.is_empty() {
            st.lanes.remove(&project);
        }
        st.bytes = st.bytes.saturating_sub(size);
        st.records = st.records.saturating_sub(1);
        match &mut st.store {
            Store::Disk(log) => log.ack(&[id]),
            Store::Mem(m) => {
                m.remove(&id);
                Ok(())
            }
        }
    }

    /// Bytes of queued records (with framing).
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Queued records.
    pub fn len(&self) -> usize {
        self.lock().records
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(project: u64, body: &str) -> ForwardRequest {
        ForwardRequest {
            project_id: project,
            public_key: "k".into(),
            path: format!("/api/{project}/envelope/"),
            query: Some("sentry_key=k".into()),
            headers: vec![("content-encoding".into(), "gzip".into())],
            body: Bytes::from(body.to_string()),
        }
    }

    fn cfg(dir: &std::path::Path, mib: u64) -> QueueConfig {
        QueueConfig {
            storage: Some(dir.to_path_buf()),
            max_size_mib: Some(mib),
            fsync: false,
            ..Default::default()
        }
    }

    #[test]
    fn records_round_trip_and_survive_a_restart_in_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (q, rec) = ForwardQueue::open(&cfg(dir.path(), 1)).unwrap();
            assert_eq!(rec.records, 0);
            for (p, b) in [(1, "a"), (2, "b"), (1, "c")] {
                q.push(p, &encode(&req(p, b))).unwrap();
            }
            let heads = q.heads(|_| true);
            assert_eq!(heads.len(), 2);
            let (p, id) = heads[0];
            let r = decode(q.read(id).unwrap().unwrap()).unwrap();
            assert_eq!((r.project_id, &r.body[..]), (1, &b"a"[..]));
            assert_eq!(r.query.as_deref(), Some("sentry_key=k"));
            q.ack(p, id).unwrap();
        }
        let (q, rec) = ForwardQueue::open(&cfg(dir.path(), 1)).unwrap();
        assert_eq!(rec.records, 2);
        let bodies: Vec<Vec<u8>> = q
            .heads(|_| true)
            .into_iter()
            .map(|(_, id)| decode(q.read(id).unwrap().unwrap()).unwrap().body.to_vec())
            .collect();
        assert_eq!(bodies, vec![b"c".to_vec(), b"b".to_vec()]);
        assert!(q.heads(|p| p == 2).iter().all(|(p, _)| *p == 2));
    }

    #[test]
    fn the_bound_refuses_pushes_but_never_an_empty_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (q, _) = ForwardQueue::open(&cfg(dir.path(), 1)).unwrap();
        let big = "x".repeat(700 << 10);
        q.push(1, &encode(&req(1, &big))).unwrap();
        assert!(!q.has_room(700 << 10));
        assert!(matches!(
            q.push(1, &encode(&req(1, &big))),
            Err(PushError::Full { .. })
        ));
        let (p, id) = q.heads(|_| true)[0];
        q.ack(p, id).unwrap();
        assert!(q.is_empty());
        let huge = "x".repeat(2 << 20);
        q.push(1, &encode(&req(1, &huge))).unwrap();
    }

    #[test]
    fn memory_queue_works_without_a_directory() {
        let c = QueueConfig {
            enabled: false,
            ..Default::default()
        };
        let (q, _) = ForwardQueue::open(&c).unwrap();
        q.push(5, &encode(&req(5, "m"))).unwrap();
        let (p, id) = q.heads(|_| true)[0];
        assert_eq!(decode(q.read(id).unwrap().unwrap()).unwrap().body, "m");
        q.ack(p, id).unwrap();
        assert_eq!(q.bytes(), 0);
    }
}
