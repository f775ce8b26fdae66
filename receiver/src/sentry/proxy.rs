//! The other ingest paths Sentry SDKs use, passed on as they are:
//!
//! | path | what | category |
//! |---|---|---|
//! | `POST /api/{project_id}/store/` | legacy JSON events | `error` |
//! | `POST /api/{project_id}/security/` | CSP / security reports (`?sentry_key=`) | `error` |
//! | `POST /api/{project_id}/minidump/` | native crash uploads (multipart) | `error` |
//! | `POST /api/{project_id}/integration/otlp/v1/traces` | OTLP traces | `span` |
//! | `POST /api/{project_id}/integration/otlp/v1/logs` | OTLP logs | `log_item` |
//!
//! (each with and without a trailing slash). Authentication and the size limit are checked as
//! for envelopes; the body is forwarded byte for byte with its headers and query, durably and in
//! order with the project's envelopes. While upstream rate-limits the path's category the
//! request is answered 429 with `X-Sentry-Rate-Limits` and not forwarded. Without an upstream
//! nothing here consumes these requests: they are answered 200, counted in
//! `profilink_receiver_dropped_items_total{type}` and logged (at most once per 10 s).

use crate::sentry::auth::{self, AuthError};
use crate::sentry::common::{
    Refusal, SentryState, answer, authenticate, check_declared_size, forward_refusal, json_ok,
    preflight, read, send_upstream,
};
use crate::sentry::forward;
use crate::server::decompress::Encoding;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http::StatusCode;
use http::request::Parts;
use profilink_consumer::Consumer;
use std::sync::Arc;

/// One proxied path: its route, the item type label it counts as, its data category.
struct Path_ {
    route: &'static str,
    label: &'static str,
    category: &'static str,
}

const PATHS: &[Path_] = &[
    Path_ {
        route: "/api/{project_id}/store/",
        label: "event",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/store",
        label: "event",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/security/",
        label: "security",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/security",
        label: "security",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/minidump/",
        label: "minidump",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/minidump",
        label: "minidump",
        category: "error",
    },
    Path_ {
        route: "/api/{project_id}/integration/otlp/v1/traces",
        label: "otlp_traces",
        category: "span",
    },
    Path_ {
        route: "/api/{project_id}/integration/otlp/v1/traces/",
        label: "otlp_traces",
        category: "span",
    },
    Path_ {
        route: "/api/{project_id}/integration/otlp/v1/logs",
        label: "otlp_logs",
        category: "log_item",
    },
    Path_ {
        route: "/api/{project_id}/integration/otlp/v1/logs/",
        label: "otlp_logs",
        category: "log_item",
    },
];

/// Adds the proxied paths to `router`.
pub(crate) fn routes<C: Consumer>(
    mut router: Router<Arc<SentryState<C>>>,
) -> Router<Arc<SentryState<C>>> {
    for (i, p) in PATHS.iter().enumerate() {
        router = router.route(
            p.route,
            post(
                move |state: State<Arc<SentryState<C>>>, path: Path<String>, request: Request| {
                    handle::<C>(state, path, request, i)
                },
            )
            .options(preflight),
        );
    }
    router
}

async fn handle<C: Consumer>(
    State(state): State<Arc<SentryState<C>>>,
    Path(project_id): Path<String>,
    request: Request,
    which: usize,
) -> Response {
    let (parts, mut body) = request.into_parts();
    let result = pass_on(&state, &PATHS[which], &project_id, &parts, &mut body).await;
    answer(&state, result, &mut body).await
}

/// Passes a request to `path` on to the upstream as it is (see the module docs).
async fn pass_on<C: Consumer>(
    state: &SentryState<C>,
    path: &Path_,
    project_id: &str,
    parts: &Parts,
    body: &mut Body,
) -> Result<Response, Refusal> {
    let (project_id, auth) = authenticate(state, project_id, parts)?;
    let auth = auth.ok_or(AuthError::Missing)?;
    let public_key = auth::project_key(&auth.public_key)?.to_string();
    let limit = state.config.max_envelope_size();
    check_declared_size(&parts.headers, limit)?;
    let items = &state.stats.sentry_items;
    let Some(upstream) = state.upstream.as_deref() else {
        read(body, Encoding::Identity, limit).await?;
        items.drop_items(path.label, 1);
        if let Some(suppressed) = state.log.allow() {
            tracing::warn!(
                project_id,
                path = path.route,
                client_report = %serde_json::json!({"discarded_events": [{"reason": "no_upstream", "category": path.category, "quantity": 1}]}),
                suppressed_lines = suppressed,
                "sentry receiver has no upstream: dropped a request no pipeline consumes \
                 (set receivers.sentry.upstream to forward it to Sentry)"
            );
        }
        return Ok(json_ok(serde_json::json!({})));
    };
    let limits: Vec<_> = upstream
        .rate_limits(project_id, &public_key)
        .into_iter()
        .filter(|l| l.matches(path.category))
        .collect();
    if let Some((header, longest)) = forward::rate_limit_header(&limits) {
        items.refuse_items(path.label, "rate_limited", 1);
        return Err(Refusal::rate_limited(header, longest));
    }
    upstream.check_ready().map_err(|e| forward_refusal(&e))?;
    let raw = Bytes::from(read(body, Encoding::Identity, limit).await?);
    let headers = forward::forward_headers(&parts.headers);
    send_upstream(
        upstream,
        items,
        forward::request(project_id, &public_key, parts, raw, headers),
    )
    .await?;
    Ok(match path.category {
        "error" => json_ok(serde_json::json!({})),
        _ => StatusCode::OK.into_response(),
    })
}
