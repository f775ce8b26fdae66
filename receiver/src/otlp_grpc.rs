//! The OTLP/gRPC receiver: `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`
//! and, for consumers that take traces, `opentelemetry.proto.collector.trace.v1.TraceService/Export`
//! on the same server.
//!
//! [`OtlpGrpcService`] (profiles) and [`OtlpTracesGrpcService`] (traces) are the generated
//! `*ServiceServer`s with three differences that make them answer like the Collector (grpc-go)
//! does:
//!
//! * the request is decoded by our codec, so an undecodable message is `INVALID_ARGUMENT` with
//!   prost's message (tonic's prost codec says `INTERNAL`, which OTLP clients do not treat as
//!   permanent for the right reason);
//! * a message over the size limit is `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`, which
//!   OTLP clients retry);
//! * bearer auth and the consumer's [`Consumer::check_ready`] are checked on the headers, before
//!   the body is read, so refused requests cost no decoding.
//!
//! When the consumer does not take traces ([`Consumer::accepts_traces`] is false),
//! `TraceService/Export` answers `UNIMPLEMENTED` ("unknown service"), as a Collector whose
//! traces pipelines do not use the receiver; such calls are not counted.
//!
//! Requests may be gzip or zstd compressed; responses are compressed the same way when the
//! client accepts it. [`OtlpGrpcHandler`] also implements the generated
//! [`ProfilesService`](profiles_service_server::ProfilesService) and
//! [`TraceService`](trace_service_server::TraceService) traits for callers that mount it in
//! their own tonic server.

use crate::batch::{ConsumeError, Consumer, Transport};
use crate::config::OtlpGrpcConfig;
use crate::otlp_ingest::{self, ExportError};
use crate::otlp_traces;
use crate::server::{self, ReceiverError, ServerHandle};
use crate::stats::{Counters, Stats};
use crate::tls::{self, TlsListener};
use profilink_proto::otlp::{
    EXPORT_PATH, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    ExportTraceServiceRequest, ExportTraceServiceResponse, profiles_service_server,
    trace_service_server,
};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
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

/// The gRPC service name of the OTLP traces export service.
pub const TRACES_SERVICE_NAME: &str = "opentelemetry.proto.collector.trace.v1.TraceService";

/// The gRPC method path of the OTLP traces export service.
pub const TRACES_EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

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
        otlp_ingest::export(&*self.consumer, self.counters(), Transport::Grpc, request)
            .await
            .map_err(|e| match e {
                ExportError::Invalid(message) => Status::invalid_argument(message),
                ExportError::Consumer(e) => consume_status(&e),
            })
    }

    /// Handles one decoded traces request; `UNIMPLEMENTED` when the consumer does not take
    /// traces.
    pub async fn export_traces(
        &self,
        request: ExportTraceServiceRequest,
    ) -> Result<ExportTraceServiceResponse, Status> {
        if !self.consumer.accepts_traces() {
            return Err(unknown_traces_service());
        }
        otlp_traces::export_traces(&*self.consumer, self.counters(), Transport::Grpc, request)
            .await
            .map_err(|e| consume_status(&e))
    }
}

