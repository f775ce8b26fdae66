//! OTLP profiles -> Sentry Sample Format V2 profile chunks. Pure functions, no I/O.
//!
//! [`to_chunks`] turns the `ResourceProfiles` of one request (with its dictionary) into
//! [`ProfileChunk`]s, the trace links of their samples ([`SampleLink`], since a chunk cannot
//! carry links), the profiles it had to reject, and counters.
//!
//! The rules of the translation follow (this module's `spec.md`, kept beside the code).
//!
#![doc = include_str!("spec.md")]

use crate::dictionary::{Attr, Dictionary};
use crate::error::TranslateError;
use crate::sample_link::SampleLink;
use profilink_proto::otlp::{ExportProfilesServiceRequest, ProfilesDictionary, ResourceProfiles};
use profilink_proto::sentry::ProfileChunk;

mod canonical_frames;
mod claims;
mod collect;
mod debug_images;
mod frame_cache;
mod frames;
mod ids;
mod in_app;
mod observations;
mod options;
mod outbox;
mod platform;
mod restore_hook;
pub mod sample_types;
mod samples;
mod session;
mod siblings;
mod sort;
mod split;
mod stacks;
mod strict;
mod window;

pub use claims::{ExpansionClaims, MAX_PLAUSIBLE_CLAIM, expansion_claims};
pub use debug_images::{BUILD_ID_GNU_KEY, debug_id_from_build_id};
pub use frames::FRAME_TYPE_KEY;
pub use options::{
    ChunkOptions, NonCpuPolicy, RELAY_MAX_CHUNK_BYTES, RELAY_MAX_CHUNK_DURATION_NS,
    SparseThreadGrouping, SparseThreadPolicy,
};
pub use restore_hook::CHUNK_ID_KEY;
pub use sample_types::{Observations, SampleTypes};
pub use session::{
    IDENTITY_KEYS, PROFILER_ID_KEY, ProcessIdentity, derive_profiler_id, resource_profiler_id,
};
pub use strict::blocking_error;
pub use window::Held;

/// The result of [`to_chunks`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChunkTranslation {
    /// The chunks: restored round-trip chunks first (input order), then each session's chunks
    /// (sessions in order of first appearance, chunks in time order). Empty from
    /// [`to_chunks_with`], which hands them out one by one in this order.
    pub chunks: Vec<ProfileChunk>,
    /// Trace links of the emitted observations, in chunk and sample order.
    pub links: Vec<SampleLink>,
    /// Profiles that could not be translated.
    pub rejected: Vec<RejectedProfile>,
    /// Chunks removed from the output because they failed the chunk validator (see *Strict
    /// out* in the module docs); never emitted.
    pub invalid_chunks: Vec<InvalidChunk>,
    /// Non-CPU profiles skipped ([`NonCpuPolicy::Skip`]), per `"type:unit"` of their sample
    /// type, in order of first appearance: (label, profiles).
    pub skipped_sample_types: Vec<(String, u64)>,
    /// Counters.
    pub stats: Stats,
    /// What the translation held at most at once while cutting chunks (one window of one
    /// session; not part of the output).
    pub held: Held,
}

/// A chunk the translation produced but did not emit, because profilink's chunk validator
/// ([`profilink_proto::validate::validate_chunk_errors`]) found an error in it.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidChunk {
    /// The chunk's id.
    pub chunk_id: String,
    /// The chunk's profiler id (as it would have been sent).
    pub profiler_id: String,
    /// Its samples (counted in [`Stats::samples_dropped_invalid`]).
    pub samples: u64,
    /// The first error the validator reported (its `rule` is the reason).
    pub finding: profilink_proto::validate::Finding,
}

/// A profile that was rejected, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedProfile {
    /// `resource_profiles[i].scope_profiles[j].profiles[k]`.
    pub path: String,
    /// What was wrong (names the table and index for index errors).
    pub error: TranslateError,
}

