//! The OTLP profiles exporter (the way back, Sentry → OTLP): gRPC (tonic, gzip) or HTTP
//! (`POST {endpoint}/v1development/profiles`, protobuf, gzip), through the OTLP client of
//! [`crate::otlp_client`]; the retry rules are [`crate::otlp_retry`]'s.
//!
//! Partial successes are never retried; they are logged (`rejected_profiles` and the message)
//! and counted. Requests wait in the exporter's sending queue ([`crate::send_queue`]): in
//! memory, or durable with `sending_queue.storage` (persisted before `export` returns,
//! removed once delivered or given up, replayed at start); `export` answers
//! [`ExportError::Full`] when it is full.

use crate::ExportError;
use crate::config::{OtlpExporterConfig, OtlpProtocol};
use crate::durations::AttemptOutcome;
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::otlp_client::{OtlpClient, note_partial};
use crate::otlp_retry::{Next, after_failure};
use crate::retry::Backoff;
use crate::send_queue::SendQueue;
use crate::send_queue::record::Queued;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::signal::{Profiles, profile_counts};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

impl Queued for ExportProfilesServiceRequest {
    const KIND: u8 = b'P';
}

type Queue = SendQueue<ExportProfilesServiceRequest>;

struct Shared {
    client: OtlpClient<Profiles>,
    cfg: OtlpExporterConfig,
    metrics: Arc<ExporterMetrics>,
}

