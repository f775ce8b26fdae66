//! One OTLP export client for any [`Signal`] (profiles, traces): gRPC (tonic) or HTTP
//! (`POST {endpoint}{HTTP_PATH}`, protobuf), compressed as configured, and one attempt's
//! outcome by the OTLP retry rules ([`crate::request::retry_rules`]).
//!
//! * A delivered request may carry a partial success (protobuf, or OTLP/JSON when the server
//!   answers `application/json`); partial successes are never retried.
//! * Every request of a versioned signal carries the version profilink was built for
//!   ([`Signal::VERSION_METADATA`]: `otlp-profiles-development-version: 1` for profiles, as
//!   gRPC metadata or HTTP header), replacing a configured header of that name: the version
//!   names the schema the body is encoded in, which only profilink knows. A receiver that
//!   does not decode it answers `INVALID_ARGUMENT` / 400, which is not retried.
//!
//! The queue and delivery loop around the client are the request exporter's
//! ([`crate::request`], behind [`crate::otlp`] for profiles and [`crate::traces`] for traces),
//! which retries by [`crate::request::retry_rules::after_failure`].

use crate::client_auth::{AuthSlot, NoToken};
use crate::config::{Compression, OtlpProtocol};
use crate::http::{compress, content_encoding, parse_retry_after, read_response, request_error};
use crate::request::AttemptError;
use crate::request::retry_rules::{classify_grpc_status, classify_http};
use crate::start_error::StartError;
use profilink_proto::signal::Signal;
use profilink_tls::ClientTlsConfig;
use prost::Message;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::{Duration, SystemTime};
use tonic::codec::CompressionEncoding;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::Channel;

/// Largest part of a response body read (for partial successes and logs).
const MAX_RESPONSE_BODY: usize = 64 << 10;

/// Bodies larger than this are compressed on the blocking pool.
const INLINE_COMPRESS_LIMIT: usize = 64 << 10;

/// Largest gRPC response accepted.
const MAX_GRPC_RESPONSE: usize = 4 << 20;

/// `endpoint` with `http://` in front unless it has a scheme.
pub fn with_scheme(endpoint: &str) -> String {
    let e = endpoint.trim();
    if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// The OTLP/HTTP URL of signal `S` for an endpoint (`host:port` or a base URL):
/// `{endpoint}{S::HTTP_PATH}` unless it already ends with the path.
pub fn http_url<S: Signal>(endpoint: &str) -> String {
    let base = with_scheme(endpoint);
    if base.trim_end_matches('/').ends_with(S::HTTP_PATH) {
        base
    } else {
        format!("{}{}", base.trim_end_matches('/'), S::HTTP_PATH)
    }
}

/// Configured `headers` as HTTP headers.
pub fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, StartError> {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|e| StartError::invalid(format!("header name {k:?}"), e))?;
        let value = HeaderValue::from_str(v.trim())
            .map_err(|e| StartError::invalid(format!("value of header {k:?}"), e))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// `map` with signal `S`'s version header (see the module docs).
fn with_version_header<S: Signal>(mut map: HeaderMap) -> HeaderMap {
    if let Some((key, value)) = S::VERSION_METADATA {
        map.insert(
            HeaderName::from_static(key),
            HeaderValue::from_static(value),
        );
    }
    map
}

/// `map` with signal `S`'s version metadata (see the module docs).
fn with_version_metadata<S: Signal>(mut map: MetadataMap) -> MetadataMap {
    if let Some((key, value)) = S::VERSION_METADATA {
        map.insert(
            AsciiMetadataKey::from_static(key),
            AsciiMetadataValue::from_static(value),
        );
    }
    map
}

/// Configured `headers` as gRPC metadata (keys lowercased).
pub fn metadata_map(headers: &BTreeMap<String, String>) -> Result<MetadataMap, StartError> {
    let mut map = MetadataMap::new();
    for (k, v) in headers {
        let key = AsciiMetadataKey::from_str(&k.trim().to_ascii_lowercase())
            .map_err(|e| StartError::invalid(format!("gRPC metadata key {k:?}"), e))?;
        let value = AsciiMetadataValue::from_str(v.trim())
            .map_err(|e| StartError::invalid(format!("value of metadata {k:?}"), e))?;
        map.insert(key, value);
    }
    Ok(map)
}

/// `raw` compressed; large bodies on the blocking pool.
async fn compressed(raw: Vec<u8>, c: Compression) -> Result<Vec<u8>, String> {
    if raw.len() <= INLINE_COMPRESS_LIMIT {
        return compress(&raw, c).map_err(|e| e.to_string());
    }
    tokio::task::spawn_blocking(move || compress(&raw, c))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// What an HTTP server answered to one POST.
#[derive(Debug)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// `X-Sentry-Rate-Limits`, if any.
    pub rate_limits: Option<String>,
    /// `Retry-After`, parsed.
    pub retry_after: Option<Duration>,
    /// `Content-Type` (empty when absent).
    pub content_type: String,
    /// The body's first 64 KiB.
    pub body: Vec<u8>,
}

impl HttpAnswer {
    /// The body's start as text, for messages.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body[..self.body.len().min(512)]).into_owned()
    }
}

