//! `exporters.otlp`: the OTLP profiles exporter's settings ([`OtlpExporterConfig`]) with their
//! defaults and the sending queue they give. The transport choice ([`OtlpProtocol`]),
//! compression, TLS and retry keys are shared with the traces exporter (the crate's `config`);
//! the queue's are `queue_config`'s.

use crate::config::{ClientTlsConfig, Compression, OtlpProtocol, RetryConfig};
use crate::queue_config::{QueueConfig, QueueSizer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// `exporters.otlp`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpExporterConfig {
    /// `host:port` or a URL (`http://host:port`); default `127.0.0.1:4317`.
    pub endpoint: String,
    /// grpc (default) or http.
    pub protocol: OtlpProtocol,
    /// gzip (default), zstd or none.
    pub compression: Compression,
    /// Per-request timeout (default 5 s; the service makes it 30 s for `protocol: http`, as the
    /// Collector's `otlphttp` exporter).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// TLS (gRPC: on unless `insecure: true` or an `http://` endpoint; HTTP: per the URL).
    pub tls: ClientTlsConfig,
    /// Backoff for retryable failures.
    pub retry_on_failure: RetryConfig,
    /// Concurrent requests (default 4); `sending_queue.num_consumers` wins when set.
    pub num_consumers: usize,
    /// Requests waiting to be sent (default 1000); `sending_queue.queue_size` wins when set.
    pub queue_size: usize,
    /// The sending queue: in memory, or durable with `storage` (the Collector's
    /// `sending_queue` keys; the request queue's, see [`QueueConfig::limits`]).
    pub sending_queue: QueueConfig,
    /// Extra request headers / gRPC metadata.
    pub headers: BTreeMap<String, String>,
    /// The authentication header of every request, asked for at each attempt (set by the
    /// service from `auth: { authenticator: ... }`; not read from YAML).
    #[serde(skip)]
    pub auth: crate::AuthSlot,
}

impl OtlpExporterConfig {
    /// `sending_queue` with the exporter-level aliases (`queue_size`, `num_consumers`) folded
    /// in where it leaves them unset: the queue settings of this exporter's traces instance.
    pub fn effective_sending_queue(&self) -> QueueConfig {
        let mut q = self.sending_queue.clone();
        if q.request_sizer() == QueueSizer::Requests {
            q.queue_size.get_or_insert(self.queue_size as u64);
        }
        q.num_consumers.get_or_insert(self.num_consumers);
        q
    }
}

impl Default for OtlpExporterConfig {
    fn default() -> Self {
        OtlpExporterConfig {
            endpoint: "127.0.0.1:4317".into(),
            protocol: OtlpProtocol::Grpc,
            compression: Compression::Gzip,
            timeout: Duration::from_secs(5),
            tls: ClientTlsConfig::default(),
            retry_on_failure: RetryConfig::default(),
            num_consumers: 4,
            queue_size: 1000,
            sending_queue: Default::default(),
            headers: BTreeMap::new(),
            auth: Default::default(),
        }
    }
}
