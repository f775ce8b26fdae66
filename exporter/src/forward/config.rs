//! `receivers.sentry.upstream`: where the Sentry receiver forwards what SDKs send.

use crate::config::RetryConfig;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// The upstream Sentry or Relay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardConfig {
    /// Base URL of the upstream, e.g. `https://o0.ingest.sentry.io` (required); the request's
    /// path (`/api/<project>/envelope/`) and query are appended.
    pub endpoint: String,
    /// Timeout of one request (default 30 s).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Forward `profile` and `profile_chunk` items too (default true); false keeps profiles
    /// out of the forwarded copy (they reach only the receiver's pipelines).
    pub forward_profiles: bool,
    /// The durable queue of forwarded requests.
    pub sending_queue: ForwardQueueConfig,
    /// Retries of 5xx answers and network errors. Default: the Collector's backoff (5 s
    /// growing 1.5× to 30 s) **without** a give-up time (`max_elapsed_time: 0`), so nothing
    /// is lost while upstream is down; the queue's bound is the limit. Keys given here take
    /// the Collector defaults for the keys left out (`max_elapsed_time` 300 s).
    pub retry_on_failure: RetryConfig,
    /// Requests in flight at once, to different projects (default 10). Each project sends one
    /// request at a time, in order.
    pub num_consumers: usize,
    /// TLS of the upstream connection (the system roots by default).
    pub tls: ForwardTlsConfig,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            endpoint: String::new(),
            timeout: Duration::from_secs(30),
            forward_profiles: true,
            sending_queue: ForwardQueueConfig::default(),
            retry_on_failure: RetryConfig {
                max_elapsed_time: Duration::ZERO,
                ..RetryConfig::default()
            },
            num_consumers: 10,
            tls: ForwardTlsConfig::default(),
        }
    }
}

/// `sending_queue` of the upstream.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardQueueConfig {
    /// Persist to disk (default true); false keeps the queue in memory (lost on a crash).
    pub enabled: bool,
    /// Directory of the queue (default `./profilink-data/forward`).
    pub storage: Option<PathBuf>,
    /// Capacity in MiB of queued requests (default 256); when full the receiver answers 503.
    pub max_size_mib: u64,
    /// fsync every append before the SDK is answered (default true).
    pub fsync: bool,
}

impl Default for ForwardQueueConfig {
    fn default() -> Self {
        ForwardQueueConfig {
            enabled: true,
            storage: None,
            max_size_mib: 256,
            fsync: true,
        }
    }
}

impl ForwardQueueConfig {
    /// The queue directory.
    pub fn dir(&self) -> PathBuf {
        self.storage
            .clone()
            .unwrap_or_else(|| PathBuf::from("./profilink-data/forward"))
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.max_size_mib.saturating_mul(1 << 20)
    }
}

/// TLS of the upstream client: the Collector's `configtls` client settings (`ca_file`,
/// `ca_pem`, `cert_file`/`key_file` for mutual TLS, `insecure_skip_verify`, `min_version`,
/// `server_name_override`, `include_system_ca_certs_pool`), as every other exporter takes them.
pub type ForwardTlsConfig = profilink_tls::ClientTlsConfig;

impl ForwardConfig {
    /// Checks what serde cannot: an endpoint that is an http(s) URL, a positive size.
    pub fn validate(&self) -> Result<(), String> {
        let e = self.endpoint.trim();
        if e.is_empty() {
            return Err("endpoint: required (the upstream Sentry or Relay base URL)".into());
        }
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            return Err(format!("endpoint: {e:?} is not an http:// or https:// URL"));
        }
        if self.sending_queue.max_size_mib == 0 {
            return Err("sending_queue.max_size_mib: must be at least 1".into());
        }
        if self.num_consumers == 0 {
            return Err("num_consumers: must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let c: ForwardConfig = serde_json::from_value(
            serde_json::json!({"endpoint": "https://o0.ingest.sentry.io", "timeout": "5s"}),
        )
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert!(c.forward_profiles);
        assert_eq!(c.retry_on_failure.max_elapsed_time, Duration::ZERO);
        assert!(c.validate().is_ok());
        assert!(ForwardConfig::default().validate().is_err());
        let ftp = ForwardConfig {
            endpoint: "ftp://x".into(),
            ..Default::default()
        };
        assert!(ftp.validate().unwrap_err().contains("not an http"));
        assert!(
            serde_json::from_value::<ForwardConfig>(serde_json::json!({"endpoit": "x"})).is_err()
        );
    }
}
