//! What splitting works on: a session's threads and, instead of its observations, where they
//! are in the request ([`Block`]s of samples, each resolved once into a [`SampleRef`]), so that
//! a session's observations are made window by window (see [`super::window`]).

use super::platform::Runtime;
use profilink_proto::sentry::CompactString;
use std::collections::HashMap;

/// One observation: a stack seen on a thread at a time (16 bytes; sorted by its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Obs {
    /// Unix nanoseconds.
    pub ts: u64,
    /// Index into [`Session::threads`].
    pub thread: u32,
    /// Unique stack id ([`super::stacks::StackTable`]).
    pub stack: u32,
}

impl Obs {
    /// Sort key: (timestamp, thread, stack) as one integer.
    #[inline]
    pub(crate) fn key(&self) -> u128 {
        (u128::from(self.ts) << 64) | (u128::from(self.thread) << 32) | u128::from(self.stack)
    }
}

/// A linked observation: the observation's key and its link id (index + 1 into the request's
/// links). Linked observations are also among the observations; this side list (usually
/// empty) keeps the main list small and fast to sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct LinkedObs {
    /// [`Obs::key`] of the observation.
    pub key: u128,
    /// Link id.
    pub link: u32,
}

/// A thread of a session.
#[derive(Debug, Clone)]
pub(crate) struct ThreadInfo {
    /// Decimal thread id.
    pub id: String,
    /// `id` as written on every sample (inline, so cloning it per sample costs a copy).
    pub sample_id: CompactString,
    /// Thread name.
    pub name: Option<String>,
    /// Digest of `id` (for chunk ids).
    pub digest: u64,
}

/// An OTLP sample as the collector resolved it: its thread in its session, its unique stack and
/// its link id (0: none). One per sample of each translated profile.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SampleRef {
    /// Index into [`Session::threads`].
    pub thread: u32,
    /// Unique stack id.
    pub stack: u32,
    /// Link id (0: none or unusable).
    pub link: u32,
}

/// Which observations of a [`Block`]'s samples it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// All of them.
    Whole,
    /// Observations `lo..hi` of its single sample, whose times never decrease (timestamps in
    /// order, or an expansion of aggregated values).
    Range(u64, u64),
    /// Timestamps `lo..hi` of a sorted copy (`sorted`, an index into the collector's sorted
    /// timestamps) of its single sample's timestamps, which are out of order.
    Sorted {
        /// Which copy.
        sorted: u32,
        /// First timestamp.
        lo: u64,
        /// End.
        hi: u64,
    },
}

/// A run of consecutive samples of one profile, all in one session, whose observations lie
/// within `[min_ts, max_ts]`: what a session's windows are read from. A run spans at most the
/// collector's block span (a longer sample is cut into several blocks).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    /// Index into the collector's translated profiles.
    pub profile: u32,
    /// Sample indices `start..end` in that profile.
    pub start: u32,
    /// End of the sample range.
    pub end: u32,
    /// Which of their observations.
    pub part: Part,
    /// Earliest observation time.
    pub min_ts: u64,
    /// Latest observation time.
    pub max_ts: u64,
}

/// One profiled process: its metadata, threads, and what the collector learned about its
/// observations (their number, runtimes, linked threads, and where they are).
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    /// The profiler id.
    pub profiler_id: String,
    /// `release`.
    pub release: Option<String>,
    /// `environment`.
    pub environment: Option<String>,
    /// Platform hint from resource attributes.
    pub platform_hint: Option<&'static str>,
    /// Threads, in order of first appearance.
    pub threads: Vec<ThreadInfo>,
    /// Thread id -> index into `threads`.
    pub thread_index: HashMap<String, u32>,
    /// Observations of the session.
    pub observations: u64,
    /// Observations per primary runtime of their stack (by [`Runtime::index`]), for the
    /// chunk platform.
    pub runtimes: [u64; Runtime::COUNT],
    /// Per thread, whether it has a linked observation (empty when none has).
    pub linked_threads: Vec<bool>,
    /// Where its observations are, in input order.
    pub blocks: Vec<Block>,
}
