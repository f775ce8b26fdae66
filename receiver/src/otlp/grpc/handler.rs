//! The export logic behind the gRPC services ([`OtlpGrpcHandler`]): a decoded request handed
//! to [`crate::otlp::ingest`], the gRPC status of a refusal, and the generated service traits
//! for a handler mounted in another tonic server.

use crate::otlp::ingest::{self, ExportError, IngestSignal, consume_reason};
use crate::stats::{Counters, RefusalReason, Stats};
use profilink_consumer::{ConsumeError, Consumer, Transport};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, ExportTraceServiceRequest,
    ExportTraceServiceResponse, profiles_service_server, trace_service_server,
};
use profilink_proto::signal::{Profiles, Signal, Traces};
use std::sync::Arc;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The export logic behind the gRPC services: validation, partial success, the consumer.
#[derive(Debug)]
pub struct OtlpGrpcHandler<C> {
    pub(super) consumer: Arc<C>,
    pub(super) stats: Arc<Stats>,
}

impl<C: Consumer> OtlpGrpcHandler<C> {
    /// A handler feeding `consumer` and counting into `stats.otlp_grpc`.
    pub fn new(consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        OtlpGrpcHandler { consumer, stats }
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.stats.otlp_grpc
    }

    /// Handles one decoded request of signal `S`; `UNIMPLEMENTED` when the consumer does not
    /// take `S`. (The request's version metadata is the servers' business, checked before
    /// decoding: a caller handing in a decoded request has decoded it.)
    pub async fn export_signal<S: IngestSignal>(
        &self,
        request: S::Request,
    ) -> Result<S::Response, Status> {
        self.export_for_reason::<S>(request)
            .await
            .map_err(|(status, _)| status)
    }

    /// [`Self::export_signal`], with the reason of a refusal.
    pub(super) async fn export_for_reason<S: IngestSignal>(
        &self,
        request: S::Request,
    ) -> Result<S::Response, (Status, RefusalReason)> {
        if !S::accepted_by(&*self.consumer) {
            return Err((unknown_service::<S>(), RefusalReason::Other));
        }
        ingest::export::<S, C>(&*self.consumer, self.counters(), Transport::Grpc, request)
            .await
            .map_err(|e| match e {
                ExportError::Invalid(message) => {
                    (Status::invalid_argument(message), RefusalReason::Invalid)
                }
                ExportError::Consumer(e) => (consume_status(&e), consume_reason(&e)),
            })
    }

    /// Handles one decoded profiles request.
    pub async fn export(
        &self,
        request: ExportProfilesServiceRequest,
    ) -> Result<ExportProfilesServiceResponse, Status> {
        self.export_signal::<Profiles>(request).await
    }

    /// Handles one decoded traces request; `UNIMPLEMENTED` when the consumer does not take
    /// traces.
    pub async fn export_traces(
        &self,
        request: ExportTraceServiceRequest,
    ) -> Result<ExportTraceServiceResponse, Status> {
        self.export_signal::<Traces>(request).await
    }
}

/// What grpc-go answers for a service that is not registered.
pub(super) fn unknown_service<S: Signal>() -> Status {
    Status::unimplemented(format!("unknown service {}", S::SERVICE_NAME))
}

impl<C: Consumer> OtlpGrpcHandler<C> {
    /// A call of the handler mounted in another tonic server: the request arrives decoded (by
    /// tonic's codec, as version 1); one whose metadata names a version `S` does not support
    /// is still refused before anything is ingested.
    async fn export_mounted<S: IngestSignal>(
        &self,
        request: tonic::Request<S::Request>,
    ) -> Result<tonic::Response<S::Response>, Status> {
        let headers = request.metadata().clone().into_headers();
        if let Err(e) = S::request_version(&headers) {
            return Err(Status::invalid_argument(e.to_string()));
        }
        self.export_signal::<S>(request.into_inner())
            .await
            .map(tonic::Response::new)
    }
}

#[tonic::async_trait]
impl<C: Consumer> profiles_service_server::ProfilesService for OtlpGrpcHandler<C> {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, Status> {
        self.export_mounted::<Profiles>(request).await
    }
}

#[tonic::async_trait]
impl<C: Consumer> trace_service_server::TraceService for OtlpGrpcHandler<C> {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, Status> {
        self.export_mounted::<Traces>(request).await
    }
}

/// The gRPC status for a consumer refusal: `UNAVAILABLE` with `google.rpc.RetryInfo` when
/// full, `INVALID_ARGUMENT` when rejected, `UNAVAILABLE` on internal errors.
pub fn consume_status(error: &ConsumeError) -> Status {
    match error {
        ConsumeError::Full { retry_after } => Status::with_error_details(
            Code::Unavailable,
            "the pipeline is full; retry later",
            ErrorDetails::with_retry_info(Some(*retry_after)),
        ),
        ConsumeError::Rejected(message) => Status::invalid_argument(message.clone()),
        failure => Status::unavailable(failure.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profiles_service_server::ProfilesService;
    use profilink_consumer::ChannelConsumer;

    #[tokio::test]
    async fn a_mounted_handler_refuses_other_versions_too() {
        let (consumer, _batches) = ChannelConsumer::new(4);
        let handler = OtlpGrpcHandler::new(Arc::new(consumer), Arc::new(Stats::default()));
        let call = |version: Option<&'static str>| {
            let mut request = tonic::Request::new(ExportProfilesServiceRequest::default());
            if let Some(v) = version {
                request
                    .metadata_mut()
                    .insert("otlp-profiles-development-version", v.parse().unwrap());
            }
            request
        };
        let refused = ProfilesService::export(&handler, call(Some("2")))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(refused.message().contains("supports version 1"));
        for ok in [None, Some("1")] {
            ProfilesService::export(&handler, call(ok))
                .await
                .expect("version 1");
        }
    }
}
