//! The OTLP/gRPC receiver: `opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`
//! and, for consumers that take traces, `opentelemetry.proto.collector.trace.v1.TraceService/Export`
//! on the same server.
//!
//! [`ExportService`] serves one signal's `Export` method, generic over the [`Signal`]:
//! [`OtlpGrpcService`] (profiles) and [`OtlpTracesGrpcService`] (traces). Each is the
//! generated `*ServiceServer` with three differences that make them answer like the
//! Collector (grpc-go) does:
//!
//! * the request is decoded by our codec, so an undecodable message is `INVALID_ARGUMENT` with
//!   prost's message (tonic's prost codec says `INTERNAL`, which OTLP clients do not treat as
//!   permanent for the right reason);
//! * a message over the size limit is `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`, which
//!   OTLP clients retry);
//! * authentication (`auth`, `bearer_token`; see [`crate::auth`]), the OTLP profiles
//!   development version ([`crate::profiles_version`]; profiles only) and the consumer's
//!   [`Consumer::check_ready`] are checked in that order on the headers, before the body is
//!   read, so refused requests cost no decoding: `UNAUTHENTICATED`, `INVALID_ARGUMENT` naming
//!   the supported version, `UNAVAILABLE`; counted as refused requests with their
//!   [`RefusalReason`] (and no samples: none were read). The body is then decoded by the
//!   decoder of the request's version.
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

use crate::auth::ListenerAuth;
use crate::batch::{ConsumeError, Consumer, Transport};
use crate::config::OtlpGrpcConfig;
use crate::error::ReceiverError;
use crate::otlp::ingest::{self, ExportError, IngestSignal, consume_reason};
use crate::server::connections::{self, ConnectionLimits};
use crate::server::detach::Detached;
use crate::server::tls;
use crate::server::{self, ServerHandle};
use crate::stats::{Counters, RefusalReason, Stats};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ExportProfilesServiceResponse, ExportTraceServiceRequest,
    ExportTraceServiceResponse, profiles_service_server, trace_service_server,
};
use profilink_proto::signal::{Profiles, Signal, Traces};
use prost::Message;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{BoxFuture, Service};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::transport::Server;
use tonic::transport::server::{Connected, Router};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// The gRPC method path of the OTLP traces export service.
pub const TRACES_EXPORT_PATH: &str = Traces::GRPC_PATH;

/// The export logic behind the gRPC services: validation, partial success, the consumer.
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
    async fn export_for_reason<S: IngestSignal>(
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
fn unknown_service<S: Signal>() -> Status {
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
        ConsumeError::Internal(message) => Status::unavailable(message.clone()),
    }
}

/// Settings the export services share: auth, size limit, compression.
#[derive(Debug, Clone)]
struct GrpcSettings {
    auth: ListenerAuth,
    max_decoding_message_size: usize,
    encodings: EnabledCompressionEncodings,
}

impl GrpcSettings {
    fn new(config: &OtlpGrpcConfig) -> Self {
        let mut encodings = EnabledCompressionEncodings::default();
        encodings.enable(CompressionEncoding::Gzip);
        encodings.enable(CompressionEncoding::Zstd);
        GrpcSettings {
            auth: ListenerAuth::new(
                config.auth.as_ref(),
                config.authenticator.as_ref(),
                config.bearer_token.as_deref(),
            ),
            max_decoding_message_size: config.max_recv_msg_size(),
            encodings,
        }
    }

    /// Authentication, `S`'s version and the consumer's readiness, on the headers alone: the
    /// version the body is to be decoded with.
    fn precheck<S: IngestSignal, C: Consumer>(
        &self,
        headers: &http::HeaderMap,
        consumer: &C,
    ) -> Result<S::Version, (Status, RefusalReason)> {
        if let Err(failure) = self.auth.check(headers) {
            return Err((
                Status::unauthenticated(failure.to_string()),
                RefusalReason::Unauthenticated,
            ));
        }
        let version = S::request_version(headers).map_err(|e| {
            tracing::debug!(error = %e, "OTLP/gRPC request refused before decoding");
            (
                Status::invalid_argument(e.to_string()),
                RefusalReason::UnsupportedVersion,
            )
        })?;
        consumer
            .check_ready()
            .map_err(|e| (consume_status(&e), consume_reason(&e)))?;
        Ok(version)
    }
}

fn ready(status: Status) -> BoxFuture<http::Response<tonic::body::Body>, Infallible> {
    Box::pin(std::future::ready(Ok(status.into_http())))
}

/// The tonic service for `S`'s `Export` method (see the module docs): [`OtlpGrpcService`]
/// for profiles, [`OtlpTracesGrpcService`] for traces.
#[derive(Debug)]
pub struct ExportService<S, C> {
    handler: Arc<OtlpGrpcHandler<C>>,
    settings: GrpcSettings,
    detached: Detached,
    _signal: PhantomData<fn() -> S>,
}

