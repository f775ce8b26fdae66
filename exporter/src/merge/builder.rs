//! [`ChunkBuilder`]: one chunk built out of selected samples of several chunks of a session,
//! frames and stacks deduplicated through hash tables keyed by [`frame_hash`].

use super::chunk_id::content_checksum_hashed;
use super::merged_chunk_id;
use hashbrown::{DefaultHashBuilder, HashTable};
use profilink_proto::sentry::CHUNK_VERSION;
use profilink_proto::sentry::{
    CompactString, DebugMeta, Frame, Measurement, MeasurementValue, ProfileChunk, ProfileData,
    Sample, ThreadMetadata,
};
use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// Not yet mapped (in the per-input remapping tables).
const UNMAPPED: usize = usize::MAX;

static FRAME_HASHER: OnceLock<DefaultHashBuilder> = OnceLock::new();

/// A hash of a frame's content, the same for every call in this process (a random seed per
/// process). The queue encoding computes it once per distinct frame of an `export` batch and
/// hands it to [`ChunkBuilder::add_hashed`], so merging does not hash every frame of every
/// chunk again.
pub fn frame_hash(frame: &Frame) -> u64 {
    FRAME_HASHER
        .get_or_init(DefaultHashBuilder::default)
        .hash_one(frame)
}

/// One merged sample as an open window holds it: 16 bytes where a [`Sample`] takes 40 (its
/// thread id is an index into the builder's threads, its stack a `u32`). Open windows hold
/// every sample of a session's minute until it settles, so this is most of their memory.
#[derive(Debug, Clone, Copy)]
struct Packed {
    timestamp: f64,
    stack: u32,
    thread: u32,
}

/// Builds one chunk out of selected samples of several chunks of the same session.
///
/// Each added chunk's frame and stack tables are remapped once per chunk (a stack only when a
/// selected sample uses it): a frame or stack already in the merged chunk is found through a
/// hash table of indices into the merged chunk's own lists (a fast hasher, no copies of the
/// keys), so the per-sample work is a table look-up and a push. Samples are held packed
/// ([`Packed`], each thread id once) and become the chunk's [`Sample`]s in
/// [`ChunkBuilder::finish`].
#[derive(Debug, Clone)]
pub struct ChunkBuilder {
    /// The chunk's metadata, frames, stacks and thread metadata (its samples are `samples`).
    chunk: ProfileChunk,
    samples: Vec<Packed>,
    /// The thread ids `Packed::thread` indexes, and their look-up by id.
    threads: Vec<CompactString>,
    thread_index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    frames: HashTable<usize>,
    /// [`frame_hash`] of each merged frame.
    frame_hashes: Vec<u64>,
    stacks: HashTable<usize>,
    images: HashTable<usize>,
    est_bytes: u64,
    dropped_invalid: u64,
}

impl ChunkBuilder {
    /// An empty builder that takes its metadata from `first`.
    pub fn new(first: &ProfileChunk) -> Self {
        let chunk = ProfileChunk {
            chunk_id: String::new(),
            profiler_id: first.profiler_id.clone(),
            debug_meta: None,
            environment: first.environment.clone(),
            platform: first.platform.clone(),
            release: first.release.clone(),
            content_type: first.content_type.clone(),
            client_sdk: first.client_sdk.clone(),
            measurements: BTreeMap::new(),
            version: if first.version.is_empty() {
                CHUNK_VERSION.to_string()
            } else {
                first.version.clone()
            },
            profile: Default::default(),
        };
        ChunkBuilder {
            chunk,
            hasher: DefaultHashBuilder::default(),
            frames: HashTable::new(),
            frame_hashes: Vec::new(),
            stacks: HashTable::new(),
            images: HashTable::new(),
            samples: Vec::new(),
            threads: Vec::new(),
            thread_index: HashTable::new(),
            est_bytes: 0,
            dropped_invalid: 0,
        }
    }

    /// Number of samples added so far.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }

    /// True when the chunk built so far would lose samples to Relay's sparse-thread rule
    /// (after grouping, when `group`): see [`ProfileData::loses_sparse_samples`].
    ///
    /// [`ProfileData::loses_sparse_samples`]: profilink_proto::sentry::ProfileData::loses_sparse_samples
    pub fn loses_sparse_samples(&self, group: bool, is_linked: impl Fn(&str) -> bool) -> bool {
        // The rule looks at each sample's thread and whether its stack is empty: a profile of
        // just that (stack 0 empty, stack 1 not), not a copy of the window's stacks.
        let stacks = &self.chunk.profile.stacks;
        let view = ProfileData {
            samples: self
                .samples
                .iter()
                .map(|p| {
                    let active = stacks.get(p.stack as usize).is_some_and(|s| !s.is_empty());
                    self.sample(p, usize::from(active))
                })
                .collect(),
            stacks: vec![Vec::new(), vec![0]],
            frames: Vec::new(),
            thread_metadata: self.chunk.profile.thread_metadata.clone(),
        };
        view.loses_sparse_samples(group, is_linked)
    }

