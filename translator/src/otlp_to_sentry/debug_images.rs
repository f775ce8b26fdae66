//! `debug_meta` images from OTLP mappings, placed in profilink's synthetic address space.
//!
//! A chunk lists one image per mapping that a frame of the chunk references (`Location`'s
//! `mapping_index`) and that has a GNU build id (mapping attribute
//! `process.executable.build_id.gnu`, a hex string or bytes) and a non-empty address range
//! (`memory_limit > memory_start`). Kernel and kernel-module mappings from the eBPF profiler
//! are `0-0`: their frames arrive symbolized, so they get no image. The image is:
//!
//! * `type`: `symbolic` (Relay rejects `elf`);
//! * `code_file`: the mapping's filename (omitted when empty);
//! * `code_id`: the build id in lowercase hex;
//! * `debug_id`: derived from the build id the way Sentry's `symbolic` derives ELF debug ids:
//!   the first 16 bytes of the build id (zero-padded when shorter), with bytes 0..4 read as a
//!   little-endian u32 and bytes 4..6, 6..8 as little-endian u16s (i.e. those groups reversed
//!   into UUID big-endian order), formatted as a hyphenated lowercase UUID, age 0;
//! * `image_addr` = `B + L`, `image_size` = `memory_limit - L` (see below); `image_vmaddr` is
//!   not written.
//!
//! # Addresses
//!
//! The eBPF profiler reports a native frame's `Location.address` and its mapping's
//! `memory_start`/`memory_limit` in the object's **ELF virtual-address space** (it subtracts
//! the process's load bias), and `file_offset` is the mapping's file offset. Symbolicator
//! looks a frame up at `instruction_addr - image_addr`, relative to the object's first
//! `PT_LOAD` address `V0` (0 for shared objects and PIE executables, the link base such as
//! `0x400000` for other executables), and picks the image by address across all images of the
//! chunk. So each image gets:
//!
//! * `L`, the estimate of `V0`: `memory_start - file_offset` (the text segment's
//!   `p_vaddr - p_offset`, which is `V0` for ld.bfd, gold and Go), rounded down to 2 MiB when
//!   that removes at most 64 KiB (lld shifts the text segment by one page, 4 KiB on x86_64 and
//!   64 KiB on aarch64), else unchanged (i386's `0x8048000`);
//! * `B`, the base of the image's 4 GiB slot, a function of its build id
//!   ([`profilink_proto::sentry::image_space`]), so images do not overlap (barring a slot
//!   collision, whose odds are given there) and every request gives an image the same place;
//! * its native frames' `instruction_addr` = `B + address` (the low 32 bits stay the ELF
//!   address) when `L <= address < memory_limit`; an address outside its image's range keeps
//!   its raw value, which lies outside every slot.
//!
//! Limits: an image whose ELF-space end is above 4 GiB, or whose `file_offset` exceeds
//! `memory_start`, gets no image (its frames keep raw addresses); a text segment shifted by 2
//! MiB or more from `V0` (linked with `-z max-page-size=2M` and hugepage-aligned text) and
//! executables whose link base is not 2 MiB-aligned but within 64 KiB of it are looked up at a
//! wrong offset; mappings and addresses in the process's runtime address space (as `perf` or
//! pprof record them) are not recognised and resolve at a wrong offset.

use crate::dictionary::{AttrValue, Dictionary};
use crate::error::TranslateError;
use profilink_proto::otlp::Mapping;
use profilink_proto::sentry::DebugImage;
use profilink_proto::sentry::image_space::{SLOT_SIZE, slot_base};
use profilink_proto::sentry::{format_instruction_addr, hex_lower};
use std::collections::BTreeMap;

/// Mapping attribute holding the GNU build id.
pub const BUILD_ID_GNU_KEY: &str = "process.executable.build_id.gnu";

