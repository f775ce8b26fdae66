//! A small HTTP server for the telemetry endpoints (`/metrics`, `health_check`) and the
//! flamegraph API, with the receivers' connection hardening (timeouts, `max_connections`).

use axum::Router;
use profilink_receiver::{HttpServerSettings, ServerHandle};
use std::future::Future;
use std::net::SocketAddr;

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
    handle: ServerHandle,
}

impl HttpServer {
    /// Binds `endpoint` (`host:port`, port 0 picks a free port) and serves `router` until
    /// `shutdown` resolves, with the default [`HttpServerSettings`] (read, header and idle
    /// timeouts of 1 minute, at most 1024 connections). The error names the endpoint.
    pub async fn start<F>(endpoint: &str, router: Router, shutdown: F) -> Result<Self, BindError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = profilink_receiver::bind_and_serve(
            endpoint,
            None,
            HttpServerSettings::default(),
            router,
            shutdown,
            "telemetry HTTP server",
        )
        .await
        .map_err(|e| match e {
            profilink_receiver::ReceiverError::Bind { endpoint, source } => {
                BindError { endpoint, source }
            }
            other => BindError {
                endpoint: endpoint.to_string(),
                source: std::io::Error::other(other),
            },
        })?;
        Ok(HttpServer { handle })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    /// Waits until the server stopped (after its shutdown future resolved).
    pub async fn wait(self) {
        if let Err(e) = self.handle.wait().await {
            tracing::warn!(error = %e, "telemetry server failed");
        }
    }
}
