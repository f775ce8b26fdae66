//! Completing the chunks a [`Splitter`] cut: sparse-thread groups, frames, debug images,
//! trace links and the chunk id; and rebuilding a chunk without the samples of dropped sparse
//! threads (see the parent module's docs).

use super::*;
use crate::otlp_to_sentry::frame_cache;

impl Splitter<'_, '_> {
    /// The thread groups of the chunk just filled (see the module docs), or none when the
    /// grouped chunk might not fit in `max_chunk_bytes` (`est` is the filled chunk's estimate).
    pub(super) fn plan_groups(
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

    /// Completes a chunk filled by [`Splitter::fill`] (all its samples kept): frames, images,
    /// links, id.
    pub(super) fn finish(
        &mut self,
        s: &Session,
        range: &[Obs],
        mut chunk: ProfileChunk,
        digest: Digest,
        (linked, link_cursor): (&[LinkedObs], &mut usize),
        sink: &mut Sink<'_>,
    ) {
        self.push_frames(&mut chunk.profile);
        let samples = &mut chunk.profile.samples;
        if samples.capacity() > 2 * samples.len() {
            // The size limit cut the chunk well before its duration limit.
            samples.shrink_to_fit();
        }
        if !linked.is_empty() {
            for o in range {
                let link = next_link(linked, link_cursor, o.key());
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
                    // The same `Arc` as in earlier requests' chunks (see `frame_cache`).
                    let info = &self.ft.frames[fi];
                    let platform = shared.frame_platforms[info.runtime.index()].as_ref();
                    let frame = frame_cache::shared(info.slot, platform, &info.frame);
                    Arc::clone(slot.insert(frame))
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
        (sink.emit)(chunk, sink.links, sink.stats);
    }

    /// Emits the trace link of an emitted sample (link id 0: none).
    fn emit_link(&self, s: &Session, o: &Obs, link: u32, sink: &mut Sink<'_>) {
        if link == 0 {
            return;
        }
        let Some((trace_id, span_id)) = self.links.get(link as usize - 1) else {
            return;
        };
        // The first `max_links` links of the request are kept (`stats.links` counts them).
        if (sink.stats.links as usize) < self.opts.max_links {
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
    pub(super) fn assemble_dropping(
        &mut self,
        s: &Session,
        range: &[Obs],
        chunk: &mut ProfileChunk,
        th: &ThreadMarks,
        dropped_gen: u32,
        (linked, link_cursor): (&[LinkedObs], &mut usize),
        sink: &mut Sink<'_>,
    ) {
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
            let link = if linked.is_empty() {
                0
            } else {
                next_link(linked, link_cursor, o.key())
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
/// window's sorted linked observations (skipping those of samples dropped for size).
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