impl Shared {
    async fn send_with_retry(&self, req: ExportProfilesServiceRequest) {
        let retry = &self.cfg.retry_on_failure;
        let mut backoff = Backoff::new(retry);
        let samples = profile_counts(&req.resource_profiles).samples;
        loop {
            let started = Instant::now();
            let attempt = self.client.attempt(&req).await;
            let outcome = attempt
                .as_ref()
                .map_or_else(AttemptOutcome::of_error, |_| AttemptOutcome::Success);
            self.metrics
                .attempt_durations
                .record(outcome, started.elapsed());
            let error = match attempt {
                Ok(partial) => {
                    ExporterMetrics::add(&self.metrics.sent_chunks, 1);
                    ExporterMetrics::add(&self.metrics.sent_samples, samples);
                    if let Some(rejected) =
                        note_partial::<Profiles>(partial.as_ref(), self.client.destination())
                    {
                        ExporterMetrics::add(&self.metrics.partial_successes, 1);
                        ExporterMetrics::add(&self.metrics.rejected_profiles, rejected);
                    }
                    return;
                }
                Err(error) => error,
            };
            ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
            match after_failure(&mut backoff, retry, Instant::now(), error) {
                Next::Retry(wait, message) => {
                    ExporterMetrics::add(&self.metrics.retries, 1);
                    tracing::debug!(%message, ?wait, "OTLP export failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                Next::GiveUp(reason, message) => {
                    self.metrics.add_dropped(reason, 1);
                    self.metrics.add_dropped_samples(reason, samples);
                    tracing::warn!(%message, reason = reason.as_str(), "OTLP export failed; request dropped");
                    return;
                }
            }
        }
    }
}

/// Sends OTLP profiles requests. See the module docs.
pub struct OtlpExporter {
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
    metrics: Arc<ExporterMetrics>,
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

/// One sender: takes the oldest request, sends it (with retries), removes it from the queue.
async fn consume(queue: Arc<Queue>, shared: Arc<Shared>) {
    while let Some(next) = queue.pop().await {
        let id = match next {
            Ok(claimed) => {
                shared.send_with_retry(claimed.value).await;
                claimed.id
            }
            Err(corrupt) => {
                ExporterMetrics::add(&shared.metrics.corrupt_records, 1);
                tracing::warn!(
                    id = corrupt.id,
                    error = %corrupt.error,
                    "OTLP sending queue: a queued request does not read; it is removed"
                );
                corrupt.id
            }
        };
        // Same poll as the outcome above (no await in between for an in-memory queue), so a
        // shutdown's abort never counts a request twice.
        if let Err(e) = queue.ack(id).await {
            tracing::warn!(error = %e, "OTLP sending queue: removing a sent request failed; it will be sent again after a restart");
        }
        shared
            .metrics
            .queue_size_bytes
            .store(queue.bytes(), Ordering::Relaxed);
    }
}

impl OtlpExporter {
    /// Builds the client (connections are made lazily), opens the sending queue (replaying
    /// what an earlier run left in `sending_queue.storage`) and starts the senders
    /// (`sending_queue.num_consumers`, else `num_consumers`).
    pub async fn start(cfg: OtlpExporterConfig) -> Result<Self, ExportError> {
        let q = &cfg.sending_queue;
        let limits = q.limits(cfg.queue_size as u64)?;
        let consumers = q.consumers(cfg.num_consumers);
        let client = match cfg.protocol {
            OtlpProtocol::Grpc => OtlpClient::grpc(
                &cfg.endpoint,
                cfg.compression,
                cfg.timeout,
                &cfg.headers,
                &cfg.tls,
            )?
            .with_auth(cfg.auth.clone()),
            OtlpProtocol::Http => OtlpClient::http(
                &cfg.endpoint,
                cfg.compression,
                cfg.timeout,
                &cfg.headers,
                consumers,
                &cfg.tls,
            )?
            .with_auth(cfg.auth.clone()),
        };
        let metrics = Arc::new(ExporterMetrics::default());
        let dir = q.dir("profiles");
        let fsync = q.fsync;
        let (queue, recovered) =
            tokio::task::spawn_blocking(move || Queue::open(dir.as_deref(), fsync, limits))
                .await??;
        let queue = Arc::new(queue);
        metrics
            .queue_capacity_bytes
            .store(limits.max_bytes, Ordering::Relaxed);
        metrics
            .queue_size_bytes
            .store(queue.bytes(), Ordering::Relaxed);
        ExporterMetrics::add(&metrics.corrupt_records, recovered.corrupt);
        if let Some(dir) = queue.dir() {
            tracing::info!(
                dir = %dir.display(),
                requests = recovered.requests,
                samples = recovered.items,
                corrupt = recovered.corrupt,
                "OTLP sending queue opened"
            );
        }
        let shared = Arc::new(Shared {
            client,
            cfg: cfg.clone(),
            metrics: metrics.clone(),
        });
        let workers = (0..consumers)
            .map(|_| tokio::spawn(consume(queue.clone(), shared.clone())))
            .collect();
        Ok(OtlpExporter {
            queue,
            workers,
            metrics,
        })
    }

    /// Queues a request (durably, with storage); [`ExportError::Full`] when the queue is full
    /// (unless `block_on_overflow`, which waits for room).
    pub async fn export(&self, req: ExportProfilesServiceRequest) -> Result<(), ExportError> {
        let samples = profile_counts(&req.resource_profiles).samples;
        self.queue
            .export_counted(vec![(req, samples)], &self.metrics, "OTLP sending queue")
            .await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight requests finish within `deadline`, then
    /// stops. What is left is dropped and counted (`network_error`) for an in-memory queue;
    /// a durable queue keeps it for the next start.
    pub async fn shutdown(mut self, deadline: Duration) {
        let workers = std::mem::take(&mut self.workers);
        let (left, samples) = self.queue.close_and_stop(workers, deadline).await;
        if left == 0 {
            return;
        }
        match self.queue.dir() {
            Some(dir) => tracing::info!(
                requests = left,
                samples,
                dir = %dir.display(),
                "OTLP exporter shut down; unsent requests stay queued for the next start"
            ),
            None => {
                self.queue.drain_memory();
                self.metrics.add_dropped(DiscardReason::NetworkError, left);
                self.metrics
                    .add_dropped_samples(DiscardReason::NetworkError, samples);
                tracing::warn!(
                    requests = left,
                    "OTLP exporter shut down with unsent requests"
                );
            }
        }
    }
}
