//! `POST /push.v1.PusherService/Push`, Pyroscope's push API, as a Connect unary call (what
//! `pyroscope-io` 1.4 and Alloy's `pyroscope.write` send): a `push.v1.PushRequest` of series,
//! each with labels and samples of raw pprof (gzipped or not).
//!
//! * `Content-Type` `application/proto` (also `application/x-protobuf`) or `application/json`
//!   (protobuf JSON: `series[].labels[].{name,value}`, `series[].samples[].rawProfile` in
//!   base64); others 415. `Content-Encoding` gzip, deflate or zstd.
//! * Every sample is translated before anything is handed on: one that is not pprof refuses
//!   the whole request (`invalid_argument`, naming the series and sample). The gzipped
//!   samples of one request may inflate to `max_request_body_size_mib` together.
//! * Each sample becomes one batch with its series' labels as resource attributes
//!   (`service_name` as `service.name`, the others as they are). A pipeline refusal after some
//!   samples of the request were taken answers the error (the client's retry repeats those).
//! * Success: 200 with an empty `PushResponse` in the request's format. Errors: Connect's JSON
//!   error body `{"code":"…","message":"…"}` with its HTTP status (`invalid_argument` 400,
//!   `resource_exhausted` 429 for a body over the limit, `unavailable` 503 with
//!   `Retry-After` for a full pipeline).

use crate::converted::{
    HandoffError, fill_missing_times, hand_off, pprof_to_otlp, set_resource_attributes,
};
use crate::pyroscope::PyroscopeState;
use crate::pyroscope::labels::resource_attributes;
use crate::server::decompress;
use crate::server::http::retry_after_secs;
use crate::server::plain::{self, Refusal, consume_error};
use crate::stats::RefusalReason;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, StatusCode};
use profilink_consumer::{Consumer, ReceiverKind, Transport};
use serde::Deserialize;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The path of the push API.
pub const PUSH_PATH: &str = "/push.v1.PusherService/Push";

/// `push.v1.PushRequest`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(default)]
pub struct PushRequest {
    /// The series.
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<RawProfileSeries>,
}

/// `push.v1.RawProfileSeries`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(default)]
pub struct RawProfileSeries {
    /// The series' labels.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    /// Its profiles.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<RawSample>,
}

/// `types.v1.LabelPair`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(default)]
pub struct LabelPair {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `push.v1.RawSample`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(default)]
pub struct RawSample {
    /// A pprof profile (raw or gzipped); base64 in JSON.
    #[prost(bytes = "vec", tag = "1")]
    #[serde(
        alias = "raw_profile",
        rename = "rawProfile",
        deserialize_with = "base64_bytes"
    )]
    pub raw_profile: Vec<u8>,
    /// The profile's id.
    #[prost(string, tag = "2")]
    #[serde(rename = "ID", alias = "id")]
    pub id: String,
}

fn base64_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    let engine = base64::engine::general_purpose::STANDARD;
    engine
        .decode(text.as_bytes())
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(text.as_bytes()))
        .map_err(serde::de::Error::custom)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Codec {
    Proto(&'static str),
    Json,
}

fn codec(headers: &http::HeaderMap) -> Option<Codec> {
    let value = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    let media = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "application/proto" => Some(Codec::Proto("application/proto")),
        "application/x-protobuf" | "application/protobuf" => {
            Some(Codec::Proto("application/proto"))
        }
        "application/json" => Some(Codec::Json),
        _ => None,
    }
}

