//! The `profile_store` extension at work: a [`StoreWriter`] takes the chunks of every pipeline
//! and inserts them into the embedded [`ProfileStore`] on a thread of its own:
//!
//! * OTLP → Sentry: the merged chunks (60 s per session, as Sentry gets them) that one chunk
//!   exporter per pipeline queues — a `sentry` exporter when the pipeline has one (stored under
//!   its DSN's project), else a `file` exporter (project 0) — so no chunk is stored twice;
//! * Sentry → OTLP: the chunks the `sentry` receiver accepts, under the envelope's project.
//!
//! Transactions the `sentry` receiver accepts (with `contexts.profile.profiler_id`) are recorded
//! too, and stored chunks carry the names of the transactions they overlap, whichever of the two
//! arrived first (SDKs send them in separate envelopes).
//!
//! OTLP forwarded as OTLP (a gateway pipeline) and V1 profiles on their way to OTLP exporters
//! are not chunks and are not stored.
//!
//! The store is a view for people, not part of delivery: inserting never slows a pipeline
//! down. Chunks wait in a queue bounded by [`MAX_PENDING_BYTES`]; when it is full, further
//! chunks are not stored and are counted (`profilink_store_chunks_total{outcome="dropped"}`).
//! At shutdown the writer inserts what is pending before the service exits.

use profilink_consumer::ChunkObserver;
use profilink_flamegraph::{ChunkMeta, ProfileStore, TransactionLink};
use profilink_proto::sentry::{ProfileChunk, SpanItem, Transaction};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Upper bound of the chunk data waiting to be stored (estimated in-memory size).
pub(crate) const MAX_PENDING_BYTES: u64 = 64 << 20;
/// Upper bound of the chunks waiting to be stored.
const MAX_PENDING_CHUNKS: usize = 4096;

/// Counters of a [`StoreWriter`].
#[derive(Debug, Default)]
pub struct StoreCounters {
    /// Chunks inserted (or already present).
    pub stored: AtomicU64,
    /// Chunks not stored because the pending queue was full.
    pub dropped: AtomicU64,
    /// Chunks the store refused (no samples, bad indices) or failed to write.
    pub failed: AtomicU64,
    /// Estimated bytes waiting.
    pub pending_bytes: AtomicU64,
    /// Batches of transactions that could not be linked (queue full or a write failed).
    pub failed_links: AtomicU64,
}

/// What the writer thread inserts.
enum Job {
    /// A chunk with its metadata and estimated size.
    Insert(Box<ProfileChunk>, ChunkMeta, u64),
    /// Transactions to link to stored chunks (see [`ProfileStore::link_transactions`]).
    Link(Vec<TransactionLink>),
    /// Answer once everything before has been inserted.
    Barrier(std::sync::mpsc::Sender<()>),
}

/// Feeds chunks to a [`ProfileStore`] without blocking the pipelines. See the module docs.
#[derive(Debug)]
pub struct StoreWriter {
    store: Arc<ProfileStore>,
    sender: Mutex<Option<SyncSender<Job>>>,
    counters: Arc<StoreCounters>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Insert(c, m, _) => write!(f, "Insert({}, project {})", c.chunk_id, m.project_id),
            Job::Link(l) => write!(f, "Link({} transactions)", l.len()),
            Job::Barrier(_) => f.write_str("Barrier"),
        }
    }
}

/// Estimated in-memory size of a chunk, for the pending bound.
pub(crate) fn estimated_bytes(chunk: &ProfileChunk) -> u64 {
    let p = &chunk.profile;
    let stacks: usize = p.stacks.iter().map(Vec::len).sum();
    (p.samples.len() * 48 + p.frames.len() * 160 + stacks * 8 + 1024) as u64
}

/// Whether a chunk of `bytes` may wait behind `pending` bytes: within [`MAX_PENDING_BYTES`],
/// or alone (a chunk larger than the bound is still stored when nothing else waits).
fn admit(pending: u64, bytes: u64) -> bool {
    pending == 0 || pending.saturating_add(bytes) <= MAX_PENDING_BYTES
}

