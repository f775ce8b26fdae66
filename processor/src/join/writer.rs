//! Group commit for the join log: concurrent requests share one write and one sync.
//!
//! Every request's chunks and spans must be durable before the `sentry` receiver answers, and
//! a sync takes milliseconds (about 4 ms on the development VM's disk); one per request, in
//! turn, would cap a pipeline at a few hundred envelopes a second (transactions arrive one
//! per envelope). One writer thread per join log takes every request that arrived while the
//! previous sync ran and appends them together ([`JoinLog::append_group`]), then answers each.
//! Nothing waits for a group to fill: a lone request is written at once. An I/O error answers
//! every request of its group with that error.

use super::log::{JoinLog, Request, Written};
use std::io;
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::oneshot;

/// Requests taken into one group, by body bytes (a group is at least one request).
const MAX_GROUP_BYTES: usize = 16 << 20;

struct Job {
    chunks: Vec<Vec<u8>>,
    spans: Option<Vec<u8>>,
    reply: oneshot::Sender<io::Result<Written>>,
}

impl Job {
    fn bytes(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum::<usize>() + self.spans.as_ref().map_or(0, Vec::len)
    }
}

/// The join log's writer thread. Dropping the handle stops it after the pending requests and
/// waits for it, so the log (and its directory lock) is let go when the drop returns.
#[derive(Debug)]
pub struct JoinWriter {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for JoinWriter {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl JoinWriter {
    /// Starts the writer thread for `log`.
    pub fn start(log: Arc<JoinLog>) -> io::Result<Self> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("profilink-join-log".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut bytes = first.bytes();
                    let mut group = vec![first];
                    while bytes < MAX_GROUP_BYTES {
                        match rx.try_recv() {
                            Ok(job) => {
                                bytes += job.bytes();
                                group.push(job);
                            }
                            Err(_) => break,
                        }
                    }
                    commit(&log, group);
                }
            })?;
        Ok(JoinWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Appends one request's encoded chunk records and spans record durably.
    pub async fn append(
        &self,
        chunks: Vec<Vec<u8>>,
        spans: Option<Vec<u8>>,
    ) -> io::Result<Written> {
        let (reply, rx) = oneshot::channel();
        let stopped = || io::Error::other("the join log writer has stopped");
        self.tx
            .as_ref()
            .ok_or_else(stopped)?
            .send(Job {
                chunks,
                spans,
                reply,
            })
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }
}

/// Appends a group and answers its requests.
fn commit(log: &JoinLog, group: Vec<Job>) {
    let parts: Vec<Request<'_>> = group
        .iter()
        .map(|j| (j.chunks.as_slice(), j.spans.as_deref()))
        .collect();
    match log.append_group(&parts) {
        Ok(ids) => {
            for (job, ids) in group.into_iter().zip(ids) {
                let _ = job.reply.send(Ok(ids));
            }
        }
        Err(e) => {
            for job in group {
                let _ = job.reply.send(Err(io::Error::new(e.kind(), e.to_string())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_get_distinct_durable_ids() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = JoinLog::open(dir.path()).unwrap();
        let w = Arc::new(JoinWriter::start(Arc::new(log)).unwrap());
        let tasks: Vec<_> = (0..40u8)
            .map(|i| {
                let w = w.clone();
                tokio::spawn(async move {
                    let chunks = vec![vec![i; 100]; usize::from(i % 3)];
                    let spans = (i % 2 == 0).then(|| vec![i; 50]);
                    let want = (chunks.len(), spans.is_some());
                    (want, w.append(chunks, spans).await.unwrap())
                })
            })
            .collect();
        let mut ids = Vec::new();
        for t in tasks {
            let ((n, has_spans), (chunks, span)) = t.await.unwrap();
            assert_eq!((chunks.len(), span != 0), (n, has_spans));
            ids.extend(chunks);
            ids.extend((span != 0).then_some(span));
        }
        let total = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), total, "ids are distinct");
        drop(w);
        // Everything is on disk (the bodies are not valid records: reopening counts them).
        let (_, replay) = JoinLog::open(dir.path()).unwrap();
        assert_eq!(replay.corrupt as usize, total);
    }
}