/// POSTs `request` as compressed protobuf to `url` with `headers`.
pub async fn post<M: Message>(
    client: &reqwest::Client,
    url: &str,
    headers: &HeaderMap,
    compression: Compression,
    request: &M,
) -> Result<HttpAnswer, AttemptError> {
    let body = compressed(request.encode_to_vec(), compression)
        .await
        .map_err(|e| AttemptError::Permanent(format!("compression failed: {e}")))?;
    let mut rb = client
        .post(url)
        .headers(headers.clone())
        .header("Content-Type", "application/x-protobuf")
        .body(body);
    if let Some(enc) = content_encoding(compression) {
        rb = rb.header("Content-Encoding", enc);
    }
    let resp = rb.send().await.map_err(|e| AttemptError::Retryable {
        after: None,
        // reqwest's error names the URL, which carries no secret (auth is in a header).
        message: format!("request failed: {}", request_error(&e)),
        network: true,
    })?;
    let answer = read_response(resp, MAX_RESPONSE_BODY).await;
    Ok(HttpAnswer {
        status: answer.status,
        rate_limits: answer.rate_limits,
        retry_after: answer
            .retry_after
            .as_deref()
            .and_then(|v| parse_retry_after(v, SystemTime::now())),
        content_type: answer.content_type.unwrap_or_default(),
        body: answer.body,
    })
}

/// Reads signal `S`'s partial success from an OTLP/HTTP response body (OTLP/JSON when the
/// content type says JSON, else protobuf); `None` when there is none or it cannot be read.
pub fn partial_from_body<S: Signal>(content_type: &str, body: &[u8]) -> Option<S::PartialSuccess> {
    if body.is_empty() {
        return None;
    }
    let response = if content_type.contains("json") {
        S::decode_json_response(body).ok()?
    } else {
        S::Response::decode(body).ok()?
    };
    S::into_partial(response)
}

/// Logs a partial success reported by `destination`; the rejected count when there is one
/// to count (a partial success with no rejection and no message is a full success).
pub fn note_partial<S: Signal>(
    partial: Option<&S::PartialSuccess>,
    destination: &str,
) -> Option<u64> {
    let (rejected, message) = S::rejected(partial?);
    if rejected == 0 && message.is_empty() {
        return None;
    }
    tracing::warn!(
        destination,
        signal = S::NAME,
        rejected,
        %message,
        "OTLP partial success"
    );
    Some(u64::try_from(rejected).unwrap_or(0))
}

/// How an [`OtlpClient`] sends.
#[derive(Debug, Clone)]
enum Transport {
    Grpc {
        grpc: tonic::client::Grpc<Channel>,
        metadata: MetadataMap,
    },
    Http {
        client: reqwest::Client,
        headers: HeaderMap,
        compression: Compression,
    },
}

