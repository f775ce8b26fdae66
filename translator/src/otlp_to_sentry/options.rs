//! Translation options and policies.

/// Relay's hard limit on a chunk's time span (`MAX_PROFILE_CHUNK_DURATION`, 66 s).
pub const RELAY_MAX_CHUNK_DURATION_NS: u64 = 66_000_000_000;

/// Relay's default limit on a serialized profile item (`max_profile_size`, 50 MiB).
pub const RELAY_MAX_CHUNK_BYTES: usize = 50 * 1024 * 1024;

/// What to do with profiles whose sample type is not a CPU/wall-clock sample.
///
/// CPU/wall profiles are those whose `sample_type` `(type, unit)` is in the sample-type table
/// ([`ChunkOptions::sample_types`], [`super::sample_types`]), or is absent. Everything else
/// (`off_cpu/nanoseconds`, allocations, locks, …) is non-CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NonCpuPolicy {
    /// Skip such profiles (counted in [`super::Stats::profiles_skipped_non_cpu`] and per type in
    /// [`super::ChunkTranslation::skipped_sample_types`]). Sentry shows
    /// chunks as CPU profiles, so mixing other kinds in would mislead.
    #[default]
    Skip,
    /// Translate them anyway: each timestamp is one Sentry sample whatever its value, and each
    /// value-only sample is one Sentry sample at the profile start.
    Include,
}

/// What to do with threads that have fewer than 2 samples with a non-empty stack in a chunk.
///
/// Relay removes such threads entirely (`remove_single_samples_per_thread`), and rejects the
/// chunk when nothing is left. Either way they are counted in [`super::Stats::sparse_threads`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SparseThreadPolicy {
    /// Emit them (default): the output stays a faithful translation of the input, and Relay
    /// applies its own rule. Chosen because the eBPF profiler samples at 20 Hz, where a thread
    /// seen once in a minute is common, and dropping here would make the translation lossy
    /// for consumers other than Relay.
    #[default]
    Keep,
    /// Drop their samples here (counted in [`super::Stats::samples_dropped_sparse`]), saving
    /// bytes that Relay would discard; a chunk left without samples is not emitted.
    Drop,
}

/// Whether threads Relay would drop are grouped into threads it keeps, before
/// [`SparseThreadPolicy`] applies to what is still sparse.
///
/// The rule (name groups per process, a catch-all `other threads` group, a lone sample joining
/// its busiest same-name thread; linked threads never touched; group ids are 16-digit decimals
/// from `9000000000000000` to `2^53 - 1` derived from the group key) is
/// [`ThreadGroups`](profilink_proto::sentry::ThreadGroups). A thread with a linked observation (an OTLP
/// `Link`, returned as a [`crate::SampleLink`]) is never grouped, so every link's thread id is
/// the thread its sample is in, and what span stamping writes into spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SparseThreadGrouping {
    /// Group them (default): on the eBPF fixtures this keeps 189/189, 55/58 and 102/107
    /// observations instead of 179, 27 and 46 (what is left is processes seen once).
    #[default]
    Group,
    /// Leave threads as they are (the behaviour before grouping existed).
    None,
}

/// Options for [`super::to_chunks`]. Every field is public; [`ChunkOptions::default`] gives the
/// documented defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkOptions {
    /// Maximum time span (first to last sample) of one chunk, in nanoseconds. Default 60 s.
    /// Values above Relay's 66 s limit are treated as 66 s.
    pub max_chunk_duration_ns: u64,
    /// Maximum serialized JSON size of one chunk, in bytes. Default 8 MiB (Relay accepts up to
    /// 50 MiB; values above that are treated as 50 MiB). The size is estimated from above while
    /// filling a chunk, so a chunk never exceeds it; a single sample that cannot fit even in an
    /// empty chunk is dropped and counted in [`super::Stats::samples_dropped_size`].
    pub max_chunk_bytes: usize,
    /// `client_sdk.name` of every chunk. Default `profilink`.
    pub sdk_name: String,
    /// `client_sdk.version` of every chunk. Default: this crate's version.
    pub sdk_version: String,
    /// What to do with non-CPU profiles. Default [`NonCpuPolicy::Skip`].
    pub non_cpu_policy: NonCpuPolicy,
    /// Which sample types are CPU/wall and how their values become observations. Default: the
    /// built-in table ([`super::sample_types`]).
    pub sample_types: super::SampleTypes,
    /// Whether threads Relay would drop are grouped first. Default
    /// [`SparseThreadGrouping::Group`].
    pub sparse_thread_grouping: SparseThreadGrouping,
    /// What to do with threads Relay would drop (that grouping left sparse). Default
    /// [`SparseThreadPolicy::Keep`].
    pub sparse_thread_policy: SparseThreadPolicy,
    /// Maximum frames per stack. Deeper stacks keep their leaf-most frames and lose the frames
    /// on the root side; counted in [`super::Stats::stacks_truncated`]. Default 1024; 0 is
    /// treated as 1.
    pub max_stack_depth: usize,
    /// Maximum samples produced from aggregated values (samples with values but no timestamps)
    /// per profile. Default 1,000,000. When a profile asks for more, every aggregated sample's
    /// count is scaled down by the same factor (see the module docs); the difference is counted
    /// in [`super::Stats::samples_dropped_expansion`]. Values above 2^32 are treated as 2^32. A
    /// profile claiming more than [`super::MAX_PLAUSIBLE_CLAIM`] (2^32) observations is rejected
    /// (`limit_exceeded`) instead: no profiler makes such a claim, and scaling it would count a
    /// fictitious drop.
    pub max_expanded_samples: usize,
    /// Maximum [`crate::SampleLink`]s returned per call (one per linked observation). Default
    /// 1,000,000; the rest are counted in [`super::Stats::links_dropped`].
    pub max_links: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        ChunkOptions {
            max_chunk_duration_ns: 60_000_000_000,
            max_chunk_bytes: 8 * 1024 * 1024,
            sdk_name: "profilink".to_owned(),
            sdk_version: env!("CARGO_PKG_VERSION").to_owned(),
            non_cpu_policy: NonCpuPolicy::Skip,
            sample_types: super::SampleTypes::default(),
            sparse_thread_grouping: SparseThreadGrouping::Group,
            sparse_thread_policy: SparseThreadPolicy::Keep,
            max_stack_depth: 1024,
            max_expanded_samples: 1_000_000,
            max_links: 1_000_000,
        }
    }
}

impl ChunkOptions {
    /// The chunk duration actually applied (capped at Relay's 66 s).
    pub fn effective_max_chunk_duration_ns(&self) -> u64 {
        self.max_chunk_duration_ns.min(RELAY_MAX_CHUNK_DURATION_NS)
    }

    /// The chunk size actually applied (capped at Relay's 50 MiB).
    pub fn effective_max_chunk_bytes(&self) -> usize {
        self.max_chunk_bytes.min(RELAY_MAX_CHUNK_BYTES)
    }

    /// The expansion bound actually applied (at most 2^32).
    pub fn effective_max_expanded_samples(&self) -> u64 {
        (self.max_expanded_samples as u64).min(1 << 32)
    }

    /// The stack depth actually applied (at least 1, at most `u32::MAX`).
    pub fn effective_max_stack_depth(&self) -> usize {
        self.max_stack_depth.clamp(1, u32::MAX as usize)
    }
}
