//! OTLP profiles -> Sentry Sample Format V2 profile chunks. Pure functions, no I/O.
//!
//! [`to_chunks`] turns the `ResourceProfiles` of one request (with its dictionary) into
//! [`ProfileChunk`]s, the trace links of their samples ([`SampleLink`], since a chunk cannot
//! carry links), the profiles it had to reject, and counters.
//!
//! # Pipeline
//!
//! 1. Every profile is read on its own. Any invalid wire index (out of range or negative, in
//!    any table: strings, attributes, functions, locations, mappings, stacks, links) or a sample
//!    whose `values` and `timestamps_unix_nano` lengths differ rejects **that profile only**
//!    ([`RejectedProfile`], path `resource_profiles[i].scope_profiles[j].profiles[k]`, error
//!    naming the table and index); the others go on. Index 0 reads `table[0]` as the Collector's
//!    pdata does: "unset" when that entry is absent or the zero value (so dictionaries without
//!    their zero entries still translate), the entry itself when a producer put a real one
//!    there (async-profiler before proto 1.10; see [`crate::Dictionary`]).
//! 2. A profile carrying the Profile attribute `sentry.chunk_id` is rebuilt exactly as the chunk
//!    it came from only when it is profilink's own complete encoding of a valid chunk: it passes
//!    the marker set of [`check_marker`](crate::sentry_to_otlp::check_marker) (the `profilink.format` mark, or the
//!    `profilink` scope of earlier versions; `sentry.chunk_id`, `sentry.profiler_id` 32 hex,
//!    `sentry.version` `"2"`, a Sentry `sentry.platform`, `telemetry.sdk.name`/`.version`), it
//!    restores, spans at most 66 s and passes the strict-out check below. Otherwise (e.g.
//!    another producer's partial `sentry.*` marks) it is translated normally and counted
//!    ([`Stats::restore_fallbacks`]), keeping the producer's valid ids (see *Sessions and ids*).
//! 3. Non-CPU profiles (sample types outside the [`sample_types`] table) follow
//!    [`NonCpuPolicy`] (skipped ones are counted per `"type:unit"`). Of CPU/wall *sibling*
//!    profiles (one `ScopeProfiles`, same `time_unix_nano`, `duration_nano`, sample count and
//!    sequence of `stack_index`: one recording under several sample types, as pprof → OTLP
//!    makes them) only one is translated: the first with a count unit, else the first (counted
//!    in [`Stats::profiles_skipped_sibling`]).
//! 4. Each sample is assigned to a *session* (one profiled process, one `profiler_id`) and a
//!    thread from its resource and sample attributes; its observations (one per timestamp, or
//!    an expansion of aggregated values) are counted, not made yet; see *Sessions*,
//!    *Threads*, *Observations* below.
//! 5. Sessions are cut one after the other: each session's observations are made one window
//!    at a time, sorted by time and cut into chunks of at most `max_chunk_duration_ns` and
//!    `max_chunk_bytes`; see *Windows* and *Chunks*.
//! 6. Strict out: every emitted chunk passes profilink's chunk validator; see *Strict out*.
//!
//! Work is linear in the input (each location, stack, mapping and link is resolved once, in
//! `Vec`s indexed by wire index), plus at most `max_expanded_samples` observations per profile
//! from aggregated values; stacks are capped at `max_stack_depth` frames.
//!
//! # Windows
//!
//! Memory holds the request's tables, 12 bytes per OTLP sample (its resolved thread, stack and
//! link; and 8 per timestamp of long samples whose timestamps are out of order) and one window
//! of one session, whatever the number of profiles per session or their
//! order in the request: a session's samples are indexed in *blocks* (runs of consecutive
//! samples spanning at most a quarter of the chunk duration; a longer sample whose times never
//! decrease is cut into blocks by index, one with timestamps out of order by index of a sorted
//! copy of them), and before a chunk starting at `t` is cut, the blocks starting by
//! `t + max_chunk_duration_ns` are read, so the window holds the observations of at most the
//! chunk duration plus a quarter of it.
//! [`ChunkTranslation::held`] reports what was held at most. Chunks go out as they are cut
//! ([`to_chunks_with`], [`to_chunks_streamed`]); [`to_chunks`] collects them, and the links
//! (at most `max_links`) are collected unless [`to_chunks_streamed`] hands them out per chunk.
//! The output is the same as cutting each session whole.
//!
//! # Sessions and ids
//!
//! The identity of a process is built from the attributes `container.id`, `host.id`,
//! `host.name`, `k8s.pod.uid`, `process.creation.time`, `process.executable.name`,
//! `process.executable.path`, `process.pid`, `service.instance.id` and `service.name`, on the
//! resource and on the sample (sample wins; older eBPF profilers put `process.*` on samples, so
//! the samples of one resource may form several sessions). Without any of them, all scalar
//! resource attributes are the identity. See [`ProcessIdentity`].
//!
//! * `profiler_id`: a valid `sentry.profiler_id` (a UUID, dashes and case ignored, normalized
//!   to 32 lowercase hex; the sample's wins over the profile's, the profile's over the
//!   resource's; an invalid one is ignored) if present, else
//!   SHA-256 over `profilink/profiler_id/v1\0` and each identity `(key, value)` in key order,
//!   each length-prefixed (u32 big-endian); first 16 bytes, UUID version 4 and variant bits
//!   set, 32 lowercase hex ([`derive_profiler_id`]). Deterministic, so retries, replicas and a
//!   traces pipeline agree.
//! * `chunk_id`: SHA-256 over `profilink/chunk_id/v1\0`, the profiler id (u64 BE length +
//!   bytes), the first and last sample time (u64 BE ns), the sample count and a 64-bit content
//!   checksum (sum over samples of a SplitMix64 mix of time, stack digest and thread digest);
//!   first 16 bytes shaped as a UUID v4, 32 lowercase hex. A profile (not restored) carrying
//!   a valid, non-zero `sentry.chunk_id` of its producer keeps its observations in a session
//!   of their own (same profiler id), and when they make exactly one chunk, that chunk reuses
//!   the producer's id (normalized); several chunks get derived ids.
//!
//! Chunk metadata: `release` = `service.version`; `environment` =
//! `deployment.environment.name` or else `deployment.environment`; `client_sdk` = the options'
//! `sdk_name`/`sdk_version` (always; a resource's `telemetry.sdk.*` is not copied, because the
//! chunk is produced by profilink and Sentry's SDK-version filters should judge profilink);
//! `version` = `"2"`. Values are taken from the session's first sample (sample attributes,
//! then resource attributes).
//!
//! # Threads
//!
//! `thread_id` is the decimal string of `thread.id` (int, or numeric string normalized; a
//! non-numeric string becomes a stable decimal hash). Samples without `thread.id` use the
//! process's `process.pid` as thread id (the main thread's id on Linux), or `"0"`.
//! `thread_metadata` lists exactly the threads with samples in the chunk, named by
//! `thread.name` (first non-empty name seen) when known.
//!
//! # Observations
//!
//! * Timestamps (with or without values): one Sentry sample per timestamp; a value is a weight
//!   and is not repeated (for `samples/count` it is 1).
//! * Values without timestamps (aggregated): the values are summed into `v` and expanded into
//!   `n(v)` samples spread evenly over `[time_unix_nano, time_unix_nano + duration_nano)`
//!   (sample `i` of `n` at `time_unix_nano + i * duration_nano / n`; all at `time_unix_nano`
//!   when the duration is 0). `n(v)` = `v` for count units (`samples/count`), `round(v /
//!   period)` (at least 1) for `cpu/nanoseconds`-like types with a nanosecond period, else 1;
//!   0 for `v <= 0`. When a profile would produce more than `max_expanded_samples`, every
//!   sample's `n` is scaled by `max / total` (floor); the loss is counted.
//! * Non-CPU profiles (`off_cpu`, `events`, allocations…): skipped by default
//!   ([`NonCpuPolicy::Skip`], counted); with [`NonCpuPolicy::Include`], one sample per
//!   timestamp and one per value-only sample.
//! * Links: a sample with a non-zero `link_index` whose link has a 16-byte trace id and an
//!   8-byte span id (not all zero) yields one [`SampleLink`] per emitted observation.
//!
//! # Frames and stacks
//!
//! Stacks are leaf-first in both formats: `location_indices[0]` is the leaf, and
//! `Location.lines[0]` is the innermost inlined function, so one location gives one frame per
//! line in `lines` order. Frames carry `function`, `abs_path`/`filename` (an absolute path gives
//! `abs_path` = path and `filename` = base name; a relative one only `filename`), `lineno`,
//! `colno`, `package` (native code: the mapping's file), `module` (JVM class, Go package) and always an
//! explicit `in_app`. Frames without a function name (unsymbolized native code) get
//! `instruction_addr` from a non-zero `Location.address` as `"0x…"` (moved into its image's
//! synthetic slot, see *Debug images*) and no synthesized name, so Sentry can symbolicate them;
//! address 0 means unset and gives no `instruction_addr` (anonymous JavaScript functions keep
//! only their file, line and column). Stacks deeper than `max_stack_depth` lose their
//! root-side frames (counted).
//!
//! `in_app` heuristic: false for kernel frames; for files under system or dependency
//! locations (`/usr/lib/`, `/lib/`, `/usr/local/lib/`, `/usr/local/go/`, `site-packages`,
//! `node_modules`, `vendor`, Go module cache `@v`, …); for native frames in system libraries
//! and interpreters (`libc.so*`, `libstdc++*`, `ld-linux*`, `linux-vdso*`, `libjvm.so`,
//! `node`, `python*`, …) or without a mapping; for the Go standard library (package path
//! without a dot in its first element, except `main`); for JDK classes (`java.`, `javax.`,
//! `jdk.`, `sun.`, `com.sun.`, `kotlin.`, `scala.`) and JVM stubs; for .NET `System.` and
//! `Microsoft.`; for V8 frames without a file. Everything else is app code.
//!
//! # Platforms
//!
//! Frame runtimes come from the location attribute `profile.frame.type`. The chunk `platform`
//! is the session's dominant managed runtime (`jvm`→`java`, `cpython`→`python`, `v8js`→`node`,
//! `go`→`go`, `dotnet`→`csharp`, `php`→`php`, `ruby`→`ruby`, `perl`→`perl`, `beam`→`elixir`,
//! `luajit`→`other`), by number of samples whose leaf-most managed frame has that runtime;
//! else the hint of `telemetry.sdk.language` / `process.runtime.name`; else `rust` when there
//! is native code (`native`, `kernel`, `unknown`…: Sentry symbolicates native addresses only
//! for the `rust` and `cocoa` platforms); else `other`. A frame gets `platform` only when its
//! runtime maps to a different platform (`native` for native/kernel frames). Trade-off: Sentry
//! honours an explicit `in_app` only when the frame platform is unset or equals the chunk's,
//! so on such foreign frames Sentry recomputes `in_app` itself (false for `native`).
//!
//! # Debug images
//!
//! For each mapping used by a frame of the chunk that has a GNU build id (mapping attribute
//! `process.executable.build_id.gnu`) and a non-empty range (`memory_limit > memory_start`;
//! kernel mappings are `0-0` and their frames are already symbolized): `type` `symbolic`,
//! `code_file` = mapping file name, `code_id` = build id hex, `debug_id` = the build id's first
//! 16 bytes (zero-padded) with the first three UUID groups byte-swapped (little-endian, as
//! symbolic does for ELF), age 0. See [`debug_id_from_build_id`].
//!
//! Addresses: the eBPF profiler reports native addresses and mapping ranges in each object's
//! ELF virtual-address space, where the objects of a process overlap, while Symbolicator picks
//! a frame's image by address across the chunk (`abs` mode) and looks it up at
//! `instruction_addr - image_addr` relative to the object's first `PT_LOAD`. So each image gets
//! a 4 GiB slot of its own at `B`, a function of its build id
//! ([`profilink_proto::sentry::image_space`]), and an estimated load address `L` =
//! `memory_start - file_offset` rounded down to 2 MiB when that removes at most 64 KiB:
//! `image_addr` = `B + L`, `image_size` = `memory_limit - L`, and each of its native frames
//! gets `instruction_addr` = `B + address` (when the address lies in `[L, memory_limit)`; other
//! addresses stay as they are, outside every slot). Assumptions and limits are in the
//! `debug_images` module: mappings in ELF space as the eBPF profiler sends them, images ending
//! below 4 GiB, and a text segment whose `p_vaddr - p_offset` is the first `PT_LOAD` address,
//! or at most 64 KiB above it when that address is 2 MiB-aligned.
//!
//! # Chunks
//!
//! A chunk spans at most `max_chunk_duration_ns` (first to last sample, ≤ 66 s) and its JSON
//! stays within `max_chunk_bytes` (an upper-bound estimate kept while filling it). Samples are
//! sorted by timestamp (ties by thread, stack); a chunk lists only the stacks, frames, debug
//! images and threads it uses. Threads with fewer than two non-empty-stack samples in a chunk
//! (which Relay drops) are counted, grouped into threads Relay keeps by
//! [`SparseThreadGrouping::Group`] (default; linked threads are never grouped), and what is
//! still sparse is handled by [`SparseThreadPolicy`].
//!
//! # Strict out
//!
//! No chunk leaves [`to_chunks`] that fails profilink's own chunk validator
//! ([`profilink_proto::validate::validate_chunk_errors`], the rules of `profilink validate`) at
//! error level. Each chunk is validated once, on the struct (its size is already bounded while
//! it is cut); restored chunks are validated when restored (and translated normally instead if
//! they fail). A chunk that fails is removed with its links and reported in
//! [`ChunkTranslation::invalid_chunks`] (the first error's rule is the reason), counted in
//! [`Stats::chunks_invalid`] and [`Stats::samples_dropped_invalid`]. The CLI prints it and
//! exits 1; the service counts it as `profilink_translation_errors_total{reason="invalid_chunk"}`
//! and logs a warning. One exception follows the options: unless the [`SparseThreadPolicy`] is
//! `Drop`, a chunk with samples whose threads all have fewer than two (`no-samples`) is emitted,
//! because its consumer (the service's accumulator) merges chunks before Relay's rule applies.

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