    /// The index of thread id `tid` in `threads` (added if new).
    fn thread(&mut self, tid: &CompactString) -> u32 {
        let hash = self.hasher.hash_one(tid.as_str());
        let threads = &self.threads;
        if let Some(&i) = self
            .thread_index
            .find(hash, |&i| threads[i as usize] == *tid)
        {
            return i;
        }
        let i = self.threads.len() as u32;
        self.threads.push(tid.clone());
        let (threads, hasher) = (&self.threads, &self.hasher);
        self.thread_index
            .insert_unique(hash, i, |&i| hasher.hash_one(threads[i as usize].as_str()));
        i
    }

    /// Packed sample `p` as a [`Sample`] with stack `stack_id`.
    fn sample(&self, p: &Packed, stack_id: usize) -> Sample {
        Sample {
            timestamp: p.timestamp,
            stack_id,
            thread_id: self.threads[p.thread as usize].clone(),
        }
    }

    /// The samples as the chunk's [`Sample`]s, in the order they were added.
    fn unpacked(&self) -> Vec<Sample> {
        self.samples
            .iter()
            .map(|p| self.sample(p, p.stack as usize))
            .collect()
    }

    /// Estimated serialized size (sum of the estimates passed to [`ChunkBuilder::add`]).
    pub fn est_bytes(&self) -> u64 {
        self.est_bytes
    }

    /// Samples and frame references left out because they pointed out of range.
    #[cfg(test)]
    pub fn dropped_invalid(&self) -> u64 {
        self.dropped_invalid
    }

    /// Adds the samples of `src` at `sample_indices` and the measurement values
    /// `measurements` (key → values), estimating their serialized size as `est_bytes`.
    #[cfg(test)]
    pub fn add(
        &mut self,
        src: &ProfileChunk,
        sample_indices: &[usize],
        measurements: &[(String, String, Vec<MeasurementValue>)],
        est_bytes: u64,
    ) {
        self.add_hashed(src, None, sample_indices, measurements, est_bytes);
    }

    /// [`ChunkBuilder::add`] with the [`frame_hash`] of each of `src`'s frames when known
    /// (`frame_hashes[i]` for `src.profile.frames[i]`; computed here where missing).
    pub fn add_hashed(
        &mut self,
        src: &ProfileChunk,
        frame_hashes: Option<&[u64]>,
        sample_indices: &[usize],
        measurements: &[(String, String, Vec<MeasurementValue>)],
        est_bytes: u64,
    ) {
        self.est_bytes = self.est_bytes.saturating_add(est_bytes);
        let mut stack_map: Vec<usize> = vec![UNMAPPED; src.profile.stacks.len()];
        let mut frame_map: Vec<usize> = vec![UNMAPPED; src.profile.frames.len()];
        let mut threads_seen: HashSet<&str, DefaultHashBuilder> = HashSet::default();
        let mut last_thread: Option<(&str, u32)> = None;
        let mut frames_buf: Vec<usize> = Vec::with_capacity(64);
        self.samples.reserve(sample_indices.len());
        for &si in sample_indices {
            let Some(sample) = src.profile.samples.get(si) else {
                continue;
            };
            if !sample.timestamp.is_finite() {
                self.dropped_invalid += 1;
                continue;
            }
            let Some(slot) = stack_map.get(sample.stack_id).copied() else {
                self.dropped_invalid += 1;
                continue;
            };
            let new_stack = if slot != UNMAPPED {
                slot
            } else {
                frames_buf.clear();
                if let Some(stack) = src.profile.stacks.get(sample.stack_id) {
                    for &fi in stack {
                        match self.map_frame(src, frame_hashes, fi, &mut frame_map) {
                            Some(nf) => frames_buf.push(nf),
                            None => self.dropped_invalid += 1,
                        }
                    }
                }
                let id = self.intern_stack(&frames_buf);
                if let Some(s) = stack_map.get_mut(sample.stack_id) {
                    *s = id;
                }
                id
            };
            let tid = sample.thread_id.as_str();
            let thread = match last_thread {
                Some((t, i)) if t == tid => i,
                _ => {
                    threads_seen.insert(tid);
                    let i = self.thread(&sample.thread_id);
                    last_thread = Some((tid, i));
                    i
                }
            };
            // Stacks and threads of one window stay far below 2^32 (a chunk is at most
            // `max_chunk_bytes`).
            self.samples.push(Packed {
                timestamp: sample.timestamp,
                stack: new_stack as u32,
                thread,
            });
        }
        let merged = &mut self.chunk.profile.thread_metadata;
        for tid in threads_seen {
            let Some(meta) = src.profile.thread_metadata.get(tid) else {
                continue;
            };
            // Most parts bring threads the window has: no key to allocate for those.
            if let Some(entry) = merged.get_mut(tid) {
                if entry.name.is_none() {
                    entry.name.clone_from(&meta.name);
                }
                if entry.priority.is_none() {
                    entry.priority = meta.priority;
                }
                continue;
            }
            merged.insert(
                tid.to_string(),
                ThreadMetadata {
                    name: meta.name.clone(),
                    priority: meta.priority,
                },
            );
        }
        if let Some(dm) = &src.debug_meta {
            let out = self
                .chunk
                .debug_meta
                .get_or_insert_with(|| DebugMeta { images: Vec::new() });
            let hasher = &self.hasher;
            for image in &dm.images {
                let key = (image.debug_id.as_deref(), image.code_file.as_deref());
                let hash = hasher.hash_one(key);
                let images = &out.images;
                let known = self
                    .images
                    .find(hash, |&i| {
                        (
                            images[i].debug_id.as_deref(),
                            images[i].code_file.as_deref(),
                        ) == key
                    })
                    .is_some();
                if !known {
                    let id = out.images.len();
                    out.images.push(image.clone());
                    let images = &out.images;
                    self.images.insert_unique(hash, id, |&i| {
                        hasher.hash_one((
                            images[i].debug_id.as_deref(),
                            images[i].code_file.as_deref(),
                        ))
                    });
                }
            }
        }
        for (key, unit, values) in measurements {
            if values.is_empty() {
                continue;
            }
            let m = self
                .chunk
                .measurements
                .entry(key.clone())
                .or_insert_with(|| Measurement {
                    unit: unit.clone(),
                    values: Vec::new(),
                });
            m.values.extend(values.iter().cloned());
        }
    }

