//! `exporters.file`: the file exporter's settings ([`FileExporterConfig`]) with their defaults
//! and checks. The accumulation keys are shared with the Sentry exporter (the crate's
//! `config`); the queue's are `queue_config`'s.

use crate::config::{AccumulateConfig, SparseThreads};
use crate::queue_config::{QueueConfig, SettingError};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `exporters.file`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileExporterConfig {
    /// Output directory of `<chunk_id>.envelope` files (default `./profilink-data`).
    pub path: PathBuf,
    /// Longest sample span of a written chunk (default 60 s).
    #[serde(with = "humantime_serde")]
    pub chunk_duration: Duration,
    /// Write a session's chunk after this long without new samples (default 10 s).
    #[serde(with = "humantime_serde")]
    pub chunk_idle_timeout: Duration,
    /// Samples read out of order still join their window while the session's newest sample is
    /// less than this past the window's end (default 10 min).
    #[serde(with = "humantime_serde")]
    pub chunk_lateness: Duration,
    /// Largest serialized chunk (default 8 MiB).
    pub max_chunk_bytes: u64,
    /// Estimated bytes all open windows may hold (default 256 MiB; the least recently joined
    /// are cut early).
    pub max_open_bytes: u64,
    /// Write the open chunks at shutdown (default true, so a stopped run leaves its files;
    /// see the `sentry` exporter's option for why it defaults to false there).
    pub flush_on_shutdown: bool,
    /// Threads Relay would drop in a merged chunk: `group` (default) or `drop`.
    pub sparse_threads: SparseThreads,
    /// The durable queue (default storage `<path>/.queue`); `sending_queue.num_consumers` sets
    /// how many files are written at once (default 2).
    pub sending_queue: QueueConfig,
    /// Scheduler tick (default 100 ms).
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
    /// Sees every merged chunk once queued (set by the service for its `profile_store`).
    #[serde(skip)]
    pub observer: crate::ObserverSlot,
}

impl Default for FileExporterConfig {
    fn default() -> Self {
        let acc = AccumulateConfig::default();
        FileExporterConfig {
            path: PathBuf::from("./profilink-data"),
            chunk_duration: acc.chunk_duration,
            chunk_idle_timeout: acc.chunk_idle_timeout,
            chunk_lateness: acc.chunk_lateness,
            max_chunk_bytes: acc.max_chunk_bytes,
            max_open_bytes: acc.max_open_bytes,
            flush_on_shutdown: true,
            sparse_threads: acc.sparse_threads,
            sending_queue: QueueConfig::default(),
            tick: Duration::from_millis(100),
            observer: Default::default(),
        }
    }
}

impl FileExporterConfig {
    /// The queue directory: `sending_queue.storage`, else `<path>/.queue`.
    pub fn queue_dir(&self) -> PathBuf {
        self.sending_queue
            .storage
            .clone()
            .unwrap_or_else(|| self.path.join(".queue"))
    }

    /// Files written at once: `sending_queue.num_consumers` (default 2).
    pub fn consumers(&self) -> usize {
        self.sending_queue.num_consumers.unwrap_or(2)
    }

    /// Refuses queue settings profilink cannot honour (the error's key is relative to the
    /// exporter's section).
    pub fn check(&self) -> Result<(), SettingError> {
        self.sending_queue.check()
    }
}

chunk_exporter_parts!(FileExporterConfig);
