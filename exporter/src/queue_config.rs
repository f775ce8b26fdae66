//! `sending_queue` of the `sentry` and `file` exporters: their durable chunk queue, in the
//! OpenTelemetry Collector's keys (exporterhelper: `enabled`, `num_consumers`, `queue_size`,
//! `sizer`, `block_on_overflow`, `storage`) and profilink's own (`max_size_mib`, `overflow`,
//! `fsync`, `segment_bytes`).
//!
//! The queue holds accumulated chunks and is bounded in bytes, so `queue_size` is honoured with
//! `sizer: bytes`; the Collector's other sizers (`requests`, the default, and `items`) count
//! what this queue does not hold and are refused by [`QueueConfig::check`], which names the key
//! and the alternative, as it does for every value profilink cannot honour.

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::path::PathBuf;
use thiserror::Error;

/// What `export` does when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// Refuse new data with [`profilink_consumer::ExportError::Full`] so receivers answer
    /// UNAVAILABLE / 429 and producers retry (default; the Collector's
    /// `block_on_overflow: false`).
    #[default]
    Backpressure,
    /// Drop the oldest queued chunks (counted, reported as `queue_overflow`).
    DropOldest,
}

/// `sending_queue.sizer`: what `queue_size` counts (the Collector's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSizer {
    /// Requests (the Collector's default): honoured by the OTLP exporters' queue, refused by
    /// the chunk queues (see the module docs).
    #[default]
    Requests,
    /// Items (samples, spans…): refused here, see the module docs.
    Items,
    /// Bytes of queued data: honoured.
    Bytes,
}

impl QueueSizer {
    fn name(self) -> &'static str {
        match self {
            QueueSizer::Requests => "requests",
            QueueSizer::Items => "items",
            QueueSizer::Bytes => "bytes",
        }
    }
}

/// A setting that cannot be used: its key relative to the exporter's section
/// (`sending_queue.sizer`) and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{key}: {message}")]
pub struct SettingError {
    /// The key (`sending_queue.queue_size`).
    pub key: String,
    /// What is wrong, and what to write instead.
    pub message: String,
}

impl SettingError {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> SettingError {
        SettingError {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Capacity when neither `queue_size` (bytes) nor `max_size_mib` is given.
pub(crate) const DEFAULT_QUEUE_MIB: u64 = 256;

/// `sending_queue`: the durable queue in front of the sender. Read the resolved values through
/// [`capacity_bytes`](Self::capacity_bytes), [`overflow`](Self::overflow) and the exporter's
/// `consumers()`, after [`check`](Self::check).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Persist to disk (default true). When false the queue lives in memory only and data
    /// accepted but not yet delivered is lost on a crash.
    pub enabled: bool,
    /// Concurrent deliveries (the Collector's key; the `sentry` exporter also reads its
    /// exporter-level `num_consumers`). Default: the exporter's.
    pub num_consumers: Option<usize>,
    /// Capacity in units of `sizer`; only `sizer: bytes` is available.
    pub queue_size: Option<u64>,
    /// What `queue_size` counts: `bytes` (the Collector's `requests` and `items` are refused).
    pub sizer: Option<QueueSizer>,
    /// The Collector's overflow switch: `false` refuses new data when full (profilink's
    /// `overflow: backpressure`); `true` (wait for room) is refused.
    pub block_on_overflow: Option<bool>,
    /// The Collector's `wait_for_result`: only `false` (answer once queued) is available.
    pub wait_for_result: bool,
    /// The Collector's `sending_queue.batch`: refused (the exporter batches into chunks).
    pub batch: Option<IgnoredAny>,
    /// Directory of the queue's segment files (default `./profilink-data/queue` for Sentry;
    /// `<path>/.queue` for the file exporter). The service also accepts the id of a
    /// `file_storage` extension here and puts the queue in a directory of that extension.
    pub storage: Option<PathBuf>,
    /// Capacity in MiB of queued (unacknowledged) records (default 256): profilink's name,
    /// the same as `sizer: bytes` with `queue_size` in bytes.
    pub max_size_mib: Option<u64>,
    /// What happens when full (default `backpressure`).
    pub overflow: Option<Overflow>,
    /// fsync every append before acknowledging it (default true). Turning it off trades crash
    /// safety on power loss for throughput; process crashes still lose nothing.
    pub fsync: bool,
    /// Segment file size at which a new segment starts (default 16 MiB).
    pub segment_bytes: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            enabled: true,
            num_consumers: None,
            queue_size: None,
            sizer: None,
            block_on_overflow: None,
            wait_for_result: false,
            batch: None,
            storage: None,
            max_size_mib: None,
            overflow: None,
            fsync: true,
            segment_bytes: 16 << 20,
        }
    }
}