/// Counters of one [`to_chunks`] call.
///
/// For translated profiles, `samples_in = samples_out + samples_dropped_expansion +
/// samples_dropped_sparse + samples_dropped_size + samples_dropped_invalid`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Profiles seen.
    pub profiles: u64,
    /// Profiles translated into sessions.
    pub profiles_translated: u64,
    /// Profiles rejected (see [`ChunkTranslation::rejected`]).
    pub profiles_rejected: u64,
    /// Non-CPU profiles skipped by [`NonCpuPolicy::Skip`].
    pub profiles_skipped_non_cpu: u64,
    /// CPU/wall profiles skipped as siblings of one translated (one recording under several
    /// sample types; see the `siblings` rule in the module docs).
    pub profiles_skipped_sibling: u64,
    /// Round-tripped profiles rebuilt as their original chunk.
    pub profiles_restored: u64,
    /// Profiles carrying `sentry.chunk_id` that were translated normally instead of restored:
    /// not profilink's complete encoding (the marker set), not restorable, spanning more than
    /// 66 s, or restoring to a chunk that fails the validator.
    pub restore_fallbacks: u64,
    /// Observations in the input: timestamps, plus requested expansions of aggregated values
    /// (before the cap), of translated and restored profiles.
    pub samples_in: u64,
    /// Samples in the emitted chunks.
    pub samples_out: u64,
    /// Observations not produced because of `max_expanded_samples`.
    pub samples_dropped_expansion: u64,
    /// Samples removed by [`SparseThreadPolicy::Drop`].
    pub samples_dropped_sparse: u64,
    /// Samples that could not fit in `max_chunk_bytes` even alone.
    pub samples_dropped_size: u64,
    /// Unique stacks truncated to `max_stack_depth`.
    pub stacks_truncated: u64,
    /// (chunk, thread) pairs with fewer than two non-empty-stack samples.
    pub sparse_threads: u64,
    /// Group threads made by [`SparseThreadGrouping::Group`].
    pub thread_groups: u64,
    /// (chunk, thread) pairs whose samples moved to a group (or a same-name thread).
    pub threads_grouped: u64,
    /// Samples that moved to a group thread (they are in `samples_out`).
    pub samples_grouped: u64,
    /// Profiler sessions with at least one observation.
    pub sessions: u64,
    /// Chunks emitted.
    pub chunks: u64,
    /// Chunks removed because they failed the chunk validator ([`ChunkTranslation::invalid_chunks`]).
    pub chunks_invalid: u64,
    /// Samples of those chunks.
    pub samples_dropped_invalid: u64,
    /// Links emitted.
    pub links: u64,
    /// Observations whose link was unusable (ids of the wrong length or zero) or beyond
    /// `max_links`.
    pub links_dropped: u64,
}

