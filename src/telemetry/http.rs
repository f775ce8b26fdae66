//! A small HTTP server for the telemetry endpoints (`/metrics`, `health_check`) and the
//! flamegraph API, with the receivers' connection hardening (timeouts, `max_connections`).

use axum::Router;
use profilink_receiver::{HttpServerSettings, ServerHandle};
use std::future::Future;
use std::net::SocketAddr;

/// A running telemetry HTTP server.
#[derive(Debug)]
pub struct HttpServer {
    handle: ServerHandle,
}

impl HttpServer {
    /// Binds `endpoint` (`host:port`, port 0 picks a free port) and serves `router` until
    /// `shutdown` resolves, with the default [`HttpServerSettings`] (read, header and idle
    /// timeouts of 1 minute, at most 1024 connections). The error names the endpoint.
    pub async fn start<F>(endpoint: &str, router: Router, shutdown: F) -> Result<Self, String>
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
        .map_err(|e| e.to_string())?;
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
