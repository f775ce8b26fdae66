//! The traces exporter itself: [`TracesExporter::start`] (one [`Sender`] per destination kind
//! and the request exporter around it), `export` (split, then queued), `shutdown`, and how it
//! meets the pipeline's [`Export`] contract (full within a tenth of its queue).

use super::config::TracesExporterConfig;
use super::metrics::TracesMetrics;
use super::send::Sender;
use super::split;
use crate::clock::{SharedClock, system_clock};
use crate::config::OtlpProtocol;
use crate::contract::nearly_full;
use crate::queue_config::DEFAULT_QUEUE_SIZE;
use crate::request::{RequestExporter, RequestSettings};
use crate::send_queue::record::Queued;
use crate::start_error::StartError;
use profilink_consumer::{BoxFuture, Export, ExportError};
use profilink_proto::otlp::ExportTraceServiceRequest;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Queued for ExportTraceServiceRequest {
    const KIND: u8 = b'T';
}

/// Forwards OTLP traces. See the module docs.
pub struct TracesExporter {
    requests: RequestExporter<Sender>,
    max_request_bytes: u64,
    metrics: Arc<TracesMetrics>,
    kind: &'static str,
}

impl std::fmt::Debug for TracesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TracesExporter")
            .field("kind", &self.kind)
            .field("destination", &self.destination())
            .finish_non_exhaustive()
    }
}

impl TracesExporter {
    /// Validates the config (endpoint, DSN, headers), builds the client (connections are made
    /// lazily) and starts `num_consumers` senders. Must run inside a tokio runtime.
    pub async fn start(cfg: TracesExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`TracesExporter::start`] with an injected clock: rate limits and the backoff's
    /// `max_elapsed_time` are measured on it (tests advance a [`crate::ManualClock`]).
    pub async fn start_with_clock(
        cfg: TracesExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        let metrics = Arc::new(TracesMetrics::default());
        let sender = match &cfg {
            TracesExporterConfig::Otlp(c) => {
                Sender::otlp(OtlpProtocol::Grpc, c, clock.clone(), metrics.clone())?
            }
            TracesExporterConfig::OtlpHttp(c) => {
                Sender::otlp(OtlpProtocol::Http, c, clock.clone(), metrics.clone())?
            }
            TracesExporterConfig::Sentry(c) => Sender::sentry(c, clock.clone(), metrics.clone())?,
        };
        let settings = RequestSettings::new(
            cfg.sending_queue(),
            "traces",
            DEFAULT_QUEUE_SIZE,
            cfg.num_consumers(),
            cfg.retry_on_failure().clone(),
        )?
        .with_clock(clock);
        let requests = RequestExporter::start(sender, metrics.clone(), settings).await?;
        tracing::debug!(kind = cfg.kind(), destination = %requests.sender().destination(), "traces exporter started");
        Ok(TracesExporter {
            requests,
            max_request_bytes: cfg.max_request_bytes(),
            metrics,
            kind: cfg.kind(),
        })
    }

    /// Queues a request (split above `max_request_bytes`) and returns; delivery happens in the
    /// background. Requests without spans are accepted and not sent.
    ///
    /// Errors: [`ExportError::Full`] when the queue cannot take the whole request (answer the
    /// producer UNAVAILABLE / 429 with `retry_after`), [`ExportError::Closed`] after shutdown.
    pub async fn export(&self, req: ExportTraceServiceRequest) -> Result<(), ExportError> {
        if self.requests.is_closed() {
            return Err(ExportError::Closed);
        }
        if split::span_count(&req) == 0 {
            return Ok(());
        }
        let pieces = split::split_request(req, self.max_request_bytes)
            .into_iter()
            .map(|req| {
                let spans = split::span_count(&req);
                (req, spans)
            })
            .filter(|(_, spans)| *spans > 0)
            .collect();
        self.requests.export(pieces).await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<TracesMetrics> {
        self.metrics.clone()
    }

    /// The exporter kind (`otlp`, `otlp_http` or `sentry`).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Where requests go (a URL without credentials), for logs.
    pub fn destination(&self) -> &str {
        self.requests.sender().destination()
    }

    /// Stops accepting, sends what is queued (retries and rate-limit waits included) until
    /// `deadline`, then stops the senders. Spans still queued or in flight then stay queued for
    /// the next start with storage; in memory they are counted as dropped:
    /// `ratelimit_backoff` while a rate limit is active, else `network_error`.
    pub async fn shutdown(self, deadline: Duration) {
        self.requests.shutdown(deadline).await;
    }
}

impl Export<ExportTraceServiceRequest> for TracesExporter {
    fn export(&self, data: ExportTraceServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(TracesExporter::export(self, data))
    }

    fn is_full(&self) -> bool {
        let m = self.metrics();
        let cap = m.queue_capacity_bytes.load(Ordering::Relaxed);
        nearly_full(m.queue_bytes.load(Ordering::Relaxed), cap, cap / 10)
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(TracesExporter::shutdown(*self, deadline))
    }
}
