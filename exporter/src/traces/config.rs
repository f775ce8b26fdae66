//! Configuration of the traces exporter (`exporters: { otlp/traces: …, otlp_http/traces: …,
//! sentry/traces: … }`).
//!
//! Durations are strings such as `"5s"` or `"300ms"`. Every field has the default shown in its
//! doc, so an empty map is a valid config (the `sentry` kind needs a `dsn`).
//!
//! ```yaml
//! exporters:
//!   otlp_http/traces:
//!     endpoint: http://collector:4318     # POST {endpoint}/v1/traces
//!     compression: gzip                   # gzip | zstd | none
//!     timeout: 5s
//!     headers: { x-tenant: a }
//!     num_consumers: 2
//!     max_request_bytes: 10485760
//!     sending_queue: { queue_size: 1000, max_size_mib: 64, storage: ./data/otlp-queue }
//!     retry_on_failure: { enabled: true, initial_interval: 5s, max_interval: 30s, max_elapsed_time: 300s }
//!   sentry/traces:
//!     dsn: https://<public key>@o1.ingest.sentry.io/123
//!     default_rate_limit: 60s
//! ```

use crate::config::{ClientTlsConfig, Compression, RetryConfig};
use crate::queue_config::QueueConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Default gRPC endpoint of the `otlp` kind.
pub const DEFAULT_GRPC_ENDPOINT: &str = "127.0.0.1:4317";
/// Default endpoint of the `otlp_http` kind.
pub const DEFAULT_HTTP_ENDPOINT: &str = "http://127.0.0.1:4318";
/// Default largest uncompressed request body (10 MiB, below Sentry's 12 MiB
/// `max_container_size`).
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 10 << 20;

/// `otlp/traces` (gRPC) and `otlp_http/traces` (HTTP/protobuf).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpTracesConfig {
    /// `host:port` or a URL. Default `127.0.0.1:4317` for gRPC and `http://127.0.0.1:4318` for
    /// HTTP. HTTP requests go to `{endpoint}/v1/traces` (unless the endpoint already ends with
    /// `/v1/traces`).
    pub endpoint: Option<String>,
    /// gzip (default), zstd or none (gRPC message compression or HTTP `Content-Encoding`).
    pub compression: Compression,
    /// Per-request timeout (default 5 s).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// TLS (gRPC: on unless `insecure: true` or an `http://` endpoint; HTTP: per the URL).
    pub tls: ClientTlsConfig,
    /// Extra request headers / gRPC metadata (names must be valid header names).
    pub headers: BTreeMap<String, String>,
    /// Backoff for retryable failures (OTLP rules).
    pub retry_on_failure: RetryConfig,
    /// Concurrent requests (default 2).
    pub num_consumers: usize,
    /// The sending queue (in memory, or durable with `storage`).
    pub sending_queue: QueueConfig,
    /// Requests whose uncompressed protobuf is larger are split by resource, scope and span
    /// (default 10 MiB; 0 = never split).
    pub max_request_bytes: u64,
    /// The authentication header of every request, asked for at each attempt (set by the
    /// service from the exporter's `auth`; not read from YAML).
    #[serde(skip)]
    pub auth: crate::AuthSlot,
}

impl Default for OtlpTracesConfig {
    fn default() -> Self {
        OtlpTracesConfig {
            endpoint: None,
            compression: Compression::Gzip,
            timeout: Duration::from_secs(5),
            tls: ClientTlsConfig::default(),
            headers: BTreeMap::new(),
            retry_on_failure: RetryConfig::default(),
            num_consumers: 2,
            sending_queue: QueueConfig::default(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            auth: Default::default(),
        }
    }
}

/// `sentry/traces`: Sentry's OTLP traces endpoint
/// (`POST {scheme}://{host}[:port]{path}api/{project_id}/integration/otlp/v1/traces`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryTracesConfig {
    /// The DSN (`https://<public key>@host[:port][/path]/<project id>`); required.
    pub dsn: Option<String>,
    /// gzip (default), zstd or none.
    pub compression: Compression,
    /// Per-request timeout (default 30 s, as the Sentry SDKs).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// TLS to Sentry (private CAs, client certificates); system roots by default.
    pub tls: ClientTlsConfig,
    /// Backoff for 408, 5xx, timeouts and connection errors.
    pub retry_on_failure: RetryConfig,
    /// Concurrent requests (default 2).
    pub num_consumers: usize,
    /// The sending queue (in memory, or durable with `storage`).
    pub sending_queue: QueueConfig,
    /// Requests whose uncompressed protobuf is larger are split by resource, scope and span
    /// (default 10 MiB, below Sentry's 12 MiB limit; 0 = never split).
    pub max_request_bytes: u64,
    /// A 429 without `X-Sentry-Rate-Limits` or `Retry-After` blocks for this long (default 60 s).
    #[serde(with = "humantime_serde")]
    pub default_rate_limit: Duration,
}

