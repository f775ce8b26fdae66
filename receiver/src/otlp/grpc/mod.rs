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
//! [`ProfilesService`](profilink_proto::otlp::profiles_service_server::ProfilesService) and
//! [`TraceService`](profilink_proto::otlp::trace_service_server::TraceService) traits for
//! callers that mount it in their own tonic server.
//!
//! The handler ([`handler`]), the tonic service ([`service`]) and its codec ([`codec`]) each
//! have their file; this one binds and serves them.

mod codec;
mod handler;
mod service;

pub use handler::OtlpGrpcHandler;
pub use service::{ExportService, OtlpGrpcService, OtlpTracesGrpcService};

use crate::config::OtlpGrpcConfig;
use crate::error::ReceiverError;
use crate::server::connections::{self, ConnectionLimits};
use crate::server::detach::Detached;
use crate::server::tls;
use crate::server::{self, ServerHandle};
use crate::stats::Stats;
use profilink_consumer::Consumer;
use profilink_proto::signal::{Signal, Traces};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tonic::transport::Server;
use tonic::transport::server::{Connected, Router};

/// The gRPC method path of the OTLP traces export service.
pub const TRACES_EXPORT_PATH: &str = Traces::GRPC_PATH;

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
