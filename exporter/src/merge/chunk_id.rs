//! The content-derived id of a merged chunk ([`merged_chunk_id`]) and the order-free checksum
//! of its samples it hashes ([`content_checksum`]), with the process-wide cache of frame
//! digests that keeps the checksum cheap.

use hashbrown::HashTable;
use profilink_proto::sentry::{Frame, ProfileChunk, hex_lower};
use sha2::{Digest, Sha256};
use std::sync::Arc;

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
    hex_lower(&id)
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
pub(super) fn content_checksum_hashed(chunk: &ProfileChunk, hashes: &[u64]) -> u64 {
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
