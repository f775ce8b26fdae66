//! The OTLP/gRPC receiver: `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`.
//!
//! [`OtlpGrpcService`] is the generated `ProfilesServiceServer` with three differences that make
//! it answer like the Collector (grpc-go) does:
//!
//! * the request is decoded by our codec, so an undecodable message is `INVALID_ARGUMENT` with
//!   prost's message (tonic's prost codec says `INTERNAL`, which OTLP clients do not treat as
//!   permanent for the right reason);
//! * a message over the size limit is `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`, which
//!   OTLP clients retry);
//! * bearer auth and the consumer's [`Consumer::check_ready`] are checked on the headers, before
//!   the body is read, so refused requests cost no decoding.
//!
//! Requests may be gzip or zstd compressed; responses are compressed the same way when the
//! client accepts it. [`OtlpGrpcHandler`] also implements the generated
//! [`ProfilesService`](profiles_service_server::ProfilesService) trait for callers that mount it
//! in their own tonic server.

use crate::batch::{ConsumeError, Consumer};
use crate::config::OtlpGrpcConfig;
use crate::otlp_ingest::{self, ExportError};
use crate::server::{self, ReceiverError, ServerHandle};
use crate::stats::{Counters, Stats};
use crate::tls::{self, TlsListener};
use profilink_proto::otlp::{
    EXPORT_PATH, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    profiles_service_server,
};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{BoxFuture, Service};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The gRPC service name.
pub const SERVICE_NAME: &str =
    "opentelemetry.proto.collector.profiles.v1development.ProfilesService";

/// The export logic behind the gRPC service: validation, partial success, the consumer.
#[derive(Debug)]
pub struct OtlpGrpcHandler<C> {
    consumer: Arc<C>,
    stats: Arc<Stats>,
}

impl<C: Consumer> OtlpGrpcHandler<C> {
    /// A handler feeding `consumer` and counting into `stats.otlp_grpc`.
    pub fn new(consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        OtlpGrpcHandler { consumer, stats }
    }

    fn counters(&self) -> &Counters {
        &self.stats.otlp_grpc
    }

    /// Handles one decoded request.
    pub async fn export(
        &self,
        request: ExportProfilesServiceRequest,
    ) -> Result<ExportProfilesServiceResponse, Status> {
        otlp_ingest::export(&*self.consumer, self.counters(), "grpc", request)
            .await
            .map_err(|e| match e {
                ExportError::Invalid(message) => Status::invalid_argument(message),
                ExportError::Consumer(e) => consume_status(&e),
            })
    }
}

#[tonic::async_trait]
impl<C: Consumer> profiles_service_server::ProfilesService for OtlpGrpcHandler<C> {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, Status> {
        OtlpGrpcHandler::export(self, request.into_inner())
            .await
            .map(tonic::Response::new)
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
        ConsumeError::Internal(message) => Status::unavailable(message.clone()),
    }
}

/// The tonic service for `ProfilesService/Export` (see the module docs).
#[derive(Debug)]
pub struct OtlpGrpcService<C> {
    handler: Arc<OtlpGrpcHandler<C>>,
    bearer_token: Option<Arc<str>>,
    max_decoding_message_size: usize,
    encodings: EnabledCompressionEncodings,
}

impl<C> Clone for OtlpGrpcService<C> {
    fn clone(&self) -> Self {
        OtlpGrpcService {
            handler: Arc::clone(&self.handler),
            bearer_token: self.bearer_token.clone(),
            max_decoding_message_size: self.max_decoding_message_size,
            encodings: self.encodings,
        }
    }
}

impl<C: Consumer> OtlpGrpcService<C> {
    /// A service configured by `config` (size limit, bearer token; TLS and the endpoint are the
    /// server's business).
    pub fn new(config: &OtlpGrpcConfig, consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        let mut encodings = EnabledCompressionEncodings::default();
        encodings.enable(CompressionEncoding::Gzip);
        encodings.enable(CompressionEncoding::Zstd);
        OtlpGrpcService {
            handler: Arc::new(OtlpGrpcHandler::new(consumer, stats)),
            bearer_token: config.bearer_token.as_deref().map(Arc::from),
            max_decoding_message_size: config.max_recv_msg_size(),
            encodings,
        }
    }

    fn refuse(&self, status: Status) -> BoxFuture<http::Response<tonic::body::Body>, Infallible> {
        self.handler.counters().request_refused();
        Box::pin(std::future::ready(Ok(status.into_http())))
    }
}

impl<C> NamedService for OtlpGrpcService<C> {
    const NAME: &'static str = SERVICE_NAME;
}

