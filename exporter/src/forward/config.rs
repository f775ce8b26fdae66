//! `receivers.sentry.upstream`: where the Sentry receiver forwards what SDKs send.

use crate::config::RetryConfig;
use crate::queue_config::{QueueConfig, SettingError};
use profilink_tls::ClientTlsConfig;
use serde::Deserialize;
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
    /// The durable queue of forwarded requests (`enabled`, `storage`, default
    /// `./profilink-data/forward`, `max_size_mib`, default 256, and `fsync`).
    pub sending_queue: QueueConfig,
    /// Retries of 5xx answers and network errors. Default: the Collector's backoff (5 s
    /// growing 1.5× to 30 s) **without** a give-up time (`max_elapsed_time: 0`), so nothing
    /// is lost while upstream is down; the queue's bound is the limit. Keys given here take
    /// the Collector defaults for the keys left out (`max_elapsed_time` 300 s).
    pub retry_on_failure: RetryConfig,
    /// Requests in flight at once, to different projects (default 10). Each project sends one
    /// request at a time, in order.
    pub num_consumers: usize,
    /// TLS of the upstream connection (the system roots by default): the Collector's
    /// `configtls` client settings (`ca_file`, `ca_pem`, `cert_file`/`key_file` for mutual
    /// TLS, `insecure_skip_verify`, `min_version`, `server_name_override`,
    /// `include_system_ca_certs_pool`), as every other exporter takes them.
    pub tls: ClientTlsConfig,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            endpoint: String::new(),
            timeout: Duration::from_secs(30),
            forward_profiles: true,
            sending_queue: QueueConfig::default(),
            retry_on_failure: RetryConfig {
                max_elapsed_time: Duration::ZERO,
                ..RetryConfig::default()
            },
            num_consumers: 10,
            tls: ClientTlsConfig::default(),
        }
    }
}

impl ForwardConfig {
    /// Checks what serde cannot: an endpoint that is an http(s) URL, the queue keys the
    /// upstream takes, positive sizes. The error's key is relative to `upstream`.
    pub fn validate(&self) -> Result<(), SettingError> {
        let e = self.endpoint.trim();
        if e.is_empty() {
            return Err(SettingError::new(
                "endpoint",
                "required (the upstream Sentry or Relay base URL)",
            ));
        }
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            return Err(SettingError::new(
                "endpoint",
                format!("{e:?} is not an http:// or https:// URL"),
            ));
        }
        self.sending_queue.check_forward()?;
        if self.num_consumers == 0 {
            return Err(SettingError::new("num_consumers", "must be at least 1"));
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
        assert!(
            ftp.validate()
                .unwrap_err()
                .to_string()
                .contains("not an http")
        );
        assert!(
            serde_json::from_value::<ForwardConfig>(serde_json::json!({"endpoit": "x"})).is_err()
        );
    }
}