/// What grpc-go answers for a service that is not registered.
fn unknown_traces_service() -> Status {
    Status::unimplemented(format!("unknown service {TRACES_SERVICE_NAME}"))
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

#[tonic::async_trait]
impl<C: Consumer> trace_service_server::TraceService for OtlpGrpcHandler<C> {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, Status> {
        OtlpGrpcHandler::export_traces(self, request.into_inner())
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

/// Settings both export services share: auth, size limit, compression.
#[derive(Debug, Clone)]
struct GrpcSettings {
    bearer_token: Option<Arc<str>>,
    max_decoding_message_size: usize,
    encodings: EnabledCompressionEncodings,
}

impl GrpcSettings {
    fn new(config: &OtlpGrpcConfig) -> Self {
        let mut encodings = EnabledCompressionEncodings::default();
        encodings.enable(CompressionEncoding::Gzip);
        encodings.enable(CompressionEncoding::Zstd);
        GrpcSettings {
            bearer_token: config.bearer_token.as_deref().map(Arc::from),
            max_decoding_message_size: config.max_recv_msg_size(),
            encodings,
        }
    }

    /// Bearer auth and the consumer's readiness, on the headers alone.
    fn precheck<C: Consumer>(&self, headers: &http::HeaderMap, consumer: &C) -> Result<(), Status> {
        if let Some(token) = &self.bearer_token
            && !crate::bearer::authorized(headers, token)
        {
            return Err(Status::unauthenticated(
                "missing or invalid bearer token in `authorization` metadata",
            ));
        }
        consumer.check_ready().map_err(|e| consume_status(&e))
    }

    /// Decodes, runs `method`, and answers one unary call; counts the request into `stats`.
    fn unary<M, Req, Resp>(
        &self,
        codec: ExportCodec<Req, Resp>,
        method: M,
        request: http::Request<tonic::body::Body>,
        stats: Arc<Stats>,
    ) -> BoxFuture<http::Response<tonic::body::Body>, Infallible>
    where
        M: UnaryService<Req, Response = Resp> + Send + 'static,
        M::Future: Send + 'static,
        Req: Message + Default + Send + 'static,
        Resp: Message + Send + 'static,
    {
        let mut grpc = Grpc::new(codec)
            .apply_compression_config(self.encodings, self.encodings)
            .apply_max_message_size_config(Some(self.max_decoding_message_size), None);
        Box::pin(async move {
            let mut response = grpc.unary(method, request).await;
            normalize_status(&mut response);
            let counters = &stats.otlp_grpc;
            if response.headers().contains_key(Status::GRPC_STATUS) {
                counters.request_refused();
            } else {
                counters.request_accepted();
            }
            Ok(response)
        })
    }
}

fn refuse(
    counters: &Counters,
    status: Status,
) -> BoxFuture<http::Response<tonic::body::Body>, Infallible> {
    counters.request_refused();
    Box::pin(std::future::ready(Ok(status.into_http())))
}

fn unimplemented(status: Status) -> BoxFuture<http::Response<tonic::body::Body>, Infallible> {
    Box::pin(std::future::ready(Ok(status.into_http())))
}

/// The tonic service for `ProfilesService/Export` (see the module docs).
#[derive(Debug)]
pub struct OtlpGrpcService<C> {
    handler: Arc<OtlpGrpcHandler<C>>,
    settings: GrpcSettings,
}

impl<C> Clone for OtlpGrpcService<C> {
    fn clone(&self) -> Self {
        OtlpGrpcService {
            handler: Arc::clone(&self.handler),
            settings: self.settings.clone(),
        }
    }
}

impl<C: Consumer> OtlpGrpcService<C> {
    /// A service configured by `config` (size limit, bearer token; TLS and the endpoint are the
    /// server's business).
    pub fn new(config: &OtlpGrpcConfig, consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        OtlpGrpcService {
            handler: Arc::new(OtlpGrpcHandler::new(consumer, stats)),
            settings: GrpcSettings::new(config),
        }
    }

    /// The traces service sharing this service's handler and settings, for the same server.
    pub fn traces(&self) -> OtlpTracesGrpcService<C> {
        OtlpTracesGrpcService {
            handler: Arc::clone(&self.handler),
            settings: self.settings.clone(),
        }
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
            return unimplemented(Status::unimplemented("unknown method"));
        }
        if let Err(status) = self
            .settings
            .precheck(request.headers(), &*self.handler.consumer)
        {
            return refuse(self.handler.counters(), status);
        }
        let stats = Arc::clone(&self.handler.stats);
        let method = ProfilesMethod(Arc::clone(&self.handler));
        self.settings.unary(
            ExportCodec::new("ExportProfilesServiceRequest"),
            method,
            request,
            stats,
        )
    }
}

/// The tonic service for `TraceService/Export` (see the module docs); make it with
/// [`OtlpTracesGrpcService::new`] or [`OtlpGrpcService::traces`].
#[derive(Debug)]
pub struct OtlpTracesGrpcService<C> {
    handler: Arc<OtlpGrpcHandler<C>>,
    settings: GrpcSettings,
}

impl<C> Clone for OtlpTracesGrpcService<C> {
    fn clone(&self) -> Self {
        OtlpTracesGrpcService {
            handler: Arc::clone(&self.handler),
            settings: self.settings.clone(),
        }
    }
}

impl<C: Consumer> OtlpTracesGrpcService<C> {
    /// A traces service configured by `config` (size limit, bearer token), counting into
    /// `stats.otlp_grpc`.
    pub fn new(config: &OtlpGrpcConfig, consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        OtlpGrpcService::new(config, consumer, stats).traces()
    }
}

impl<C> NamedService for OtlpTracesGrpcService<C> {
    const NAME: &'static str = TRACES_SERVICE_NAME;
}

impl<C: Consumer> Service<http::Request<tonic::body::Body>> for OtlpTracesGrpcService<C> {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if !self.handler.consumer.accepts_traces() {
            return unimplemented(unknown_traces_service());
        }
        if request.uri().path() != TRACES_EXPORT_PATH {
            return unimplemented(Status::unimplemented("unknown method"));
        }
        if let Err(status) = self
            .settings
            .precheck(request.headers(), &*self.handler.consumer)
        {
            return refuse(self.handler.counters(), status);
        }
        let stats = Arc::clone(&self.handler.stats);
        let method = TracesMethod(Arc::clone(&self.handler));
        self.settings.unary(
            ExportCodec::new("ExportTraceServiceRequest"),
            method,
            request,
            stats,
        )
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

struct ProfilesMethod<C>(Arc<OtlpGrpcHandler<C>>);

impl<C: Consumer> UnaryService<ExportProfilesServiceRequest> for ProfilesMethod<C> {
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

struct TracesMethod<C>(Arc<OtlpGrpcHandler<C>>);

impl<C: Consumer> UnaryService<ExportTraceServiceRequest> for TracesMethod<C> {
    type Response = ExportTraceServiceResponse;
    type Future = BoxFuture<tonic::Response<Self::Response>, Status>;

    fn call(&mut self, request: tonic::Request<ExportTraceServiceRequest>) -> Self::Future {
        let handler = Arc::clone(&self.0);
        Box::pin(async move {
            handler
                .export_traces(request.into_inner())
                .await
                .map(tonic::Response::new)
        })
    }
}

/// Prost codec whose decode errors are `INVALID_ARGUMENT` (`Req` is decoded, `Resp` encoded;
/// `name` names `Req` in error messages).
struct ExportCodec<Req, Resp> {
    name: &'static str,
    _types: PhantomData<fn() -> (Req, Resp)>,
}

impl<Req, Resp> ExportCodec<Req, Resp> {
    fn new(name: &'static str) -> Self {
        ExportCodec {
            name,
            _types: PhantomData,
        }
    }
}

impl<Req, Resp> Clone for ExportCodec<Req, Resp> {
    fn clone(&self) -> Self {
        ExportCodec::new(self.name)
    }
}

impl<Req, Resp> Codec for ExportCodec<Req, Resp>
where
    Req: Message + Default + Send + 'static,
    Resp: Message + Send + 'static,
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = ExportCodec<Req, Resp>;
    type Decoder = ExportCodec<Req, Resp>;

    fn encoder(&mut self) -> Self::Encoder {
        self.clone()
    }

    fn decoder(&mut self) -> Self::Decoder {
        self.clone()
    }
}

impl<Req, Resp: Message> Encoder for ExportCodec<Req, Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl<Req: Message + Default, Resp> Decoder for ExportCodec<Req, Resp> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        Req::decode(src)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("cannot decode {}: {e}", self.name)))
    }
}

/// Binds `config.endpoint` and serves OTLP/gRPC (TLS when configured) until `shutdown`
/// resolves; in-flight calls are then finished. Serves `ProfilesService/Export` and
/// `TraceService/Export` (the latter `UNIMPLEMENTED` unless the consumer
/// [accepts traces](Consumer::accepts_traces)). Counts into `stats.otlp_grpc`.
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
    let traces = service.traces();
    let router = Server::builder().add_service(service).add_service(traces);
    let task = match &config.tls {
        None => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            tokio::spawn(async move {
                router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
                    .map_err(ReceiverError::serve)
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
                    .map_err(ReceiverError::serve)
            })
        }
    };
    tracing::info!(%local_addr, tls = config.tls.is_some(), "OTLP/gRPC receiver listening");
    Ok(server::handle(local_addr, task))
}
