//! The synthetic address space profilink gives ELF images in Sentry chunks.
//!
//! Sentry's Symbolicator reads a chunk's native frames in one absolute address space (its
//! `abs` address mode): a frame belongs to the last debug image whose `image_addr` is at or
//! below its `instruction_addr` (and is rejected when past that image's `image_size`), and it
//! is looked up at `instruction_addr - image_addr` relative to the object's first `PT_LOAD`
//! address. The eBPF profiler reports every native address in its object's own ELF
//! virtual-address space, so the objects of one process overlap (a shared library and the
//! executable both start near 0). profilink therefore moves each image into a **slot** of its
//! own:
//!
//! * A slot is [`SLOT_SIZE`] (4 GiB) of addresses; slot `s` covers `[s << 32, (s + 1) << 32)`.
//! * The slot of an image is a pure function of its GNU build id ([`slot_base`]): FNV-1a 64
//!   over the build id bytes, mixed with the SplitMix64 finalizer, reduced into the
//!   [`SLOT_COUNT`] slots that start at [`SPACE_START`] (2^56) and end at [`SPACE_END`]
//!   (2^63). Every translation (a retry, another replica, the 5 s parts that the exporter
//!   merges into one chunk) gives an image the same slot, so merged chunks stay consistent.
//! * An address `a` of the object's ELF space becomes `slot_base + a`; the low 32 bits of a
//!   synthetic address are the ELF virtual address, which keeps unsymbolicated frames readable.
//!
//! Addresses that are not synthetic never fall into the space: user-space ELF virtual
//! addresses are below 2^47 (2^56 with 5-level paging) and kernel addresses are at or above
//! 2^63. Two different build ids share a slot with probability about `n² / 2^32` for `n`
//! images in one chunk (`n = 100`: 2.3e-6); their frames could then resolve to the wrong one
//! of the two.

/// log2 of [`SLOT_SIZE`].
pub const SLOT_BITS: u32 = 32;
/// Size of one image slot (4 GiB): an image's ELF-space end must not exceed it.
pub const SLOT_SIZE: u64 = 1 << SLOT_BITS;
/// First synthetic address (2^56).
pub const SPACE_START: u64 = 1 << 56;
/// End of the synthetic space (2^63, exclusive).
pub const SPACE_END: u64 = 1 << 63;
/// Number of slots in `[SPACE_START, SPACE_END)`.
pub const SLOT_COUNT: u64 = (SPACE_END - SPACE_START) >> SLOT_BITS;

/// The base address of the slot of the image with GNU build id `build_id` (see the module
/// docs). Always in `[SPACE_START, SPACE_END)` and a multiple of [`SLOT_SIZE`].
///
/// ```
/// use profilink_proto::sentry::image_space::{slot_base, SLOT_SIZE, SPACE_START};
/// let base = slot_base(&[0xde, 0xad, 0xbe, 0xef]);
/// assert!(base >= SPACE_START && base % SLOT_SIZE == 0);
/// assert_eq!(base, slot_base(&[0xde, 0xad, 0xbe, 0xef]));
/// ```
pub fn slot_base(build_id: &[u8]) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    for b in build_id {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    // SplitMix64 finalizer: spreads every input bit over the whole word.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    SPACE_START + ((h % SLOT_COUNT) << SLOT_BITS)
}

/// True when `addr` lies in the synthetic space.
pub fn is_synthetic(addr: u64) -> bool {
    (SPACE_START..SPACE_END).contains(&addr)
}

/// The slot base of a synthetic address (`None` for addresses outside the space).
pub fn slot_of(addr: u64) -> Option<u64> {
    is_synthetic(addr).then_some(addr & !(SLOT_SIZE - 1))
}

/// When an image `[image_addr, image_addr + image_size)` is one that profilink placed (it lies
/// within one slot of the synthetic space, and that slot is the one of its build id
/// `code_id_hex` when given), its slot base.
pub fn synthetic_image_base(
    image_addr: u64,
    image_size: u64,
    code_id_hex: Option<&str>,
) -> Option<u64> {
    let base = slot_of(image_addr)?;
    let end = image_addr.checked_add(image_size)?;
    if image_size == 0 || end > base + SLOT_SIZE {
        return None;
    }
    if let Some(code_id) = code_id_hex {
        let bytes = hex::decode(code_id).ok()?;
        if slot_base(&bytes) != base {
            return None;
        }
    }
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_in_the_space_and_stable() {
        for id in [&b""[..], b"\x01", b"\x01\x02\x03", &[0xff; 20]] {
            let b = slot_base(id);
            assert!(is_synthetic(b), "{b:#x}");
            assert!(b + SLOT_SIZE <= SPACE_END);
            assert_eq!(b % SLOT_SIZE, 0);
            assert_eq!(slot_of(b + 0x1234), Some(b));
        }
        assert_ne!(slot_base(b"\x01"), slot_base(b"\x02"));
        assert_eq!(slot_of(0x7fff_ffff_f000), None);
        assert_eq!(slot_of(0xffff_ffff_8100_0000), None);
    }

    #[test]
    fn recognises_placed_images() {
        let id = hex::decode("2e5abcee94f3bcbed7bba094f341070a2585a2ba").unwrap();
        let base = slot_base(&id);
        let code = "2e5abcee94f3bcbed7bba094f341070a2585a2ba";
        assert_eq!(
            synthetic_image_base(base, 0x17_0000, Some(code)),
            Some(base)
        );
        assert_eq!(
            synthetic_image_base(base + 0x40_0000, 0x1000, None),
            Some(base)
        );
        // Wrong slot for the build id, past the slot, empty, outside the space.
        assert_eq!(
            synthetic_image_base(base + SLOT_SIZE, 0x1000, Some(code)),
            None
        );
        assert_eq!(synthetic_image_base(base, SLOT_SIZE + 1, None), None);
        assert_eq!(synthetic_image_base(base, 0, None), None);
        assert_eq!(synthetic_image_base(0x40_0000, 0x1000, None), None);
    }
}
