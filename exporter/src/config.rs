//! Exporter configuration, read from the `exporters:` section of the service YAML.
//!
//! Durations are strings such as `"5s"`, `"300ms"`, `"1m"` (humantime). Every field has the
//! default shown in its doc, so an empty map is a valid config.
//!
//! ```yaml
//! exporters:
//!   sentry:
//!     dsn: https://<key>@host/123
//!     compression: gzip   # gzip | zstd | none
//!     compression_params: { level: 2 }   # gzip 1-9 (default 2), zstd 1-22 (default 3)
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

use crate::queue_config::consumers;
pub use crate::queue_config::{Overflow, QueueConfig, QueueSizer, SettingError};
pub use profilink_tls::ClientTlsConfig;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// The level to use with `compression`, or an error naming the valid range.
    pub fn level_for(&self, compression: Compression) -> Result<i32, String> {
        let (default, range) = match compression {
            Compression::Gzip => (2, 1..=9),
            Compression::Zstd => (3, 1..=22),
            Compression::None => return Ok(0),
        };
        match self.level {
            None => Ok(default),
            Some(l) if range.contains(&l) => Ok(l),
            Some(l) => Err(format!(
                "compression_params.level {l} is out of range for {compression:?} ({}..={})",
                range.start(),
                range.end()
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

/// `routing`: choose a DSN by a resource attribute.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoutingConfig {
    /// The resource attribute whose value picks the DSN (default `service.name`).
    pub attribute: String,
    /// Attribute value → DSN; values not listed use the exporter's `dsn`.
    pub dsns: BTreeMap<String, String>,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            attribute: "service.name".into(),
            dsns: BTreeMap::new(),
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
/// top level ([`AccumulateConfig`]), and the delivery engine they start on their queue.
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

            /// Opens the exporter's durable queue (replaying what an earlier run left) and
            /// starts the delivery engine on it, delivering to `sink` and retrying with `retry`.
            pub(crate) async fn start_engine<S: crate::engine::Sink>(
                &self,
                sink: std::sync::Arc<S>,
                retry: RetryConfig,
                clock: crate::SharedClock,
                metrics: std::sync::Arc<crate::ExporterMetrics>,
            ) -> Result<crate::engine::Engine<S>, crate::ExportError> {
                let engine = crate::engine::EngineConfig {
                    accumulate: self.accumulate(),
                    retry,
                    num_consumers: self.consumers(),
                    tick: self.tick,
                    observer: self.observer.clone(),
                    flush_on_shutdown: self.flush_on_shutdown,
                };
                crate::engine::Engine::open(
                    &self.sending_queue,
                    self.queue_dir(),
                    sink,
                    engine,
                    clock,
                    metrics,
                )
                .await
            }
        }
    )+};
}

chunk_exporter_parts!(SentryExporterConfig, FileExporterConfig);

