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
use profilink_proto::otlp::ExportTraceServiceRequest;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Exporter;
    use profilink_receiver::ConsumeError;
    use std::sync::Mutex;

    /// Takes numbers; refuses as told.
    #[derive(Default)]
    struct Numbers {
        got: Arc<Mutex<Vec<u32>>>,
        refuse: Option<Duration>,
    }

    impl Export<u32> for Numbers {
        fn export(&self, data: u32) -> BoxFuture<'_, Result<(), ExportError>> {
            Box::pin(async move {
                if let Some(retry_after) = self.refuse {
                    return Err(ExportError::Full { retry_after });
                }
                self.got.lock().unwrap().push(data);
                Ok(())
            })
        }

        fn shutdown(self: Box<Self>, _deadline: Duration) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    #[test]
    fn backpressure_is_full_within_the_headroom() {
        let m = Arc::new(ExporterMetrics::default());
        let cap = 1000u64 << 20;
        m.queue_capacity_bytes.store(cap, Ordering::Relaxed);
        let on = Backpressure::new(Numbers::default(), m.clone(), true);
        let off = Backpressure::new(Numbers::default(), m.clone(), false);
        // The headroom is the smaller of a tenth of the capacity and QUEUE_HEADROOM.
        m.queue_size_bytes
            .store(cap - QUEUE_HEADROOM - 1, Ordering::Relaxed);
        assert!(!on.is_full());
        m.queue_size_bytes
            .store(cap - QUEUE_HEADROOM, Ordering::Relaxed);
        assert!(on.is_full());
        assert!(
            !off.is_full(),
            "overflow other than backpressure never refuses up front"
        );
        m.queue_capacity_bytes.store(0, Ordering::Relaxed);
        assert!(!on.is_full(), "no capacity known: not full");
    }

    #[tokio::test]
    async fn exporters_hand_over_and_map_refusals() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let a = Arc::new(Exporter::new(
            "a",
            Numbers {
                got: got.clone(),
                refuse: None,
            },
        ));
        let b = Arc::new(Exporter::new(
            "b",
            Numbers {
                got: got.clone(),
                refuse: None,
            },
        ));
        crate::export::export_all(&[a.clone(), b], 7).await.unwrap();
        assert_eq!(*got.lock().unwrap(), vec![7, 7]);

        let full = Arc::new(Exporter::new(
            "full",
            Numbers {
                got: got.clone(),
                refuse: Some(Duration::from_secs(3)),
            },
        ));
        let e = crate::export::export_all(&[full, a], 8).await.unwrap_err();
        assert!(
            matches!(e, ConsumeError::Full { retry_after } if retry_after == Duration::from_secs(3)),
            "{e:?}"
        );
        assert_eq!(got.lock().unwrap().len(), 2, "stops at the first refusal");
    }
}
