//! What the store takes in besides a chunk, and what it tells about what it holds.

/// What the caller knows about a chunk besides its payload.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkMeta {
    /// Sentry project id the chunk belongs to (from the DSN or the exporter's config).
    pub project_id: u64,
    /// Names of transactions linked to the chunk (from trace linking; may be empty).
    pub transaction_names: Vec<String>,
    /// When the chunk was received or exported, in Unix seconds; non-positive or non-finite
    /// values mean "now". Retention by age counts from this time.
    pub received: f64,
}

/// A transaction that may link to stored chunks: the chunks of `profiler_id` whose samples
/// overlap `[start, end]` (Unix seconds) are linked to `name` (Sentry's rule: profiler id and
/// time range).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TransactionLink {
    /// Sentry profiler id of the transaction (`contexts.profile.profiler_id`).
    pub profiler_id: String,
    /// Start (Unix seconds).
    pub start: f64,
    /// End (Unix seconds).
    pub end: f64,
    /// Transaction name.
    pub name: String,
}

/// What [`crate::ProfileStore::enforce_retention`] removed and what is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionStats {
    /// Chunks deleted because they were older than the retention period.
    pub deleted_by_age: u64,
    /// Chunks deleted (oldest first) to get under `max_size_mib`.
    pub deleted_by_size: u64,
    /// Chunks left.
    pub remaining_chunks: u64,
    /// Bytes counted against `max_size_mib` left.
    pub remaining_bytes: u64,
}

/// Metadata of one stored chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredChunkInfo {
    /// Project id.
    pub project_id: u64,
    /// Chunk id.
    pub chunk_id: String,
    /// Profiler session id.
    pub profiler_id: String,
    /// Environment, if the chunk had one.
    pub environment: Option<String>,
    /// Release, if the chunk had one.
    pub release: Option<String>,
    /// Chunk platform.
    pub platform: String,
    /// First sample timestamp (Unix seconds).
    pub start: f64,
    /// Last sample timestamp (Unix seconds).
    pub end: f64,
    /// When it was received (Unix seconds).
    pub received: f64,
    /// Thread ids of the samples.
    pub thread_ids: Vec<String>,
    /// Linked transaction names.
    pub transaction_names: Vec<String>,
    /// Size of the chunk's JSON payload in bytes (uncompressed).
    pub payload_size: u64,
}

/// Distinct values present in the store (for the viewer's pickers).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facets {
    /// Project ids.
    pub projects: Vec<u64>,
    /// Environments.
    pub environments: Vec<String>,
    /// Releases.
    pub releases: Vec<String>,
    /// Platforms.
    pub platforms: Vec<String>,
    /// Number of chunks.
    pub chunks: u64,
    /// Earliest sample timestamp (Unix seconds), if any chunk is stored.
    pub first: Option<f64>,
    /// Latest sample timestamp (Unix seconds), if any chunk is stored.
    pub last: Option<f64>,
}
