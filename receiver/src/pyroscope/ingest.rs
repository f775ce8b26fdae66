//! `POST /ingest`, Pyroscope's own ingest door (the one the SDKs used before the push API), as
//! Alloy's `pyroscope.receive_http` and the Pyroscope server serve it.
//!
//! | body | read as |
//! |---|---|
//! | `multipart/form-data` (no `format`, or `pprof`: the Go SDK's) | the part `profile` is a pprof profile (raw or gzipped); `sample_type_config` must be JSON when present (the pprof's own sample types are kept); `prev_profile` is not used |
//! | `format=pprof` | a pprof profile (raw or gzipped) |
//! | `format=folded`, `groups`, or none | folded stacks, `root;...;leaf N` per line |
//! | `format=lines` | one stack per line, each counted once |
//! | `format=jfr` | refused: 415, counted with `reason="unsupported_format"` |
//! | `format=trie`, `tree`, `speedscope` | the same |
//!
//! Folded stacks become a profile of the sample type the name's suffix names (`app.cpu`:
//! `samples`/`count` with a CPU period of one second over `sampleRate`; `app.alloc_space`:
//! `alloc_space`/`bytes`; …; no suffix: by `units`), spanning `from` to `until`. A pprof without
//! a time of its own gets that span too.
//!
//! The answer is 200 with an empty body once the profile reached the pipeline; errors are
//! plain text: 400 naming the bad key or what is wrong with the body, 413 too large, 415 a
//! format not read, 503 a full pipeline (`Retry-After`).

use crate::converted::{
    FoldedMeta, HandoffError, fill_missing_times, folded_to_otlp, hand_off, pprof_to_otlp,
    set_resource_attributes,
};
use crate::pyroscope::PyroscopeState;
use crate::pyroscope::labels::resource_attributes;
use crate::pyroscope::query::IngestQuery;
use crate::server::decompress;
use crate::server::plain::{self, Refusal, consume_error};
use crate::stats::RefusalReason;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, StatusCode};
use profilink_consumer::{Consumer, ReceiverKind, Transport};
use profilink_proto::otlp::ProfilesData;
use std::sync::Arc;

/// The path of the ingest door.
pub const INGEST_PATH: &str = "/ingest";

/// `POST /ingest`.
pub(crate) async fn handle<C: Consumer>(
    State(state): State<Arc<PyroscopeState<C>>>,
    request: Request,
) -> Response {
    let counters = &state.stats.pyroscope_http;
    let (parts, mut body) = request.into_parts();
    let outcome = ingest(
        &state,
        parts.uri.query().unwrap_or(""),
        &parts.headers,
        &mut body,
    )
    .await;
    decompress::drain(&mut body).await;
    match outcome {
        Ok(()) => {
            counters.request_accepted();
            StatusCode::OK.into_response()
        }
        Err(refusal) => {
            tracing::debug!(reason = refusal.reason.as_str(), message = %refusal.message, "pyroscope ingest refused");
            counters.request_refused_for(refusal.reason);
            refusal.plain()
        }
    }
}

fn bad(message: impl Into<String>) -> Refusal {
    Refusal::new(RefusalReason::Invalid, StatusCode::BAD_REQUEST, message)
}

async fn ingest<C: Consumer>(
    state: &PyroscopeState<C>,
    query: &str,
    headers: &HeaderMap,
    body: &mut Body,
) -> Result<(), Refusal> {
    let q = IngestQuery::parse(query).map_err(bad)?;
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let multipart = content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data");
    // As Pyroscope: the named formats come first (a Java agent's JFR arrives as a multipart
    // form with format=jfr); a multipart form is otherwise the Go SDK's pprof.
    if matches!(q.format.as_str(), "jfr" | "trie" | "tree" | "speedscope") {
        return Err(Refusal::new(
            RefusalReason::UnsupportedFormat,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "format={} is not read by profilink (supported: pprof, folded, lines)",
                q.format
            ),
        ));
    }
    if !matches!(
        q.format.as_str(),
        "pprof" | "folded" | "groups" | "lines" | ""
    ) {
        return Err(bad(format!(
            "format: {:?} is not a Pyroscope format",
            q.format
        )));
    }
    let multipart = multipart && q.format != "lines";
    let bytes = plain::read_body(headers, body, state.limit, &*state.consumer).await?;
    let duration = q.until_ns - q.from_ns;
    let mut data = if multipart {
        let profile = profile_part(&content_type, bytes).await?;
        pprof(&profile, state.limit)?
    } else if q.format == "pprof" {
        pprof(&bytes, state.limit)?
    } else {
        folded(&q, &bytes)?
    };
    fill_missing_times(&mut data, q.from_ns, duration);
    let mut attributes = resource_attributes(Some(&q.name.app), &q.name.labels);
    if let Some(spy) = &q.spy_name {
        attributes.push(("pyroscope_spy".into(), spy.clone()));
    }
    set_resource_attributes(&mut data, &attributes);
    let kind = (ReceiverKind::Pyroscope, Transport::Http);
    match hand_off(&*state.consumer, &state.stats.pyroscope_http, kind, data).await {
        Ok(_) => Ok(()),
        Err(HandoffError::Invalid(m)) => Err(bad(m)),
        Err(HandoffError::Consumer(e)) => Err(consume_error(&e)),
    }
}

fn pprof(bytes: &[u8], limit: usize) -> Result<ProfilesData, Refusal> {
    let mut budget = limit;
    pprof_to_otlp(bytes, &mut budget).map_err(|e| bad(format!("not a pprof profile: {e}")))
}

fn folded(q: &IngestQuery, bytes: &[u8]) -> Result<ProfilesData, Refusal> {
    let (ty, unit) = q.sample_type().map_err(bad)?;
    let period = q
        .period_type()
        .map(|p| ((p.to_string(), "nanoseconds".to_string()), q.period_ns()));
    let meta = FoldedMeta {
        sample_type: (ty.to_string(), unit.to_string()),
        period,
        time_unix_nano: q.from_ns,
        duration_nano: q.until_ns - q.from_ns,
    };
    let text: std::borrow::Cow<'_, [u8]> = if q.format == "lines" {
        // One stack per line, each seen once: folded with a count of 1.
        let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8);
        for line in bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
        {
            out.extend_from_slice(line.trim_ascii_end());
            out.extend_from_slice(b" 1\n");
        }
        out.into()
    } else {
        bytes.into()
    };
    folded_to_otlp(&text, &meta).map_err(|e| bad(format!("not folded stacks: {e}")))
}

/// The `profile` part of a multipart body (`sample_type_config`, when there, must be JSON).
async fn profile_part(content_type: &str, bytes: Vec<u8>) -> Result<Vec<u8>, Refusal> {
    let boundary =
        multer::parse_boundary(content_type).map_err(|e| bad(format!("multipart body: {e}")))?;
    let stream = futures_util::stream::once(async move {
        Ok::<Bytes, std::convert::Infallible>(Bytes::from(bytes))
    });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut profile = None;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| bad(format!("multipart body: {e}")))?
    {
        let name = field.name().unwrap_or("").to_string();
        let data = field
            .bytes()
            .await
            .map_err(|e| bad(format!("multipart part {name:?}: {e}")))?;
        match name.as_str() {
            "profile" => profile = Some(data.to_vec()),
            "sample_type_config" => {
                serde_json::from_slice::<serde_json::Value>(&data)
                    .map_err(|e| bad(format!("sample_type_config: not JSON: {e}")))?;
            }
            _ => {}
        }
    }
    profile.ok_or_else(|| bad("multipart body: no part named \"profile\""))
}
