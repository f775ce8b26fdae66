//! The pprof receiver's `server` mode: `POST /v1/pprof` with a pprof profile as the body (raw,
//! or gzipped as Go writes them; `Content-Encoding` gzip, deflate or zstd is undone first),
//! answered as the Collector contrib's push server answers:
//!
//! | case | status |
//! |---|---|
//! | the profile reached the pipeline | 204 |
//! | not a pprof profile (the reason in the body) | 400 |
//! | unsupported `Content-Encoding`, corrupt compression | 400 |
//! | body over `max_request_body_size_mib` (declared or read, after decompression) | 413 |
//! | pipeline full | 503 + `Retry-After` (the Collector: 500) |
//! | pipeline refused for good (the amplification budget) / failed | 400 / 503 |
//! | other methods | 405 `method GET not allowed, supported: [POST]` |
//! | other paths | 404 |
//!
//! Error bodies are plain text. Every request is counted (`transport="http"`), refusals with
//! their reason.

use crate::converted::{HandoffError, hand_off, pprof_to_otlp};
use crate::error::ReceiverError;
use crate::pprof::config::PprofServerConfig;
use crate::server::decompress;
use crate::server::plain::{self, Refusal, consume_error, text};
use crate::server::{self, ServerHandle};
use crate::stats::{RefusalReason, Stats};
use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use http::header::ALLOW;
use http::{HeaderValue, Method, StatusCode};
use profilink_consumer::{Consumer, ReceiverKind, Transport};
use std::future::Future;
use std::sync::Arc;

/// The path pprof profiles are pushed to.
pub const PUSH_PATH: &str = "/v1/pprof";

struct ServerState<C> {
    consumer: Arc<C>,
    stats: Arc<Stats>,
    limit: usize,
}

/// The `server` mode's routes (`POST /v1/pprof`, 404 elsewhere).
pub fn pprof_router<C: Consumer>(
    config: &PprofServerConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
) -> Router {
    let state = Arc::new(ServerState {
        consumer,
        stats,
        limit: config.max_request_body_size(),
    });
    Router::new()
        .route(PUSH_PATH, any(handle::<C>))
        .with_state(state)
}

/// Binds `config.endpoint` and serves `POST /v1/pprof` (TLS when configured) until `shutdown`
/// resolves. Counts into `stats.pprof_http`.
pub async fn serve_pprof_http<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &PprofServerConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    server::bind_and_serve(
        &config.endpoint,
        config.tls.as_ref(),
        crate::HttpServerSettings::from(config),
        pprof_router(config, consumer, stats),
        shutdown,
        "pprof receiver",
    )
    .await
}

async fn handle<C: Consumer>(
    State(state): State<Arc<ServerState<C>>>,
    request: Request,
) -> Response {
    let counters = &state.stats.pprof_http;
    if request.method() != Method::POST {
        let message = format!("method {} not allowed, supported: [POST]", request.method());
        let mut body = request.into_body();
        decompress::drain(&mut body).await;
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, &message);
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let (parts, mut body) = request.into_parts();
    let outcome = async {
        let bytes =
            plain::read_body(&parts.headers, &mut body, state.limit, &*state.consumer).await?;
        let mut budget = state.limit;
        let data = pprof_to_otlp(&bytes, &mut budget).map_err(|e| {
            Refusal::new(
                RefusalReason::Invalid,
                StatusCode::BAD_REQUEST,
                format!("failed to parse pprof data: {e}"),
            )
        })?;
        drop(bytes);
        let kind = (ReceiverKind::Pprof, Transport::Http);
        match hand_off(&*state.consumer, counters, kind, data).await {
            Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
            Err(HandoffError::Invalid(message)) => Err(Refusal::new(
                RefusalReason::Invalid,
                StatusCode::BAD_REQUEST,
                format!("failed to convert pprof to profiles: {message}"),
            )),
            Err(HandoffError::Consumer(e)) => Err(consume_error(&e)),
        }
    }
    .await;
    decompress::drain(&mut body).await;
    match outcome {
        Ok(response) => {
            counters.request_accepted();
            response
        }
        Err(refusal) => {
            tracing::debug!(reason = refusal.reason.as_str(), message = %refusal.message, "pprof push refused");
            counters.request_refused_for(refusal.reason);
            refusal.plain()
        }
    }
}
