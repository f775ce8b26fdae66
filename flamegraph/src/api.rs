//! HTTP: Sentry's `GET /api/0/organizations/{organization_id_or_slug}/profiling/flamegraph/`,
//! the viewer under `/ui/`, bearer-token authentication, and serving.

use crate::config::ApiConfig;
use crate::flamegraph::{Example, Flamegraph, FrameInfo, FunctionMetrics, MAX_SAMPLES, OutFrame};
use crate::query;
use crate::store::ProfileStore;
use crate::ui;
use crate::web::{AppState, TOKEN_COOKIE, error, now_secs, query_pairs, run_query};
use axum::Router;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;

/// The flamegraph API and the viewer as an axum router (no state left to provide).
///
/// Routes: `GET /api/0/organizations/{organization_id_or_slug}/profiling/flamegraph/` (also
/// without the trailing slash), `GET /ui/` (viewer page), `GET /ui/flamegraph.svg` (the same
/// filters as an SVG). With `cfg.bearer_token` set, every route requires
/// `Authorization: Bearer <token>`; the viewer also accepts the token from its login form.
pub fn router(store: Arc<ProfileStore>, cfg: &ApiConfig) -> Router {
    let state = AppState {
        store,
        token: cfg
            .bearer_token
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(Arc::from),
    };
    Router::new()
        .route(
            "/api/0/organizations/{org}/profiling/flamegraph/",
            get(api_flamegraph),
        )
        .route(
            "/api/0/organizations/{org}/profiling/flamegraph",
            get(api_flamegraph),
        )
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(ui::index))
        .route("/ui/flamegraph.svg", get(ui::svg))
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

/// Binds `cfg.endpoint` and serves [`router`] until `shutdown` completes.
pub async fn serve<F>(store: Arc<ProfileStore>, cfg: &ApiConfig, shutdown: F) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(&cfg.endpoint).await?;
    serve_on(listener, store, cfg, shutdown).await
}

/// Serves [`router`] on an already bound listener until `shutdown` completes.
pub async fn serve_on<F>(
    listener: tokio::net::TcpListener,
    store: Arc<ProfileStore>,
    cfg: &ApiConfig,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "flamegraph API and viewer listening");
    }
    axum::serve(listener, router(store, cfg))
        .with_graceful_shutdown(shutdown)
        .await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token a request presents: `Authorization: Bearer …`, or for the viewer the cookie.
fn presented_token(headers: &HeaderMap, allow_cookie: bool) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, token) = v.trim().split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string());
    }
    if !allow_cookie {
        return None;
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == TOKEN_COOKIE)
        .map(|(_, v)| {
            form_urlencoded::parse(format!("v={v}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        })
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(expected) = state.token.as_deref() else {
        return next.run(req).await;
    };
    let is_ui = req.uri().path().starts_with("/ui");
    match presented_token(req.headers(), is_ui) {
        Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => next.run(req).await,
        presented => {
            if is_ui && req.uri().path() != "/ui/flamegraph.svg" {
                return ui::login_page(presented.is_some());
            }
            let detail = if presented.is_some() {
                "Invalid token"
            } else {
                "Authentication credentials were not provided."
            };
            let mut resp = error(StatusCode::UNAUTHORIZED, detail);
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            resp
        }
    }
}

async fn api_flamegraph(
    State(state): State<AppState>,
    Path(org): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let pairs = query_pairs(raw.as_deref());
    let params = match query::parse_params(&pairs, now_secs()) {
        Ok(p) => p,
        Err(msg) => return error(StatusCode::BAD_REQUEST, &msg),
    };
    let (_, fg) = match run_query(Arc::clone(&state.store), params).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let org_id = org.parse::<u64>().unwrap_or(0);
    axum::Json(FlamegraphResponse::build(&fg, org_id)).into_response()
}

/// The JSON body of the flamegraph endpoint (vroom's `speedscope.Output`).
#[derive(Serialize)]
pub(crate) struct FlamegraphResponse<'a> {
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: u32,
    metadata: Metadata,
    platform: String,
    #[serde(rename = "transactionName")]
    transaction_name: String,
    #[serde(rename = "projectID")]
    project_id: u64,
    shared: Shared<'a>,
    profiles: Vec<SampledProfile>,
    metrics: Option<&'a [FunctionMetrics]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    device_classification: String,
    device_locale: String,
    device_manufacturer: String,
    device_model: String,
    #[serde(rename = "deviceOSName")]
    device_os_name: String,
    #[serde(rename = "deviceOSVersion")]
    device_os_version: String,
    #[serde(rename = "durationNS")]
    duration_ns: u64,
    #[serde(rename = "organizationID")]
    organization_id: u64,
    platform: String,
    #[serde(rename = "profileID")]
    profile_id: String,
    #[serde(rename = "projectID")]
    project_id: u64,
    received: String,
    sampled: bool,
    timestamp: String,
    #[serde(rename = "traceID")]
    trace_id: String,
    #[serde(rename = "transactionID")]
    transaction_id: String,
    transaction_name: String,
    version: String,
}

#[derive(Serialize)]
struct Shared<'a> {
    frames: &'a [OutFrame],
    frame_infos: &'a [FrameInfo],
    profiles: Vec<&'a Example>,
}

#[derive(Serialize)]
struct SampledProfile {
    #[serde(rename = "endValue")]
    end_value: u64,
    #[serde(rename = "isMainThread")]
    is_main_thread: bool,
    name: String,
    samples: Vec<Vec<u32>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    samples_examples: Vec<Vec<u32>>,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "threadID")]
    thread_id: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    unit: &'static str,
    weights: Vec<u64>,
    sample_durations_ns: Vec<u64>,
    sample_counts: Vec<u64>,
}

