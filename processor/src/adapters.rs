//! [`Export`] for the exporter crate's exporters.
//!
//! * [`SentryExporter`], [`FileExporter`]: chunks; wrap them in [`Backpressure`] so a full
//!   durable queue refuses requests before they are read (`sending_queue.overflow:
//!   backpressure`).
//! * [`OtlpExporter`]: OTLP profiles requests.
//! * [`TracesExporter`]: OTLP traces requests; full within a tenth of its in-memory queue.

use crate::export::{BoxFuture, Export};

use profilink_exporter::{
    ExportChunk, ExportError, ExporterMetrics, FileExporter, OtlpExporter, SentryExporter,
    TracesExporter,
};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp::trace::ExportTraceServiceRequest;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Room kept free in a durable queue: requests are refused up front once less than this (or a
/// tenth of the capacity, whichever is smaller) is left.
pub const QUEUE_HEADROOM: u64 = 16 << 20;

impl Export<Vec<ExportChunk>> for SentryExporter {
    fn export(&self, data: Vec<ExportChunk>) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(SentryExporter::export(self, data))
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(SentryExporter::shutdown(*self, deadline))
    }
}

impl Export<Vec<ExportChunk>> for FileExporter {
    fn export(&self, data: Vec<ExportChunk>) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(FileExporter::export(self, data))
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(FileExporter::shutdown(*self, deadline))
    }
}

impl Export<ExportProfilesServiceRequest> for OtlpExporter {
    fn export(&self, data: ExportProfilesServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(OtlpExporter::export(self, data))
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(OtlpExporter::shutdown(*self, deadline))
    }
}

impl Export<ExportTraceServiceRequest> for TracesExporter {
    fn export(&self, data: ExportTraceServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(TracesExporter::export(self, data))
    }

    fn is_full(&self) -> bool {
        let m = self.metrics();
        let cap = m.queue_capacity_bytes.load(Ordering::Relaxed);
        cap > 0 && m.queue_bytes.load(Ordering::Relaxed) + cap / 10 >= cap
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(TracesExporter::shutdown(*self, deadline))
    }
}

/// An exporter with a durable queue that, when `enabled`, is full within [`QUEUE_HEADROOM`] of
/// its capacity, so requests are refused before they are read rather than after they were
/// decoded and translated.
pub struct Backpressure<E> {
    inner: E,
    metrics: Arc<ExporterMetrics>,
    enabled: bool,
}

impl<E> Backpressure<E> {
    /// `inner`, whose queue gauges are in `metrics`; pushes back only when `enabled`.
    pub fn new(inner: E, metrics: Arc<ExporterMetrics>, enabled: bool) -> Self {
        Backpressure {
            inner,
            metrics,
            enabled,
        }
    }
}

impl<T, E: Export<T> + 'static> Export<T> for Backpressure<E> {
    fn export(&self, data: T) -> BoxFuture<'_, Result<(), ExportError>> {
        self.inner.export(data)
    }

    fn is_full(&self) -> bool {
        if !self.enabled {
            return false;
        }
        let cap = self.metrics.queue_capacity_bytes.load(Ordering::Relaxed);
        let headroom = (cap / 10).min(QUEUE_HEADROOM);
        cap > 0 && self.metrics.queue_size_bytes.load(Ordering::Relaxed) + headroom >= cap
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::new(self.inner).shutdown(deadline)
    }
}