/// The Sentry/symbolic debug id of an ELF file with GNU build id `build_id` (see the module
/// docs): hyphenated lowercase UUID, age 0.
///
/// ```
/// use profilink_translator::otlp_to_sentry::debug_id_from_build_id;
/// let build_id = hex::decode("f1c3bcc0279865fe3058404b2831d9e64135386c").unwrap();
/// assert_eq!(debug_id_from_build_id(&build_id), "c0bcc3f1-9827-fe65-3058-404b2831d9e6");
/// ```
pub fn debug_id_from_build_id(build_id: &[u8]) -> String {
    let mut b = [0u8; 16];
    for (o, i) in b.iter_mut().zip(build_id) {
        *o = *i;
    }
    b[0..4].reverse();
    b[4..6].reverse();
    b[6..8].reverse();
    let h = hex_lower(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Build id bytes from an attribute value: bytes as they are, strings as hex (an optional
/// `0x` prefix allowed); `None` for anything else, empty or not hex.
pub(crate) fn build_id_bytes(v: &AttrValue<'_>) -> Option<Vec<u8>> {
    let bytes = match v {
        AttrValue::Bytes(b) => b.to_vec(),
        AttrValue::Str(s) => {
            let s = s.trim();
            let s = s.strip_prefix("0x").unwrap_or(s);
            hex::decode(s).ok()?
        }
        _ => return None,
    };
    (!bytes.is_empty()).then_some(bytes)
}

/// The ELF-space load address `L` of a mapping (see the module docs): `memory_start -
/// file_offset`, rounded down to 2 MiB when that removes at most 64 KiB; `None` when
/// `file_offset > memory_start`.
pub(crate) fn load_address(memory_start: u64, file_offset: u64) -> Option<u64> {
    const HUGE_PAGE: u64 = 2 << 20;
    const MAX_PAGE_SHIFT: u64 = 64 << 10;
    let delta = memory_start.checked_sub(file_offset)?;
    let rem = delta % HUGE_PAGE;
    Some(if rem <= MAX_PAGE_SHIFT {
        delta - rem
    } else {
        delta
    })
}

/// Where an image's ELF-space addresses go in the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The slot base `B`.
    pub base: u64,
    /// The estimated load address `L`.
    pub start: u64,
    /// `memory_limit`, the end of the image's ELF-space range.
    pub end: u64,
}

impl Placement {
    /// The chunk address of ELF address `address` of this image, when it lies in the image.
    pub(crate) fn place(&self, address: u64) -> Option<u64> {
        (self.start..self.end)
            .contains(&address)
            .then(|| self.base + address)
    }
}

/// A resolved mapping: its file name and, when it has a build id, its debug image.
#[derive(Debug, Clone)]
pub(crate) struct MappingInfo {
    /// The mapping's file name (may be empty).
    pub filename: String,
    /// The debug image, when the mapping has a GNU build id and a placeable range.
    pub image: Option<DebugImage>,
    /// Where the image's frames go, with `image`.
    pub placement: Option<Placement>,
    /// Serialized JSON length of `image` (0 without one).
    pub image_json_len: usize,
}

/// Resolves a mapping through the dictionary (every index bounds-checked).
pub(crate) fn resolve_mapping(
    dict: &Dictionary<'_>,
    m: &Mapping,
) -> Result<MappingInfo, TranslateError> {
    let filename = dict.string(m.filename_strindex)?.to_owned();
    let mut build_id = None;
    for a in dict.attributes(&m.attribute_indices)? {
        if a.key == BUILD_ID_GNU_KEY {
            build_id = build_id_bytes(&a.value);
        }
    }
    let placement = build_id.as_deref().and_then(|id| {
        if m.memory_limit <= m.memory_start || m.memory_limit > SLOT_SIZE {
            return None;
        }
        let start = load_address(m.memory_start, m.file_offset)?;
        Some(Placement {
            base: slot_base(id),
            start,
            end: m.memory_limit,
        })
    });
    let image = build_id.zip(placement).map(|(id, p)| DebugImage {
        image_type: "symbolic".to_owned(),
        code_file: (!filename.is_empty()).then(|| filename.clone()),
        debug_id: Some(debug_id_from_build_id(&id)),
        code_id: Some(hex_lower(&id)),
        image_addr: Some(format_instruction_addr(p.base + p.start)),
        image_vmaddr: None,
        image_size: Some(p.end - p.start),
        other: BTreeMap::new(),
    });
    let image_json_len = image.as_ref().map_or(0, super::json_len);
    Ok(MappingInfo {
        filename,
        image,
        placement,
        image_json_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_debug_ids() {
        let id = hex::decode("f1c3bcc0279865fe3058404b2831d9e64135386c").unwrap();
        assert_eq!(
            debug_id_from_build_id(&id),
            "c0bcc3f1-9827-fe65-3058-404b2831d9e6"
        );
        // Short build ids are zero-padded.
        assert_eq!(
            debug_id_from_build_id(&[1, 2, 3, 4, 5]),
            "04030201-0005-0000-0000-000000000000"
        );
        assert_eq!(
            debug_id_from_build_id(&[]),
            "00000000-0000-0000-0000-000000000000"
        );
    }

    #[test]
    fn load_addresses() {
        // ld.bfd PIE / shared object: text at the same offset and address.
        assert_eq!(load_address(0x26000, 0x26000), Some(0));
        // ld.bfd non-PIE: link base 0x400000.
        assert_eq!(load_address(0x401000, 0x1000), Some(0x40_0000));
        // lld shifts text by a page (x86_64) or 64 KiB (aarch64).
        assert_eq!(load_address(0x2000, 0x1000), Some(0));
        assert_eq!(load_address(0x41_1000, 0x1000), Some(0x40_0000));
        assert_eq!(load_address(0x20000, 0x10000), Some(0));
        // i386 non-PIE base 0x8048000 is kept as it is.
        assert_eq!(load_address(0x804_9000, 0x1000), Some(0x804_8000));
        assert_eq!(load_address(0x1000, 0x2000), None);
    }

    #[test]
    fn placement() {
        let p = Placement {
            base: 1 << 56,
            start: 0x40_0000,
            end: 0x50_0000,
        };
        assert_eq!(p.place(0x40_1136), Some((1 << 56) + 0x40_1136));
        assert_eq!(p.place(0x3f_ffff), None);
        assert_eq!(p.place(0x50_0000), None);
    }

    #[test]
    fn build_id_forms() {
        assert_eq!(build_id_bytes(&AttrValue::Str("0a0B")), Some(vec![10, 11]));
        assert_eq!(build_id_bytes(&AttrValue::Str("0x0a")), Some(vec![10]));
        assert_eq!(build_id_bytes(&AttrValue::Str("xyz")), None);
        assert_eq!(build_id_bytes(&AttrValue::Str("")), None);
        assert_eq!(build_id_bytes(&AttrValue::Bytes(&[1])), Some(vec![1]));
        assert_eq!(build_id_bytes(&AttrValue::Int(1)), None);
    }
}
