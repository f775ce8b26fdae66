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
pub(crate) mod tls;

use crate::config::TlsConfig;
use crate::error::ReceiverError;
use axum::Router;
use http::HttpServerSettings;
use std::future::Future;
use std::net::SocketAddr;
use tls::TlsListener;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
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

/// Binds `endpoint` (`host:port`; port 0 picks a free port).
pub(crate) async fn bind(endpoint: &str) -> Result<TcpListener, ReceiverError> {
    TcpListener::bind(endpoint)
        .await
        .map_err(|source| ReceiverError::Bind {
            endpoint: endpoint.to_string(),
            source,
        })
}

pub(crate) fn local_addr(
    listener: &TcpListener,
    endpoint: &str,
) -> Result<SocketAddr, ReceiverError> {
    listener.local_addr().map_err(|source| ReceiverError::Bind {
        endpoint: endpoint.to_string(),
        source,
    })
}

/// Binds `endpoint` and serves `router` there (TLS when `tls` is set) with `settings`'
/// timeouts and connection bound until `shutdown` resolves; logs the address as `what`
/// (e.g. "OTLP/HTTP receiver").
pub async fn bind_and_serve<F>(
    endpoint: &str,
    tls: Option<&TlsConfig>,
    settings: HttpServerSettings,
    router: Router,
    shutdown: F,
    what: &'static str,
) -> Result<ServerHandle, ReceiverError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let listener = bind(endpoint).await?;
    let handle = serve_router(listener, endpoint, tls, settings, router, shutdown, what)?;
    tracing::info!(local_addr = %handle.local_addr(), tls = tls.is_some(), "{what} listening");
    Ok(handle)
}

/// Serves `router` on `listener` (HTTP/1.1 and HTTP/2, TLS when `tls` is set) until
/// `shutdown` resolves, then finishes in-flight requests.
pub(crate) fn serve_router<F>(
    listener: TcpListener,
    endpoint: &str,
    tls: Option<&TlsConfig>,
    settings: HttpServerSettings,
    router: Router,
    shutdown: F,
    what: &'static str,
) -> Result<ServerHandle, ReceiverError>
where
    F: Future<Output = ()> + Send + 'static,
{
    let local_addr = local_addr(&listener, endpoint)?;
    let task = match tls {
        None => {
            let incoming = TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .with_keepalive(Some(crate::server::connections::TCP_KEEPALIVE));
            tokio::spawn(async move {
                http::serve(incoming, router, settings, shutdown, what).await;
                Ok(())
            })
        }
        Some(tls_config) => {
            let config = tls::server_config(tls_config, tls::ALPN_HTTP)?;
            let listener =
                TlsListener::new(listener, config).map_err(|source| ReceiverError::Bind {
                    endpoint: endpoint.to_string(),
                    source,
                })?;
            tokio::spawn(async move {
                http::serve(listener, router, settings, shutdown, what).await;
                Ok(())
            })
        }
    };
    Ok(ServerHandle { local_addr, task })
}

pub(crate) fn handle(
    local_addr: SocketAddr,
    task: JoinHandle<Result<(), ReceiverError>>,
) -> ServerHandle {
    ServerHandle { local_addr, task }
}
