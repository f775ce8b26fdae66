//! `sending_queue`: the one settings type ([`QueueConfig`]) of every exporter's queue, in the
//! OpenTelemetry Collector's keys (exporterhelper: `enabled`, `num_consumers`, `queue_size`,
//! `sizer`, `block_on_overflow`, `wait_for_result`, `batch`, `storage`) and profilink's own
//! (`max_size_mib`, `overflow`, `fsync`, `segment_bytes`).
//!
//! Three queues read it, each honouring the keys that mean something for what it holds and
//! refusing the others by name (never ignoring them):
//!
//! | queue | exporters | keys | file |
//! | --- | --- | --- | --- |
//! | chunk queue | `sentry`, `file` | all (`queue_size` with `sizer: bytes` only) | `chunks.rs` |
//! | request queue | `otlp`, `otlp_http`, traces, `kafka` | all but `batch`, `overflow`, `segment_bytes` | `requests.rs` |
//! | forward queue | the Sentry receiver's `upstream` | `enabled`, `storage`, `max_size_mib`, `fsync` | `forward.rs` |
//!
//! Where the queues' defaults differ (how many consumers, the bound when nothing is given,
//! where the queue lives), the value is read through the queue's accessor with the exporter's
//! default, so an unset key stays unset here.
//!
//! ```yaml
//! sending_queue:
//!   enabled: true              # false: in memory (lost on a crash)
//!   storage: ./data/queue      # the durable queue's directory (or a file_storage extension)
//!   sizer: bytes               # requests | items | bytes (what queue_size counts)
//!   queue_size: 268435456      # alias max_requests
//!   num_consumers: 4           # concurrent deliveries
//!   block_on_overflow: false   # alias blocking
//!   fsync: true                # sync every append before export returns
//!   max_size_mib: 256          # bound in MiB
//!   overflow: backpressure     # chunk queue: backpressure | drop_oldest
//!   segment_bytes: 16777216    # chunk queue: segment file size
//! ```

mod chunks;
mod forward;
mod requests;

pub(crate) use chunks::consumers;
pub(crate) use requests::DEFAULT_QUEUE_SIZE;
pub use requests::QueueLimits;

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::path::PathBuf;
use thiserror::Error;

/// What `export` does when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// Refuse new data with [`ExportError::Full`](profilink_consumer::ExportError::Full) so
    /// receivers answer UNAVAILABLE / 429 and producers retry (default; the Collector's
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
    /// Requests (the Collector's default): honoured by the request queue, refused by the
    /// chunk queue (it holds accumulated chunks and is bounded in bytes).
    #[default]
    Requests,
    /// Items (samples, spans…): refused by every queue.
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
    /// The error of `key`, and what is wrong with it.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> SettingError {
        SettingError {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The same error with `section` put before its key (`exporters.sentry` +
    /// `sending_queue.sizer`).
    pub fn under(self, section: &str) -> SettingError {
        SettingError {
            key: format!("{section}.{}", self.key),
            message: self.message,
        }
    }
}

/// The keys' prefix in setting errors.
const AT: &str = "sending_queue";

/// `sending_queue` (see the module docs). Unset keys are `None`: each queue reads them with
/// its own default.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    /// Persist to disk (default true). When false the queue lives in memory only and data
    /// accepted but not yet delivered is lost on a crash (the request queue is also in memory
    /// when `storage` is unset).
    pub enabled: bool,
    /// Concurrent deliveries (the Collector's key). Default: the exporter's (its own
    /// `num_consumers`; 2 files at once for the `file` exporter).
    pub num_consumers: Option<usize>,
    /// Capacity in units of `sizer` (the request queue: default 1000 requests, or the
    /// exporter-level `queue_size`; the chunk queue takes only `sizer: bytes`).
    /// `max_requests` is accepted as an alias.
    #[serde(alias = "max_requests")]
    pub queue_size: Option<u64>,
    /// What `queue_size` counts: `requests` (the request queue's default), `bytes`; `items`
    /// is refused, and the chunk queue refuses `requests` too.
    pub sizer: Option<QueueSizer>,
    /// The Collector's overflow switch: `false` (default) refuses new data when full; `true`
    /// makes the request queue's `export` wait for room, and is refused by the chunk queue.
    /// `blocking` is accepted as the Collector's older name.
    #[serde(alias = "blocking")]
    pub block_on_overflow: Option<bool>,
    /// The Collector's `wait_for_result`: only `false` (answer once queued) is available.
    pub wait_for_result: bool,
    /// The Collector's `sending_queue.batch`: refused (the chunk exporters batch into chunks,
    /// the others send requests as received).
    pub batch: Option<IgnoredAny>,
    /// Directory of the queue's segment files (defaults: `./profilink-data/queue` for Sentry,
    /// `<path>/.queue` for the file exporter, `./profilink-data/forward` for the upstream; the
    /// request queue is in memory without it, and puts each signal in its own subdirectory,
    /// `profiles` or `traces`). The service also accepts the id of a `file_storage` extension
    /// here and puts the queue in a directory of that extension.
    pub storage: Option<PathBuf>,
    /// Capacity in MiB of queued (unacknowledged) records: profilink's name, the same as
    /// `sizer: bytes` with `queue_size` in bytes (default 256; the request queue: 64 in
    /// memory, 256 with `storage`).
    pub max_size_mib: Option<u64>,
    /// What the chunk queue does when full (default `backpressure`).
    pub overflow: Option<Overflow>,
    /// fsync every append before acknowledging it (default true). Turning it off trades crash
    /// safety on power loss for throughput; process crashes still lose nothing.
    pub fsync: bool,
    /// The chunk queue's segment file size at which a new segment starts (default 16 MiB).
    pub segment_bytes: Option<u64>,
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
            segment_bytes: None,
        }
    }
}

impl QueueConfig {
    /// Refuses the first of `keys` (with `present`) that is set, as not available in the
    /// `queue` ("the OTLP exporters' queue").
    fn refuse_set(keys: &[(&str, bool)], queue: &str) -> Result<(), SettingError> {
        match keys.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(SettingError::new(
                format!("{AT}.{key}"),
                format!("not available in {queue}; remove the key"),
            )),
            None => Ok(()),
        }
    }
}
