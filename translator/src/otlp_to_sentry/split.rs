//! Sessions to chunks: sorting, splitting by duration and size, sparse threads, assembly.
//!
//! A session's observations are sorted by (timestamp, thread, stack). Chunks are then cut
//! greedily from the earliest sample: a chunk takes samples while the span from its first
//! sample stays within `max_chunk_duration_ns` (capped at 66 s) and an upper-bound estimate of
//! its serialized size stays within `max_chunk_bytes` (capped at 50 MiB). The estimate is exact
//! for metadata, frames, debug images and thread names (measured once each) and bounds each
//! sample and stack reference from above (24 characters per timestamp, index digits of the
//! largest possible index), so a chunk never exceeds the limit.
//!
//! Within each chunk, threads with fewer than 2 samples with a non-empty stack are *sparse*
//! (Relay drops them): each is counted in [`super::Stats::sparse_threads`]; under
//! [`super::SparseThreadGrouping::Group`] they are grouped into threads Relay keeps
//! ([`profilink_proto::sentry::thread_groups`]; threads with a linked observation in the
//! session are never grouped), and under [`super::SparseThreadPolicy::Drop`] the samples of
//! threads still sparse are removed (counted in [`super::Stats::samples_dropped_sparse`]).
//! Grouping rewrites the thread ids of the finished chunk; the size estimate stays an upper
//! bound because the group's `thread_metadata` entries and longer ids are added to it first
//! (a chunk where they would not fit is left ungrouped).
//!
//! One pass over a chunk's observations both cuts it and builds its stacks, thread metadata
//! and content checksum; frames and samples are then written in tight loops. Only when sparse
//! threads are dropped is the chunk built again from its range, without them (stack and frame
//! numbering follow first use among the samples kept).
//!
//! A chunk holds only the stacks, frames, debug images and `thread_metadata` entries its own
//! samples use, numbered in order of first use; samples are in timestamp order. Frames are
//! shared (`Arc`): each is built once per chunk platform and every chunk of that platform in
//! the request points to it. Sample
//! timestamps are `nanos_to_secs` of the observation time.

