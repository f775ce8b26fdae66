//! What identifies an object: its GNU build id, or the eBPF profiler's file id (`htlhash`).
//!
//! The eBPF profiler sends a mapping's GNU build id (`process.executable.build_id.gnu`) when
//! the file has one, and always its own file id (`process.executable.build_id.htlhash`): the
//! first 16 bytes of SHA-256 over the file's first 4096 bytes, its last `min(size, 4096)`
//! bytes (both blocks overlap for files under 8 KiB) and its length as a big-endian u64,
//! written as 32 lowercase hex digits. [`htlhash`] computes it here from the same definition.

use sha2::{Digest, Sha256};
use std::fmt;

/// Mapping attribute with the GNU build id.
pub const BUILD_ID_GNU_KEY: &str = "process.executable.build_id.gnu";
/// Mapping attribute with the eBPF profiler's file id.
pub const HTLHASH_KEY: &str = "process.executable.build_id.htlhash";

const BLOCK: usize = 4096;

/// The identity a mapping claims for its file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectId {
    /// A GNU build id (`NT_GNU_BUILD_ID`), 1 to 64 bytes.
    Gnu(Vec<u8>),
    /// The eBPF profiler's 16-byte file id.
    Htlhash([u8; 16]),
}

impl ObjectId {
    /// Parses the hex (or bytes) of a build id attribute; `None` when empty, too long or not hex.
    pub fn gnu_from_hex(s: &str) -> Option<ObjectId> {
        let s = s.trim();
        let s = s.strip_prefix("0x").unwrap_or(s);
        let b = hex::decode(s).ok()?;
        (!b.is_empty() && b.len() <= 64).then_some(ObjectId::Gnu(b))
    }

    /// Parses a 32-hex-digit file id.
    pub fn htlhash_from_hex(s: &str) -> Option<ObjectId> {
        let b = hex::decode(s.trim()).ok()?;
        Some(ObjectId::Htlhash(b.try_into().ok()?))
    }

    /// Whether `data` (a whole ELF file) has this identity.
    pub fn matches(&self, data: &[u8]) -> bool {
        match self {
            ObjectId::Gnu(b) => gnu_build_id(data).as_deref() == Some(b.as_slice()),
            ObjectId::Htlhash(h) => htlhash(data) == *h,
        }
    }

    /// The GNU build id, when that is the identity.
    pub fn gnu(&self) -> Option<&[u8]> {
        match self {
            ObjectId::Gnu(b) => Some(b),
            ObjectId::Htlhash(_) => None,
        }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectId::Gnu(b) => write!(f, "{}", hex::encode(b)),
            ObjectId::Htlhash(h) => write!(f, "htlhash:{}", hex::encode(h)),
        }
    }
}

/// The GNU build id of an ELF file, `None` without one or when it does not parse.
pub fn gnu_build_id(data: &[u8]) -> Option<Vec<u8>> {
    use object::Object;
    let file = object::File::parse(data).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The GNU build id of the ELF file at `path`, read through a cache of the parts the parser
/// asks for (the headers and the note), not the whole file.
pub fn gnu_build_id_of_file(path: &std::path::Path) -> Option<Vec<u8>> {
    use object::Object;
    let file = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let parsed = object::File::parse(&cache).ok()?;
    parsed.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The eBPF profiler's file id of a whole file's bytes (see the module docs).
pub fn htlhash(data: &[u8]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(&data[..data.len().min(BLOCK)]);
    h.update(&data[data.len() - data.len().min(BLOCK)..]);
    h.update((data.len() as u64).to_be_bytes());
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htlhash_of_small_and_large_files() {
        // Small: the head and the tail are the same bytes, hashed twice.
        let small = b"hello";
        let mut h = Sha256::new();
        h.update(small);
        h.update(small);
        h.update(5u64.to_be_bytes());
        assert_eq!(&htlhash(small)[..], &h.finalize()[..16]);
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut h = Sha256::new();
        h.update(&big[..4096]);
        h.update(&big[10_000 - 4096..]);
        h.update(10_000u64.to_be_bytes());
        assert_eq!(&htlhash(&big)[..], &h.finalize()[..16]);
        let id = ObjectId::Htlhash(htlhash(&big));
        assert!(id.matches(&big));
        assert!(!id.matches(small));
        assert_eq!(
            ObjectId::htlhash_from_hex(&hex::encode(htlhash(&big))),
            Some(id)
        );
    }

    #[test]
    fn parses_ids() {
        assert_eq!(
            ObjectId::gnu_from_hex("0xabCD"),
            Some(ObjectId::Gnu(vec![0xab, 0xcd]))
        );
        assert_eq!(ObjectId::gnu_from_hex(""), None);
        assert_eq!(ObjectId::gnu_from_hex("xyz"), None);
        assert_eq!(ObjectId::htlhash_from_hex("abcd"), None);
    }
}
