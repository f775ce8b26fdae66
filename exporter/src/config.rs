//! The settings several exporters share, read from their sections of the service YAML's
//! `exporters:`: request compression ([`Compression`], [`CompressionParams`]), TLS
//! ([`ClientTlsConfig`]), `retry_on_failure` ([`RetryConfig`]), the OTLP transport
//! ([`OtlpProtocol`], profiles and traces) and the chunk exporters' accumulation
//! ([`AccumulateConfig`], [`SparseThreads`]). Each exporter's own settings are in its folder's
//! `config.rs` (`sentry/`, `file/`, `otlp/`, `traces/`, `forward/`); `sending_queue` is
//! `queue_config`'s.
//!
//! Durations are strings such as `"5s"`, `"300ms"`, `"1m"` (humantime). Every field has the
//! default shown in its doc, so an empty map is a valid config.
//!
//! ```yaml
//! exporters:
//!   sentry:
//!     dsn: https://<key>@host/123
//!     compression: zstd   # zstd (default) | gzip | none
//!     compression_params: { level: 3 }   # zstd 1-22 (default 3), gzip 1-9 (default 2)
//!     timeout: 30s
//!     num_consumers: 4   # or sending_queue.num_consumers (the Collector's level)
//!     chunk_duration: 60s
//!     chunk_idle_timeout: 10s
//!     chunk_lateness: 10m
//!     max_chunk_bytes: 8388608
//!     max_open_bytes: 268435456
//!     sparse_threads: group   # group | drop
//!     retry_on_failure: { enabled: true, initial_interval: 5s, max_interval: 30s, max_elapsed_time: 300s, multiplier: 1.5, randomization_factor: 0.5 }
//!     sending_queue: { enabled: true, storage: ./profilink-data/queue, max_size_mib: 256, overflow: backpressure }
//!     # or in the Collector's keys: { enabled: true, num_consumers: 4, sizer: bytes, queue_size: 268435456, block_on_overflow: false }
//!     dead_letter_dir: null
//!     routing: { attribute: service.name, dsns: { checkout: https://... } }
//!     rate_limit_max_wait: 5m
//!     tls: { ca_file: /etc/ssl/private-ca.pem }
//!   otlp: { endpoint: 127.0.0.1:4317, protocol: grpc, compression: gzip, timeout: 5s, tls: { insecure: true },
//!           sending_queue: { storage: ./profilink-data/otlp-queue, queue_size: 1000, num_consumers: 4 } }
//!   file: { path: ./profilink-data }
//! ```

use crate::queue_config::SettingError;
pub use profilink_tls::ClientTlsConfig;
use serde::Deserialize;
use std::time::Duration;

/// Request body compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// `Content-Encoding: gzip` (default).
    #[default]
    Gzip,
    /// `Content-Encoding: zstd`.
    Zstd,
    /// No compression.
    None,
}

/// `compression_params` (the Collector's name): tuning of the request compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompressionParams {
    /// Compression level: gzip 1-9 (default 2: on profile chunk JSON ~1.5x faster than 6 for
    /// ~11% larger bodies, while level 1, a static-Huffman mode in zlib-rs, is 40-60% larger),
    /// zstd 1-22 (default 3). Out-of-range levels are rejected when the exporter starts.
    pub level: Option<i32>,
}

impl CompressionParams {
    /// The level to use with `compression`, or an error (`compression_params.level`) naming
    /// the valid range.
    pub fn level_for(&self, compression: Compression) -> Result<i32, SettingError> {
        let (default, range) = match compression {
            Compression::Gzip => (2, 1..=9),
            Compression::Zstd => (3, 1..=22),
            Compression::None => return Ok(0),
        };
        match self.level {
            None => Ok(default),
            Some(l) if range.contains(&l) => Ok(l),
            Some(l) => Err(SettingError::new(
                "compression_params.level",
                format!(
                    "{l} is out of range for {compression:?} ({}..={})",
                    range.start(),
                    range.end()
                ),
            )),
        }
    }
}

