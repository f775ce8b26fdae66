//! `exporters.sentry`: the Sentry exporter's settings ([`SentryExporterConfig`]) with their
//! defaults and checks, and its per-attribute DSN routing ([`RoutingConfig`]). The keys it
//! shares with other exporters (compression, TLS, retry, accumulation) are the crate's
//! `config`'s; the queue's are `queue_config`'s.

use crate::config::{
    AccumulateConfig, ClientTlsConfig, Compression, CompressionParams, RetryConfig, SparseThreads,
};
use crate::queue_config::{QueueConfig, SettingError, consumers};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `exporters.sentry`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryExporterConfig {
    /// The default DSN (`https://<public key>@host[:port][/path]/<project id>`).
    pub dsn: Option<String>,
    /// Request compression (default zstd: Relay decompresses `gzip`, `deflate`, `br` and `zstd`
    /// request bodies, and on chunk JSON zstd level 3 gives ~33% smaller bodies than gzip level 2
    /// for the same CPU).
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
    /// Estimated bytes all open windows may hold (default 256 MiB; the least recently joined
    /// are cut early).
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
            compression: Compression::Zstd,
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

chunk_exporter_parts!(SentryExporterConfig);

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
