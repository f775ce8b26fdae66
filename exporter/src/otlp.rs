//! The OTLP profiles exporter (the way back, Sentry → OTLP): gRPC (tonic, gzip) or HTTP
//! (`POST {endpoint}/v1development/profiles`, protobuf, gzip), through the OTLP client of
//! [`crate::otlp_client`]; the retry rules are [`crate::otlp_retry`]'s.
//!
//! Partial successes are never retried; they are logged (`rejected_profiles` and the message)
//! and counted. Requests wait in a bounded in-memory queue (`queue_size`); `export` answers
//! [`ExportError::Full`] when it is full.

use crate::ExportError;
use crate::config::{OtlpExporterConfig, OtlpProtocol};
use crate::durations::AttemptOutcome;
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::otlp_client::{OtlpClient, note_partial};
use crate::otlp_retry::{Next, after_failure};
use crate::retry::Backoff;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::signal::{Profiles, profile_counts};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

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
    tx: Option<mpsc::Sender<ExportProfilesServiceRequest>>,
    rx: Arc<Mutex<mpsc::Receiver<ExportProfilesServiceRequest>>>,
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

impl OtlpExporter {
    /// Builds the client (connections are made lazily) and starts `num_consumers` senders.
    pub async fn start(cfg: OtlpExporterConfig) -> Result<Self, ExportError> {
        let client = match cfg.protocol {
            OtlpProtocol::Grpc => OtlpClient::grpc(
                &cfg.endpoint,
                cfg.compression,
                cfg.timeout,
                &cfg.headers,
                &cfg.tls,
            )?,
            OtlpProtocol::Http => OtlpClient::http(
                &cfg.endpoint,
                cfg.compression,
                cfg.timeout,
                &cfg.headers,
                cfg.num_consumers,
                &cfg.tls,
            )?,
        };
        let metrics = Arc::new(ExporterMetrics::default());
        let (tx, rx) = mpsc::channel(cfg.queue_size.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared {
            client,
            cfg: cfg.clone(),
            metrics: metrics.clone(),
        });
        let workers = (0..cfg.num_consumers.max(1))
            .map(|_| {
                let rx = rx.clone();
                let shared = shared.clone();
                tokio::spawn(async move {
                    loop {
                        let next = rx.lock().await.recv().await;
                        match next {
                            Some(req) => shared.send_with_retry(req).await,
                            None => return,
                        }
                    }
                })
            })
            .collect();
        Ok(OtlpExporter {
            tx: Some(tx),
            rx,
            workers,
            metrics,
        })
    }

    /// Queues a request; [`ExportError::Full`] when `queue_size` requests are waiting.
    pub async fn export(&self, req: ExportProfilesServiceRequest) -> Result<(), ExportError> {
        let Some(tx) = &self.tx else {
            return Err(ExportError::Closed);
        };
        let samples = profile_counts(&req.resource_profiles).samples;
        match tx.try_send(req) {
            Ok(()) => {
                ExporterMetrics::add(&self.metrics.accepted_chunks, 1);
                ExporterMetrics::add(&self.metrics.accepted_samples, samples);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                ExporterMetrics::add(&self.metrics.refused_full, 1);
                ExporterMetrics::add(&self.metrics.refused_full_samples, samples);
                Err(ExportError::Full {
                    retry_after: Duration::from_secs(1),
                })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ExportError::Closed),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight requests finish within `deadline`, then
    /// stops; requests still waiting are dropped and counted (this exporter's queue is in
    /// memory).
    pub async fn shutdown(mut self, deadline: Duration) {
        self.tx = None;
        let workers = std::mem::take(&mut self.workers);
        let aborts: Vec<_> = workers.iter().map(|w| w.abort_handle()).collect();
        let all = async {
            for w in workers {
                let _ = w.await;
            }
        };
        if tokio::time::timeout(deadline, all).await.is_err() {
            for a in aborts {
                a.abort();
            }
            let mut rx = self.rx.lock().await;
            let (mut left, mut samples) = (0u64, 0u64);
            while let Ok(req) = rx.try_recv() {
                left += 1;
                samples += profile_counts(&req.resource_profiles).samples;
            }
            if left > 0 {
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
