//! The Sentry exporter itself: [`SentryExporter::start`] (DSNs, transport, the durable queue
//! and its chunk engine, the client report task), `export`, `is_full` and `shutdown`, and how
//! it meets the pipeline's [`Export`] contract.

use super::client_report::Discards;
use super::config::SentryExporterConfig;
use super::routing::Router;
use super::sink::SentrySink;
use super::transport::Transport;
use crate::chunk_engine::start_engine;
use crate::clock::{SharedClock, system_clock};
use crate::engine::Engine;
use crate::metrics::ExporterMetrics;
use crate::start_error::StartError;
use profilink_consumer::{BoxFuture, Export, ExportChunk, ExportError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Sends profile chunks to Sentry. See the module docs.
pub struct SentryExporter {
    engine: Option<Engine<SentrySink>>,
    sink: Arc<SentrySink>,
    metrics: Arc<ExporterMetrics>,
    /// `sending_queue.overflow: backpressure`: refuse requests up front near full.
    backpressure: bool,
    report_stop: watch::Sender<bool>,
    report_task: Option<JoinHandle<()>>,
}

impl Drop for SentryExporter {
    fn drop(&mut self) {
        if let Some(t) = self.report_task.take() {
            t.abort();
        }
    }
}

impl SentryExporter {
    /// Parses the DSNs, opens the queue (replaying what a previous run left) and starts sending.
    pub async fn start(cfg: SentryExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`SentryExporter::start`] with an injected clock (tests).
    pub async fn start_with_clock(
        cfg: SentryExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        let Some(dsn) = cfg.dsn.as_deref() else {
            return Err(StartError::Missing("exporters.sentry.dsn"));
        };
        cfg.check().map_err(|e| e.under("exporters.sentry"))?;
        let router = Router::new(dsn, cfg.routing.as_ref())?;
        let level = cfg
            .compression_params
            .level_for(cfg.compression)
            .map_err(|e| e.under("exporters.sentry"))?;
        let transport = Transport::new(
            cfg.compression,
            level,
            cfg.timeout,
            cfg.consumers(),
            &cfg.tls,
        )?;
        let metrics = Arc::new(ExporterMetrics::default());
        let sink = Arc::new(SentrySink {
            router,
            transport,
            clock: clock.clone(),
            metrics: metrics.clone(),
            discards: Discards::default(),
            dead_letter_dir: cfg.dead_letter_dir.clone(),
            default_rate_limit: cfg.default_rate_limit,
            rate_limit_max_wait: cfg.rate_limit_max_wait,
        });
        let engine = start_engine(
            &cfg,
            sink.clone(),
            cfg.retry_on_failure.clone(),
            clock,
            metrics.clone(),
        )
        .await?;
        let (report_stop, mut stop_rx) = watch::channel(false);
        let interval = cfg.client_report_interval.max(Duration::from_millis(10));
        let s2 = sink.clone();
        let report_task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => s2.send_client_reports().await,
                    _ = stop_rx.changed() => return,
                }
            }
        });
        Ok(SentryExporter {
            engine: Some(engine),
            sink,
            metrics,
            backpressure: cfg.sending_queue.overflow() == crate::Overflow::Backpressure,
            report_stop,
            report_task: Some(report_task),
        })
    }

    /// Durably queues chunks (routed by their resource attributes); `Ok` once on disk.
    /// [`ExportError::Full`] means: answer the producer UNAVAILABLE / 429.
    pub async fn export(&self, chunks: Vec<ExportChunk>) -> Result<(), ExportError> {
        match &self.engine {
            Some(p) => {
                p.export_chunks(chunks, |c| self.sink.router.key_for(&c.resource))
                    .await
            }
            None => Err(ExportError::Closed),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// True while requests should be refused before they are read: with
    /// `sending_queue.overflow: backpressure`, once the durable queue is within its headroom of
    /// full (16 MiB, or a tenth of the capacity when that is less).
    pub fn is_full(&self) -> bool {
        self.backpressure && crate::contract::within_headroom(&self.metrics)
    }

    /// Flushes open sessions into the queue, sends what it can before `deadline` (in-flight
    /// requests included), sends a last client report, and stops. Undelivered chunks stay
    /// queued for the next start.
    pub async fn shutdown(mut self, deadline: Duration) {
        let start = tokio::time::Instant::now();
        let _ = self.report_stop.send(true);
        if let Some(t) = self.report_task.take() {
            let _ = t.await;
        }
        let sink = self.sink.clone();
        if let Some(engine) = self.engine.take() {
            engine.shutdown(deadline).await;
        }
        let left = deadline.saturating_sub(start.elapsed());
        let budget = left.max(Duration::from_millis(500));
        let _ = tokio::time::timeout(budget, sink.send_client_reports()).await;
    }
}

impl Export<Vec<ExportChunk>> for SentryExporter {
    fn export(&self, data: Vec<ExportChunk>) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(SentryExporter::export(self, data))
    }

    fn is_full(&self) -> bool {
        SentryExporter::is_full(self)
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(SentryExporter::shutdown(*self, deadline))
    }
}

crate::chunk_engine::chunk_exporter_config!(SentryExporterConfig);
