//! A small HTTP server for the telemetry endpoints (`/metrics`, `health_check`).

use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// An endpoint that could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {endpoint}: {source}")]
pub struct BindError {
    /// The configured `host:port`.
    pub endpoint: String,
    /// The socket error.
    #[source]
    pub source: std::io::Error,
}

/// A running telemetry HTTP server.
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// Binds `endpoint` (`host:port`, port 0 picks a free port) and serves `router` until
    /// `shutdown` resolves. The error names the endpoint.
    pub async fn start<F>(endpoint: &str, router: Router, shutdown: F) -> Result<Self, BindError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let bind_error = |source| BindError {
            endpoint: endpoint.to_string(),
            source,
        };
        let listener = TcpListener::bind(endpoint).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::warn!(error = %e, "telemetry server failed");
            }
        });
        Ok(HttpServer { local_addr, task })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits until the server stopped (after its shutdown future resolved).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}
