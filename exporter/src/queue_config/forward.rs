//! The forward queue's reading of `sending_queue`: the durable queue of the requests the Sentry
//! receiver passes on to its `upstream`, as received. It takes `enabled`, `storage`,
//! `max_size_mib` (default 256) and `fsync`; a full queue makes the receiver answer 503.

use super::{AT, QueueConfig, SettingError};
use std::path::PathBuf;

impl QueueConfig {
    /// The forward queue's directory: `storage`, else `./profilink-data/forward`.
    pub fn forward_dir(&self) -> PathBuf {
        self.storage
            .clone()
            .unwrap_or_else(|| PathBuf::from("./profilink-data/forward"))
    }

    /// Refuses what the forward queue does not take (every key but `enabled`, `storage`,
    /// `max_size_mib` and `fsync`) and a zero `max_size_mib`.
    pub fn check_forward(&self) -> Result<(), SettingError> {
        Self::refuse_set(
            &[
                ("num_consumers", self.num_consumers.is_some()),
                ("queue_size", self.queue_size.is_some()),
                ("sizer", self.sizer.is_some()),
                ("block_on_overflow", self.block_on_overflow.is_some()),
                ("wait_for_result", self.wait_for_result),
                ("batch", self.batch.is_some()),
                ("overflow", self.overflow.is_some()),
                ("segment_bytes", self.segment_bytes.is_some()),
            ],
            "the upstream's queue (it takes enabled, storage, max_size_mib and fsync; the \
             upstream's own num_consumers sets the requests in flight)",
        )?;
        if self.max_size_mib == Some(0) {
            return Err(SettingError::new(
                format!("{AT}.max_size_mib"),
                "must be at least 1",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forward_queue_takes_its_four_keys_and_refuses_the_rest() {
        let q = QueueConfig::default();
        q.check_forward().unwrap();
        assert_eq!(q.capacity_bytes(), 256 << 20);
        assert_eq!(q.forward_dir(), PathBuf::from("./profilink-data/forward"));
        let q: QueueConfig = serde_json::from_str(
            r#"{"enabled": true, "storage": "/f", "max_size_mib": 2, "fsync": false}"#,
        )
        .unwrap();
        q.check_forward().unwrap();
        assert_eq!(
            (q.capacity_bytes(), q.forward_dir()),
            (2 << 20, "/f".into())
        );
        for (json, key) in [
            (r#"{"num_consumers": 2}"#, "sending_queue.num_consumers"),
            (r#"{"overflow": "drop_oldest"}"#, "sending_queue.overflow"),
            (r#"{"max_size_mib": 0}"#, "sending_queue.max_size_mib"),
        ] {
            let q: QueueConfig = serde_json::from_str(json).unwrap();
            assert_eq!(q.check_forward().unwrap_err().key, key, "{json}");
        }
    }
}