impl Default for SentryTracesConfig {
    fn default() -> Self {
        SentryTracesConfig {
            dsn: None,
            compression: Compression::Gzip,
            timeout: Duration::from_secs(30),
            tls: ClientTlsConfig::default(),
            retry_on_failure: RetryConfig::default(),
            num_consumers: 2,
            sending_queue: QueueConfig::default(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            default_rate_limit: Duration::from_secs(60),
        }
    }
}

/// Which traces exporter to start. Externally tagged when deserialized
/// (`{otlp_http: {endpoint: …}}`); the service usually builds it from the exporter key's kind.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TracesExporterConfig {
    /// OTLP over gRPC (`TraceService/Export`).
    Otlp(OtlpTracesConfig),
    /// OTLP over HTTP/protobuf (`POST {endpoint}/v1/traces`).
    OtlpHttp(OtlpTracesConfig),
    /// Sentry's OTLP traces endpoint, authenticated by the DSN's public key.
    Sentry(SentryTracesConfig),
}

impl TracesExporterConfig {
    /// The exporter kind as written in the config (`otlp`, `otlp_http`, `sentry`).
    pub fn kind(&self) -> &'static str {
        match self {
            TracesExporterConfig::Otlp(_) => "otlp",
            TracesExporterConfig::OtlpHttp(_) => "otlp_http",
            TracesExporterConfig::Sentry(_) => "sentry",
        }
    }

    /// The sending queue settings.
    pub fn sending_queue(&self) -> &QueueConfig {
        match self {
            TracesExporterConfig::Otlp(c) | TracesExporterConfig::OtlpHttp(c) => &c.sending_queue,
            TracesExporterConfig::Sentry(c) => &c.sending_queue,
        }
    }

    /// Concurrent requests (`sending_queue.num_consumers`, else `num_consumers`).
    pub fn num_consumers(&self) -> usize {
        let exporter_level = match self {
            TracesExporterConfig::Otlp(c) | TracesExporterConfig::OtlpHttp(c) => c.num_consumers,
            TracesExporterConfig::Sentry(c) => c.num_consumers,
        };
        self.sending_queue().consumers(exporter_level)
    }

    /// The split threshold (0 = never split).
    pub fn max_request_bytes(&self) -> u64 {
        match self {
            TracesExporterConfig::Otlp(c) | TracesExporterConfig::OtlpHttp(c) => {
                c.max_request_bytes
            }
            TracesExporterConfig::Sentry(c) => c.max_request_bytes,
        }
    }

    /// The retry settings.
    pub fn retry_on_failure(&self) -> &RetryConfig {
        match self {
            TracesExporterConfig::Otlp(c) | TracesExporterConfig::OtlpHttp(c) => {
                &c.retry_on_failure
            }
            TracesExporterConfig::Sentry(c) => &c.retry_on_failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_kinds() {
        let c = OtlpTracesConfig::default();
        assert_eq!(c.num_consumers, 2);
        assert_eq!(c.max_request_bytes, 10 << 20);
        assert_eq!(c.sending_queue.limits(1000).unwrap().max_bytes, 64 << 20);
        assert_eq!(c.retry_on_failure.initial_interval, Duration::from_secs(5));
        let s = SentryTracesConfig::default();
        assert_eq!(s.default_rate_limit, Duration::from_secs(60));
        assert_eq!(TracesExporterConfig::Sentry(s).kind(), "sentry");
        assert_eq!(TracesExporterConfig::OtlpHttp(c).kind(), "otlp_http");
    }

    #[test]
    fn deserializes_tagged_and_plain() {
        let c: TracesExporterConfig = serde_json::from_str(
            r#"{"otlp_http": {"endpoint": "http://x:4318", "timeout": "2s", "compression": "zstd",
                "sending_queue": {"max_requests": 5}}}"#,
        )
        .unwrap();
        let TracesExporterConfig::OtlpHttp(h) = &c else {
            panic!("{c:?}")
        };
        assert_eq!(h.endpoint.as_deref(), Some("http://x:4318"));
        assert_eq!(h.timeout, Duration::from_secs(2));
        assert_eq!(h.compression, Compression::Zstd);
        assert_eq!(h.sending_queue.queue_size, Some(5));
        assert_eq!(h.sending_queue.max_size_mib, None);
        let s: SentryTracesConfig =
            serde_json::from_str(r#"{"dsn": "https://k@h/1", "default_rate_limit": "1m"}"#)
                .unwrap();
        assert_eq!(s.default_rate_limit, Duration::from_secs(60));
        assert!(serde_json::from_str::<SentryTracesConfig>(r#"{"endpoint": "x"}"#).is_err());
    }
}
