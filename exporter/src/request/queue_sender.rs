//! The sending queue and its consumers: the Collector's `queue_sender`. [`RequestExporter`]
//! opens the queue, takes `export`'s requests into it, runs `num_consumers` tasks that each
//! claim the oldest request and hand it to the retry sender, and stops them at shutdown.

use super::metrics::QueueLevels;
use super::{Queue, RequestMetrics, RequestSender, retry_sender};
use crate::clock::{SharedClock, system_clock};
use crate::config::RetryConfig;
use crate::queue_config::{QueueConfig, QueueLimits};
use crate::send_queue::PushError;
use crate::start_error::StartError;
use profilink_consumer::ExportError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How a [`RequestExporter`] queues and retries.
#[derive(Debug, Clone)]
pub struct RequestSettings {
    /// The durable queue's directory; `None` keeps the queue in memory.
    pub dir: Option<PathBuf>,
    /// Sync each appended request before `export` returns (durable queue only).
    pub fsync: bool,
    /// The queue's bounds.
    pub limits: QueueLimits,
    /// Concurrent senders.
    pub consumers: usize,
    /// The retry budget and backoff.
    pub retry: RetryConfig,
    /// The clock the backoff's `max_elapsed_time` is measured on.
    pub clock: SharedClock,
}

impl RequestSettings {
    /// The settings of `sending_queue` for `signal` (its subdirectory of `storage`), with the
    /// exporter-level `queue_size` and `num_consumers` where `sending_queue` leaves them
    /// unset, the system clock, and `retry`. An error for queue settings profilink cannot
    /// honour.
    pub fn new(
        sending_queue: &QueueConfig,
        signal: &str,
        queue_size: u64,
        num_consumers: usize,
        retry: RetryConfig,
    ) -> Result<Self, StartError> {
        Ok(RequestSettings {
            limits: sending_queue.limits(queue_size)?,
            consumers: sending_queue.consumers(num_consumers),
            dir: sending_queue.dir(signal),
            fsync: sending_queue.fsync,
            retry,
            clock: system_clock(),
        })
    }

    /// The same settings with the backoff measured on `clock`.
    pub fn with_clock(self, clock: SharedClock) -> Self {
        RequestSettings { clock, ..self }
    }
}

/// What the consumers share.
struct Shared<S: RequestSender> {
    queue: Arc<Queue<S>>,
    sender: Arc<S>,
    metrics: Arc<S::Metrics>,
    retry: RetryConfig,
    clock: SharedClock,
}

impl<S: RequestSender> Shared<S> {
    /// Sets the queue gauges from the queue.
    fn levels(&self) {
        self.metrics.queue_levels(QueueLevels {
            waiting: self.queue.len() as u64,
            waiting_bytes: self.queue.waiting_bytes(),
            bytes: self.queue.bytes(),
        });
    }
}

/// A sending queue and the `num_consumers` senders that deliver its requests, for an exporter
/// that supplies only its [`RequestSender`] (the OpenTelemetry Collector's `exporterhelper`):
/// the helper owns the queue, the consumer loop, the retries with backoff, the counters
/// ([`RequestMetrics`]) and the shutdown. Dropping it stops the senders like a crash: a
/// durable queue keeps what it holds for the next start.
pub struct RequestExporter<S: RequestSender> {
    shared: Arc<Shared<S>>,
    workers: Vec<JoinHandle<()>>,
}

impl<S: RequestSender> Drop for RequestExporter<S> {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

impl<S: RequestSender> std::fmt::Debug for RequestExporter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestExporter")
            .field("exporter", &S::NAME)
            .field("destination", &self.shared.sender.destination())
            .finish_non_exhaustive()
    }
}

/// One consumer: claims the oldest request, sends it (with retries), removes it.
async fn consume<S: RequestSender>(shared: Arc<Shared<S>>) {
    let queue = &shared.queue;
    while let Some(next) = queue.pop().await {
        shared.levels();
        let id = match next {
            Ok(claimed) => {
                retry_sender::send(
                    &*shared.sender,
                    &*shared.metrics,
                    &shared.retry,
                    &*shared.clock,
                    &claimed.value,
                    claimed.items,
                )
                .await;
                claimed.id
            }
            Err(corrupt) => {
                shared.metrics.corrupt(corrupt.items);
                tracing::warn!(
                    exporter = S::NAME,
                    destination = shared.sender.destination(),
                    id = corrupt.id,
                    items = corrupt.items,
                    error = %corrupt.error,
                    "sending queue: a queued request does not read; it is removed"
                );
                corrupt.id
            }
        };
        // Same poll as the outcome above (no await in between for an in-memory queue), so a
        // shutdown's abort never counts a request twice.
        if let Err(e) = queue.ack(id).await {
            tracing::warn!(
                exporter = S::NAME,
                error = %e,
                "sending queue: removing a sent request failed; it will be sent again after a restart"
            );
        }
        shared.levels();
    }
}

