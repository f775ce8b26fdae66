//! The bounded in-memory FIFO queue between `export` and the senders, bounded by requests and
//! by bytes.

use super::metrics::TracesMetrics;
use profilink_proto::otlp::ExportTraceServiceRequest;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// One queued request (already split to `max_request_bytes`).
#[derive(Debug, Clone)]
pub struct Item {
    /// The request.
    pub req: ExportTraceServiceRequest,
    /// Its uncompressed protobuf length.
    pub bytes: u64,
    /// Its number of spans.
    pub spans: u64,
}

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Item>,
    bytes: u64,
    closed: bool,
}

/// Why [`MemQueue::push_all`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushError {
    /// Over a bound.
    Full,
    /// Closed by shutdown.
    Closed,
}

/// The queue. Pushes are all-or-nothing per `export` call.
#[derive(Debug)]
pub struct MemQueue {
    state: Mutex<State>,
    notify: Notify,
    max_requests: usize,
    max_bytes: u64,
    metrics: Arc<TracesMetrics>,
}

impl MemQueue {
    /// An empty queue with these bounds.
    pub fn new(max_requests: usize, max_bytes: u64, metrics: Arc<TracesMetrics>) -> Self {
        MemQueue {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            max_requests: max_requests.max(1),
            max_bytes,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends every item, or none: [`PushError::Full`] when they would take the queue past
    /// `max_requests` or `max_bytes` (a non-empty queue; an empty one takes any single call
    /// whose pieces fit `max_requests`).
    pub fn push_all(&self, items: Vec<Item>) -> Result<(), PushError> {
        let n = items.len();
        let bytes: u64 = items.iter().map(|i| i.bytes).sum();
        {
            let mut st = self.lock();
            if st.closed {
                return Err(PushError::Closed);
            }
            let too_many = st.items.len().saturating_add(n) > self.max_requests
                && !(st.items.is_empty() && n > self.max_requests);
            let too_big = !st.items.is_empty() && st.bytes.saturating_add(bytes) > self.max_bytes;
            if too_many || too_big {
                return Err(PushError::Full);
            }
            st.items.extend(items);
            st.bytes = st.bytes.saturating_add(bytes);
        }
        TracesMetrics::add(&self.metrics.queue_requests, n as u64);
        TracesMetrics::add(&self.metrics.queue_bytes, bytes);
        for _ in 0..n {
            self.notify.notify_one();
        }
        Ok(())
    }

    /// The next item; `None` once the queue is closed and empty.
    pub async fn pop(&self) -> Option<Item> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if let Some(item) = st.items.pop_front() {
                    st.bytes = st.bytes.saturating_sub(item.bytes);
                    let more = !st.items.is_empty();
                    drop(st);
                    TracesMetrics::sub(&self.metrics.queue_requests, 1);
                    TracesMetrics::sub(&self.metrics.queue_bytes, item.bytes);
                    if more {
                        // Pass the wake-up on: a permit may have been consumed by this call.
                        self.notify.notify_one();
                    }
                    return Some(item);
                }
                if st.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Refuses further pushes and wakes idle senders so they drain and stop.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Removes everything still queued; returns (requests, spans).
    pub fn drain(&self) -> (u64, u64) {
        let mut st = self.lock();
        let items = std::mem::take(&mut st.items);
        st.bytes = 0;
        drop(st);
        let spans = items.iter().map(|i| i.spans).sum();
        let bytes: u64 = items.iter().map(|i| i.bytes).sum();
        TracesMetrics::sub(&self.metrics.queue_requests, items.len() as u64);
        TracesMetrics::sub(&self.metrics.queue_bytes, bytes);
        (items.len() as u64, spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(bytes: u64) -> Item {
        Item {
            req: ExportTraceServiceRequest::default(),
            bytes,
            spans: 1,
        }
    }

    #[test]
    fn bounds_by_requests_and_bytes() {
        let m = Arc::new(TracesMetrics::default());
        let q = MemQueue::new(3, 100, m.clone());
        // An empty queue takes an oversized call, then refuses more bytes.
        q.push_all(vec![item(150)]).unwrap();
        assert_eq!(q.push_all(vec![item(1)]), Err(PushError::Full));
        assert_eq!(q.drain(), (1, 1));
        q.push_all(vec![item(40), item(40)]).unwrap();
        assert_eq!(q.push_all(vec![item(30)]), Err(PushError::Full));
        q.push_all(vec![item(20)]).unwrap();
        assert_eq!(
            q.push_all(vec![item(0)]),
            Err(PushError::Full),
            "3 requests"
        );
        let s = m.snapshot();
        assert_eq!((s.queue_requests, s.queue_bytes), (3, 100));
        q.close();
        assert_eq!(q.push_all(vec![item(0)]), Err(PushError::Closed));
    }

    #[tokio::test]
    async fn pops_in_order_then_ends_when_closed() {
        let m = Arc::new(TracesMetrics::default());
        let q = Arc::new(MemQueue::new(10, 1000, m.clone()));
        let q2 = q.clone();
        let popper = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(i) = q2.pop().await {
                got.push(i.bytes);
            }
            got
        });
        q.push_all(vec![item(1), item(2)]).unwrap();
        q.push_all(vec![item(3)]).unwrap();
        q.close();
        assert_eq!(popper.await.unwrap(), vec![1, 2, 3]);
        let s = m.snapshot();
        assert_eq!((s.queue_requests, s.queue_bytes), (0, 0));
    }
}