impl<C: Consumer> Service<http::Request<tonic::body::Body>> for OtlpGrpcService<C> {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if request.uri().path() != EXPORT_PATH {
            return Box::pin(std::future::ready(Ok(Status::unimplemented(
                "unknown method",
            )
            .into_http())));
        }
        if let Some(token) = &self.bearer_token
            && !crate::bearer::authorized(request.headers(), token)
        {
            return self.refuse(Status::unauthenticated(
                "missing or invalid bearer token in `authorization` metadata",
            ));
        }
        if let Err(e) = self.handler.consumer.check_ready() {
            return self.refuse(consume_status(&e));
        }
        let handler = Arc::clone(&self.handler);
        let mut grpc = Grpc::new(ExportCodec)
            .apply_compression_config(self.encodings, self.encodings)
            .apply_max_message_size_config(Some(self.max_decoding_message_size), None);
        Box::pin(async move {
            let method = ExportMethod(Arc::clone(&handler));
            let mut response = grpc.unary(method, request).await;
            normalize_status(&mut response);
            let counters = handler.counters();
            if response.headers().contains_key(Status::GRPC_STATUS) {
                counters.request_refused();
            } else {
                counters.request_accepted();
            }
            Ok(response)
        })
    }
}

/// Rewrites tonic's `OUT_OF_RANGE` for an over-limit message into `RESOURCE_EXHAUSTED`, as
/// grpc-go answers it (OTLP clients retry `OUT_OF_RANGE`; they must not retry this).
fn normalize_status(response: &mut http::Response<tonic::body::Body>) {
    let out_of_range = (Code::OutOfRange as i32).to_string();
    let is_out_of_range = response
        .headers()
        .get(Status::GRPC_STATUS)
        .is_some_and(|v| v.as_bytes() == out_of_range.as_bytes());
    if is_out_of_range {
        response.headers_mut().insert(
            Status::GRPC_STATUS,
            http::HeaderValue::from(Code::ResourceExhausted as i32),
        );
    }
}

struct ExportMethod<C>(Arc<OtlpGrpcHandler<C>>);

impl<C: Consumer> UnaryService<ExportProfilesServiceRequest> for ExportMethod<C> {
    type Response = ExportProfilesServiceResponse;
    type Future = BoxFuture<tonic::Response<Self::Response>, Status>;

    fn call(&mut self, request: tonic::Request<ExportProfilesServiceRequest>) -> Self::Future {
        let handler = Arc::clone(&self.0);
        Box::pin(async move {
            handler
                .export(request.into_inner())
                .await
                .map(tonic::Response::new)
        })
    }
}

/// Prost codec whose decode errors are `INVALID_ARGUMENT`.
#[derive(Debug, Clone, Copy, Default)]
struct ExportCodec;

impl Codec for ExportCodec {
    type Encode = ExportProfilesServiceResponse;
    type Decode = ExportProfilesServiceRequest;
    type Encoder = ExportCodec;
    type Decoder = ExportCodec;

    fn encoder(&mut self) -> Self::Encoder {
        ExportCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        ExportCodec
    }
}

impl Encoder for ExportCodec {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl Decoder for ExportCodec {
    type Item = ExportProfilesServiceRequest;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        ExportProfilesServiceRequest::decode(src)
            .map(Some)
            .map_err(|e| {
                Status::invalid_argument(format!("cannot decode ExportProfilesServiceRequest: {e}"))
            })
    }
}

/// Binds `config.endpoint` and serves OTLP/gRPC (TLS when configured) until `shutdown`
/// resolves; in-flight calls are then finished. Counts into `stats.otlp_grpc`.
pub async fn serve_otlp_grpc<C, F>(
    config: &OtlpGrpcConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError>
where
    C: Consumer,
    F: Future<Output = ()> + Send + 'static,
{
    let listener = server::bind(&config.endpoint).await?;
    let local_addr = server::local_addr(&listener, &config.endpoint)?;
    let service = OtlpGrpcService::new(config, consumer, stats);
    let router = Server::builder().add_service(service);
    let task = match &config.tls {
        None => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            tokio::spawn(async move {
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
                    .map_err(|e| ReceiverError::Serve(e.to_string()))
            })
        }
        Some(tls_config) => {
            let server_config = tls::server_config(tls_config, tls::ALPN_GRPC)?;
            let incoming = TlsListener::new(listener, server_config).map_err(|source| {
                ReceiverError::Bind {
                    endpoint: config.endpoint.clone(),
                    source,
                }
            })?;
            tokio::spawn(async move {
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
                    .map_err(|e| ReceiverError::Serve(e.to_string()))
            })
        }
    };
    tracing::info!(%local_addr, tls = config.tls.is_some(), "OTLP/gRPC receiver listening");
    Ok(server::handle(local_addr, task))
}