fn run(store: Arc<ProfileStore>, jobs: Receiver<Job>, counters: Arc<StoreCounters>) {
    for job in jobs {
        match job {
            Job::Insert(chunk, meta, bytes) => {
                match store.insert(&chunk, &meta) {
                    Ok(()) => {
                        counters.stored.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        counters.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(chunk_id = %chunk.chunk_id, error = %e, "chunk not stored");
                    }
                }
                counters.pending_bytes.fetch_sub(bytes, Ordering::Relaxed);
            }
            Job::Link(links) => {
                if let Err(e) = store.link_transactions(&links) {
                    counters.failed_links.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %e, "transactions not linked in the store");
                }
            }
            Job::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl StoreWriter {
    /// Starts the writer thread over `store`.
    pub fn start(store: Arc<ProfileStore>) -> std::io::Result<StoreWriter> {
        let (sender, jobs) = sync_channel(MAX_PENDING_CHUNKS);
        let counters = Arc::new(StoreCounters::default());
        let thread = {
            let (store, counters) = (store.clone(), counters.clone());
            std::thread::Builder::new()
                .name("profile-store".into())
                .spawn(move || run(store, jobs, counters))?
        };
        Ok(StoreWriter {
            store,
            sender: Mutex::new(Some(sender)),
            counters,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The store.
    pub fn store(&self) -> &Arc<ProfileStore> {
        &self.store
    }

    /// The counters.
    pub fn counters(&self) -> Arc<StoreCounters> {
        self.counters.clone()
    }

    fn sender(&self) -> Option<SyncSender<Job>> {
        self.sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues `chunk` for storing under `project_id` (with the names of transactions linked to
    /// it); counts it as dropped when the pending queue is full or the writer is closed.
    pub fn offer(&self, chunk: ProfileChunk, project_id: u64, transaction_names: Vec<String>) {
        let bytes = estimated_bytes(&chunk);
        let c = &self.counters;
        let pending = c.pending_bytes.fetch_add(bytes, Ordering::Relaxed);
        if !admit(pending, bytes) {
            c.pending_bytes.fetch_sub(bytes, Ordering::Relaxed);
            c.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let meta = ChunkMeta {
            project_id,
            transaction_names,
            received: 0.0,
        };
        let sent = match self.sender() {
            Some(s) => match s.try_send(Job::Insert(Box::new(chunk), meta, bytes)) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !sent {
            c.pending_bytes.fetch_sub(bytes, Ordering::Relaxed);
            c.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Queues the links of `transactions` and of span-streaming segments (those with a
    /// profiler id), so the chunks they overlap, stored before or after, carry their names.
    pub fn link(&self, transactions: &[Transaction], spans: &[SpanItem]) {
        let links = transaction_links(transactions, spans);
        if links.is_empty() {
            return;
        }
        let sent = self
            .sender()
            .is_some_and(|s| s.try_send(Job::Link(links)).is_ok());
        if !sent {
            self.counters.failed_links.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits (up to `timeout`) until every chunk offered before has been inserted; false on
    /// timeout or when the writer is closed.
    pub async fn flushed(&self, timeout: Duration) -> bool {
        let Some(sender) = self.sender() else {
            return false;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let wait = tokio::task::spawn_blocking(move || {
            sender.send(Job::Barrier(tx)).is_ok() && rx.recv().is_ok()
        });
        matches!(tokio::time::timeout(timeout, wait).await, Ok(Ok(true)))
    }

    /// Stops taking chunks and inserts what is pending, waiting at most `deadline`.
    pub async fn close(&self, deadline: Duration) {
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let join = tokio::task::spawn_blocking(move || thread.join());
            if tokio::time::timeout(deadline, join).await.is_err() {
                tracing::warn!("profile store: pending chunks not all stored before the deadline");
            }
        }
    }
}

impl ChunkObserver for StoreWriter {
    fn queued(&self, project_id: Option<u64>, chunk: &ProfileChunk) {
        self.offer(chunk.clone(), project_id.unwrap_or(0), Vec::new());
    }
}

/// The links the store records: transactions, and span-streaming segment spans (a
/// transaction's counterpart), with a profiler id, a name and a time range.
pub fn transaction_links(transactions: &[Transaction], spans: &[SpanItem]) -> Vec<TransactionLink> {
    let from_transactions = transactions.iter().filter_map(|t| {
        Some(TransactionLink {
            profiler_id: t.profiler_id()?.to_string(),
            start: t.start_timestamp?.as_secs_f64(),
            end: t.timestamp?.as_secs_f64(),
            name: t.transaction.clone()?,
        })
    });
    let from_segments = spans
        .iter()
        .filter(|s| s.is_segment == Some(true))
        .filter_map(|s| {
            Some(TransactionLink {
                profiler_id: s.profiler_id()?.to_string(),
                start: s.start_timestamp.as_secs_f64(),
                end: s.end_timestamp.as_secs_f64(),
                name: s.name.clone()?,
            })
        });
    from_transactions.chain(from_segments).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_flamegraph::StoreConfig;
    use profilink_proto::sentry::{Frame, ProfileData, Sample};

    fn chunk(id: &str, samples: usize) -> ProfileChunk {
        let mut c = ProfileChunk {
            chunk_id: id.into(),
            profiler_id: "a".repeat(32),
            platform: "python".into(),
            version: "2".into(),
            ..Default::default()
        };
        c.profile = ProfileData {
            frames: vec![std::sync::Arc::new(Frame {
                function: Some("f".into()),
                ..Default::default()
            })],
            stacks: vec![vec![0]],
            samples: (0..samples)
                .map(|i| Sample {
                    stack_id: 0,
                    thread_id: "1".into(),
                    timestamp: 1.7e9 + i as f64 * 0.01,
                })
                .collect(),
            ..Default::default()
        };
        c
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stores_counts_and_refuses_bad_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            path: dir.path().join("store.db"),
            ..Default::default()
        };
        let store = Arc::new(ProfileStore::open(&cfg).unwrap());
        let w = StoreWriter::start(store.clone()).unwrap();
        w.offer(chunk(&"1".repeat(32), 10), 7, vec!["GET /".into()]);
        w.offer(chunk(&"2".repeat(32), 0), 7, vec![]);
        assert!(w.flushed(Duration::from_secs(10)).await);
        let c = w.counters();
        assert_eq!(c.stored.load(Ordering::Relaxed), 1);
        assert_eq!(c.failed.load(Ordering::Relaxed), 1, "no samples: refused");
        assert_eq!(c.pending_bytes.load(Ordering::Relaxed), 0);
        let list = store.list().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].project_id, 7);
        assert_eq!(list[0].transaction_names, vec!["GET /".to_string()]);

        w.close(Duration::from_secs(10)).await;
        w.offer(chunk(&"3".repeat(32), 10), 7, vec![]);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 1, "closed: dropped");
        assert!(!w.flushed(Duration::from_secs(1)).await);
    }

    #[test]
    fn pending_bytes_are_bounded() {
        let big = estimated_bytes(&chunk("x", 2_000_000));
        assert!(big > MAX_PENDING_BYTES);
        assert!(admit(0, big), "alone, even a big chunk waits");
        assert!(!admit(1, big));
        assert!(admit(MAX_PENDING_BYTES - 100, 100));
        assert!(!admit(MAX_PENDING_BYTES - 100, 101));
    }
}
