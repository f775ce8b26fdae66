//! The `pyroscope` receiver: the doors of Grafana Alloy's `pyroscope.receive_http`, for the
//! Pyroscope SDKs and agents: `POST /ingest` (`ingest.rs`: pprof, folded stacks) and
//! `POST /push.v1.PusherService/Push` ([`push`]: the Connect push API). Every profile is
//! translated to OTLP, given the resource attributes of its application and labels
//! (`labels.rs`: `service.name` from the app name or the `service_name` label) and handed to the
//! pipeline as an OTLP batch. Other paths: 404; other methods: 405.

pub mod config;
pub(crate) mod ingest;
pub(crate) mod labels;
pub mod push;
pub(crate) mod query;

use crate::error::ReceiverError;
use crate::server::plain::text;
use crate::server::{self, ServerHandle};
use crate::stats::Stats;
use axum::Router;
use axum::response::Response;
use axum::routing::post;
use config::PyroscopeReceiverConfig;
use http::header::ALLOW;
use http::{HeaderValue, StatusCode};
use profilink_consumer::Consumer;
use std::future::Future;
use std::sync::Arc;

/// What the Pyroscope handlers share.
pub(crate) struct PyroscopeState<C> {
    pub consumer: Arc<C>,
    pub stats: Arc<Stats>,
    pub limit: usize,
}

/// The Pyroscope receiver's routes.
pub fn pyroscope_router<C: Consumer>(
    config: &PyroscopeReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
) -> Router {
    let state = Arc::new(PyroscopeState {
        consumer,
        stats,
        limit: config.max_request_body_size(),
    });
    Router::new()
        .route(
            ingest::INGEST_PATH,
            post(ingest::handle::<C>).fallback(method_not_allowed),
        )
        .route(
            push::PUSH_PATH,
            post(push::handle::<C>).fallback(method_not_allowed),
        )
        .with_state(state)
}

async fn method_not_allowed() -> Response {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed, supported: [POST]",
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static("POST"));
    r
}

/// Binds `config.endpoint` and serves the Pyroscope doors (TLS when configured) until
/// `shutdown` resolves. Counts into `stats.pyroscope_http`.
pub async fn serve_pyroscope<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &PyroscopeReceiverConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    server::bind_and_serve(
        &config.endpoint,
        config.tls.as_ref(),
        crate::HttpServerSettings::from(config),
        pyroscope_router(config, consumer, stats),
        shutdown,
        "Pyroscope receiver",
    )
    .await
}