use super::frames::FrameTable;
use super::ids::{chunk_id, sample_checksum};
use super::options::{Options, SparseThreadGrouping, SparseThreadPolicy};
use super::platform::{Runtime, choose_platform, frame_platform};
use super::sort::sort_observations;
use super::stacks::{EMPTY_STACK, StackTable};
use super::{Stats, json_len};
use crate::sample_link::SampleLink;
use profilink_proto::sentry::CompactString;
use profilink_proto::sentry::chunk::CHUNK_VERSION;
use profilink_proto::sentry::timestamp::{nanos_to_secs, secs_to_nanos};
use profilink_proto::sentry::{
    ClientSdk, DebugMeta, Frame, ProfileChunk, ProfileData, Sample, ThreadGroups, ThreadMetadata,
    ThreadStat,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One observation: a stack seen on a thread at a time (16 bytes; sorted by its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Obs {
    /// Unix nanoseconds.
    pub ts: u64,
    /// Index into [`Session::threads`].
    pub thread: u32,
    /// Unique stack id ([`StackTable`]).
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

const NONE: u32 = u32::MAX;
/// `{"timestamp":` + 24 digits + `,"stack_id":` + `,"thread_id":"` + `"}` + `,`.
const SAMPLE_FIXED: usize = 13 + 24 + 12 + 14 + 2 + 1;
/// `,"thread_metadata":{}`.
const THREAD_METADATA_WRAPPER: usize = 21;
/// `"debug_meta":{"images":[]},`.
const DEBUG_META_WRAPPER: usize = 27;

fn digits(n: usize) -> usize {
    let mut d = 1;
    let mut n = n / 10;
    while n > 0 {
        d += 1;
        n /= 10;
    }
    d
}

/// Per-session thread bookkeeping for the chunk being built.
struct ThreadMarks {
    /// Generation at which each thread was last marked.
    mark: Vec<u32>,
    /// Non-empty-stack samples of each thread in the chunk (valid while `mark` is current).
    count: Vec<u32>,
    /// All samples of each thread in the chunk (valid while `mark` is current).
    total: Vec<u32>,
    /// Current generation.
    gen_: u32,
    /// Threads of the chunk, in order of first sample.
    in_chunk: Vec<u32>,
}

impl ThreadMarks {
    fn new(threads: usize) -> Self {
        ThreadMarks {
            mark: vec![0; threads],
            count: vec![0; threads],
            total: vec![0; threads],
            gen_: 0,
            in_chunk: Vec::new(),
        }
    }

    fn next_gen(&mut self) -> u32 {
        if self.gen_ == u32::MAX {
            self.gen_ = 0;
            self.mark.fill(0);
        }
        self.gen_ += 1;
        self.gen_
    }
}

/// The frames of the request as the chunks of one platform share them.
struct SharedFrames {
    /// The chunk platform.
    platform: String,
    /// The `platform` of frames of each runtime (by [`Runtime::index`]) in these chunks.
    frame_platforms: Vec<Option<Arc<str>>>,
    /// What a frame's `platform` adds to its serialized size, by [`Runtime::index`].
    platform_extra: [usize; Runtime::COUNT],
    /// Each frame (by frame id) once built.
    frames: Vec<Option<Arc<Frame>>>,
}

/// What is fixed for all chunks of a session.
struct SessionCtx {
    /// Serialized size of the chunk without samples, stacks, frames, images and threads.
    base: usize,
    /// Serialized size of each thread's `thread_metadata` entry.
    meta_len: Vec<usize>,
}

/// The chunk's content checksum and time range, accumulated over its samples.
#[derive(Clone, Copy)]
struct Digest {
    checksum: u64,
    first: u64,
    last: u64,
    /// The chunk's size estimate (an upper bound of its JSON length).
    est: usize,
}

/// Outputs of splitting.
pub(crate) struct Sink<'o> {
    /// Receives each chunk as it is cut.
    pub emit: &'o mut dyn FnMut(ProfileChunk),
    /// Links.
    pub links: &'o mut Vec<SampleLink>,
    /// Counters.
    pub stats: &'o mut Stats,
}

/// Chunk assembly over the request's frame and stack tables.
pub(crate) struct Splitter<'r, 'a> {
    ft: &'r FrameTable<'a>,
    st: &'r StackTable,
    links: &'r [([u8; 16], [u8; 8])],
    opts: &'r Options,
    gen_: u32,
    stack_seen: Vec<u32>,
    stack_out: Vec<u32>,
    frame_seen: Vec<u32>,
    frame_out: Vec<u32>,
    map_seen: Vec<u32>,
    /// The runtimes of the request's frames (each once).
    runtimes: Vec<super::platform::Runtime>,
    /// Mapping with a debug image of each frame, or `NONE`.
    frame_image: Vec<u32>,
    /// Frames as chunks share them, per chunk platform (a frame's `platform` depends only on
    /// its runtime and the chunk's platform): each frame is built once per platform in the
    /// request, however many sessions and chunks use it.
    shared: Vec<SharedFrames>,
    /// Index into `shared` of the current session's chunk platform.
    current: usize,
    /// Reused sort buffer.
    sort_scratch: Vec<Obs>,
    /// Samples of each stack in the current session.
    stack_count: Vec<u64>,
    /// Chunk stack id of each kept sample (when sparse threads are dropped).
    sample_stacks: Vec<u32>,
    /// Frame ids of the chunk being assembled, in order of first use.
    new_frames: Vec<u32>,
    /// Mappings (with a debug image) of the chunk being assembled, in order of first use.
    new_images: Vec<u32>,
    /// The thread groups of the chunk being assembled, applied when it is sealed.
    groups: ThreadGroups,
}

impl<'r, 'a> Splitter<'r, 'a> {
    pub(crate) fn new(
        ft: &'r FrameTable<'a>,
        st: &'r StackTable,
        links: &'r [([u8; 16], [u8; 8])],
        opts: &'r Options,
    ) -> Self {
        Splitter {
            ft,
            st,
            links,
            opts,
            gen_: 0,
            stack_seen: vec![0; st.stacks.len()],
            stack_out: vec![0; st.stacks.len()],
            frame_seen: vec![0; ft.frames.len()],
            frame_out: vec![0; ft.frames.len()],
            map_seen: vec![0; ft.mappings.len()],
            runtimes: {
                let mut seen = [false; Runtime::COUNT];
                let mut v = Vec::new();
                for f in &ft.frames {
                    if !std::mem::replace(&mut seen[f.runtime.index()], true) {
                        v.push(f.runtime);
                    }
                }
                v
            },
            shared: Vec::new(),
            current: 0,
            sort_scratch: Vec::new(),
            stack_count: Vec::new(),
            sample_stacks: Vec::new(),
            new_frames: Vec::new(),
            new_images: Vec::new(),
            groups: ThreadGroups::default(),
            frame_image: ft
                .frames
                .iter()
                .map(|f| {
                    let m = f.mapping;
                    if m != NONE && ft.mappings[m as usize].image.is_some() {
                        m
                    } else {
                        NONE
                    }
                })
                .collect(),
        }
    }

    fn next_gen(&mut self) -> u32 {
        if self.gen_ == u32::MAX {
            self.gen_ = 0;
            self.stack_seen.fill(0);
            self.frame_seen.fill(0);
            self.map_seen.fill(0);
        }
        self.gen_ += 1;
        self.gen_
    }

    /// Selects the shared frames of chunk platform `platform`, setting them up (frame platforms
    /// per runtime, O(runtimes)) the first time that platform is seen in the request.
    fn select_platform(&mut self, platform: &str) {
        self.current = match self.shared.iter().position(|c| c.platform == platform) {
            Some(i) => i,
            None => {
                let mut shared = SharedFrames {
                    platform: platform.to_owned(),
                    frame_platforms: vec![None; Runtime::COUNT],
                    platform_extra: [0; Runtime::COUNT],
                    frames: vec![None; self.ft.frames.len()],
                };
                for &r in &self.runtimes {
                    let p = frame_platform(r, platform);
                    shared.platform_extra[r.index()] = p.map_or(0, |p| 14 + p.len());
                    shared.frame_platforms[r.index()] = p.map(Arc::from);
                }
                self.shared.push(shared);
                self.shared.len() - 1
            }
        };
    }

    fn image_of(&self, f: u32) -> Option<u32> {
        let m = self.frame_image[f as usize];
        (m != NONE).then_some(m)
    }

    /// Splits one session into chunks.
    pub(crate) fn split_session(&mut self, s: &mut Session, sink: &mut Sink<'_>) {
        if s.obs.is_empty() {
            return;
        }
        // Samples per stack, counted in the sort's first pass, then per primary runtime (for
        // the platform). Counting per stack keeps consecutive increments mostly on different
        // counters (one counter per runtime would make each increment wait for the previous).
        let stack_count = &mut self.stack_count;
        stack_count.clear();
        stack_count.resize(self.st.stacks.len(), 0);
        sort_observations(&mut s.obs, &mut self.sort_scratch, |o| {
            if let Some(c) = stack_count.get_mut(o.stack as usize) {
                *c += 1;
            }
        });
        let mut counts = [0u64; Runtime::COUNT];
        for (info, &c) in self.st.stacks.iter().zip(stack_count.iter()) {
            counts[info.primary.index()] += c;
        }
        s.linked.sort_unstable();
        let mut link_cursor = 0usize;
        let platform = choose_platform(&counts, s.platform_hint);
        self.select_platform(platform);
        let template = ProfileChunk {
            chunk_id: "0".repeat(32),
            profiler_id: s.profiler_id.clone(),
            debug_meta: None,
            environment: s.environment.clone(),
            platform: platform.to_owned(),
            release: s.release.clone(),
            content_type: None,
            client_sdk: Some(ClientSdk {
                name: self.opts.sdk_name.clone(),
                version: self.opts.sdk_version.clone(),
            }),
            measurements: BTreeMap::new(),
            version: CHUNK_VERSION.to_owned(),
            profile: ProfileData::default(),
        };
        let ctx = SessionCtx {
            base: json_len(&template),
            meta_len: s
                .threads
                .iter()
                .map(|t| t.id.len() + 5 + t.name.as_ref().map_or(0, |n| 8 + json_len(n)))
                .collect(),
        };
        let mut th = ThreadMarks::new(s.threads.len());
        let drop = self.opts.sparse_thread_policy == SparseThreadPolicy::Drop;
        let grouping = self.opts.sparse_thread_grouping == SparseThreadGrouping::Group;
        // Threads with a linked observation anywhere in the session: spans may reference
        // them, so they are never grouped.
        let mut linked = vec![
            false;
            if s.linked.is_empty() {
                0
            } else {
                s.threads.len()
            }
        ];
        for l in &s.linked {
            if let Some(t) = linked.get_mut(((l.key >> 32) as u32) as usize) {
                *t = true;
            }
        }

        let mut i = 0;
        while i < s.obs.len() {
            let mut chunk = template.clone();
            let (range, digest) = self.fill(s, i, &ctx, &mut th, &mut chunk, sink.stats);
            i = range.end;
            if range.is_empty() {
                continue;
            }
            // Threads Relay would drop: fewer than two non-empty-stack samples in the chunk.
            let sparse = th
                .in_chunk
                .iter()
                .filter(|&&t| th.count[t as usize] < 2)
                .count();
            sink.stats.sparse_threads += sparse as u64;
            self.groups = if grouping && sparse > 0 {
                self.plan_groups(s, &th, &linked, digest.est)
            } else {
                ThreadGroups::default()
            };
            let dropped_gen = th.next_gen();
            let mut any_dropped = false;
            if drop && sparse > 0 {
                for &t in &th.in_chunk {
                    if th.count[t as usize] < 2
                        && !self
                            .groups
                            .moves
                            .contains_key(s.threads[t as usize].id.as_str())
                    {
                        th.mark[t as usize] = dropped_gen;
                        any_dropped = true;
                    }
                }
            }
            if any_dropped {
                // Rare (only under `SparseThreadPolicy::Drop`): rebuild the chunk without the
                // dropped threads' samples, numbering stacks and frames by first use among
                // the samples that stay.
                let mut chunk = template.clone();
                self.assemble_dropping(
                    s,
                    &range,
                    &mut chunk,
                    &th,
                    dropped_gen,
                    &mut link_cursor,
                    sink,
                );
            } else {
                self.finish(s, &range, chunk, digest, &mut link_cursor, sink);
            }
        }
    }

    /// The thread groups of the chunk just filled (see the module docs), or none when the
    /// grouped chunk might not fit in `max_chunk_bytes` (`est` is the filled chunk's estimate).
    fn plan_groups(
        &self,
        s: &Session,
        th: &ThreadMarks,
        linked: &[bool],
        est: usize,
    ) -> ThreadGroups {
        let stats: Vec<ThreadStat<'_>> = th
            .in_chunk
            .iter()
            .map(|&t| {
                let info = &s.threads[t as usize];
                ThreadStat {
                    id: &info.id,
                    name: info.name.as_deref(),
                    active: th.count[t as usize] as usize,
                    linked: linked.get(t as usize).copied().unwrap_or(false),
                }
            })
            .collect();
        let groups = ThreadGroups::plan(&stats, &[]);
        if groups.is_empty() {
            return groups;
        }
        // What grouping adds: longer ids on the moved samples and the groups' entries.
        let mut extra = 0usize;
        for &t in &th.in_chunk {
            let info = &s.threads[t as usize];
            if let Some(to) = groups.moves.get(info.id.as_str()) {
                extra += th.total[t as usize] as usize * to.len().saturating_sub(info.id.len());
            }
        }
        for (id, name) in &groups.groups {
            extra += id.len() + 5 + 8 + json_len(name) + 1;
        }
        if est.saturating_add(extra) > self.opts.effective_max_chunk_bytes() {
            return ThreadGroups::default();
        }
        groups
    }

    /// Fills `chunk` (a copy of the session's template) from observation `i` on, in one pass:
    /// takes samples while the chunk stays within the duration and size limits (samples that
    /// cannot fit even alone are dropped and counted), and builds its stacks (frames and
    /// images are listed in `new_frames`/`new_images`, `thread_metadata` and the samples
    /// filled). Returns the range taken (empty at the end) and its digest.
    fn fill(
        &mut self,
        s: &Session,
        mut i: usize,
        ctx: &SessionCtx,
        th: &mut ThreadMarks,
        chunk: &mut ProfileChunk,
        stats: &mut Stats,
    ) -> (std::ops::Range<usize>, Digest) {
        let max_dur = self.opts.effective_max_chunk_duration_ns();
        let max_bytes = self.opts.effective_max_chunk_bytes();
        let n = s.obs.len();
        let profile = &mut chunk.profile;
        'restart: while i < n {
            let g = self.next_gen();
            let tg = th.next_gen();
            th.in_chunk.clear();
            self.new_frames.clear();
            self.new_images.clear();
            let first = s.obs[i].ts;
            // Room for every sample within the duration limit (observations are sorted; the
            // size limit may cut earlier, see `finish`).
            let within = s.obs[i..].partition_point(|o| o.ts - first <= max_dur);
            profile.samples.reserve_exact(within);
            let mut est = ctx.base;
            let mut stack_digits = 1;
            let (mut any_thread, mut any_image) = (false, false);
            let mut checksum = 0u64;
            let mut j = i;
            while j < n {
                let o = s.obs[j];
                if o.ts - first > max_dur {
                    break;
                }
                let thread = o.thread as usize;
                let mut delta = SAMPLE_FIXED + stack_digits + s.threads[thread].id.len();
                let new_stack = self.stack_seen[o.stack as usize] != g;
                let (frames_before, images_before) = (self.new_frames.len(), self.new_images.len());
                if new_stack {
                    let frames = self.st.frames_of(o.stack);
                    delta += 3 + frames.len() * (digits(frames_before + frames.len()) + 1);
                    for &f in frames {
                        let fi = f as usize;
                        if self.frame_seen[fi] != g {
                            self.frame_seen[fi] = g;
                            self.frame_out[fi] = self.new_frames.len() as u32;
                            self.new_frames.push(f);
                            let info = &self.ft.frames[fi];
                            delta += info.json_len
                                + self.shared[self.current].platform_extra[info.runtime.index()]
                                + 1;
                            if let Some(m) = self.image_of(f)
                                && self.map_seen[m as usize] != g
                            {
                                self.map_seen[m as usize] = g;
                                delta += self.ft.mappings[m as usize].image_json_len + 1;
                                if !any_image && self.new_images.len() == images_before {
                                    delta += DEBUG_META_WRAPPER;
                                }
                                self.new_images.push(m);
                            }
                        }
                    }
                }
                let new_thread = th.mark[thread] != tg;
                if new_thread {
                    delta += ctx.meta_len[thread]
                        + 1
                        + if any_thread {
                            0
                        } else {
                            THREAD_METADATA_WRAPPER
                        };
                }
                if est + delta > max_bytes {
                    // Frames and images this sample would have added are not the chunk's
                    // (their marks are stale once the generation moves on).
                    self.new_frames.truncate(frames_before);
                    self.new_images.truncate(images_before);
                    if j == i {
                        stats.samples_dropped_size += 1;
                        i += 1;
                        continue 'restart;
                    }
                    break;
                }
                // The sample is in the chunk.
                est += delta;
                any_image |= self.new_images.len() > images_before;
                let info = &s.threads[thread];
                if new_thread {
                    th.mark[thread] = tg;
                    th.count[thread] = 0;
                    th.total[thread] = 0;
                    th.in_chunk.push(o.thread);
                    any_thread = true;
                    profile.thread_metadata.insert(
                        info.id.clone(),
                        ThreadMetadata {
                            name: info.name.clone(),
                            priority: None,
                        },
                    );
                }
                th.count[thread] += u32::from(o.stack != EMPTY_STACK);
                th.total[thread] += 1;
                let stack_id = if new_stack {
                    let id = profile.stacks.len() as u32;
                    profile.stacks.push(
                        self.st
                            .frames_of(o.stack)
                            .iter()
                            .map(|&f| self.frame_out[f as usize] as usize)
                            .collect(),
                    );
                    self.stack_seen[o.stack as usize] = g;
                    self.stack_out[o.stack as usize] = id;
                    stack_digits = digits(profile.stacks.len());
                    id
                } else {
                    self.stack_out[o.stack as usize]
                };
                profile.samples.push(Sample {
                    timestamp: nanos_to_secs(o.ts),
                    stack_id: stack_id as usize,
                    thread_id: info.sample_id.clone(),
                });
                checksum = checksum.wrapping_add(sample_checksum(
                    o.ts,
                    self.st.stacks[o.stack as usize].digest,
                    info.digest,
                ));
                j += 1;
            }
            let digest = Digest {
                checksum,
                first,
                last: s.obs[j - 1].ts,
                est,
            };
            return (i..j, digest);
        }
        (
            i..i,
            Digest {
                checksum: 0,
                first: 0,
                last: 0,
                est: 0,
            },
        )
    }

    /// Completes a chunk filled by [`Splitter::fill`] (all its samples kept): frames, images,
    /// links, id.
    fn finish(
        &mut self,
        s: &Session,
        range: &std::ops::Range<usize>,
        mut chunk: ProfileChunk,
        digest: Digest,
        link_cursor: &mut usize,
        sink: &mut Sink<'_>,
    ) {
        let range = &s.obs[range.clone()];
        self.push_frames(&mut chunk.profile);
        let samples = &mut chunk.profile.samples;
        if samples.capacity() > 2 * samples.len() {
            // The size limit cut the chunk well before its duration limit.
            samples.shrink_to_fit();
        }
        if !s.linked.is_empty() {
            for o in range {
                let link = next_link(&s.linked, link_cursor, o.key());
                self.emit_link(s, o, link, sink);
            }
        }
        self.seal(chunk, digest, sink);
    }

    /// Adds the frames listed in `new_frames` to `profile`, with the session's frame platforms.
    /// Each frame is built once per chunk platform and shared by the chunks of that platform.
    fn push_frames(&mut self, profile: &mut ProfileData) {
        profile.frames.reserve_exact(self.new_frames.len());
        for &f in &self.new_frames {
            let fi = f as usize;
            // Frame ids index the request's frame table, which `frames` mirrors.
            let shared = &mut self.shared[self.current];
            let slot = &mut shared.frames[fi];
            let frame = match slot {
                Some(frame) => Arc::clone(frame),
                None => {
                    let info = &self.ft.frames[fi];
                    let mut frame = info.frame.clone();
                    frame.platform = shared.frame_platforms[info.runtime.index()].clone();
                    Arc::clone(slot.insert(Arc::new(frame)))
                }
            };
            profile.frames.push(frame);
        }
    }

    /// Sets the chunk's debug images and id, groups its sparse threads, and emits it.
    fn seal(&mut self, mut chunk: ProfileChunk, digest: Digest, sink: &mut Sink<'_>) {
        if !self.groups.is_empty() {
            let groups = std::mem::take(&mut self.groups);
            sink.stats.samples_grouped += chunk.profile.apply_thread_groups(&groups) as u64;
            sink.stats.threads_grouped += groups.moves.len() as u64;
            sink.stats.thread_groups += groups.groups.len() as u64;
        }
        if !self.new_images.is_empty() {
            let images = self
                .new_images
                .iter()
                .filter_map(|&m| self.ft.mappings[m as usize].image.clone())
                .collect();
            chunk.debug_meta = Some(DebugMeta { images });
        }
        let n = chunk.profile.samples.len() as u64;
        chunk.chunk_id = chunk_id(
            &chunk.profiler_id,
            digest.first,
            digest.last,
            n,
            digest.checksum,
        );
        sink.stats.samples_out += n;
        sink.stats.chunks += 1;
        (sink.emit)(chunk);
    }

    /// Emits the trace link of an emitted sample (link id 0: none).
    fn emit_link(&self, s: &Session, o: &Obs, link: u32, sink: &mut Sink<'_>) {
        if link == 0 {
            return;
        }
        let Some((trace_id, span_id)) = self.links.get(link as usize - 1) else {
            return;
        };
        if sink.links.len() < self.opts.max_links {
            sink.links.push(SampleLink {
                profiler_id: s.profiler_id.clone(),
                thread_id: s.threads[o.thread as usize].id.clone(),
                // The time as the chunk's sample states it (f64 seconds hold about 240 ns at
                // today's epoch), so the link re-attaches to that sample.
                timestamp_ns: secs_to_nanos(nanos_to_secs(o.ts)).unwrap_or(o.ts),
                trace_id: *trace_id,
                span_id: *span_id,
            });
            sink.stats.links += 1;
        } else {
            sink.stats.links_dropped += 1;
        }
    }

    /// Builds a chunk over `range` without the samples of threads marked `dropped_gen`
    /// (sparse threads under [`SparseThreadPolicy::Drop`]); not emitted when none is left.
    #[allow(clippy::too_many_arguments)]
    fn assemble_dropping(
        &mut self,
        s: &Session,
        range: &std::ops::Range<usize>,
        chunk: &mut ProfileChunk,
        th: &ThreadMarks,
        dropped_gen: u32,
        link_cursor: &mut usize,
        sink: &mut Sink<'_>,
    ) {
        let range = &s.obs[range.clone()];
        let g = self.next_gen();
        let profile = &mut chunk.profile;
        self.sample_stacks.clear();
        self.new_frames.clear();
        self.new_images.clear();
        let mut digest = Digest {
            checksum: 0,
            first: u64::MAX,
            last: 0,
            est: 0,
        };
        for o in range {
            let t = o.thread as usize;
            let link = if s.linked.is_empty() {
                0
            } else {
                next_link(&s.linked, link_cursor, o.key())
            };
            if th.mark[t] == dropped_gen {
                sink.stats.samples_dropped_sparse += 1;
                continue;
            }
            let stack_id = if self.stack_seen[o.stack as usize] == g {
                self.stack_out[o.stack as usize]
            } else {
                let frames = self.st.frames_of(o.stack);
                for &f in frames {
                    let fi = f as usize;
                    if self.frame_seen[fi] != g {
                        self.frame_seen[fi] = g;
                        self.frame_out[fi] = self.new_frames.len() as u32;
                        self.new_frames.push(f);
                        if let Some(m) = self.image_of(f)
                            && self.map_seen[m as usize] != g
                        {
                            self.map_seen[m as usize] = g;
                            self.new_images.push(m);
                        }
                    }
                }
                let id = profile.stacks.len() as u32;
                profile.stacks.push(
                    frames
                        .iter()
                        .map(|&f| self.frame_out[f as usize] as usize)
                        .collect(),
                );
                self.stack_seen[o.stack as usize] = g;
                self.stack_out[o.stack as usize] = id;
                id
            };
            self.sample_stacks.push(stack_id);
            let thread = &s.threads[t];
            if !profile.thread_metadata.contains_key(&thread.id) {
                profile.thread_metadata.insert(
                    thread.id.clone(),
                    ThreadMetadata {
                        name: thread.name.clone(),
                        priority: None,
                    },
                );
            }
            digest.first = digest.first.min(o.ts);
            digest.last = digest.last.max(o.ts);
            digest.checksum = digest.checksum.wrapping_add(sample_checksum(
                o.ts,
                self.st.stacks[o.stack as usize].digest,
                thread.digest,
            ));
            self.emit_link(s, o, link, sink);
        }
        if self.sample_stacks.is_empty() {
            return;
        }
        self.push_frames(profile);
        profile.samples.reserve_exact(self.sample_stacks.len());
        profile.samples.extend(
            range
                .iter()
                .filter(|o| th.mark[o.thread as usize] != dropped_gen)
                .zip(&self.sample_stacks)
                .map(|(o, id)| make_sample(s, o, *id)),
        );
        self.seal(std::mem::take(chunk), digest, sink);
    }
}

/// A Sentry sample for an observation.
#[inline]
fn make_sample(s: &Session, o: &Obs, stack_id: u32) -> Sample {
    Sample {
        timestamp: nanos_to_secs(o.ts),
        stack_id: stack_id as usize,
        thread_id: s.threads[o.thread as usize].sample_id.clone(),
    }
}

/// The link id of the observation with key `key` (0: none), advancing `cursor` through the
/// session's sorted linked observations (skipping those of samples dropped for size).
fn next_link(linked: &[LinkedObs], cursor: &mut usize, key: u128) -> u32 {
    while let Some(l) = linked.get(*cursor) {
        if l.key < key {
            *cursor += 1;
            continue;
        }
        if l.key == key {
            *cursor += 1;
            return l.link;
        }
        break;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::digits;

    #[test]
    fn digit_counts() {
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(usize::MAX), 20);
    }
}