/// The tonic service for `ProfilesService/Export`.
pub type OtlpGrpcService<C> = ExportService<Profiles, C>;

/// The tonic service for `TraceService/Export`.
pub type OtlpTracesGrpcService<C> = ExportService<Traces, C>;

impl<S, C> Clone for ExportService<S, C> {
    fn clone(&self) -> Self {
        ExportService {
            handler: Arc::clone(&self.handler),
            settings: self.settings.clone(),
            detached: self.detached.clone(),
            _signal: PhantomData,
        }
    }
}

impl<S: IngestSignal, C: Consumer> ExportService<S, C> {
    /// A service configured by `config` (size limit, bearer token; TLS and the endpoint are the
    /// server's business), counting into `stats.otlp_grpc`.
    pub fn new(config: &OtlpGrpcConfig, consumer: Arc<C>, stats: Arc<Stats>) -> Self {
        ExportService {
            handler: Arc::new(OtlpGrpcHandler::new(consumer, stats)),
            settings: GrpcSettings::new(config),
            detached: Detached::default(),
            _signal: PhantomData,
        }
    }

    /// The service of signal `T` sharing this service's handler and settings, for the same
    /// server.
    pub fn with_signal<T: IngestSignal>(&self) -> ExportService<T, C> {
        ExportService {
            handler: Arc::clone(&self.handler),
            settings: self.settings.clone(),
            detached: self.detached.clone(),
            _signal: PhantomData,
        }
    }

    /// The calls of this service (and of the services sharing its handler) still running
    /// after their clients went away (see [`Detached`]); a server waits for them when it
    /// stops.
    pub fn detached(&self) -> Detached {
        self.detached.clone()
    }

    /// The traces service sharing this service's handler and settings, for the same server.
    pub fn traces(&self) -> OtlpTracesGrpcService<C> {
        self.with_signal::<Traces>()
    }
}

impl<S: Signal, C> NamedService for ExportService<S, C> {
    const NAME: &'static str = S::SERVICE_NAME;
}

impl<S: IngestSignal, C: Consumer> Service<http::Request<tonic::body::Body>>
    for ExportService<S, C>
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let handler = &self.handler;
        if !S::accepted_by(&*handler.consumer) {
            // Not counted: the service is not there.
            return ready(unknown_service::<S>());
        }
        if request.uri().path() != S::GRPC_PATH {
            return ready(Status::unimplemented("unknown method"));
        }
        let version = match self
            .settings
            .precheck::<S, C>(request.headers(), &*handler.consumer)
        {
            Ok(version) => version,
            Err((status, reason)) => {
                handler.counters().request_refused_for(reason);
                return ready(status);
            }
        };
        let encodings = self.settings.encodings;
        let mut grpc = Grpc::new(ExportCodec::<S>::new(version))
            .apply_compression_config(encodings, encodings)
            .apply_max_message_size_config(Some(self.settings.max_decoding_message_size), None);
        let reason = Arc::new(OnceLock::new());
        let method = ExportMethod::<S, C> {
            handler: Arc::clone(handler),
            reason: Arc::clone(&reason),
            _signal: PhantomData,
        };
        let stats = Arc::clone(&handler.stats);
        // All or nothing: the call runs to its end even if the client cancels it.
        let call = self.detached.run(async move {
            let mut response = grpc.unary(method, request).await;
            normalize_status(&mut response);
            let counters = &stats.otlp_grpc;
            match response.headers().get(Status::GRPC_STATUS) {
                None => counters.request_accepted(),
                Some(code) => {
                    // The handler's own reason when it refused; else what tonic answered for
                    // (decoding, size, compression).
                    let reason = reason.get().copied().unwrap_or_else(|| {
                        RefusalReason::of_grpc_code(Code::from_bytes(code.as_bytes()))
                    });
                    counters.request_refused_for(reason);
                }
            }
            response
        });
        Box::pin(async move {
            Ok(call.await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "OTLP/gRPC export call panicked");
                Status::internal("the export call failed").into_http()
            }))
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

/// One call's export: the handler, and where it leaves the reason of a refusal.
struct ExportMethod<S, C> {
    handler: Arc<OtlpGrpcHandler<C>>,
    reason: Arc<OnceLock<RefusalReason>>,
    _signal: PhantomData<fn() -> S>,
}

impl<S: IngestSignal, C: Consumer> UnaryService<S::Request> for ExportMethod<S, C> {
    type Response = S::Response;
    type Future = BoxFuture<tonic::Response<Self::Response>, Status>;

    fn call(&mut self, request: tonic::Request<S::Request>) -> Self::Future {
        let handler = Arc::clone(&self.handler);
        let reason = Arc::clone(&self.reason);
        Box::pin(async move {
            match handler.export_for_reason::<S>(request.into_inner()).await {
                Ok(response) => Ok(tonic::Response::new(response)),
                Err((status, why)) => {
                    let _ = reason.set(why);
                    Err(status)
                }
            }
        })
    }
}