    /// The merged index of a stack with merged frame indices `frames` (added if new).
    fn intern_stack(&mut self, frames: &[usize]) -> usize {
        let ChunkBuilder {
            chunk,
            hasher,
            stacks: table,
            ..
        } = self;
        let stacks = &mut chunk.profile.stacks;
        let hash = hasher.hash_one(frames);
        if let Some(&i) = table.find(hash, |&i| stacks[i] == frames) {
            return i;
        }
        let id = stacks.len();
        stacks.push(frames.to_vec());
        let stacks = &*stacks;
        table.insert_unique(hash, id, |&i| hasher.hash_one(stacks[i].as_slice()));
        id
    }

    fn map_frame(
        &mut self,
        src: &ProfileChunk,
        hashes: Option<&[u64]>,
        fi: usize,
        frame_map: &mut [usize],
    ) -> Option<usize> {
        let slot = frame_map.get_mut(fi)?;
        if *slot != UNMAPPED {
            return Some(*slot);
        }
        let frame = src.profile.frames.get(fi)?;
        let hash = match hashes.and_then(|h| h.get(fi)) {
            Some(&h) => h,
            None => frame_hash(frame),
        };
        let ChunkBuilder {
            chunk,
            frames: table,
            frame_hashes,
            ..
        } = self;
        let frames = &mut chunk.profile.frames;
        let id = match table.find(hash, |&i| frames[i] == *frame) {
            Some(&i) => i,
            None => {
                let id = frames.len();
                frames.push(frame.clone());
                frame_hashes.push(hash);
                let hashes = &*frame_hashes;
                table.insert_unique(hash, id, |&i| hashes[i]);
                id
            }
        };
        *slot = id;
        Some(id)
    }

    /// Adds everything `other` holds (two adjacent windows of one session becoming one chunk),
    /// with its size estimate.
    pub fn absorb(&mut self, other: ChunkBuilder) {
        let samples = other.unpacked();
        let ChunkBuilder {
            mut chunk,
            frame_hashes,
            est_bytes,
            dropped_invalid,
            ..
        } = other;
        chunk.profile.samples = samples;
        self.dropped_invalid += dropped_invalid;
        let all: Vec<usize> = (0..chunk.profile.samples.len()).collect();
        let measurements: Vec<(String, String, Vec<MeasurementValue>)> = chunk
            .measurements
            .iter()
            .map(|(k, m)| (k.clone(), m.unit.clone(), m.values.clone()))
            .collect();
        self.add_hashed(&chunk, Some(&frame_hashes), &all, &measurements, est_bytes);
    }

    /// The finished chunk: samples sorted by timestamp, measurement values sorted, and the
    /// deterministic [`merged_chunk_id`].
    pub fn finish(mut self) -> ProfileChunk {
        // Sorted packed (16-byte moves), stable: samples of one instant keep their order.
        self.samples
            .sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        self.chunk.profile.samples = self.unpacked();
        let samples = &self.chunk.profile.samples;
        for m in self.chunk.measurements.values_mut() {
            m.values.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        }
        let count = samples.len();
        let (first, last) = match (samples.first(), samples.last()) {
            (Some(f), Some(l)) => (f.timestamp, l.timestamp),
            _ => (0.0, 0.0),
        };
        let checksum = content_checksum_hashed(&self.chunk, &self.frame_hashes);
        self.chunk.chunk_id =
            merged_chunk_id(&self.chunk.profiler_id, first, last, count, checksum);
        self.chunk
    }
}
