//! What both doors share: running a receiver (binding its listener, serving until a shutdown
//! signal, and the handle that reports the bound address and the outcome), and the rooms below
//! it: serving HTTP ([`http`]) with bounded connections ([`connections`]) over TCP or TLS
//! ([`tls`]), requests that run to their end ([`detach`]), request bodies ([`decompress`]) and
//! CORS ([`cors`]).

pub(crate) mod connections;
pub(crate) mod cors;
pub(crate) mod decompress;
pub(crate) mod detach;
pub(crate) mod http;
pub(crate) mod plain;
pub(crate) mod tls;

use crate::error::ReceiverError;
use axum::Router;
use http::HttpServerSettings;
use profilink_tls::ServerTlsConfig as TlsConfig;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use tls::TlsListener;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_stream::Stream;
use tonic::transport::server::TcpIncoming;

/// A running receiver.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    task: JoinHandle<Result<(), ReceiverError>>,
}

impl ServerHandle {
    /// The handle of a receiver that listens on no socket (the Kafka receiver, which reads
    /// from brokers): `task` ends once the receiver has stopped; the address is `0.0.0.0:0`.
    pub fn without_listener(task: JoinHandle<Result<(), ReceiverError>>) -> Self {
        ServerHandle {
            local_addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            task,
        }
    }

    /// The bound address (the real port when the endpoint asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits until the server has stopped: after the shutdown signal, once in-flight requests
    /// are answered and connections closed.
    pub async fn wait(self) -> Result<(), ReceiverError> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(ReceiverError::serve(e)),
        }
    }

    /// Stops the server at once, dropping in-flight requests.
    pub fn abort(&self) {
        self.task.abort();
    }
}

/// Binds `endpoint` (`host:port`; port 0 picks a free port): the listener and the address it
/// is bound to (the real port when the endpoint asked for port 0).
pub(crate) async fn bind(endpoint: &str) -> Result<(TcpListener, SocketAddr), ReceiverError> {
    let bind_error = |source| ReceiverError::Bind {
        endpoint: endpoint.to_string(),
        source,
    };
    let listener = TcpListener::bind(endpoint).await.map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local_addr))
}

/// The plain TCP connections `listener` accepts, with `TCP_NODELAY` and TCP keepalive.
pub(crate) fn tcp_incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(connections::TCP_KEEPALIVE))
}

/// The TLS connections `listener` accepts (handshakes run concurrently), offering `alpn`;
/// `endpoint` names the listener in errors.
pub(crate) fn tls_incoming(
    listener: TcpListener,
    endpoint: &str,
    tls: &TlsConfig,
    alpn: &[&[u8]],
) -> Result<TlsListener, ReceiverError> {
    let config = tls::server_config(tls, alpn)?;
    TlsListener::new(listener, config).map_err(|source| ReceiverError::Bind {
        endpoint: endpoint.to_string(),
        source,
    })
}

/// Binds `endpoint` and serves `router` there (HTTP/1.1 and HTTP/2, TLS when `tls` is set)
/// with `settings`' timeouts and connection bound until `shutdown` resolves, then finishes
/// in-flight requests; logs the address as `what` (e.g. "OTLP/HTTP receiver").
pub async fn bind_and_serve<F: Future<Output = ()> + Send + 'static>(
    endpoint: &str,
    tls: Option<&TlsConfig>,
    settings: HttpServerSettings,
    router: Router,
    shutdown: F,
    what: &'static str,
) -> Result<ServerHandle, ReceiverError> {
    let (listener, local_addr) = bind(endpoint).await?;
    let task = match tls {
        None => spawn_http(tcp_incoming(listener), router, settings, shutdown, what),
        Some(tls) => {
            let incoming = tls_incoming(listener, endpoint, tls, tls::ALPN_HTTP)?;
            spawn_http(incoming, router, settings, shutdown, what)
        }
    };
    tracing::info!(%local_addr, tls = tls.is_some(), "{what} listening");
    Ok(ServerHandle { local_addr, task })
}

/// [`http::serve`] in a task of its own.
fn spawn_http<St, S>(
    incoming: St,
    router: Router,
    settings: HttpServerSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
    what: &'static str,
) -> JoinHandle<Result<(), ReceiverError>>
where
    St: Stream<Item = io::Result<S>> + Send + Unpin + 'static,
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    tokio::spawn(async move {
        http::serve(incoming, router, settings, shutdown, what).await;
        Ok(())
    })
}

pub(crate) fn handle(
    local_addr: SocketAddr,
    task: JoinHandle<Result<(), ReceiverError>>,
) -> ServerHandle {
    ServerHandle { local_addr, task }
}
