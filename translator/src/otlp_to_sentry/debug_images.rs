//! `debug_meta` images from OTLP mappings.
//!
//! A chunk lists one image per mapping that a frame of the chunk references (`Location`'s
//! `mapping_index`) and that has a GNU build id (mapping attribute
//! `process.executable.build_id.gnu`, a hex string or bytes) and a non-empty address range
//! (`memory_limit > memory_start`). Kernel and kernel-module mappings from the eBPF profiler
//! are `0-0`: their frames arrive symbolized, and a zero-size image at `0x0` would let
//! Symbolicator attribute unrelated low addresses to it (it extends unsized images up to the
//! next one), so they get no image. The image is:
//!
//! * `type`: `symbolic` (Relay rejects `elf`);
//! * `code_file`: the mapping's filename (omitted when empty);
//! * `code_id`: the build id in lowercase hex;
//! * `debug_id`: derived from the build id the way Sentry's `symbolic` derives ELF debug ids:
//!   the first 16 bytes of the build id (zero-padded when shorter), with bytes 0..4 read as a
//!   little-endian u32 and bytes 4..6, 6..8 as little-endian u16s (i.e. those groups reversed
//!   into UUID big-endian order), formatted as a hyphenated lowercase UUID, age 0;
//! * `image_addr`: `memory_start` as `"0x…"`; `image_size`: `memory_limit - memory_start`.
//!   `image_vmaddr` is not written.
//!
//! Mappings from the eBPF profiler carry ELF virtual addresses, and so do native frames'
//! `instruction_addr` (the location address, unchanged).

use crate::dictionary::{AttrValue, Dictionary};
use crate::error::TranslateError;
use profilink_proto::otlp::Mapping;
use profilink_proto::sentry::DebugImage;
use profilink_proto::sentry::ids::format_instruction_addr;
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
    let h = hex::encode(b);
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

/// A resolved mapping: its file name and, when it has a build id, its debug image.
#[derive(Debug, Clone)]
pub(crate) struct MappingInfo {
    /// The mapping's file name (may be empty).
    pub filename: String,
    /// The debug image, when the mapping has a GNU build id.
    pub image: Option<DebugImage>,
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
    let image = build_id
        .filter(|_| m.memory_limit > m.memory_start)
        .map(|id| DebugImage {
            image_type: "symbolic".to_owned(),
            code_file: (!filename.is_empty()).then(|| filename.clone()),
            debug_id: Some(debug_id_from_build_id(&id)),
            code_id: Some(hex::encode(&id)),
            image_addr: Some(format_instruction_addr(m.memory_start)),
            image_vmaddr: None,
            image_size: Some(m.memory_limit.saturating_sub(m.memory_start)),
            other: BTreeMap::new(),
        });
    let image_json_len = image.as_ref().map_or(0, super::json_len);
    Ok(MappingInfo {
        filename,
        image,
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
    fn build_id_forms() {
        assert_eq!(build_id_bytes(&AttrValue::Str("0a0B")), Some(vec![10, 11]));
        assert_eq!(build_id_bytes(&AttrValue::Str("0x0a")), Some(vec![10]));
        assert_eq!(build_id_bytes(&AttrValue::Str("xyz")), None);
        assert_eq!(build_id_bytes(&AttrValue::Str("")), None);
        assert_eq!(build_id_bytes(&AttrValue::Bytes(&[1])), Some(vec![1]));
        assert_eq!(build_id_bytes(&AttrValue::Int(1)), None);
    }
}
