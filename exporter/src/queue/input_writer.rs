//! Group commit for the input log: concurrent `export` calls share one write and one fsync.
//!
//! Every `export` must be durable before it returns, and each append used to take the input
//! log's lock for its own write and `fsync`, so concurrent receivers queued behind each other's
//! syncs. One writer thread now takes every batch that arrived while the previous sync ran and
//! appends them as one group ([`Queue::append_inputs`]: one write, one sync), then answers each
//! caller. Nothing waits for a group to fill: a lone batch is written at once.
//!
//! A group that does not fit in the queue is retried batch by batch, so each caller gets the
//! verdict it would have got alone (some may fit). An I/O error answers every batch of the
//! group with that error (none of them is acknowledged as durable).

use super::{Queue, QueueError, ReadyMeta};
use std::io;
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// Batches taken into one group, by body bytes (a group is at least one batch).
const MAX_GROUP_BYTES: usize = 16 << 20;

/// What an append returns: the records' ids and the ready chunks dropped to make room.
pub type AppendResult = Result<(Vec<u64>, Vec<ReadyMeta>), QueueError>;

struct Job {
    bodies: Vec<Vec<u8>>,
    reply: oneshot::Sender<AppendResult>,
}

/// The input log's writer thread (stops when the handle is dropped, after pending batches).
#[derive(Debug)]
pub struct InputWriter {
    tx: mpsc::Sender<Job>,
}

impl InputWriter {
    /// Starts the writer thread for `queue`.
    pub fn start(queue: Arc<Queue>) -> io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("profilink-input-log".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut bytes: usize = first.bodies.iter().map(Vec::len).sum();
                    let mut group = vec![first];
                    while bytes < MAX_GROUP_BYTES {
                        match rx.try_recv() {
                            Ok(job) => {
                                bytes += job.bodies.iter().map(Vec::len).sum::<usize>();
                                group.push(job);
                            }
                            Err(_) => break,
                        }
                    }
                    commit(&queue, group);
                }
            })?;
        Ok(InputWriter { tx })
    }

    /// Appends one `export` batch's record bodies durably.
    pub async fn append(&self, bodies: Vec<Vec<u8>>) -> AppendResult {
        let (reply, rx) = oneshot::channel();
        let stopped = || QueueError::Io(io::Error::other("the input log writer has stopped"));
        self.tx.send(Job { bodies, reply }).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

/// Appends a group and answers its callers.
fn commit(queue: &Queue, group: Vec<Job>) {
    if group.len() == 1 {
        for job in group {
            let _ = job.reply.send(queue.append_inputs(&job.bodies));
        }
        return;
    }
    let counts: Vec<usize> = group.iter().map(|j| j.bodies.len()).collect();
    let mut all = Vec::with_capacity(counts.iter().sum());
    let mut replies = Vec::with_capacity(group.len());
    for job in group {
        all.extend(job.bodies);
        replies.push(job.reply);
    }
    match queue.append_inputs(&all) {
        Ok((ids, mut dropped)) => {
            let mut start = 0;
            for (reply, n) in replies.into_iter().zip(counts) {
                // Dropped chunks are reported once, by the first caller.
                let _ = reply.send(Ok((
                    ids[start..start + n].to_vec(),
                    std::mem::take(&mut dropped),
                )));
                start += n;
            }
        }
        Err(QueueError::Full { .. }) => {
            let mut start = 0;
            for (reply, n) in replies.into_iter().zip(counts) {
                let _ = reply.send(queue.append_inputs(&all[start..start + n]));
                start += n;
            }
        }
        Err(QueueError::Io(e)) => {
            for reply in replies {
                let _ = reply.send(Err(QueueError::Io(io::Error::new(e.kind(), e.to_string()))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ExporterMetrics;
    use crate::queue_config::QueueConfig;

    fn open(dir: &std::path::Path, max_size_mib: u64) -> Arc<Queue> {
        let cfg = QueueConfig {
            max_size_mib: Some(max_size_mib),
            ..QueueConfig::default()
        };
        let (q, _) =
            Queue::open_when_free(&cfg, dir, Arc::new(ExporterMetrics::default())).unwrap();
        Arc::new(q)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_batches_get_distinct_durable_ids() {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path(), 64);
        let w = Arc::new(InputWriter::start(q.clone()).unwrap());
        let tasks: Vec<_> = (0..40u8)
            .map(|i| {
                let w = w.clone();
                tokio::spawn(async move {
                    let bodies = vec![vec![i; 1000 + usize::from(i)]; 1 + usize::from(i % 3)];
                    (bodies.len(), w.append(bodies).await)
                })
            })
            .collect();
        let mut ids = Vec::new();
        for t in tasks {
            let (n, res) = t.await.unwrap();
            let (got, dropped) = res.unwrap();
            assert_eq!(got.len(), n);
            assert!(dropped.is_empty());
            ids.extend(got);
        }
        let total = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), total, "ids are distinct");
        drop(w);
        drop(q);
        // Everything is in the log: a reopened queue recovers every record.
        let q = open(dir.path(), 64);
        assert!(q.size_bytes() >= (total * 1000) as u64);
    }

    #[test]
    fn a_group_that_does_not_fit_is_retried_batch_by_batch() {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path(), 1);
        let (small_tx, small_rx) = oneshot::channel();
        let (big_tx, big_rx) = oneshot::channel();
        // Together over 1 MiB; the small batch fits alone.
        commit(
            &q,
            vec![
                Job {
                    bodies: vec![vec![1; 1 << 20]],
                    reply: big_tx,
                },
                Job {
                    bodies: vec![vec![2; 1000]],
                    reply: small_tx,
                },
            ],
        );
        assert!(matches!(
            big_rx.blocking_recv().unwrap(),
            Err(QueueError::Full { .. })
        ));
        assert_eq!(small_rx.blocking_recv().unwrap().unwrap().0.len(), 1);
    }
}
