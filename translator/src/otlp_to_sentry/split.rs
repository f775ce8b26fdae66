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
//! (Relay drops them): each is counted in [`super::Stats::sparse_threads`] and, under
//! [`super::SparseThreadPolicy::Drop`], its samples are removed (counted in
//! [`super::Stats::samples_dropped_sparse`]).
//!
//! A chunk holds only the stacks, frames, debug images and `thread_metadata` entries its own
//! samples use, numbered in order of first use; samples are in timestamp order. Sample
//! timestamps are `nanos_to_secs` of the observation time.

use super::frames::FrameTable;
use super::ids::{chunk_id, sample_checksum};
use super::options::{Options, SparseThreadPolicy};
use super::platform::{Runtime, choose_platform, frame_platform};
use super::sort::sort_observations;
use super::stacks::{EMPTY_STACK, StackTable};
use super::{Stats, json_len};
use crate::sample_link::SampleLink;
use profilink_proto::sentry::CompactString;
use profilink_proto::sentry::chunk::CHUNK_VERSION;
use profilink_proto::sentry::timestamp::{nanos_to_secs, secs_to_nanos};
use profilink_proto::sentry::{
    ClientSdk, DebugMeta, ProfileChunk, ProfileData, Sample, ThreadMetadata,
};
use std::collections::{BTreeMap, HashMap};

/// One observation: a stack seen on a thread at a time (16 bytes; sorted by its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A chunk's range of observations and its frame and stack counts (before sparse threads).
struct Cut {
    start: usize,
    end: usize,
    frames: usize,
    stacks: usize,
}

