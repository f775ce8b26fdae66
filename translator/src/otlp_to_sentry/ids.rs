//! Deterministic ids: UUID-v4-shaped hashes and the chunk id.
//!
//! `chunk_id` = SHA-256 over the domain tag `profilink/chunk_id/v1`, then the profiler id
//! (length-prefixed), the first and last sample timestamps (u64 big-endian nanoseconds), the
//! sample count (u64 BE) and a 64-bit content checksum (u64 BE); the first 16 bytes, with the
//! UUID version nibble set to 4 and the variant bits to `10`, as 32 lowercase hex characters.
//!
//! The content checksum is the wrapping sum over the chunk's samples of
//! `mix(timestamp ^ rotl(stack_digest, 17) ^ rotl(thread_digest, 41))`, where `mix` is the
//! SplitMix64 finalizer, `stack_digest` the first 8 bytes of a SHA-256 over the stack's frames
//! (each frame hashed from its JSON) and `thread_digest` the first 8 bytes of a SHA-256 of the
//! thread id. It costs a few nanoseconds per sample and changes when any sample's time, thread
//! or stack content changes, so the same input always gives the same id (retries, replicas),
//! and different chunks of one session get different ids.

use profilink_proto::sentry::hex_lower;
use sha2::{Digest, Sha256};

/// Formats 16 bytes as a UUID-v4-shaped Sentry id: version nibble 4, RFC 4122 variant, 32
/// lowercase hex characters without dashes.
pub(crate) fn uuid_v4_hex(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    hex_lower(&bytes)
}

/// The first 16 bytes of a SHA-256 digest.
pub(crate) fn first16(digest: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, d) in out.iter_mut().zip(digest) {
        *o = *d;
    }
    out
}

/// The first 8 bytes of a SHA-256 digest as a big-endian u64.
pub(crate) fn first8(digest: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    for (o, d) in out.iter_mut().zip(digest) {
        *o = *d;
    }
    u64::from_be_bytes(out)
}

/// 64-bit digest of a byte string (first 8 bytes of its SHA-256).
pub(crate) fn digest64(bytes: &[u8]) -> u64 {
    first8(&Sha256::digest(bytes))
}

/// SplitMix64 finalizer: a cheap, well-mixing bijection on u64.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One sample's contribution to a chunk's content checksum.
#[inline]
pub(crate) fn sample_checksum(ts_ns: u64, stack_digest: u64, thread_digest: u64) -> u64 {
    mix64(ts_ns ^ stack_digest.rotate_left(17) ^ thread_digest.rotate_left(41))
}

/// The chunk id (see the module docs).
pub(crate) fn chunk_id(
    profiler_id: &str,
    first_ns: u64,
    last_ns: u64,
    samples: u64,
    checksum: u64,
) -> String {
    let mut h = Sha256::new();
    h.update(b"profilink/chunk_id/v1\0");
    h.update((profiler_id.len() as u64).to_be_bytes());
    h.update(profiler_id.as_bytes());
    h.update(first_ns.to_be_bytes());
    h.update(last_ns.to_be_bytes());
    h.update(samples.to_be_bytes());
    h.update(checksum.to_be_bytes());
    uuid_v4_hex(first16(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::is_sentry_id;

    #[test]
    fn uuid_shape() {
        let id = uuid_v4_hex([0xff; 16]);
        assert!(is_sentry_id(&id));
        assert_eq!(&id[12..13], "4");
        assert_eq!(&id[16..17], "b");
        assert_eq!(uuid_v4_hex([0; 16]), "00000000000040008000000000000000");
    }

    #[test]
    fn chunk_ids_are_deterministic_and_sensitive() {
        let a = chunk_id("p", 1, 2, 3, 4);
        assert_eq!(a, chunk_id("p", 1, 2, 3, 4));
        assert!(is_sentry_id(&a));
        assert_ne!(a, chunk_id("p", 1, 2, 3, 5));
        assert_ne!(a, chunk_id("q", 1, 2, 3, 4));
        assert_ne!(a, chunk_id("p", 0, 2, 3, 4));
    }
}