/// Sends export requests of signal `S` to one OTLP endpoint, one attempt at a time (see the
/// module docs).
#[derive(Debug, Clone)]
pub struct OtlpClient<S> {
    transport: Transport,
    auth: AuthSlot,
    timeout: Duration,
    destination: String,
    _signal: PhantomData<fn() -> S>,
}

impl<S: Signal> OtlpClient<S> {
    /// A client of `endpoint` over `protocol`, with `timeout` per request and `tls`:
    /// * gRPC: `endpoint` is `host:port` or a URL; the channel connects lazily, with TLS as
    ///   [`crate::http::grpc_channel`] decides;
    /// * HTTP: `endpoint` is `host:port` or a base URL (see [`http_url`]); the client keeps
    ///   `pool` idle connections ([`crate::http::client`]).
    pub fn new(
        protocol: OtlpProtocol,
        endpoint: &str,
        compression: Compression,
        timeout: Duration,
        headers: &BTreeMap<String, String>,
        pool: usize,
        tls: &ClientTlsConfig,
    ) -> Result<Self, StartError> {
        let (transport, destination) = match protocol {
            OtlpProtocol::Grpc => {
                let url = crate::http::grpc_url(endpoint, tls);
                let channel = crate::http::grpc_channel(endpoint, timeout, tls)?;
                let mut grpc =
                    tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_GRPC_RESPONSE);
                let encoding = match compression {
                    Compression::Gzip => Some(CompressionEncoding::Gzip),
                    Compression::Zstd => Some(CompressionEncoding::Zstd),
                    Compression::None => None,
                };
                if let Some(encoding) = encoding {
                    grpc = grpc.send_compressed(encoding).accept_compressed(encoding);
                }
                let metadata = with_version_metadata::<S>(metadata_map(headers)?);
                (Transport::Grpc { grpc, metadata }, url)
            }
            OtlpProtocol::Http => {
                let url = http_url::<S>(endpoint);
                reqwest::Url::parse(&url)
                    .map_err(|e| StartError::invalid(format!("OTLP endpoint {url:?}"), e))?;
                let transport = Transport::Http {
                    client: crate::http::client(timeout, pool, tls)?,
                    headers: with_version_header::<S>(header_map(headers)?),
                    compression,
                };
                (transport, url)
            }
        };
        Ok(OtlpClient {
            transport,
            auth: AuthSlot::default(),
            timeout,
            destination,
            _signal: PhantomData,
        })
    }

    /// The client with `auth`'s header on every attempt, asked for anew each time (replacing a
    /// configured header of the same name). Without a token at that moment the attempt fails
    /// as retryable and nothing is sent.
    pub fn with_auth(mut self, auth: AuthSlot) -> Self {
        self.auth = auth;
        self
    }

    /// Where requests go (URL; no credentials).
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// Sends `request` once: delivered (with the server's partial success, if any), or how
    /// it failed.
    pub async fn attempt(
        &self,
        request: &S::Request,
    ) -> Result<Option<S::PartialSuccess>, AttemptError> {
        match &self.transport {
            Transport::Grpc { grpc, metadata } => self.grpc_attempt(grpc, metadata, request).await,
            Transport::Http {
                client,
                headers,
                compression,
            } => {
                let headers = self.auth.http(headers).map_err(no_token)?;
                let answer =
                    post(client, &self.destination, &headers, *compression, request).await?;
                classify_http(answer.status, answer.retry_after, &answer.body_text())?;
                Ok(partial_from_body::<S>(&answer.content_type, &answer.body))
            }
        }
    }

    async fn grpc_attempt(
        &self,
        grpc: &tonic::client::Grpc<Channel>,
        metadata: &MetadataMap,
        request: &S::Request,
    ) -> Result<Option<S::PartialSuccess>, AttemptError> {
        let mut grpc = grpc.clone();
        let mut call = tonic::Request::new(request.clone());
        call.set_timeout(self.timeout);
        *call.metadata_mut() = self.auth.grpc(metadata).map_err(no_token)?;
        let exchange = async move {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::from_error(e.into()))?;
            let codec = tonic_prost::ProstCodec::<S::Request, S::Response>::default();
            grpc.unary(call, PathAndQuery::from_static(S::GRPC_PATH), codec)
                .await
        };
        match tokio::time::timeout(self.timeout + Duration::from_secs(1), exchange).await {
            Err(_) => Err(AttemptError::Retryable {
                after: None,
                message: "gRPC request timed out".into(),
                network: true,
            }),
            Ok(Ok(response)) => Ok(S::into_partial(response.into_inner())),
            Ok(Err(status)) => Err(classify_grpc_status(&status)),
        }
    }
}

