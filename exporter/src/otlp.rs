//! The OTLP exporter (the way back, Sentry → OTLP): gRPC (tonic, gzip) or HTTP
//! (`POST {endpoint}/v1development/profiles`, protobuf, gzip).
//!
//! Retry rules follow the OTLP specification and the Collector's `otlpexporter`:
//! * gRPC: `CANCELLED`, `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `UNAVAILABLE` and
//!   `DATA_LOSS` are retried; `RESOURCE_EXHAUSTED` only when the status carries
//!   `google.rpc.RetryInfo`; the wait is the larger of the backoff and `RetryInfo.retry_delay`; every
//!   other code is permanent.
//! * HTTP: 429, 502, 503 and 504 are retried, honouring `Retry-After`; other statuses are
//!   permanent. Connection errors and timeouts are retried on both transports.
//!
//! Partial successes are never retried; they are logged (`rejected_profiles` and the message)
//! and counted. Requests wait in a bounded in-memory queue (`queue_size`); `export` answers
//! [`ExportError::Full`] when it is full.

use crate::ExportError;
use crate::config::{Compression, OtlpExporterConfig, OtlpProtocol, RetryConfig};
use crate::http::{compress, content_encoding, parse_retry_after};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::retry::Backoff;
use profilink_proto::otlp::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    HTTP_PATH, profiles_service_client::ProfilesServiceClient,
};
use prost::Message;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;
use tonic_types::StatusExt;

/// How one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptError {
    /// Worth retrying, after the server's delay if it gave one.
    Retryable {
        /// Server-requested delay.
        after: Option<Duration>,
        /// Description.
        message: String,
        /// True for transport failures (no response).
        network: bool,
    },
    /// Not worth retrying.
    Permanent(String),
}

/// Classifies a gRPC status by the OTLP rules; `retry_info` is `RetryInfo.retry_delay` when
/// the status carried one (`Some(None)`: RetryInfo without a delay).
pub fn classify_grpc(
    code: Code,
    retry_info: Option<Option<Duration>>,
    message: &str,
) -> AttemptError {
    let msg = format!("gRPC {code:?}: {message}");
    let retryable = matches!(
        code,
        Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss
    ) || (code == Code::ResourceExhausted && retry_info.is_some());
    if retryable {
        AttemptError::Retryable {
            after: retry_info.flatten(),
            message: msg,
            network: false,
        }
    } else {
        AttemptError::Permanent(msg)
    }
}