impl<S: RequestSender> RequestExporter<S> {
    /// Opens the queue (replaying what an earlier run left in a durable one) and starts the
    /// consumers, which send with `sender` and count in `metrics`.
    pub async fn start(
        sender: S,
        metrics: Arc<S::Metrics>,
        settings: RequestSettings,
    ) -> Result<Self, StartError> {
        let RequestSettings {
            dir,
            fsync,
            limits,
            consumers,
            retry,
            clock,
        } = settings;
        let (queue, recovered) =
            tokio::task::spawn_blocking(move || Queue::<S>::open(dir.as_deref(), fsync, limits))
                .await??;
        metrics.queue_opened(&limits, recovered.corrupt);
        if recovered.corrupt > 0 {
            tracing::warn!(
                exporter = S::NAME,
                records = recovered.corrupt,
                "sending queue: unreadable records refused at start"
            );
        }
        if let Some(dir) = queue.dir() {
            tracing::info!(
                exporter = S::NAME,
                dir = %dir.display(),
                requests = recovered.requests,
                items = recovered.items,
                corrupt = recovered.corrupt,
                "sending queue opened"
            );
        }
        let shared = Arc::new(Shared {
            queue: Arc::new(queue),
            sender: Arc::new(sender),
            metrics,
            retry,
            clock,
        });
        shared.levels();
        let workers = (0..consumers)
            .map(|_| tokio::spawn(consume(shared.clone())))
            .collect();
        Ok(RequestExporter { shared, workers })
    }

    /// The sender.
    pub fn sender(&self) -> &S {
        &self.shared.sender
    }

    /// True once shutdown has begun: `export` answers [`ExportError::Closed`].
    pub fn is_closed(&self) -> bool {
        self.shared.queue.is_closed()
    }

    /// Queues `requests`, each with its item count, all or none (durably, with a directory);
    /// counted as accepted, or as refused when the queue is full. [`ExportError::Full`] (with
    /// the sender's [`full_retry_after`](RequestSender::full_retry_after)) when it is full,
    /// unless `block_on_overflow`, which waits for room; [`ExportError::Closed`] after
    /// shutdown.
    pub async fn export(&self, requests: Vec<(S::Request, u64)>) -> Result<(), ExportError> {
        let shared = &self.shared;
        let n = requests.len() as u64;
        let items: u64 = requests.iter().map(|(_, items)| items).sum();
        match shared.queue.push_all(requests).await {
            Ok(()) => {
                shared.metrics.accepted(n, items);
                shared.levels();
                Ok(())
            }
            Err(PushError::Full { .. }) => {
                shared.metrics.refused_full(items);
                Err(ExportError::Full {
                    retry_after: shared.sender.full_retry_after(),
                })
            }
            Err(PushError::Closed) => Err(ExportError::Closed),
            Err(PushError::Io(e)) => {
                tracing::error!(
                    exporter = S::NAME,
                    error = %e,
                    "sending queue: a request could not be stored; refused"
                );
                Err(e.into())
            }
        }
    }

    /// Refuses new requests, lets the consumers send what is queued (retries and rate-limit
    /// waits included) until `deadline`, then stops them. What is left then stays queued for
    /// the next start with a durable queue; an in-memory queue's rest is dropped and counted
    /// under the sender's [`shutdown_reason`](RequestSender::shutdown_reason).
    pub async fn shutdown(mut self, deadline: Duration) {
        let workers = std::mem::take(&mut self.workers);
        let shared = &self.shared;
        let (requests, items) = shared.queue.close_and_stop(workers, deadline).await;
        if requests == 0 {
            return;
        }
        let destination = shared.sender.destination();
        if let Some(dir) = shared.queue.dir() {
            tracing::info!(
                exporter = S::NAME,
                destination,
                requests,
                items,
                dir = %dir.display(),
                "exporter shut down; unsent requests stay queued for the next start"
            );
            return;
        }
        shared.queue.drain_memory();
        shared.levels();
        let reason = shared.sender.shutdown_reason();
        shared.metrics.dropped(reason, requests, items);
        tracing::warn!(
            exporter = S::NAME,
            destination,
            requests,
            items,
            reason = reason.as_str(),
            "exporter shut down with unsent requests; they are dropped"
        );
    }
}
