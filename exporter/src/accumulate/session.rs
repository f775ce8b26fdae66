//! What the accumulator keys its sessions by and what it emits: [`SessionKey`] (and its
//! borrowed form for lookups), [`Emitted`] merged chunks with their sparse-thread counts and
//! why they were emitted ([`EmitReason`](crate::EmitReason)).

use crate::config::SparseThreads;
use crate::emit_reason::EmitReason;
use crate::merge::ChunkBuilder;
use crate::queue::consumed::Consumed;
use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::BTreeSet;

/// Identifies an accumulation session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// Routing key (resource attribute value, or empty for the default destination).
    pub route: String,
    /// The chunk's profiler id.
    pub profiler_id: String,
    /// The chunk's platform.
    pub platform: String,
}

/// A [`SessionKey`] made of borrowed parts, to look sessions up without allocating. Its hash
/// equals the owned key's (the same fields in the same order; `&str` hashes as `String`).
#[derive(Hash)]
pub(super) struct SessionRef<'a> {
    pub(super) route: &'a str,
    pub(super) profiler_id: &'a str,
    pub(super) platform: &'a str,
}

impl SessionRef<'_> {
    pub(super) fn owned(&self) -> SessionKey {
        SessionKey {
            route: self.route.to_string(),
            profiler_id: self.profiler_id.to_string(),
            platform: self.platform.to_string(),
        }
    }
}

impl hashbrown::Equivalent<SessionKey> for SessionRef<'_> {
    fn equivalent(&self, key: &SessionKey) -> bool {
        self.route == key.route
            && self.profiler_id == key.profiler_id
            && self.platform == key.platform
    }
}

/// A merged chunk ready to be persisted and sent.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// The session it belongs to.
    pub key: SessionKey,
    /// The merged chunk (deterministic id).
    pub chunk: ProfileChunk,
    /// Queue ids of the inputs that contributed samples.
    pub inputs: Vec<u64>,
    /// Why it was emitted.
    pub reason: EmitReason,
    /// Samples removed because their thread had fewer than 2 samples in the finished chunk
    /// (Relay drops such threads, and rejects a chunk left without samples) and could not be
    /// grouped.
    pub sparse_samples_dropped: usize,
    /// Samples of such threads moved into group threads instead.
    pub sparse_samples_grouped: usize,
    /// Threads whose samples were moved into group threads.
    pub sparse_threads_grouped: usize,
    /// The size estimate of the merged chunk (the sum of its inputs' shares).
    pub est_bytes: u64,
    /// The timestamp range taken from each input part.
    pub consumed: Vec<Consumed>,
}

impl Emitted {
    /// Finishes a merged chunk. Only now, with all its samples merged, is a thread's sample
    /// count final, so this is where threads Relay would drop are grouped (unless `policy` is
    /// [`SparseThreads::Drop`]; never the `linked` ones) and what is still sparse is removed
    /// (and counted).
    pub(super) fn finished(
        key: SessionKey,
        builder: ChunkBuilder,
        linked: &BTreeSet<CompactString>,
        policy: SparseThreads,
        inputs: Vec<u64>,
        consumed: Vec<Consumed>,
        reason: EmitReason,
    ) -> Self {
        let est_bytes = builder.est_bytes();
        let mut chunk = builder.finish();
        let grouped = match policy {
            SparseThreads::Group => chunk.profile.group_sparse_threads(|t| linked.contains(t)),
            SparseThreads::Drop => Default::default(),
        };
        let (_, sparse_samples_dropped) = chunk.profile.drop_sparse_threads();
        Emitted {
            key,
            chunk,
            inputs,
            reason,
            sparse_samples_dropped,
            sparse_samples_grouped: grouped.samples,
            sparse_threads_grouped: grouped.threads,
            est_bytes,
            consumed,
        }
    }
}

/// The outcome of [`ChunkAccumulator::push`].
#[derive(Debug, Default)]
pub struct PushOutcome {
    /// Chunks completed by this input.
    pub emitted: Vec<Emitted>,
    /// Inputs that contributed nothing (no valid samples): acknowledge at once.
    pub ack_now: Vec<u64>,
}
