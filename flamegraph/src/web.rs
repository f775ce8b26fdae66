//! What the two web surfaces (the Sentry API in `api`, the viewer in `ui`) share: the
//! handlers' state, the viewer's token cookie name, Sentry's error body, query-string pairs,
//! the clock, and running a flamegraph query off the async runtime.

use crate::flamegraph::{self, Flamegraph};
use crate::query::FlamegraphParams;
use crate::store::ProfileStore;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Shared state of the handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Arc<ProfileStore>,
    pub token: Option<Arc<str>>,
}

/// Name of the viewer's token cookie.
pub(crate) const TOKEN_COOKIE: &str = "profilink_token";

/// `{"detail": "..."}` with `status`, as Sentry's API errors.
pub(crate) fn error(status: StatusCode, detail: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "detail": detail }))).into_response()
}

/// Parses a raw query string into pairs (repeated keys kept).
pub(crate) fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

pub(crate) fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Runs a flamegraph query off the async runtime.
pub(crate) async fn run_query(
    store: Arc<ProfileStore>,
    params: FlamegraphParams,
) -> Result<(FlamegraphParams, Flamegraph), Response> {
    match tokio::task::spawn_blocking(move || {
        flamegraph::query(&store, &params).map(|fg| (params, fg))
    })
    .await
    {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "flamegraph query failed");
            Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "profile store error",
            ))
        }
        Err(e) => {
            tracing::warn!(error = %e, "flamegraph query task failed");
            Err(error(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))
        }
    }
}
