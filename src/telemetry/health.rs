//! The `health_check` extension: `GET <path>` answers 200 while the service is ready and 503
//! while it is starting or draining (after SIGTERM), as the Collector's extension does.

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// `extensions.health_check`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthCheckConfig {
    /// `host:port` to listen on (default `127.0.0.1:13133`).
    pub endpoint: String,
    /// The path answering the check (default `/`).
    pub path: String,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        HealthCheckConfig {
            endpoint: "127.0.0.1:13133".into(),
            path: "/".into(),
        }
    }
}

/// The service's state as the health check reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Components are starting: 503.
    Starting,
    /// Receivers accept data: 200.
    Ready,
    /// Shutting down (receivers stopped or stopping, exporters flushing): 503.
    Draining,
}

/// Shared, lock-free service state.
#[derive(Debug)]
pub struct Health(AtomicU8);

impl Default for Health {
    fn default() -> Self {
        Health(AtomicU8::new(0))
    }
}

impl Health {
    /// Sets the state.
    pub fn set(&self, state: State) {
        let v = match state {
            State::Starting => 0,
            State::Ready => 1,
            State::Draining => 2,
        };
        self.0.store(v, Ordering::SeqCst);
    }

    /// The current state.
    pub fn get(&self) -> State {
        match self.0.load(Ordering::SeqCst) {
            0 => State::Starting,
            1 => State::Ready,
            _ => State::Draining,
        }
    }
}

/// The router of the health endpoint.
pub fn router(config: &HealthCheckConfig, health: Arc<Health>) -> Router {
    let path = if config.path.starts_with('/') {
        config.path.clone()
    } else {
        format!("/{}", config.path)
    };
    Router::new().route(
        &path,
        get(move || {
            let health = health.clone();
            async move { respond(health.get()) }
        }),
    )
}

fn respond(state: State) -> impl IntoResponse {
    let (status, body) = match state {
        State::Ready => (StatusCode::OK, r#"{"status":"Server available"}"#),
        State::Starting => (
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"status":"Server not available","reason":"starting"}"#,
        ),
        State::Draining => (
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"status":"Server not available","reason":"shutting down"}"#,
        ),
    };
    (status, [("content-type", "application/json")], body)
}