impl QueueConfig {
    /// Capacity in bytes: `queue_size` with `sizer: bytes`, else `max_size_mib` (default
    /// 256 MiB).
    pub fn capacity_bytes(&self) -> u64 {
        match (self.sizer, self.queue_size) {
            (Some(QueueSizer::Bytes), Some(bytes)) => bytes,
            _ => self
                .max_size_mib
                .unwrap_or(DEFAULT_QUEUE_MIB)
                .saturating_mul(1 << 20),
        }
    }

    /// What a full queue does: `overflow`, else backpressure (as `block_on_overflow: false`).
    pub fn overflow(&self) -> Overflow {
        self.overflow.unwrap_or_default()
    }

    /// Refuses what this queue cannot honour and keys that disagree, naming the key
    /// (`sending_queue.<key>`) and what to write instead.
    pub fn check(&self) -> Result<(), SettingError> {
        const AT: &str = "sending_queue";
        if self.batch.is_some() {
            return Err(SettingError::new(
                format!("{AT}.batch"),
                "not available: the exporter batches samples into chunks per profiler session \
                 (chunk_duration, chunk_idle_timeout and max_chunk_bytes set their size)",
            ));
        }
        if self.wait_for_result {
            return Err(SettingError::new(
                format!("{AT}.wait_for_result"),
                "true is not available: a request is answered once its data is in the queue \
                 (on disk when enabled), as with false; remove the key",
            ));
        }
        if let Some(sizer @ (QueueSizer::Requests | QueueSizer::Items)) = self.sizer {
            return Err(SettingError::new(
                format!("{AT}.sizer"),
                format!(
                    "{} is not available: this queue holds accumulated chunks and is bounded in \
                     bytes; use `sizer: bytes` with queue_size in bytes, or max_size_mib",
                    sizer.name()
                ),
            ));
        }
        if let Some(size) = self.queue_size {
            if self.sizer.is_none() {
                return Err(SettingError::new(
                    format!("{AT}.queue_size"),
                    "counts requests without a sizer (the Collector's default sizer: requests), \
                     but this queue is bounded in bytes: add `sizer: bytes` and give the size \
                     in bytes, or use max_size_mib",
                ));
            }
            if size == 0 {
                return Err(SettingError::new(
                    format!("{AT}.queue_size"),
                    "must be positive",
                ));
            }
            if let Some(mib) = self.max_size_mib
                && mib.saturating_mul(1 << 20) != size
            {
                return Err(SettingError::new(
                    format!("{AT}.queue_size"),
                    format!(
                        "{size} bytes disagrees with {AT}.max_size_mib: {mib} ({} bytes); give \
                         one of them",
                        mib.saturating_mul(1 << 20)
                    ),
                ));
            }
        }
        if self.max_size_mib == Some(0) {
            return Err(SettingError::new(
                format!("{AT}.max_size_mib"),
                "must be at least 1",
            ));
        }
        match (self.block_on_overflow, self.overflow) {
            (Some(true), _) => {
                return Err(SettingError::new(
                    format!("{AT}.block_on_overflow"),
                    "true is not available: a full queue refuses new data at once (receivers \
                     answer UNAVAILABLE / 503 with Retry-After, so producers retry); remove the \
                     key or set it to false",
                ));
            }
            (Some(false), Some(Overflow::DropOldest)) => {
                return Err(SettingError::new(
                    format!("{AT}.block_on_overflow"),
                    format!(
                        "false (refuse new data when full) disagrees with {AT}.overflow: \
                         drop_oldest; give one of them"
                    ),
                ));
            }
            _ => {}
        }
        if self.num_consumers == Some(0) {
            return Err(SettingError::new(
                format!("{AT}.num_consumers"),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

/// The number of concurrent deliveries from `sending_queue.num_consumers` and the exporter's
/// own `num_consumers` (when it has one), or `default`; an error names both keys when they
/// disagree.
pub(crate) fn consumers(
    queue: &QueueConfig,
    exporter_level: Option<usize>,
    default: usize,
) -> Result<usize, SettingError> {
    match (queue.num_consumers, exporter_level) {
        (Some(q), Some(e)) if q != e => Err(SettingError::new(
            "sending_queue.num_consumers",
            format!("{q} disagrees with num_consumers: {e}; give one of them"),
        )),
        (_, Some(0)) => Err(SettingError::new("num_consumers", "must be at least 1")),
        (Some(n), _) | (None, Some(n)) => Ok(n),
        (None, None) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(yaml: &str) -> QueueConfig {
        serde_json::from_str(yaml).unwrap()
    }

    fn refused(json: &str) -> String {
        queue(json).check().unwrap_err().to_string()
    }

    #[test]
    fn collector_keys_resolve_to_the_same_queue() {
        let q = queue(r#"{"sizer": "bytes", "queue_size": 1048576, "block_on_overflow": false}"#);
        q.check().unwrap();
        assert_eq!(q.capacity_bytes(), 1 << 20);
        assert_eq!(q.overflow(), Overflow::Backpressure);
        let q = queue(r#"{"max_size_mib": 2, "overflow": "drop_oldest"}"#);
        q.check().unwrap();
        assert_eq!(q.capacity_bytes(), 2 << 20);
        assert_eq!(q.overflow(), Overflow::DropOldest);
        let q = queue(r#"{"sizer": "bytes", "queue_size": 2097152, "max_size_mib": 2}"#);
        q.check().unwrap();
        let q = queue("{}");
        q.check().unwrap();
        assert_eq!(q.capacity_bytes(), DEFAULT_QUEUE_MIB << 20);
        assert!(q.enabled && q.fsync);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_key() {
        let cases = [
            (
                r#"{"sizer": "requests"}"#,
                "sending_queue.sizer: requests is not available",
            ),
            (
                r#"{"sizer": "items", "queue_size": 10}"#,
                "sending_queue.sizer: items",
            ),
            (
                r#"{"queue_size": 5000}"#,
                "sending_queue.queue_size: counts requests without a sizer",
            ),
            (
                r#"{"sizer": "bytes", "queue_size": 0}"#,
                "sending_queue.queue_size: must be positive",
            ),
            (
                r#"{"sizer": "bytes", "queue_size": 1000, "max_size_mib": 1}"#,
                "sending_queue.queue_size: 1000 bytes disagrees with sending_queue.max_size_mib: 1",
            ),
            (
                r#"{"block_on_overflow": true}"#,
                "sending_queue.block_on_overflow: true is not available",
            ),
            (
                r#"{"block_on_overflow": false, "overflow": "drop_oldest"}"#,
                "sending_queue.block_on_overflow: false (refuse new data when full) disagrees with sending_queue.overflow",
            ),
            (
                r#"{"wait_for_result": true}"#,
                "sending_queue.wait_for_result: true",
            ),
            (
                r#"{"batch": {"min_size": 10}}"#,
                "sending_queue.batch: not available",
            ),
            (
                r#"{"num_consumers": 0}"#,
                "sending_queue.num_consumers: must be at least 1",
            ),
            (
                r#"{"max_size_mib": 0}"#,
                "sending_queue.max_size_mib: must be at least 1",
            ),
        ];
        for (json, want) in cases {
            let got = refused(json);
            assert!(
                got.starts_with(want),
                "{json}: {got:?} should start with {want:?}"
            );
        }
    }

    #[test]
    fn consumers_come_from_either_level_and_must_agree() {
        let q = queue(r#"{"num_consumers": 8}"#);
        assert_eq!(consumers(&q, None, 4), Ok(8));
        assert_eq!(consumers(&q, Some(8), 4), Ok(8));
        assert_eq!(consumers(&QueueConfig::default(), Some(2), 4), Ok(2));
        assert_eq!(consumers(&QueueConfig::default(), None, 4), Ok(4));
        let e = consumers(&q, Some(2), 4).unwrap_err().to_string();
        assert_eq!(
            e,
            "sending_queue.num_consumers: 8 disagrees with num_consumers: 2; give one of them"
        );
        let e = consumers(&QueueConfig::default(), Some(0), 4).unwrap_err();
        assert_eq!(e.key, "num_consumers");
    }
}