/// Counts bytes written (serialized sizes without allocating).
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Serialized JSON length of a value (`usize::MAX / 4` if it cannot be serialized, which
/// cannot happen for the plain data passed here).
fn json_len<T: ?Sized + JsonLen>(v: &T) -> usize {
    v.json_len()
}

/// Types whose JSON length can be measured.
trait JsonLen {
    fn json_len(&self) -> usize;
}

macro_rules! impl_json_len {
    ($($t:ty),*) => {$(
        impl JsonLen for $t {
            fn json_len(&self) -> usize {
                let mut c = ByteCounter(0);
                match serde_json::to_writer(&mut c, self) {
                    Ok(()) => c.0,
                    Err(_) => usize::MAX / 4,
                }
            }
        }
    )*};
}

impl_json_len!(ProfileChunk, profilink_proto::sentry::DebugImage, String);

/// Translates the `ResourceProfiles` of one request into Sentry chunks (see the module docs).
///
/// Collects the chunks of [`to_chunks_with`] into [`ChunkTranslation::chunks`].
pub fn to_chunks(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
) -> ChunkTranslation {
    let mut chunks = Vec::new();
    let mut t = to_chunks_with(dictionary, resource_profiles, options, &mut |c| {
        chunks.push(c)
    });
    t.chunks = chunks;
    t
}

/// [`to_chunks`] that hands each chunk to `emit` as soon as it is cut, in the order
/// [`to_chunks`] lists them, instead of keeping them: the returned [`ChunkTranslation`] has empty
/// `chunks` (its links, rejections and counters are complete). Memory then holds the request's
/// tables, one window of one session and one chunk at a time, not the whole output (but the
/// links, see [`to_chunks_streamed`]).
pub fn to_chunks_with(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
    emit: &mut dyn FnMut(ProfileChunk),
) -> ChunkTranslation {
    let mut links = Vec::new();
    let mut t = to_chunks_streamed(dictionary, resource_profiles, options, &mut |c, l| {
        links.extend(l);
        emit(c)
    });
    t.links = links;
    t
}

/// [`to_chunks_with`] that hands each chunk out with the trace links of its samples (in sample
/// order; what [`ChunkTranslation::links`] would list for it) and keeps neither: the returned
/// [`ChunkTranslation`] has empty `chunks` and `links` (its rejections and counters are
/// complete, `max_links` counts the links handed out). Memory holds the request's tables, one
/// window of one session (see [`ChunkTranslation::held`]) and one chunk at a time, whatever the
/// number of profiles per session or their order in the request.
pub fn to_chunks_streamed(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
    emit: &mut dyn FnMut(ProfileChunk, Vec<SampleLink>),
) -> ChunkTranslation {
    translate(dictionary, resource_profiles, options, false, emit)
}

/// [`to_chunks`] holding each session whole (every observation of it read, then sorted and
/// cut) instead of one window at a time: the oracle the tests compare the windows against.
#[doc(hidden)]
pub fn to_chunks_whole(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
) -> ChunkTranslation {
    let (mut chunks, mut links) = (Vec::new(), Vec::new());
    let mut t = translate(dictionary, resource_profiles, options, true, &mut |c, l| {
        chunks.push(c);
        links.extend(l);
    });
    t.chunks = chunks;
    t.links = links;
    t
}

/// The translation: sessions cut one window at a time, or each `whole`.
fn translate(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
    whole: bool,
    emit: &mut dyn FnMut(ProfileChunk, Vec<SampleLink>),
) -> ChunkTranslation {
    let dict = Dictionary::new(dictionary);
    let mut c = collect::Collector::new(dict, options);
    let mut t = ChunkTranslation::default();
    for (ri, rp) in resource_profiles.iter().enumerate() {
        let resource: Result<Vec<Attr<'_>>, TranslateError> = match &rp.resource {
            Some(r) => dict.key_values(&r.attributes),
            None => Ok(Vec::new()),
        };
        for (si, sp) in rp.scope_profiles.iter().enumerate() {
            let scope_name = sp.scope.as_ref().map_or("", |s| s.name.as_str());
            let siblings = siblings::skipped_siblings(&dict, sp, options);
            for (pi, p) in sp.profiles.iter().enumerate() {
                t.stats.profiles += 1;
                if siblings[pi] {
                    t.stats.profiles_skipped_sibling += 1;
                    continue;
                }
                let outcome = match &resource {
                    Ok(attrs) => c.profile(rp, scope_name, attrs, p),
                    Err(e) => Err(e.clone()),
                };
                match outcome {
                    Ok(collect::Outcome::Translated {
                        observations,
                        dropped_expansion,
                        unusable_links,
                        restore_fallback,
                    }) => {
                        t.stats.profiles_translated += 1;
                        // Saturating: aggregated values are claims of up to i64::MAX each.
                        let s = &mut t.stats;
                        s.samples_in = s.samples_in.saturating_add(observations);
                        s.samples_dropped_expansion = s
                            .samples_dropped_expansion
                            .saturating_add(dropped_expansion);
                        s.links_dropped = s.links_dropped.saturating_add(unusable_links);
                        t.stats.restore_fallbacks += u64::from(restore_fallback);
                    }
                    Ok(collect::Outcome::SkippedNonCpu(label)) => {
                        t.stats.profiles_skipped_non_cpu += 1;
                        match t.skipped_sample_types.iter_mut().find(|(l, _)| *l == label) {
                            Some((_, n)) => *n += 1,
                            None => t.skipped_sample_types.push((label, 1)),
                        }
                    }
                    Ok(collect::Outcome::Restored(chunk, mut links)) => {
                        let n = chunk.profile.samples.len() as u64;
                        t.stats.profiles_restored += 1;
                        t.stats.samples_in = t.stats.samples_in.saturating_add(n);
                        t.stats.samples_out += n;
                        t.stats.chunks += 1;
                        // The first `max_links` links of the request are kept.
                        let room = options.max_links.saturating_sub(t.stats.links as usize);
                        let keep = room.min(links.len());
                        t.stats.links_dropped += (links.len() - keep) as u64;
                        t.stats.links += keep as u64;
                        links.truncate(keep);
                        emit(*chunk, links);
                    }
                    Err(error) => {
                        t.stats.profiles_rejected += 1;
                        t.rejected.push(RejectedProfile {
                            path: format!(
                                "resource_profiles[{ri}].scope_profiles[{si}].profiles[{pi}]"
                            ),
                            error,
                        });
                    }
                }
            }
        }
    }

    let collect::Collector {
        ft,
        st,
        sessions,
        chunk_ids,
        links,
        profiles,
        refs,
        sorted,
        ..
    } = c;
    t.stats.stacks_truncated = st.truncated;
    let src = window::Sources {
        profiles: &profiles,
        refs: &refs,
        sorted: &sorted,
    };
    let mut splitter = split::Splitter::new(&ft, &st, &links, options);
    let mut w = window::Window::new(whole);
    let mut chunk_links = Vec::new();
    let mut invalid = Vec::new();
    for (s, producer_chunk_id) in sessions.iter().zip(chunk_ids) {
        if s.observations == 0 {
            continue;
        }
        t.stats.sessions += 1;
        // Strict out: each chunk is validated as it is cut and only valid ones are emitted. A
        // session that carries another producer's chunk id keeps it when it makes exactly one
        // chunk, so its first chunk waits for a second one or for the end of the session.
        let mut out = outbox::Outbox {
            emit: &mut *emit,
            options,
            producer_chunk_id,
            held: None,
            invalid: &mut invalid,
        };
        {
            let mut pass = |chunk: ProfileChunk, links: &mut Vec<SampleLink>, stats: &mut Stats| {
                out.cut(chunk, std::mem::take(links), stats)
            };
            let mut sink = split::Sink {
                emit: &mut pass,
                links: &mut chunk_links,
                stats: &mut t.stats,
            };
            splitter.split_session(s, &src, &mut w, &mut sink);
        }
        out.end_of_session(&mut t.stats);
    }
    t.invalid_chunks = invalid;
    t.held = w.held;
    t
}

/// [`to_chunks`] over an export request.
pub fn request_to_chunks(
    req: &ExportProfilesServiceRequest,
    options: &ChunkOptions,
) -> ChunkTranslation {
    to_chunks(req.dictionary.as_ref(), &req.resource_profiles, options)
}