/// `retry_on_failure`: exponential backoff with jitter (OpenTelemetry Collector defaults).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Retry at all (default true). When false a failed chunk is dropped and counted at once.
    pub enabled: bool,
    /// First backoff (default 5 s).
    #[serde(with = "humantime_serde")]
    pub initial_interval: Duration,
    /// Backoff cap (default 30 s).
    #[serde(with = "humantime_serde")]
    pub max_interval: Duration,
    /// Give up after this long since the first failure (default 300 s; 0 = retry forever).
    #[serde(with = "humantime_serde")]
    pub max_elapsed_time: Duration,
    /// Backoff growth factor (default 1.5).
    pub multiplier: f64,
    /// Jitter: each wait is drawn from `interval * [1 - r, 1 + r]` (default 0.5).
    pub randomization_factor: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            enabled: true,
            initial_interval: Duration::from_secs(5),
            max_interval: Duration::from_secs(30),
            max_elapsed_time: Duration::from_secs(300),
            multiplier: 1.5,
            randomization_factor: 0.5,
        }
    }
}

/// What a merged chunk's threads that Relay would drop (fewer than 2 samples with a stack)
/// become before it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SparseThreads {
    /// Grouped into threads Relay keeps (default; see
    /// [`ThreadGroups`](profilink_proto::sentry::ThreadGroups)): per process, same-name threads together,
    /// the rest in one `other threads` thread. Threads with trace links are never grouped.
    /// What is still sparse afterwards is dropped.
    #[default]
    Group,
    /// Dropped (the behaviour before grouping).
    Drop,
}

/// Chunk accumulation settings (shared by the Sentry and file exporters).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccumulateConfig {
    /// Length of the time-aligned windows a session's samples are merged in, `[k * d, (k + 1)
    /// * d)` on the Unix epoch (default 60 s; Relay rejects > 66 s).
    #[serde(with = "humantime_serde")]
    pub chunk_duration: Duration,
    /// Emit a session's chunks after this long without new samples (default 10 s); a window
    /// the session's newest sample has passed is emitted after half of it without a sample
    /// joining it.
    #[serde(with = "humantime_serde")]
    pub chunk_idle_timeout: Duration,
    /// How far (in sample time) behind a session's newest sample a window stays open for
    /// samples read out of order (default 10 min): a window closes once the session's newest
    /// sample is this far past its end; older samples go out as chunks of their own.
    #[serde(with = "humantime_serde")]
    pub chunk_lateness: Duration,
    /// Largest serialized chunk (default 8 MiB).
    pub max_chunk_bytes: u64,
    /// Estimated bytes all open windows may hold together (default 256 MiB); past it the
    /// windows samples joined least recently are cut early
    /// (`profilink_exporter_chunks_cut_early_total{reason="memory"}`).
    pub max_open_bytes: u64,
    /// Threads Relay would drop in a merged chunk (default grouped).
    pub sparse_threads: SparseThreads,
}

impl Default for AccumulateConfig {
    fn default() -> Self {
        AccumulateConfig {
            chunk_duration: Duration::from_secs(60),
            chunk_idle_timeout: Duration::from_secs(10),
            chunk_lateness: Duration::from_secs(600),
            max_chunk_bytes: 8 << 20,
            max_open_bytes: 256 << 20,
            sparse_threads: SparseThreads::Group,
        }
    }
}

/// What the chunk exporters' configs (`sentry`, `file`) share: the accumulation keys at their
/// top level ([`AccumulateConfig`]). (The engine they start on their queue is started from
/// them by `chunk_engine`, above this module.)
macro_rules! chunk_exporter_parts {
    ($($config:ty),+) => {$(
        impl $config {
            /// The accumulation part.
            pub fn accumulate(&self) -> AccumulateConfig {
                AccumulateConfig {
                    chunk_duration: self.chunk_duration,
                    chunk_idle_timeout: self.chunk_idle_timeout,
                    chunk_lateness: self.chunk_lateness,
                    max_chunk_bytes: self.max_chunk_bytes,
                    max_open_bytes: self.max_open_bytes,
                    sparse_threads: self.sparse_threads,
                }
            }
        }
    )+};
}

/// OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtlpProtocol {
    /// gRPC (default).
    #[default]
    Grpc,
    /// HTTP/protobuf: `POST {endpoint}/v1development/profiles`.
    Http,
}