/// `POST /push.v1.PusherService/Push`.
pub(crate) async fn handle<C: Consumer>(
    State(state): State<Arc<PyroscopeState<C>>>,
    request: Request,
) -> Response {
    let counters = &state.stats.pyroscope_http;
    let (parts, mut body) = request.into_parts();
    let outcome = match codec(&parts.headers) {
        None => Err(Refusal::new(
            RefusalReason::UnsupportedMediaType,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type, supported: application/proto, application/json",
        )),
        Some(codec) => {
            async {
                let bytes =
                    plain::read_body(&parts.headers, &mut body, state.limit, &*state.consumer)
                        .await?;
                let request = match codec {
                    Codec::Proto(_) => <PushRequest as prost::Message>::decode(bytes.as_slice())
                        .map_err(|e| format!("cannot decode push.v1.PushRequest: {e}")),
                    Codec::Json => serde_json::from_slice::<PushRequest>(&bytes)
                        .map_err(|e| format!("cannot decode push.v1.PushRequest JSON: {e}")),
                }
                .map_err(|m| Refusal::new(RefusalReason::Invalid, StatusCode::BAD_REQUEST, m))?;
                drop(bytes);
                push(&state, request).await.map(|()| codec)
            }
            .await
        }
    };
    decompress::drain(&mut body).await;
    match outcome {
        Ok(codec) => {
            counters.request_accepted();
            let (media, body) = match codec {
                Codec::Proto(media) => (media, Vec::new()),
                Codec::Json => ("application/json", b"{}".to_vec()),
            };
            (
                StatusCode::OK,
                [(CONTENT_TYPE, HeaderValue::from_static(media))],
                body,
            )
                .into_response()
        }
        Err(refusal) => {
            tracing::debug!(reason = refusal.reason.as_str(), message = %refusal.message, "pyroscope push refused");
            counters.request_refused_for(refusal.reason);
            connect_error(&refusal)
        }
    }
}

async fn push<C: Consumer>(state: &PyroscopeState<C>, request: PushRequest) -> Result<(), Refusal> {
    let mut budget = state.limit;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut translated = Vec::new();
    for (s, series) in request.series.into_iter().enumerate() {
        let labels: Vec<(String, String)> = series
            .labels
            .into_iter()
            .map(|l| (l.name, l.value))
            .collect();
        let attributes = resource_attributes(None, &labels);
        for (i, sample) in series.samples.into_iter().enumerate() {
            let mut data = pprof_to_otlp(&sample.raw_profile, &mut budget).map_err(|e| {
                Refusal::new(
                    RefusalReason::Invalid,
                    StatusCode::BAD_REQUEST,
                    format!("series[{s}].samples[{i}]: not a pprof profile: {e}"),
                )
            })?;
            fill_missing_times(&mut data, now, 0);
            set_resource_attributes(&mut data, &attributes);
            translated.push(data);
        }
    }
    let kind = (ReceiverKind::Pyroscope, Transport::Http);
    for data in translated {
        match hand_off(&*state.consumer, &state.stats.pyroscope_http, kind, data).await {
            Ok(_) => {}
            Err(HandoffError::Invalid(m)) => {
                return Err(Refusal::new(
                    RefusalReason::Invalid,
                    StatusCode::BAD_REQUEST,
                    m,
                ));
            }
            Err(HandoffError::Consumer(e)) => return Err(consume_error(&e)),
        }
    }
    Ok(())
}

/// A Connect error: its JSON body and the HTTP status of its code.
fn connect_error(refusal: &Refusal) -> Response {
    let (code, status) = match refusal.status {
        StatusCode::BAD_REQUEST => ("invalid_argument", StatusCode::BAD_REQUEST),
        StatusCode::PAYLOAD_TOO_LARGE => ("resource_exhausted", StatusCode::TOO_MANY_REQUESTS),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            let mut r = plain::text(StatusCode::UNSUPPORTED_MEDIA_TYPE, &refusal.message);
            r.headers_mut().insert(
                "accept-post",
                HeaderValue::from_static("application/proto, application/json"),
            );
            return r;
        }
        _ => ("unavailable", StatusCode::SERVICE_UNAVAILABLE),
    };
    let body = serde_json::json!({ "code": code, "message": refusal.message }).to_string();
    let mut r = (
        status,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response();
    if let Some(delay) = refusal.retry_after {
        r.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(delay)));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_requests_decode_from_json_as_protobuf_json_writes_them() {
        let r: PushRequest = serde_json::from_str(
            r#"{"series":[{"labels":[{"name":"service_name","value":"a"}],
                "samples":[{"rawProfile":"AQID","ID":"x"}]}]}"#,
        )
        .unwrap();
        assert_eq!(r.series[0].labels[0].value, "a");
        assert_eq!(r.series[0].samples[0].raw_profile, [1, 2, 3]);
        assert_eq!(r.series[0].samples[0].id, "x");
        let bytes = prost::Message::encode_to_vec(&r);
        let back = <PushRequest as prost::Message>::decode(bytes.as_slice()).unwrap();
        assert_eq!(back, r);
    }
}