/// `exporters.sentry`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryExporterConfig {
    /// The default DSN (`https://<public key>@host[:port][/path]/<project id>`).
    pub dsn: Option<String>,
    /// Request compression (default gzip).
    pub compression: Compression,
    /// Compression level.
    pub compression_params: CompressionParams,
    /// Per-request timeout (default 30 s, as the Sentry SDKs; a chunk may be 8 MiB).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// TLS to Sentry (private CAs, client certificates); system roots by default.
    pub tls: ClientTlsConfig,
    /// Concurrent requests (default 4); `sending_queue.num_consumers` is the Collector's
    /// spelling (see [`consumers`](Self::consumers)).
    pub num_consumers: Option<usize>,
    /// Longest sample span of an emitted chunk (default 60 s).
    #[serde(with = "humantime_serde")]
    pub chunk_duration: Duration,
    /// Emit a session's chunk after this long without new samples (default 10 s).
    #[serde(with = "humantime_serde")]
    pub chunk_idle_timeout: Duration,
    /// Samples read out of order still join their window while the session's newest sample is
    /// less than this past the window's end (default 10 min).
    #[serde(with = "humantime_serde")]
    pub chunk_lateness: Duration,
    /// Largest serialized chunk (default 8 MiB).
    pub max_chunk_bytes: u64,
    /// Estimated bytes all open windows may hold (default 256 MiB; the least recently joined are cut early).
    pub max_open_bytes: u64,
    /// Cut the open chunks at shutdown (default false): with a durable queue, open chunks stay
    /// as their queued inputs and the next start goes on filling them, so a restart does not
    /// change where chunks are cut (nor, through Relay's thread rule, what survives). Set it
    /// when the queue directory does not outlive the process.
    pub flush_on_shutdown: bool,
    /// Threads Relay would drop in a merged chunk: `group` (default) or `drop`.
    pub sparse_threads: SparseThreads,
    /// Backoff for 5xx, timeouts and connection errors.
    pub retry_on_failure: RetryConfig,
    /// The durable queue.
    pub sending_queue: QueueConfig,
    /// Where envelopes refused for good (400/401/403/413) are written; none by default.
    pub dead_letter_dir: Option<PathBuf>,
    /// Per-attribute DSNs.
    pub routing: Option<RoutingConfig>,
    /// A 429 without `X-Sentry-Rate-Limits` or `Retry-After` blocks for this long (default 60 s).
    #[serde(with = "humantime_serde")]
    pub default_rate_limit: Duration,
    /// Rate limits longer than this, and quota limits (reason `usage_exceeded` or a `*quota*`
    /// reason), drop the chunks of their category while they last (`ratelimit_backoff` in
    /// client reports and metrics) instead of holding them in the queue (default 5 min).
    /// Shorter limits make chunks wait.
    #[serde(with = "humantime_serde")]
    pub rate_limit_max_wait: Duration,
    /// How often client reports of discarded chunks are sent (default 30 s).
    #[serde(with = "humantime_serde")]
    pub client_report_interval: Duration,
    /// Scheduler tick: the longest the sender sleeps between checks of its deadlines
    /// (default 100 ms).
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
    /// Sees every merged chunk once queued (set by the service for its `profile_store`).
    #[serde(skip)]
    pub observer: crate::ObserverSlot,
}

impl Default for SentryExporterConfig {
    fn default() -> Self {
        let acc = AccumulateConfig::default();
        SentryExporterConfig {
            dsn: None,
            compression: Compression::Gzip,
            compression_params: CompressionParams::default(),
            timeout: Duration::from_secs(30),
            tls: ClientTlsConfig::default(),
            num_consumers: None,
            chunk_duration: acc.chunk_duration,
            chunk_idle_timeout: acc.chunk_idle_timeout,
            chunk_lateness: acc.chunk_lateness,
            max_chunk_bytes: acc.max_chunk_bytes,
            max_open_bytes: acc.max_open_bytes,
            flush_on_shutdown: false,
            sparse_threads: acc.sparse_threads,
            retry_on_failure: RetryConfig::default(),
            sending_queue: QueueConfig::default(),
            dead_letter_dir: None,
            routing: None,
            default_rate_limit: Duration::from_secs(60),
            rate_limit_max_wait: Duration::from_secs(300),
            client_report_interval: Duration::from_secs(30),
            tick: Duration::from_millis(100),
            observer: Default::default(),
        }
    }
}

impl SentryExporterConfig {
    /// The queue directory: `sending_queue.storage`, else `./profilink-data/queue`.
    pub fn queue_dir(&self) -> PathBuf {
        self.sending_queue
            .storage
            .clone()
            .unwrap_or_else(|| PathBuf::from("./profilink-data/queue"))
    }

    /// Concurrent requests: `num_consumers` or `sending_queue.num_consumers` (default 4).
    /// Call [`check`](Self::check) first: when the two disagree this is the queue's.
    pub fn consumers(&self) -> usize {
        consumers(&self.sending_queue, self.num_consumers, 4)
            .unwrap_or_else(|_| self.sending_queue.num_consumers.unwrap_or(4))
    }

    /// Refuses queue settings profilink cannot honour and keys that disagree (the error's key
    /// is relative to the exporter's section).
    pub fn check(&self) -> Result<(), SettingError> {
        self.sending_queue.check()?;
        consumers(&self.sending_queue, self.num_consumers, 4).map(|_| ())
    }
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
    /// `sending_queue` keys).
    pub sending_queue: crate::send_queue::SendingQueueConfig,
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
    pub fn effective_sending_queue(&self) -> crate::send_queue::SendingQueueConfig {
        let mut q = self.sending_queue.clone();
        if q.sizer == crate::send_queue::QueueSizer::Requests {
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
    /// Estimated bytes all open windows may hold (default 256 MiB; the least recently joined are cut early).
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
