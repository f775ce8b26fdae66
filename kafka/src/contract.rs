//! How the [`KafkaExporter`] meets the pipeline's contract ([`Export`] of `profilink-consumer`): the
//! profiles and traces it takes, and its traces instance's rule for refusing up front.

use crate::exporter::KafkaExporter;
use profilink_consumer::{BoxFuture, Export, ExportError};
use profilink_exporter::nearly_full;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ExportTraceServiceRequest};
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Export<ExportProfilesServiceRequest> for KafkaExporter {
    fn export(&self, data: ExportProfilesServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(self.export_profiles(data))
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(KafkaExporter::shutdown(*self, deadline))
    }
}

/// The traces instance of a `kafka` exporter (its own queue, `traces` subdirectory).
pub struct KafkaTracesExporter(pub KafkaExporter);

impl Export<ExportTraceServiceRequest> for KafkaTracesExporter {
    fn export(&self, data: ExportTraceServiceRequest) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(self.0.export_traces(data))
    }

    fn is_full(&self) -> bool {
        let m = self.0.metrics();
        let cap = m.queue_capacity_bytes.load(Ordering::Relaxed);
        nearly_full(m.queue_size_bytes.load(Ordering::Relaxed), cap, cap / 10)
    }

    fn shutdown(self: Box<Self>, deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(KafkaExporter::shutdown(self.0, deadline))
    }
}