/// Classifies an HTTP status by the OTLP rules (`Ok(())` for 2xx).
pub fn classify_http(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> Result<(), AttemptError> {
    match status {
        200..=299 => Ok(()),
        429 | 502 | 503 | 504 => Err(AttemptError::Retryable {
            after: retry_after,
            message: format!("HTTP {status}: {body}"),
            network: false,
        }),
        _ => Err(AttemptError::Permanent(format!("HTTP {status}: {body}"))),
    }
}

#[derive(Clone)]
enum Client {
    Grpc(ProfilesServiceClient<Channel>),
    Http {
        client: reqwest::Client,
        url: String,
    },
}

struct Shared {
    client: Client,
    cfg: OtlpExporterConfig,
    metrics: Arc<ExporterMetrics>,
}

fn with_scheme(endpoint: &str) -> String {
    let e = endpoint.trim();
    if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// The OTLP/HTTP URL for an endpoint (`host:port` or a base URL).
pub fn http_url(endpoint: &str) -> String {
    let base = with_scheme(endpoint);
    if base.ends_with(HTTP_PATH) {
        base
    } else {
        format!("{}{HTTP_PATH}", base.trim_end_matches('/'))
    }
}

impl Shared {
    fn record_partial(&self, partial: Option<ExportProfilesPartialSuccess>) {
        let Some(p) = partial else { return };
        if p.rejected_profiles == 0 && p.error_message.is_empty() {
            return;
        }
        ExporterMetrics::add(&self.metrics.partial_successes, 1);
        ExporterMetrics::add(
            &self.metrics.rejected_profiles,
            u64::try_from(p.rejected_profiles).unwrap_or(0),
        );
        tracing::warn!(
            rejected_profiles = p.rejected_profiles,
            message = %p.error_message,
            "OTLP partial success"
        );
    }

    async fn attempt(&self, req: &ExportProfilesServiceRequest) -> Result<(), AttemptError> {
        match &self.client {
            Client::Grpc(client) => {
                let mut client = client.clone();
                let mut request = tonic::Request::new(req.clone());
                request.set_timeout(self.cfg.timeout);
                for (k, v) in &self.cfg.headers {
                    if let (Ok(k), Ok(v)) = (
                        k.to_ascii_lowercase()
                            .parse::<tonic::metadata::MetadataKey<_>>(),
                        v.parse(),
                    ) {
                        request.metadata_mut().insert(k, v);
                    }
                }
                let fut = client.export(request);
                match tokio::time::timeout(self.cfg.timeout + Duration::from_secs(1), fut).await {
                    Err(_) => Err(AttemptError::Retryable {
                        after: None,
                        message: "gRPC request timed out".into(),
                        network: true,
                    }),
                    Ok(Ok(resp)) => {
                        self.record_partial(resp.into_inner().partial_success);
                        Ok(())
                    }
                    Ok(Err(status)) => {
                        let retry_info = status.get_details_retry_info().map(|r| r.retry_delay);
                        let err = classify_grpc(status.code(), retry_info, status.message());
                        // A transport failure shows up as UNAVAILABLE without a server message.
                        Err(match err {
                            AttemptError::Retryable { after, message, .. } => {
                                AttemptError::Retryable {
                                    after,
                                    network: status.code() == Code::Unavailable,
                                    message,
                                }
                            }
                            p => p,
                        })
                    }
                }
            }
            Client::Http { client, url } => {
                let raw = req.encode_to_vec();
                let c = self.cfg.compression;
                let body = tokio::task::spawn_blocking(move || compress(&raw, c))
                    .await
                    .map_err(|e| AttemptError::Permanent(e.to_string()))?
                    .map_err(|e| AttemptError::Permanent(e.to_string()))?;
                let mut rb = client
                    .post(url)
                    .header("Content-Type", "application/x-protobuf")
                    .body(body);
                if let Some(enc) = content_encoding(self.cfg.compression) {
                    rb = rb.header("Content-Encoding", enc);
                }
                for (k, v) in &self.cfg.headers {
                    rb = rb.header(k, v);
                }
                let resp = rb.send().await.map_err(|e| AttemptError::Retryable {
                    after: None,
                    message: format!(
                        "request to {url} failed: {}",
                        crate::http::request_error(&e)
                    ),
                    network: true,
                })?;
                let status = resp.status().as_u16();
                let retry_after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, SystemTime::now()));
                let bytes = resp.bytes().await.unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
                classify_http(status, retry_after, &text)?;
                match ExportProfilesServiceResponse::decode(bytes.as_ref()) {
                    Ok(r) => self.record_partial(r.partial_success),
                    Err(e) => {
                        tracing::debug!(error = %e, "OTLP/HTTP response body is not a protobuf response")
                    }
                }
                Ok(())
            }
        }
    }

    async fn send_with_retry(&self, req: ExportProfilesServiceRequest) {
        let retry: &RetryConfig = &self.cfg.retry_on_failure;
        let mut backoff = Backoff::new(retry);
        loop {
            match self.attempt(&req).await {
                Ok(()) => {
                    ExporterMetrics::add(&self.metrics.sent_chunks, 1);
                    return;
                }
                Err(AttemptError::Permanent(message)) => {
                    ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                    self.metrics.add_dropped(DiscardReason::SendError, 1);
                    tracing::warn!(%message, "OTLP export refused; not retrying");
                    return;
                }
                Err(AttemptError::Retryable {
                    after,
                    message,
                    network,
                }) => {
                    ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                    match backoff.next(retry, Instant::now(), after) {
                        Some(wait) => {
                            ExporterMetrics::add(&self.metrics.retries, 1);
                            tracing::debug!(%message, ?wait, "OTLP export failed; retrying");
                            tokio::time::sleep(wait).await;
                        }
                        None => {
                            let reason = if network {
                                DiscardReason::NetworkError
                            } else {
                                DiscardReason::SendError
                            };
                            self.metrics.add_dropped(reason, 1);
                            tracing::warn!(%message, "OTLP export failed and retries are exhausted; request dropped");
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Sends OTLP profiles requests. See the module docs.
pub struct OtlpExporter {
    tx: Option<mpsc::Sender<ExportProfilesServiceRequest>>,
    rx: Arc<Mutex<mpsc::Receiver<ExportProfilesServiceRequest>>>,
    workers: Vec<JoinHandle<()>>,
    metrics: Arc<ExporterMetrics>,
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

impl OtlpExporter {
    /// Builds the client (connections are made lazily) and starts `num_consumers` senders.
    pub async fn start(cfg: OtlpExporterConfig) -> Result<Self, ExportError> {
        let client = match cfg.protocol {
            OtlpProtocol::Grpc => {
                let channel = crate::http::grpc_channel(&cfg.endpoint, cfg.timeout, &cfg.tls)?;
                let mut c = ProfilesServiceClient::new(channel).max_decoding_message_size(4 << 20);
                match cfg.compression {
                    Compression::Gzip => {
                        c = c
                            .send_compressed(CompressionEncoding::Gzip)
                            .accept_compressed(CompressionEncoding::Gzip);
                    }
                    Compression::Zstd => {
                        c = c
                            .send_compressed(CompressionEncoding::Zstd)
                            .accept_compressed(CompressionEncoding::Zstd);
                    }
                    Compression::None => {}
                }
                Client::Grpc(c)
            }
            OtlpProtocol::Http => {
                let client = crate::http::client(cfg.timeout, cfg.num_consumers, &cfg.tls)?;
                Client::Http {
                    client,
                    url: http_url(&cfg.endpoint),
                }
            }
        };
        let metrics = Arc::new(ExporterMetrics::default());
        let (tx, rx) = mpsc::channel(cfg.queue_size.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared {
            client,
            cfg: cfg.clone(),
            metrics: metrics.clone(),
        });
        let workers = (0..cfg.num_consumers.max(1))
            .map(|_| {
                let rx = rx.clone();
                let shared = shared.clone();
                tokio::spawn(async move {
                    loop {
                        let next = rx.lock().await.recv().await;
                        match next {
                            Some(req) => shared.send_with_retry(req).await,
                            None => return,
                        }
                    }
                })
            })
            .collect();
        Ok(OtlpExporter {
            tx: Some(tx),
            rx,
            workers,
            metrics,
        })
    }

    /// Queues a request; [`ExportError::Full`] when `queue_size` requests are waiting.
    pub async fn export(&self, req: ExportProfilesServiceRequest) -> Result<(), ExportError> {
        let Some(tx) = &self.tx else {
            return Err(ExportError::Closed);
        };
        match tx.try_send(req) {
            Ok(()) => {
                ExporterMetrics::add(&self.metrics.accepted_chunks, 1);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                ExporterMetrics::add(&self.metrics.refused_full, 1);
                Err(ExportError::Full {
                    retry_after: Duration::from_secs(1),
                })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ExportError::Closed),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// Stops accepting, lets queued and in-flight requests finish within `deadline`, then
    /// stops; requests still waiting are dropped and counted (this exporter's queue is in
    /// memory).
    pub async fn shutdown(mut self, deadline: Duration) {
        self.tx = None;
        let workers = std::mem::take(&mut self.workers);
        let aborts: Vec<_> = workers.iter().map(|w| w.abort_handle()).collect();
        let all = async {
            for w in workers {
                let _ = w.await;
            }
        };
        if tokio::time::timeout(deadline, all).await.is_err() {
            for a in aborts {
                a.abort();
            }
            let mut rx = self.rx.lock().await;
            let mut left = 0u64;
            while rx.try_recv().is_ok() {
                left += 1;
            }
            if left > 0 {
                self.metrics.add_dropped(DiscardReason::NetworkError, left);
                tracing::warn!(
                    requests = left,
                    "OTLP exporter shut down with unsent requests"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_retry_rules() {
        for code in [
            Code::Cancelled,
            Code::DeadlineExceeded,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unavailable,
            Code::DataLoss,
        ] {
            assert!(matches!(
                classify_grpc(code, None, ""),
                AttemptError::Retryable { .. }
            ));
        }
        assert!(matches!(
            classify_grpc(Code::ResourceExhausted, None, ""),
            AttemptError::Permanent(_)
        ));
        assert_eq!(
            classify_grpc(
                Code::ResourceExhausted,
                Some(Some(Duration::from_secs(3))),
                "x"
            ),
            AttemptError::Retryable {
                after: Some(Duration::from_secs(3)),
                message: "gRPC ResourceExhausted: x".into(),
                network: false
            }
        );
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Internal,
        ] {
            assert!(matches!(
                classify_grpc(code, None, ""),
                AttemptError::Permanent(_)
            ));
        }
    }

    #[test]
    fn http_retry_rules_and_url() {
        assert!(classify_http(200, None, "").is_ok());
        for s in [429, 502, 503, 504] {
            assert!(matches!(
                classify_http(s, None, ""),
                Err(AttemptError::Retryable { .. })
            ));
        }
        for s in [400, 401, 404, 413, 500] {
            assert!(matches!(
                classify_http(s, None, ""),
                Err(AttemptError::Permanent(_))
            ));
        }
        assert_eq!(
            http_url("127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1development/profiles"
        );
        assert_eq!(http_url("https://x/"), "https://x/v1development/profiles");
        assert_eq!(
            http_url("http://x/v1development/profiles"),
            "http://x/v1development/profiles"
        );
    }
}
