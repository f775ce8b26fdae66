//! `sending_queue` of the OTLP exporters (`otlp`, `otlp_http`, for profiles and traces) and of
//! the `sentry` traces exporter, with the Collector's `exporterhelper` keys.
//!
//! ```yaml
//! sending_queue:
//!   enabled: true              # false: no storage (the queue stays in memory)
//!   storage: ./data/otlp-queue # a directory: the durable queue; unset: in memory
//!   sizer: requests            # requests | bytes (what queue_size counts)
//!   queue_size: 1000           # requests (or bytes with sizer: bytes)
//!   num_consumers: 4           # concurrent sends
//!   block_on_overflow: false   # true: a full queue makes export wait instead of refusing
//!   fsync: true                # sync every append before export returns
//!   max_size_mib: 256          # bound in MiB (default 64 in memory, 256 with storage)
//! ```

use profilink_consumer::ExportError;
use serde::Deserialize;
use std::path::PathBuf;

/// Default request bound (the Collector's `queue_size`).
pub const DEFAULT_QUEUE_SIZE: u64 = 1000;
/// Default byte bound of an in-memory queue, in MiB.
pub const DEFAULT_MEMORY_MIB: u64 = 64;
/// Default byte bound of a durable queue, in MiB.
pub const DEFAULT_STORAGE_MIB: u64 = 256;

/// What `queue_size` counts (the Collector's `sizer`): the same setting as the chunk
/// queues'; the OTLP queue honours `requests` (its default) and `bytes`.
pub use crate::queue_config::QueueSizer;

/// `sending_queue` (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SendingQueueConfig {
    /// Use `storage` (default true). `false` keeps the queue in memory whatever `storage` says
    /// (profilink always queues; the Collector's "no queue at all" is not offered).
    pub enabled: bool,
    /// Directory of the durable queue (created if missing; each signal in its own
    /// subdirectory, `profiles` or `traces`). Unset: the queue is in memory and what it holds
    /// is lost if the process dies.
    pub storage: Option<PathBuf>,
    /// What `queue_size` counts (default `requests`).
    pub sizer: QueueSizer,
    /// The bound in `sizer` units (default 1000 requests, or the exporter-level `queue_size`;
    /// with `sizer: bytes`, unset means `max_size_mib`). `max_requests` is accepted as an
    /// alias.
    #[serde(alias = "max_requests")]
    pub queue_size: Option<u64>,
    /// Concurrent sends (default: the exporter-level `num_consumers`).
    pub num_consumers: Option<usize>,
    /// A full queue makes `export` wait for room instead of refusing (default false).
    /// `blocking` is accepted as the Collector's older name.
    #[serde(alias = "blocking")]
    pub block_on_overflow: bool,
    /// The Collector's `wait_for_result`: only `false` is supported.
    pub wait_for_result: bool,
    /// fsync each appended request before `export` returns (default true). Off, a process
    /// crash still loses nothing; a power loss may lose the last requests.
    pub fsync: bool,
    /// Bound in MiB of queued requests (default 64 in memory, 256 with `storage`).
    pub max_size_mib: Option<u64>,
}

impl Default for SendingQueueConfig {
    fn default() -> Self {
        SendingQueueConfig {
            enabled: true,
            storage: None,
            sizer: QueueSizer::Requests,
            queue_size: None,
            num_consumers: None,
            block_on_overflow: false,
            wait_for_result: false,
            fsync: true,
            max_size_mib: None,
        }
    }
}

/// The bounds a queue enforces, from a [`SendingQueueConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Most requests waiting (`None`: unbounded in requests).
    pub max_requests: Option<u64>,
    /// Most bytes waiting.
    pub max_bytes: u64,
    /// Wait for room instead of refusing.
    pub block_on_overflow: bool,
}

impl SendingQueueConfig {
    /// The durable queue's directory for `signal` (`profiles`, `traces`), if any.
    pub fn dir(&self, signal: &str) -> Option<PathBuf> {
        match (&self.storage, self.enabled) {
            (Some(dir), true) => Some(dir.join(signal)),
            _ => None,
        }
    }

    /// The bounds, with `default_queue_size` (the exporter-level `queue_size`) when
    /// `queue_size` is unset; an error for settings profilink cannot honour.
    pub fn limits(&self, default_queue_size: u64) -> Result<QueueLimits, ExportError> {
        if self.wait_for_result {
            return Err(ExportError::Config(
                "sending_queue.wait_for_result: true is not supported (profilink answers once \
                 the request is queued)"
                    .into(),
            ));
        }
        let default_mib = if self.dir("").is_some() {
            DEFAULT_STORAGE_MIB
        } else {
            DEFAULT_MEMORY_MIB
        };
        let mib_bytes = self
            .max_size_mib
            .unwrap_or(default_mib)
            .saturating_mul(1 << 20);
        let (max_requests, max_bytes) = match self.sizer {
            QueueSizer::Requests => (
                Some(self.queue_size.unwrap_or(default_queue_size).max(1)),
                mib_bytes,
            ),
            QueueSizer::Bytes => (
                None,
                self.queue_size.map_or(mib_bytes, |b| b.min(mib_bytes)),
            ),
            QueueSizer::Items => {
                return Err(ExportError::Config(
                    "sending_queue.sizer: items is not supported; use requests or bytes".into(),
                ));
            }
        };
        Ok(QueueLimits {
            max_requests,
            max_bytes,
            block_on_overflow: self.block_on_overflow,
        })
    }

    /// Concurrent sends: `num_consumers` here, else the exporter-level value.
    pub fn consumers(&self, exporter_level: usize) -> usize {
        self.num_consumers.unwrap_or(exporter_level).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_sizer_and_the_aliases() {
        let c: SendingQueueConfig = serde_json::from_str(r#"{"max_requests": 5}"#).unwrap();
        let l = c.limits(1000).unwrap();
        assert_eq!(l.max_requests, Some(5));
        assert_eq!(l.max_bytes, 64 << 20);
        let c: SendingQueueConfig = serde_json::from_str(
            r#"{"storage": "/q", "sizer": "bytes", "queue_size": 4096, "blocking": true}"#,
        )
        .unwrap();
        let l = c.limits(1000).unwrap();
        assert_eq!((l.max_requests, l.max_bytes), (None, 4096));
        assert!(l.block_on_overflow);
        assert_eq!(c.dir("traces"), Some(PathBuf::from("/q/traces")));
        let c = SendingQueueConfig::default();
        assert_eq!(c.limits(7).unwrap().max_requests, Some(7));
        assert_eq!(c.dir("profiles"), None);
        assert_eq!(c.consumers(4), 4);
        let off = SendingQueueConfig {
            enabled: false,
            storage: Some("/q".into()),
            ..Default::default()
        };
        assert_eq!(off.dir("profiles"), None);
        let storage = SendingQueueConfig {
            storage: Some("/q".into()),
            ..Default::default()
        };
        assert_eq!(storage.limits(1).unwrap().max_bytes, 256 << 20);
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        let items: SendingQueueConfig = serde_json::from_str(r#"{"sizer": "items"}"#).unwrap();
        let e = items.limits(1).unwrap_err().to_string();
        assert!(e.contains("sizer: items"), "{e}");
        let wait: SendingQueueConfig =
            serde_json::from_str(r#"{"wait_for_result": true}"#).unwrap();
        let e = wait.limits(1).unwrap_err().to_string();
        assert!(e.contains("wait_for_result"), "{e}");
        assert!(serde_json::from_str::<SendingQueueConfig>(r#"{"bogus": 1}"#).is_err());
    }
}
