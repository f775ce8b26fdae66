//! The chunk queue's reading of `sending_queue` (the `sentry` and `file` exporters' durable
//! queue of accumulated chunks).
//!
//! The queue holds accumulated chunks and is bounded in bytes, so `queue_size` is honoured with
//! `sizer: bytes`; the Collector's other sizers (`requests`, the default, and `items`) count
//! what this queue does not hold and are refused by [`QueueConfig::check`], which names the key
//! and the alternative, as it does for every value profilink cannot honour.

use super::{AT, Overflow, QueueConfig, QueueSizer, SettingError};

/// Capacity when neither `queue_size` (bytes) nor `max_size_mib` is given (also the forward
/// queue's).
pub(super) const DEFAULT_QUEUE_MIB: u64 = 256;

/// Segment file size when `segment_bytes` is not given.
const DEFAULT_SEGMENT_BYTES: u64 = 16 << 20;

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

    /// Segment file size: `segment_bytes`, else 16 MiB.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes.unwrap_or(DEFAULT_SEGMENT_BYTES)
    }

    /// Refuses what this queue cannot honour and keys that disagree, naming the key
    /// (`sending_queue.<key>`) and what to write instead.
    pub fn check(&self) -> Result<(), SettingError> {
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
        assert_eq!(q.segment_bytes(), 16 << 20);
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
