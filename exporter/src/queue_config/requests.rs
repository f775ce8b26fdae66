//! The request queue's reading of `sending_queue`: the sending queue of the OTLP exporters
//! (`otlp`, `otlp_http`, for profiles and traces), of the `sentry` traces exporter and of
//! profilink-kafka's exporter, with the Collector's `exporterhelper` keys.
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

use super::{AT, QueueConfig, QueueSizer, SettingError};
use std::path::PathBuf;

/// Default request bound (the Collector's `queue_size`).
pub(crate) const DEFAULT_QUEUE_SIZE: u64 = 1000;
/// Default byte bound of an in-memory queue, in MiB.
const DEFAULT_MEMORY_MIB: u64 = 64;
/// Default byte bound of a durable queue, in MiB.
const DEFAULT_STORAGE_MIB: u64 = 256;

/// The bounds a request queue enforces, from a [`QueueConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Most requests waiting (`None`: unbounded in requests).
    pub max_requests: Option<u64>,
    /// Most bytes waiting.
    pub max_bytes: u64,
    /// Wait for room instead of refusing.
    pub block_on_overflow: bool,
}

impl QueueConfig {
    /// The durable request queue's directory for `signal` (`profiles`, `traces`), if any.
    pub fn dir(&self, signal: &str) -> Option<PathBuf> {
        match (&self.storage, self.enabled) {
            (Some(dir), true) => Some(dir.join(signal)),
            _ => None,
        }
    }

    /// What `queue_size` counts in the request queue: `sizer`, else requests.
    pub fn request_sizer(&self) -> QueueSizer {
        self.sizer.unwrap_or(QueueSizer::Requests)
    }

    /// Refuses the keys only the chunk queue has (`batch`, `overflow`, `segment_bytes`).
    pub fn check_request_keys(&self) -> Result<(), SettingError> {
        Self::refuse_set(
            &[
                ("batch", self.batch.is_some()),
                ("overflow", self.overflow.is_some()),
                ("segment_bytes", self.segment_bytes.is_some()),
            ],
            "this exporter's sending queue (a queue of requests, sent as received)",
        )
    }

    /// The request queue's bounds, with `default_queue_size` (the exporter-level
    /// `queue_size`) when `queue_size` is unset; an error for settings profilink cannot
    /// honour.
    pub fn limits(&self, default_queue_size: u64) -> Result<QueueLimits, SettingError> {
        self.check_request_keys()?;
        if self.wait_for_result {
            return Err(SettingError::new(
                format!("{AT}.wait_for_result"),
                "true is not supported (profilink answers once the request is queued)",
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
        let (max_requests, max_bytes) = match self.request_sizer() {
            QueueSizer::Requests => (
                Some(self.queue_size.unwrap_or(default_queue_size).max(1)),
                mib_bytes,
            ),
            QueueSizer::Bytes => (
                None,
                self.queue_size.map_or(mib_bytes, |b| b.min(mib_bytes)),
            ),
            QueueSizer::Items => {
                return Err(SettingError::new(
                    format!("{AT}.sizer"),
                    "items is not supported; use requests or bytes",
                ));
            }
        };
        Ok(QueueLimits {
            max_requests,
            max_bytes,
            block_on_overflow: self.block_on_overflow.unwrap_or(false),
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
        let c: QueueConfig = serde_json::from_str(r#"{"max_requests": 5}"#).unwrap();
        let l = c.limits(1000).unwrap();
        assert_eq!(l.max_requests, Some(5));
        assert_eq!(l.max_bytes, 64 << 20);
        let c: QueueConfig = serde_json::from_str(
            r#"{"storage": "/q", "sizer": "bytes", "queue_size": 4096, "blocking": true}"#,
        )
        .unwrap();
        let l = c.limits(1000).unwrap();
        assert_eq!((l.max_requests, l.max_bytes), (None, 4096));
        assert!(l.block_on_overflow);
        assert_eq!(c.dir("traces"), Some(PathBuf::from("/q/traces")));
        let c = QueueConfig::default();
        assert_eq!(c.limits(7).unwrap().max_requests, Some(7));
        assert_eq!(c.dir("profiles"), None);
        assert_eq!(c.consumers(4), 4);
        let off = QueueConfig {
            enabled: false,
            storage: Some("/q".into()),
            ..Default::default()
        };
        assert_eq!(off.dir("profiles"), None);
        let storage = QueueConfig {
            storage: Some("/q".into()),
            ..Default::default()
        };
        assert_eq!(storage.limits(1).unwrap().max_bytes, 256 << 20);
    }

    #[test]
    fn unsupported_settings_are_refused_by_name() {
        let items: QueueConfig = serde_json::from_str(r#"{"sizer": "items"}"#).unwrap();
        let e = items.limits(1).unwrap_err().to_string();
        assert!(e.contains("sizer: items"), "{e}");
        let wait: QueueConfig = serde_json::from_str(r#"{"wait_for_result": true}"#).unwrap();
        let e = wait.limits(1).unwrap_err().to_string();
        assert!(e.contains("wait_for_result"), "{e}");
        assert!(serde_json::from_str::<QueueConfig>(r#"{"bogus": 1}"#).is_err());
        for key in [
            r#"{"overflow": "drop_oldest"}"#,
            r#"{"segment_bytes": 1024}"#,
            r#"{"batch": {}}"#,
        ] {
            let c: QueueConfig = serde_json::from_str(key).unwrap();
            let e = c.limits(1).unwrap_err();
            assert!(e.message.starts_with("not available"), "{key}: {e}");
        }
    }
}