/// Prost codec whose decode errors are `INVALID_ARGUMENT` (`S::Request` is decoded with the
/// decoder of the request's version, `S::Response` encoded).
struct ExportCodec<S: IngestSignal> {
    version: S::Version,
}

impl<S: IngestSignal> ExportCodec<S> {
    fn new(version: S::Version) -> Self {
        ExportCodec { version }
    }
}

impl<S: IngestSignal> Codec for ExportCodec<S> {
    type Encode = S::Response;
    type Decode = S::Request;
    type Encoder = ExportCodec<S>;
    type Decoder = ExportCodec<S>;

    fn encoder(&mut self) -> Self::Encoder {
        ExportCodec::new(self.version)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ExportCodec::new(self.version)
    }
}

impl<S: IngestSignal> Encoder for ExportCodec<S> {
    type Item = S::Response;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl<S: IngestSignal> Decoder for ExportCodec<S> {
    type Item = S::Request;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        S::decode_protobuf(self.version, src)
            .map(Some)
            .map_err(|e| {
                Status::invalid_argument(format!("cannot decode {}: {e}", S::REQUEST_NAME))
            })
    }
}

/// Binds `config.endpoint` and serves OTLP/gRPC (TLS when configured) until `shutdown`
/// resolves; in-flight calls are then finished. Serves `ProfilesService/Export` and
/// `TraceService/Export` (the latter `UNIMPLEMENTED` unless the consumer
/// [accepts traces](Consumer::accepts_traces)). Counts into `stats.otlp_grpc`.
pub async fn serve_otlp_grpc<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &OtlpGrpcConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    let service = OtlpGrpcService::new(config, consumer, stats);
    if let Some(e) = service.settings.auth.start_error() {
        return Err(ReceiverError::Config(e));
    }
    let (listener, local_addr) = server::bind(&config.endpoint).await?;
    let traces = service.traces();
    let detached = service.detached();
    let router = grpc_server(config).add_service(service).add_service(traces);
    let limits = grpc_connection_limits(config);
    let task = match &config.tls {
        None => spawn_grpc(
            router,
            server::tcp_incoming(listener),
            limits,
            shutdown,
            detached,
        ),
        Some(tls) => {
            let incoming = server::tls_incoming(listener, &config.endpoint, tls, tls::ALPN_GRPC)?;
            spawn_grpc(router, incoming, limits, shutdown, detached)
        }
    };
    tracing::info!(%local_addr, tls = config.tls.is_some(), "OTLP/gRPC receiver listening");
    Ok(server::handle(local_addr, task))
}

/// Serves `router` in a task of its own on the connections of `incoming`, bounded by
/// `limits`, until `shutdown` resolves; then waits for the calls still running `detached`.
fn spawn_grpc<St, S>(
    router: Router,
    incoming: St,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    detached: Detached,
) -> JoinHandle<Result<(), ReceiverError>>
where
    St: Stream<Item = io::Result<S>> + Send + Unpin + 'static,
    S: AsyncRead + AsyncWrite + Connected + Send + Unpin + 'static,
    S::ConnectInfo: Clone + Send + Sync + 'static,
{
    let incoming = connections::limit(incoming, limits, "OTLP/gRPC receiver");
    tokio::spawn(async move {
        let served = router
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
            .map_err(ReceiverError::serve);
        detached.idle().await;
        served
    })
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

/// tonic's server with `keepalive.server_parameters`, `max_concurrent_streams` and
/// `request_timeout`.
fn grpc_server(config: &OtlpGrpcConfig) -> Server {
    let params = &config.keepalive.server_parameters;
    let mut server = Server::builder()
        .http2_keepalive_interval(nonzero(params.time))
        .http2_keepalive_timeout(nonzero(params.timeout))
        .max_concurrent_streams(config.max_concurrent_streams.max(1));
    if let Some(timeout) = nonzero(config.request_timeout) {
        server = server.timeout(timeout);
    }
    if let Some(age) = nonzero(params.max_connection_age) {
        server = server.max_connection_age(age);
        if let Some(grace) = nonzero(params.max_connection_age_grace) {
            server = server.max_connection_age_grace(grace);
        }
    }
    server
}

/// `max_connections` and `max_connection_idle` (no byte either way; keepalive pings count).
fn grpc_connection_limits(config: &OtlpGrpcConfig) -> ConnectionLimits {
    ConnectionLimits {
        max_connections: config.max_connections,
        handshake_timeout: nonzero(config.handshake_timeout),
        idle_timeout: nonzero(config.keepalive.server_parameters.max_connection_idle),
        write_timeout: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChannelConsumer;
    use profiles_service_server::ProfilesService;

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
