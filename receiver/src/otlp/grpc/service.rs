//! The tonic service of one signal's `Export` method ([`ExportService`]): the checks on the
//! headers before the body is read, the call run detached from its connection, the status
//! tonic answers rewritten as grpc-go's, and the counting of each call.

use super::codec::ExportCodec;
use super::handler::{OtlpGrpcHandler, consume_status, unknown_service};
use crate::auth::ListenerAuth;
use crate::config::OtlpGrpcConfig;
use crate::otlp::ingest::{IngestSignal, consume_reason};
use crate::server::detach::Detached;
use crate::stats::{RefusalReason, Stats};
use profilink_consumer::Consumer;
use profilink_proto::signal::{Profiles, Signal, Traces};
use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tonic::codec::{CompressionEncoding, EnabledCompressionEncodings};
use tonic::codegen::{BoxFuture, Service};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Code, Status};

/// Settings the export services share: auth, size limit, compression.
#[derive(Debug, Clone)]
pub(super) struct GrpcSettings {
    pub(super) auth: ListenerAuth,
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
    pub(super) settings: GrpcSettings,
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