/// An attempt without a token to send: retried (the token file may have a token again soon),
/// never sent without it.
fn no_token(e: NoToken) -> AttemptError {
    AttemptError::Retryable {
        after: None,
        message: e.to_string(),
        network: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{ExportTracePartialSuccess, ExportTraceServiceResponse};
    use profilink_proto::signal::{Profiles, Traces};

    #[test]
    fn urls() {
        assert_eq!(
            http_url::<Profiles>("127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1development/profiles"
        );
        assert_eq!(
            http_url::<Profiles>("https://x/"),
            "https://x/v1development/profiles"
        );
        assert_eq!(
            http_url::<Profiles>("http://x/v1development/profiles"),
            "http://x/v1development/profiles"
        );
        assert_eq!(
            http_url::<Traces>("127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            http_url::<Traces>("https://x/otlp/"),
            "https://x/otlp/v1/traces"
        );
        assert_eq!(
            http_url::<Traces>("http://x/v1/traces"),
            "http://x/v1/traces"
        );
        // A URL that already ends with the path (and a slash) is taken as it is.
        assert_eq!(
            http_url::<Profiles>("http://x/v1development/profiles/"),
            "http://x/v1development/profiles/"
        );
    }

    #[test]
    fn profiles_requests_carry_the_version_traces_none() {
        let configured: BTreeMap<String, String> = [
            (
                "OTLP-Profiles-Development-Version".to_string(),
                "7".to_string(),
            ),
            ("x-team".to_string(), "a".to_string()),
        ]
        .into();
        let h = with_version_header::<Profiles>(header_map(&configured).unwrap());
        let values: Vec<_> = h
            .get_all("otlp-profiles-development-version")
            .iter()
            .collect();
        assert_eq!(
            values,
            ["1"],
            "the built-in version replaces a configured one"
        );
        assert_eq!(h["x-team"], "a");
        let m = with_version_metadata::<Profiles>(metadata_map(&configured).unwrap());
        let values: Vec<_> = m
            .get_all("otlp-profiles-development-version")
            .iter()
            .collect();
        assert_eq!(values, ["1"]);
        let t = with_version_header::<Traces>(HeaderMap::new());
        assert!(t.is_empty());
        let t = with_version_metadata::<Traces>(MetadataMap::new());
        assert!(t.is_empty());
    }

    #[test]
    fn partial_success_bodies() {
        let pb = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess {
                rejected_spans: 3,
                error_message: "bad".into(),
            }),
        }
        .encode_to_vec();
        assert_eq!(
            partial_from_body::<Traces>("application/x-protobuf", &pb).map(|p| p.rejected_spans),
            Some(3)
        );
        let json = br#"{"partialSuccess":{"rejectedSpans":"2","errorMessage":"x"}}"#;
        let p = partial_from_body::<Traces>("application/json", json).unwrap();
        assert_eq!((p.rejected_spans, p.error_message.as_str()), (2, "x"));
        assert_eq!(partial_from_body::<Traces>("application/json", b"{}"), None);
        assert_eq!(partial_from_body::<Traces>("", b""), None);
        let json = br#"{"partialSuccess":{"rejectedProfiles":4}}"#;
        let p = partial_from_body::<Profiles>("application/json", json).unwrap();
        assert_eq!(note_partial::<Profiles>(Some(&p), "test"), Some(4));
        assert_eq!(note_partial::<Profiles>(None, "test"), None);
    }
}
