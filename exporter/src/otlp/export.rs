//! The OTLP profiles exporter itself: [`OtlpExporter::start`] (the OTLP client and the request
//! exporter around it), `export` and `shutdown`, the one attempt it supplies
//! (`ProfilesSender`), and how it meets the pipeline's [`Export`] contract.

use super::config::OtlpExporterConfig;
use crate::metrics::ExporterMetrics;
use crate::otlp_client::{OtlpClient, note_partial};
use crate::request::{RequestExporter, RequestSender, RequestSettings, SendOutcome};
use crate::send_queue::record::Queued;
use crate::start_error::StartError;
use profilink_consumer::{BoxFuture, Export, ExportError};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::signal::{Profiles, profile_counts};
use std::sync::Arc;
use std::time::Duration;

impl Queued for ExportProfilesServiceRequest {
    const KIND: u8 = b'P';
}

/// One attempt of a profiles request: the OTLP client's.
struct ProfilesSender {
    client: OtlpClient<Profiles>,
}

impl RequestSender for ProfilesSender {
    type Request = ExportProfilesServiceRequest;
    type Metrics = ExporterMetrics;
    const NAME: &'static str = "OTLP";

    fn destination(&self) -> &str {
        self.client.destination()
    }

    async fn attempt(&self, request: &ExportProfilesServiceRequest) -> SendOutcome {
        match self.client.attempt(request).await {
            Ok(partial) => SendOutcome::Delivered(note_partial::<Profiles>(
                partial.as_ref(),
                self.client.destination(),
            )),
            Err(error) => SendOutcome::Failed(error),
        }
    }
}

/// Sends OTLP profiles requests. See the module docs.
pub struct OtlpExporter {
    requests: RequestExporter<ProfilesSender>,
    metrics: Arc<ExporterMetrics>,
}

impl OtlpExporter {
    /// Builds the client (connections are made lazily), opens the sending queue (replaying
    /// what an earlier run left in `sending_queue.storage`) and starts the senders
    /// (`sending_queue.num_consumers`, else `num_consumers`).
    pub async fn start(cfg: OtlpExporterConfig) -> Result<Self, StartError> {
        let settings = RequestSettings::new(
            &cfg.sending_queue,
            "profiles",
            cfg.queue_size as u64,
            cfg.num_consumers,
            cfg.retry_on_failure.clone(),
        )?;
        let client = OtlpClient::new(
            cfg.protocol,
            &cfg.endpoint,
            cfg.compression,
            cfg.timeout,
            &cfg.headers,
            settings.consumers,
            &cfg.tls,
        )?
        .with_auth(cfg.auth.clone());
        let metrics = Arc::new(ExporterMetrics::default());
        let requests =
            RequestExporter::start(ProfilesSender { client }, metrics.clone(), settings).await?;
        Ok(OtlpExporter { requests, metrics })
    }

    /// Queues a request (durably, with storage); [`ExportError::Full`] when the queue is full
    /// (unless `block_on_overflow`, which waits for room).
    pub async fn export(&self, req: ExportProfilesServiceRequest) -> Result<(), ExportError> {
        let samples = profile_counts(&req.resource_profiles).samples;
        self.requests.export(vec![(req, samples)]).await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight requests finish within `deadline`, then
    /// stops. What is left is dropped and counted (`network_error`) for an in-memory queue;
    /// a durable queue keeps it for the next start.
    pub async fn shutdown(self, deadline: Duration) {
        self.requests.shutdown(deadline).await;
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