/// Outputs of splitting.
pub(crate) struct Sink<'o> {
    /// Chunks.
    pub chunks: &'o mut Vec<ProfileChunk>,
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
    /// Serialized size of each frame for the current session's platform.
    frame_size: Vec<usize>,
    /// Mapping with a debug image of each frame, or `NONE`.
    frame_image: Vec<u32>,
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
            frame_size: Vec::new(),
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

    /// Per-frame serialized size in a chunk of `platform` (dense, computed once per session).
    fn frame_sizes(&mut self, platform: &str) {
        self.frame_size.clear();
        self.frame_size.extend(self.ft.frames.iter().map(|info| {
            info.json_len + frame_platform(info.runtime, platform).map_or(0, |p| 14 + p.len())
        }));
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
        sort_observations(&mut s.obs);
        s.linked.sort_unstable();
        let mut link_cursor = 0usize;
        let mut counts = [0u64; Runtime::COUNT];
        for o in &s.obs {
            counts[self.st.stacks[o.stack as usize].primary.index()] += 1;
        }
        let platform = choose_platform(&counts, s.platform_hint);
        self.frame_sizes(platform);
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
        let base = json_len(&template);
        let meta_len: Vec<usize> = s
            .threads
            .iter()
            .map(|t| t.id.len() + 5 + t.name.as_ref().map_or(0, |n| 8 + json_len(n)))
            .collect();
        let mut thread_mark = vec![0u32; s.threads.len()];
        let mut thread_count = vec![0u32; s.threads.len()];
        let mut thread_gen = 0u32;

        let mut i = 0;
        while i < s.obs.len() {
            let cut = self.cut(
                s,
                i,
                base,
                &meta_len,
                &mut thread_mark,
                &mut thread_gen,
                sink.stats,
            );
            i = cut.end;
            if cut.start < cut.end {
                let mut t = template.clone();
                self.assemble(
                    s,
                    &cut,
                    &mut t,
                    &mut thread_mark,
                    &mut thread_count,
                    &mut thread_gen,
                    &mut link_cursor,
                    sink,
                );
            }
        }
    }

    /// Pass 1: the range `[start, end)` of the next chunk from `i` (samples that cannot fit
    /// even alone are dropped and counted).
    #[allow(clippy::too_many_arguments)]
    fn cut(
        &mut self,
        s: &Session,
        mut i: usize,
        base: usize,
        meta_len: &[usize],
        thread_mark: &mut [u32],
        thread_gen: &mut u32,
        stats: &mut Stats,
    ) -> Cut {
        let max_dur = self.opts.effective_max_chunk_duration_ns();
        let max_bytes = self.opts.effective_max_chunk_bytes();
        let n = s.obs.len();
        'restart: while i < n {
            let g = self.next_gen();
            *thread_gen += 1;
            let tg = *thread_gen;
            let first = s.obs[i].ts;
            let mut est = base;
            let (mut nframes, mut nstacks) = (0usize, 0usize);
            let (mut any_thread, mut any_image) = (false, false);
            let mut j = i;
            let mut stack_digits = 1;
            while j < n {
                let o = s.obs[j];
                if o.ts - first > max_dur {
                    break;
                }
                let thread = o.thread as usize;
                let mut delta = SAMPLE_FIXED + stack_digits + s.threads[thread].id.len();
                let (mut new_frames, mut new_stack, mut new_image) = (0usize, false, false);
                if self.stack_seen[o.stack as usize] != g {
                    self.stack_seen[o.stack as usize] = g;
                    new_stack = true;
                    let frames = self.st.frames_of(o.stack);
                    delta += 3 + frames.len() * (digits(nframes + frames.len()) + 1);
                    for &f in frames {
                        if self.frame_seen[f as usize] != g {
                            self.frame_seen[f as usize] = g;
                            new_frames += 1;
                            delta += self.frame_size[f as usize] + 1;
                            if let Some(m) = self.image_of(f)
                                && self.map_seen[m as usize] != g
                            {
                                self.map_seen[m as usize] = g;
                                delta += self.ft.mappings[m as usize].image_json_len + 1;
                                if !any_image && !new_image {
                                    delta += DEBUG_META_WRAPPER;
                                }
                                new_image = true;
                            }
                        }
                    }
                }
                let new_thread = thread_mark[thread] != tg;
                if new_thread {
                    delta += meta_len[thread]
                        + 1
                        + if any_thread {
                            0
                        } else {
                            THREAD_METADATA_WRAPPER
                        };
                }
                if est + delta > max_bytes {
                    if j == i {
                        stats.samples_dropped_size += 1;
                        i += 1;
                        continue 'restart;
                    }
                    break;
                }
                if new_thread {
                    thread_mark[thread] = tg;
                    any_thread = true;
                }
                any_image |= new_image;
                nframes += new_frames;
                if new_stack {
                    nstacks += 1;
                    stack_digits = digits(nstacks);
                }
                est += delta;
                j += 1;
            }
            return Cut {
                start: i,
                end: j,
                frames: nframes,
                stacks: nstacks,
            };
        }
        Cut {
            start: i,
            end: i,
            frames: 0,
            stacks: 0,
        }
    }

    /// Pass 2: sparse threads, then the chunk itself.
    #[allow(clippy::too_many_arguments)]
    fn assemble(
        &mut self,
        s: &Session,
        cut: &Cut,
        chunk: &mut ProfileChunk,
        thread_mark: &mut [u32],
        thread_count: &mut [u32],
        thread_gen: &mut u32,
        link_cursor: &mut usize,
        sink: &mut Sink<'_>,
    ) {
        let range = &s.obs[cut.start..cut.end];
        // Count non-empty samples per thread in the range.
        *thread_gen += 1;
        let tg = *thread_gen;
        let mut in_range: Vec<u32> = Vec::new();
        for o in range {
            let t = o.thread as usize;
            if thread_mark[t] != tg {
                thread_mark[t] = tg;
                thread_count[t] = 0;
                in_range.push(o.thread);
            }
            if o.stack != EMPTY_STACK {
                thread_count[t] += 1;
            }
        }
        let drop = self.opts.sparse_thread_policy == SparseThreadPolicy::Drop;
        *thread_gen += 1;
        let dropped_gen = *thread_gen;
        for &t in &in_range {
            if thread_count[t as usize] < 2 {
                sink.stats.sparse_threads += 1;
                if drop {
                    thread_mark[t as usize] = dropped_gen;
                }
            }
        }
        *thread_gen += 1;
        let emitted_gen = *thread_gen;

        let g = self.next_gen();
        let platform = chunk.platform.clone();
        let profile = &mut chunk.profile;
        profile.samples.reserve_exact(range.len());
        profile.frames.reserve_exact(cut.frames);
        profile.stacks.reserve_exact(cut.stacks);
        let mut images = Vec::new();
        let mut checksum = 0u64;
        let (mut first, mut last) = (u64::MAX, 0u64);
        for o in range {
            let t = o.thread as usize;
            let mut link = 0u32;
            if !s.linked.is_empty() {
                let key = o.key();
                while let Some(l) = s.linked.get(*link_cursor) {
                    if l.key < key {
                        // Left behind by samples dropped for size.
                        *link_cursor += 1;
                        continue;
                    }
                    if l.key == key {
                        link = l.link;
                        *link_cursor += 1;
                    }
                    break;
                }
            }
            if thread_mark[t] == dropped_gen {
                sink.stats.samples_dropped_sparse += 1;
                continue;
            }
            let stack_id = if self.stack_seen[o.stack as usize] == g {
                self.stack_out[o.stack as usize]
            } else {
                let frames = self.st.frames_of(o.stack);
                let mut out = Vec::with_capacity(frames.len());
                for &f in frames {
                    let fi = f as usize;
                    if self.frame_seen[fi] != g {
                        self.frame_seen[fi] = g;
                        self.frame_out[fi] = profile.frames.len() as u32;
                        let info = &self.ft.frames[fi];
                        let mut frame = info.frame.clone();
                        frame.platform = frame_platform(info.runtime, &platform).map(Into::into);
                        profile.frames.push(frame);
                        if let Some(m) = self.image_of(f)
                            && self.map_seen[m as usize] != g
                        {
                            self.map_seen[m as usize] = g;
                            if let Some(img) = &self.ft.mappings[m as usize].image {
                                images.push(img.clone());
                            }
                        }
                    }
                    out.push(self.frame_out[fi] as usize);
                }
                let id = profile.stacks.len() as u32;
                profile.stacks.push(out);
                self.stack_seen[o.stack as usize] = g;
                self.stack_out[o.stack as usize] = id;
                id
            };
            let thread = &s.threads[t];
            if thread_mark[t] != emitted_gen {
                thread_mark[t] = emitted_gen;
                profile.thread_metadata.insert(
                    thread.id.clone(),
                    ThreadMetadata {
                        name: thread.name.clone(),
                        priority: None,
                    },
                );
            }
            let timestamp = nanos_to_secs(o.ts);
            profile.samples.push(Sample {
                timestamp,
                stack_id: stack_id as usize,
                thread_id: CompactString::from(thread.id.as_str()),
            });
            first = first.min(o.ts);
            last = last.max(o.ts);
            checksum = checksum.wrapping_add(sample_checksum(
                o.ts,
                self.st.stacks[o.stack as usize].digest,
                thread.digest,
            ));
            if link != 0
                && let Some((trace_id, span_id)) = self.links.get(link as usize - 1)
            {
                if sink.links.len() < self.opts.max_links {
                    sink.links.push(SampleLink {
                        profiler_id: s.profiler_id.clone(),
                        thread_id: thread.id.clone(),
                        // The time as the chunk's sample states it (f64 seconds hold about
                        // 240 ns at today's epoch), so the link re-attaches to that sample.
                        timestamp_ns: secs_to_nanos(timestamp).unwrap_or(o.ts),
                        trace_id: *trace_id,
                        span_id: *span_id,
                    });
                    sink.stats.links += 1;
                } else {
                    sink.stats.links_dropped += 1;
                }
            }
        }
        if profile.samples.is_empty() {
            return;
        }
        if !images.is_empty() {
            chunk.debug_meta = Some(DebugMeta { images });
        }
        let n = chunk.profile.samples.len() as u64;
        chunk.chunk_id = chunk_id(&chunk.profiler_id, first, last, n, checksum);
        sink.stats.samples_out += n;
        sink.stats.chunks += 1;
        sink.chunks.push(std::mem::take(chunk));
    }
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
