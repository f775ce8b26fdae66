//! Sessions to chunks: sorting, splitting by duration and size, sparse threads, assembly.
//!
//! A session's observations are read one window at a time ([`super::window`]), sorted by
//! (timestamp, thread, stack). Chunks are cut greedily from the earliest sample: a chunk takes samples while the span from its first
//! sample stays within `max_chunk_duration_ns` (capped at 66 s) and an upper-bound estimate of
//! its serialized size stays within `max_chunk_bytes` (capped at 50 MiB). The estimate is exact
//! for metadata, frames, debug images and thread names (measured once each) and bounds each
//! sample and stack reference from above (24 characters per timestamp, index digits of the
//! largest possible index), so a chunk never exceeds the limit.
//!
//! Within each chunk, threads with fewer than 2 samples with a non-empty stack are *sparse*
//! (Relay drops them): each is counted in [`super::Stats::sparse_threads`]; under
//! [`super::SparseThreadGrouping::Group`] they are grouped into threads Relay keeps
//! ([`ThreadGroups`](profilink_proto::sentry::ThreadGroups); threads with a linked observation in the
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
use super::observations::{LinkedObs, Obs, Session};
use super::options::{ChunkOptions, SparseThreadGrouping, SparseThreadPolicy};
use super::platform::{Runtime, choose_platform, frame_platform};
use super::stacks::{EMPTY_STACK, StackTable};
use super::window::{Sources, Window};
use super::{Stats, json_len};
use crate::sample_link::SampleLink;
use profilink_proto::sentry::CHUNK_VERSION;
use profilink_proto::sentry::{
    ClientSdk, DebugMeta, Frame, ProfileChunk, ProfileData, Sample, ThreadGroups, ThreadMetadata,
    ThreadStat,
};
use profilink_proto::sentry::{nanos_to_secs, secs_to_nanos};
use std::collections::BTreeMap;
use std::sync::Arc;

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
#[derive(Clone, Copy, Default)]
struct Digest {
    checksum: u64,
    first: u64,
    last: u64,
    /// The chunk's size estimate (an upper bound of its JSON length).
    est: usize,
}

/// Outputs of splitting.
pub(crate) struct Sink<'o> {
    /// Receives each chunk as it is cut, with the links of its samples (taken from `links`)
    /// and the counters.
    pub emit: &'o mut dyn FnMut(ProfileChunk, &mut Vec<SampleLink>, &mut Stats),
    /// The links of the chunk being cut.
    pub links: &'o mut Vec<SampleLink>,
    /// Counters.
    pub stats: &'o mut Stats,
}

/// Chunk assembly over the request's frame and stack tables.
pub(crate) struct Splitter<'r, 'a> {
    ft: &'r FrameTable<'a>,
    st: &'r StackTable,
    links: &'r [([u8; 16], [u8; 8])],
    opts: &'r ChunkOptions,
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
        opts: &'r ChunkOptions,
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

    /// Splits one session into chunks, reading its observations window by window (see
    /// [`super::window`]).
    pub(crate) fn split_session(
        &mut self,
        s: &Session,
        src: &Sources<'_, '_>,
        w: &mut Window,
        sink: &mut Sink<'_>,
    ) {
        if s.observations == 0 {
            return;
        }
        let platform = choose_platform(&s.runtimes, s.platform_hint);
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
        let max_dur = self.opts.effective_max_chunk_duration_ns();
        // Threads with a linked observation anywhere in the session: spans may reference
        // them, so they are never grouped.
        let linked = &s.linked_threads;

        w.start(s);
        while let Some(first) = w.next_time(s) {
            // The chunk starting at `first` takes observations up to `first + max_dur`.
            w.fill_to(first.saturating_add(max_dur), s, src);
            let mut chunk = template.clone();
            let (range, digest) =
                self.fill(s, &w.ready, w.cursor, &ctx, &mut th, &mut chunk, sink.stats);
            w.cursor = range.end;
            if range.is_empty() {
                continue;
            }
            let obs = &w.ready[range];
            // Threads Relay would drop: fewer than two non-empty-stack samples in the chunk.
            let sparse = th
                .in_chunk
                .iter()
                .filter(|&&t| th.count[t as usize] < 2)
                .count();
            sink.stats.sparse_threads += sparse as u64;
            self.groups = if grouping && sparse > 0 {
                self.plan_groups(s, &th, linked, digest.est)
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
            let links = (&w.ready_linked[..], &mut w.link_cursor);
            if any_dropped {
                // Rare (only under `SparseThreadPolicy::Drop`): rebuild the chunk without the
                // dropped threads' samples, numbering stacks and frames by first use among
                // the samples that stay.
                let mut chunk = template.clone();
                self.assemble_dropping(s, obs, &mut chunk, &th, dropped_gen, links, sink);
            } else {
                self.finish(s, obs, chunk, digest, links, sink);
            }
        }
        w.finish();
    }

    /// Fills `chunk` (a copy of the session's template) from observation `i` on, in one pass:
    /// takes samples while the chunk stays within the duration and size limits (samples that
    /// cannot fit even alone are dropped and counted), and builds its stacks (frames and
    /// images are listed in `new_frames`/`new_images`, `thread_metadata` and the samples
    /// filled). Returns the range taken (empty at the end) and its digest.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &mut self,
        s: &Session,
        obs: &[Obs],
        i: usize,
        ctx: &SessionCtx,
        th: &mut ThreadMarks,
        chunk: &mut ProfileChunk,
        stats: &mut Stats,
    ) -> (std::ops::Range<usize>, Digest) {
        let max_dur = self.opts.effective_max_chunk_duration_ns();
        let max_bytes = self.opts.effective_max_chunk_bytes();
        let n = obs.len();
        let profile = &mut chunk.profile;
        let g = self.next_gen();
        let tg = th.next_gen();
        th.in_chunk.clear();
        self.new_frames.clear();
        self.new_images.clear();
        let first = obs[i].ts;
        // Room for every sample within the duration limit (observations are sorted; the size
        // limit may cut earlier, see `finish`).
        let within = obs[i..].partition_point(|o| o.ts - first <= max_dur);
        profile.samples.reserve_exact(within);
        let mut est = ctx.base;
        let mut stack_digits = 1;
        let (mut any_thread, mut any_image) = (false, false);
        let mut checksum = 0u64;
        let mut j = i;
        while j < n {
            let o = obs[j];
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
                // Frames and images this sample would have added are not the chunk's (their
                // marks are stale once the generation moves on).
                self.new_frames.truncate(frames_before);
                self.new_images.truncate(images_before);
                if j == i {
                    // It cannot fit even alone: dropped; the next chunk starts after it.
                    stats.samples_dropped_size += 1;
                    return (i + 1..i + 1, Digest::default());
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
            last: obs[j - 1].ts,
            est,
        };
        (i..j, digest)
    }
}

mod seal;

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
