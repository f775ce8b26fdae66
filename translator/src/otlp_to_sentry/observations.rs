//! What splitting works on: a session's threads and observations, as the collector built them.

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
/// links). Linked observations are also in [`Session::obs`]; this side list (usually empty)
/// keeps the main list small and fast to sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

/// One profiled process: its metadata, threads and observations.
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
    /// Observations (unsorted until split).
    pub obs: Vec<Obs>,
    /// Linked observations (unsorted until split).
    pub linked: Vec<LinkedObs>,
}