fn rfc3339(secs: Option<f64>) -> String {
    let secs = secs.unwrap_or(0.0);
    chrono::DateTime::from_timestamp(secs.floor() as i64, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The only element of `items`, or the default.
fn single<T: Clone + Default>(items: &[T]) -> T {
    match items {
        [one] => one.clone(),
        _ => T::default(),
    }
}

impl<'a> FlamegraphResponse<'a> {
    pub(crate) fn build(fg: &'a Flamegraph, org_id: u64) -> Self {
        // vroom keeps the heaviest samples (count, then duration, then depth).
        let mut keep: Vec<usize> = (0..fg.samples.len()).collect();
        if keep.len() > MAX_SAMPLES {
            keep.sort_by(|&a, &b| {
                let (x, y) = (&fg.samples[a], &fg.samples[b]);
                y.count
                    .cmp(&x.count)
                    .then(y.duration_ns.cmp(&x.duration_ns))
                    .then(y.stack.len().cmp(&x.stack.len()))
                    .then(a.cmp(&b))
            });
            keep.truncate(MAX_SAMPLES);
            keep.sort_unstable();
        }
        let mut example_index: Vec<Option<u32>> = vec![None; fg.examples.len()];
        let mut shared_profiles: Vec<&Example> = Vec::new();
        let mut samples = Vec::with_capacity(keep.len());
        let mut samples_examples = Vec::with_capacity(keep.len());
        let mut counts = Vec::with_capacity(keep.len());
        let mut durations = Vec::with_capacity(keep.len());
        for &i in &keep {
            let s = &fg.samples[i];
            samples.push(s.stack.clone());
            counts.push(s.count);
            durations.push(s.duration_ns);
            samples_examples.push(
                s.examples
                    .iter()
                    .map(|&e| {
                        *example_index[e as usize].get_or_insert_with(|| {
                            shared_profiles.push(&fg.examples[e as usize]);
                            (shared_profiles.len() - 1) as u32
                        })
                    })
                    .collect(),
            );
        }
        let end_value: u64 = fg.samples.iter().map(|s| s.count).sum();
        let total_ns: u64 = fg.samples.iter().map(|s| s.duration_ns).sum();
        let platform = single(&fg.platforms);
        let project_id = single(&fg.projects);
        let transaction_name = single(&fg.transaction_names);
        let thread_id = single(&fg.thread_ids).parse::<u64>().unwrap_or(0);
        FlamegraphResponse {
            active_profile_index: 0,
            metadata: Metadata {
                device_classification: String::new(),
                device_locale: String::new(),
                device_manufacturer: String::new(),
                device_model: String::new(),
                device_os_name: String::new(),
                device_os_version: String::new(),
                duration_ns: total_ns,
                organization_id: org_id,
                platform: platform.clone(),
                profile_id: String::new(),
                project_id,
                received: rfc3339(fg.last_received),
                sampled: false,
                timestamp: rfc3339(fg.first_start),
                trace_id: String::new(),
                transaction_id: String::new(),
                transaction_name: transaction_name.clone(),
                version: String::new(),
            },
            platform,
            transaction_name,
            project_id,
            shared: Shared {
                frames: &fg.frames,
                frame_infos: &fg.frame_infos,
                profiles: shared_profiles,
            },
            profiles: vec![SampledProfile {
                end_value,
                is_main_thread: true,
                name: single(&fg.thread_names),
                samples,
                samples_examples,
                start_value: 0,
                thread_id,
                kind: "sampled",
                unit: "count",
                weights: counts.clone(),
                sample_durations_ns: durations,
                sample_counts: counts,
            }],
            metrics: fg.metrics.as_deref(),
        }
    }
}
