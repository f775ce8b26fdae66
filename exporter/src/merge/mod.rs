//! Merging pieces of chunks of one profiler session into one chunk.
//!
//! [`ChunkBuilder`] takes metadata (platform, release, environment, client SDK, content type,
//! profiler id) from the first chunk it sees and then adds selected samples of any number of
//! chunks: frames and stacks are deduplicated and re-indexed, thread metadata and debug images
//! are unioned, measurement values are concatenated per key. [`ChunkBuilder::finish`] sorts the
//! samples by time and gives the chunk its deterministic id ([`merged_chunk_id`]).
//!
//! Invalid references (a sample's `stack_id` or a stack's frame index out of range) would make
//! Relay reject the whole merged chunk, so such samples and frame references are left out.

use hashbrown::{DefaultHashBuilder, HashTable};
use profilink_proto::sentry::CHUNK_VERSION;
use profilink_proto::sentry::{
    DebugMeta, Frame, Measurement, MeasurementValue, ProfileChunk, Sample,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

/// The deterministic id of a merged chunk: SHA-256 over the profiler id, the first and last
/// sample timestamps (exact float bits), the sample count and the [`content_checksum`] of the
/// samples, truncated to 16 bytes with the UUID v4 version and variant bits set, as 32
/// lowercase hex characters. A replay of the same samples after a crash yields the same id, so
/// duplicates can be recognised downstream; chunks of one session with different samples get
/// different ids even when their time range and count agree (two replicas merging different
/// requests of one window, or threads of one process sent in separate requests, which Sentry
/// would otherwise store under one id, keeping only one of them).
pub fn merged_chunk_id(
    profiler_id: &str,
    first_ts: f64,
    last_ts: f64,
    count: usize,
    checksum: u64,
) -> String {
    let mut h = Sha256::new();
    h.update(profiler_id.as_bytes());
    h.update(b"\0");
    h.update(first_ts.to_bits().to_be_bytes());
    h.update(last_ts.to_bits().to_be_bytes());
    h.update((count as u64).to_be_bytes());
    h.update(checksum.to_be_bytes());
    let digest = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    hex::encode(id)
}

/// The first 8 bytes of a SHA-256 over `bytes`, big-endian.
fn digest64(bytes: &[u8]) -> u64 {
    let d = Sha256::digest(bytes);
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    u64::from_be_bytes(out)
}

/// SplitMix64 finalizer: a cheap, well-mixing bijection on u64.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A checksum of a chunk's samples that does not depend on their order or on how frames and
/// stacks are indexed: the wrapping sum over samples of
/// `mix(timestamp bits ^ rotl(stack digest, 17) ^ rotl(thread digest, 41))`, where a stack's
/// digest is a SHA-256 over the digests of its frames (each a SHA-256 of the frame's JSON),
/// and a thread's a SHA-256 of its id. Deterministic across processes and machines (unlike
/// `frame_hash`), so every replica and every replay computes the same value; one SHA-256
/// per distinct frame, stack and thread of the chunk, a few nanoseconds per sample.
pub fn content_checksum(chunk: &ProfileChunk) -> u64 {
    let frames: Vec<u64> = chunk
        .profile
        .frames
        .iter()
        .map(|f| frame_digest(f))
        .collect();
    checksum_over(chunk, &frames)
}

/// A frame's digest in [`content_checksum`]: the first 8 bytes of a SHA-256 of its JSON.
fn frame_digest(frame: &Frame) -> u64 {
    digest64(&serde_json::to_vec(frame).unwrap_or_default())
}

/// At most this many frame digests are remembered ([`DIGESTS`]); past it the memory starts
/// over (a few tens of MiB at most: the frames are shared with the chunks).
const DIGEST_CACHE_FRAMES: usize = 1 << 18;

/// Frame digests already computed in this process, by frame content (hash from
/// [`frame_hash`], equality on the frame): a producer sends the same frames again and again,
/// so most merged chunks find every digest here instead of serializing and hashing each
/// frame (once the most expensive step of finishing a chunk of named native frames).
static DIGESTS: std::sync::Mutex<Option<DigestTable>> = std::sync::Mutex::new(None);

/// Remembered digests: ([`frame_hash`], the frame, its digest).
type DigestTable = HashTable<(u64, Arc<Frame>, u64)>;

/// [`content_checksum`] with the [`frame_hash`] of each frame known (`hashes[i]` for frame
/// `i`), the frame digests taken from [`DIGESTS`] where present. Same value.
fn content_checksum_hashed(chunk: &ProfileChunk, hashes: &[u64]) -> u64 {
    let p = &chunk.profile;
    if hashes.len() != p.frames.len() {
        return content_checksum(chunk);
    }
    let mut frames = Vec::with_capacity(p.frames.len());
    {
        let mut guard = DIGESTS.lock().unwrap_or_else(|e| e.into_inner());
        let table = guard.get_or_insert_with(HashTable::new);
        if table.len() >= DIGEST_CACHE_FRAMES {
            table.clear();
        }
        for (f, &h) in p.frames.iter().zip(hashes) {
            let d = match table.find(h, |(eh, ef, _)| *eh == h && **ef == **f) {
                Some(&(_, _, d)) => d,
                None => {
                    let d = frame_digest(f);
                    table.insert_unique(h, (h, f.clone(), d), |(eh, _, _)| *eh);
                    d
                }
            };
            frames.push(d);
        }
    }
    checksum_over(chunk, &frames)
}

/// The checksum of `chunk`'s samples given the digest of each of its frames.
fn checksum_over(chunk: &ProfileChunk, frames: &[u64]) -> u64 {
    let p = &chunk.profile;
    let stacks: Vec<u64> = p
        .stacks
        .iter()
        .map(|s| {
            let mut h = Sha256::new();
            for &fi in s {
                h.update(frames.get(fi).copied().unwrap_or(u64::MAX).to_be_bytes());
            }
            let d = h.finalize();
            let mut out = [0u8; 8];
            out.copy_from_slice(&d[..8]);
            u64::from_be_bytes(out)
        })
        .collect();
    let mut threads: hashbrown::HashMap<&str, u64> = hashbrown::HashMap::new();
    let mut sum = 0u64;
    for s in &p.samples {
        let thread = *threads
            .entry(s.thread_id.as_str())
            .or_insert_with(|| digest64(s.thread_id.as_bytes()));
        let stack = stacks.get(s.stack_id).copied().unwrap_or(u64::MAX);
        sum = sum.wrapping_add(mix64(
            s.timestamp.to_bits() ^ stack.rotate_left(17) ^ thread.rotate_left(41),
        ));
    }
    sum
}

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

/// Builds one chunk out of selected samples of several chunks of the same session.
///
/// Each added chunk's frame and stack tables are remapped once per chunk (a stack only when a
/// selected sample uses it): a frame or stack already in the merged chunk is found through a
/// hash table of indices into the merged chunk's own lists (a fast hasher, no copies of the
/// keys), so the per-sample work is a table look-up and a push.
#[derive(Debug, Clone)]
pub struct ChunkBuilder {
    chunk: ProfileChunk,
    hasher: DefaultHashBuilder,
    frames: HashTable<usize>,
    /// [`frame_hash`] of each merged frame.
    frame_hashes: Vec<u64>,
    stacks: HashTable<usize>,
    images: HashTable<usize>,
    first_ts: f64,
    last_ts: f64,
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
            first_ts: f64::INFINITY,
            last_ts: f64::NEG_INFINITY,
            est_bytes: 0,
            dropped_invalid: 0,
        }
    }

    /// Number of samples added so far.
    pub fn sample_count(&self) -> usize {
        self.chunk.profile.samples.len()
    }

    /// The newest sample's timestamp so far (negative infinity when empty).
    pub fn last_ts(&self) -> f64 {
        self.last_ts
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
        let mut last_thread: Option<&str> = None;
        let mut frames_buf: Vec<usize> = Vec::with_capacity(64);
        self.chunk.profile.samples.reserve(sample_indices.len());
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
            self.first_ts = self.first_ts.min(sample.timestamp);
            self.last_ts = self.last_ts.max(sample.timestamp);
            let tid = sample.thread_id.as_str();
            if last_thread != Some(tid) {
                threads_seen.insert(tid);
                last_thread = Some(tid);
            }
            self.chunk.profile.samples.push(Sample {
                timestamp: sample.timestamp,
                stack_id: new_stack,
                thread_id: sample.thread_id.clone(),
            });
        }
        for tid in threads_seen {
            if let Some(meta) = src.profile.thread_metadata.get(tid) {
                let entry = self
                    .chunk
                    .profile
                    .thread_metadata
                    .entry(tid.to_string())
                    .or_default();
                if entry.name.is_none() {
                    entry.name.clone_from(&meta.name);
                }
                if entry.priority.is_none() {
                    entry.priority = meta.priority;
                }
            }
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

    /// The finished chunk: samples sorted by timestamp, measurement values sorted, and the
    /// deterministic [`merged_chunk_id`].
    pub fn finish(mut self) -> ProfileChunk {
        let samples = &mut self.chunk.profile.samples;
        samples.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
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

#[cfg(test)]
mod tests;
