//! Sentry frames as OTLP `Location`/`Line`/`Function`/`Mapping`, and back.
//!
//! A frame becomes one `Location`:
//!
//! * `Location.address` ← `instruction_addr` parsed (`0x…` hex or decimal). When the string is
//!   not given back by formatting the address as lowercase `0x…` (e.g. `"0X1A"`, `"26"`, `"0x0"`,
//!   unparsable), it is also kept in [`SENTRY_FRAME_INSTRUCTION_ADDR`].
//! * `Location.mapping_index` ← the `Mapping` of the first debug image (in `debug_meta.images`
//!   order) whose `[image_addr, image_addr + image_size)` contains the address. The mapping has
//!   `memory_start`/`memory_limit` from that range, `filename` ← `code_file`, and attributes
//!   [`PROCESS_EXECUTABLE_BUILD_ID_GNU`] ← `code_id`, [`SENTRY_DEBUG_IMAGE_TYPE`],
//!   [`SENTRY_DEBUG_IMAGE_DEBUG_ID`], [`SENTRY_DEBUG_IMAGE_VMADDR`], [`SENTRY_DEBUG_IMAGE_ARCH`].
//!   Images no frame falls into get no mapping (they are kept in `sentry.debug_meta`).
//! * An image that profilink placed in its synthetic address space (it lies within one slot,
//!   the slot of its `code_id`; [`profilink_proto::sentry::image_space::synthetic_image_base`])
//!   goes back to ELF space, as the eBPF profiler reports it: the mapping's range and the
//!   location's address are the chunk's minus the slot base, `file_offset` 0 (the range starts
//!   at the image's load address), and [`SENTRY_DEBUG_IMAGE_SLOT_BASE`] keeps the base, which
//!   restoring the chunk adds back.
//! * One `Line` when any of `function`, `abs_path`, `filename`, `lineno`, `colno` is set (else
//!   none, as for an unsymbolized native frame): `line` ← `lineno`, `column` ← `colno`
//!   (0 when unset), `function_index` → `Function { name ← function, filename ← abs_path, else
//!   filename }` ("" when unset). When both `abs_path` and `filename` are set, `filename` goes to
//!   [`SENTRY_FRAME_FILENAME`].
//! * Attributes: [`PROFILE_FRAME_TYPE`] (from the frame's platform, else the chunk's, mapped by
//!   [`frame_type`]), and when set [`SENTRY_FRAME_PLATFORM`], [`SENTRY_FRAME_IN_APP`],
//!   [`SENTRY_FRAME_MODULE`], [`SENTRY_FRAME_PACKAGE`].
//!
//! **Absent vs empty.** OTLP cannot tell an unset name from `""` (string index 0) or an unset
//! line from 0. The *default reading* of a `Line` is: `function` is set iff the name is not
//! empty; if [`SENTRY_FRAME_FILENAME`] is present then `abs_path` = the function's filename and
//! `filename` = that attribute, else `abs_path` is unset and `filename` is set iff the function's
//! filename is not empty; `lineno`/`colno` are set iff not 0. Only when the default reading
//! would be wrong, the location carries [`SENTRY_FRAME_PRESENT`]: the exact list of the set
//! fields among `function`, `abs_path`, `filename`, `lineno`, `colno`. A frame with no field at
//! all that would make `Location{}` (the zero entry) gets one all-zero `Line` instead, so that a
//! stack never points at location 0.

use super::attributes::*;
use super::builder::{DictionaryBuilder, array_value, str_value};
use crate::dictionary::{AttrValue, Dictionary};
use crate::error::{Malformed, TranslateError};
use profilink_proto::otlp::{Function, Line, Location, Mapping};
use profilink_proto::sentry::image_space::synthetic_image_base;
use profilink_proto::sentry::{DebugImage, Frame};
use profilink_proto::sentry::{format_instruction_addr, parse_instruction_addr};
use std::sync::Arc;

/// The `profile.frame.type` for a Sentry platform: `python`→`cpython`, `java`/`android`→`jvm`,
/// `node`/`javascript`→`v8js`, `go`→`go`, `rust`/`native`/`cocoa`→`native`, `php`→`php`,
/// `ruby`→`ruby`, `csharp`→`dotnet`; any other platform as it is.
pub fn frame_type(platform: &str) -> &str {
    match platform {
        "python" => "cpython",
        "java" | "android" => "jvm",
        "node" | "javascript" => "v8js",
        "go" => "go",
        "rust" | "native" | "cocoa" => "native",
        "php" => "php",
        "ruby" => "ruby",
        "csharp" => "dotnet",
        other => other,
    }
}

/// Which of the ambiguous frame fields are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Presence {
    function: bool,
    abs_path: bool,
    filename: bool,
    lineno: bool,
    colno: bool,
}

impl Presence {
    fn any(self) -> bool {
        self.function || self.abs_path || self.filename || self.lineno || self.colno
    }

    /// The default reading of a line (see the module docs).
    fn default_reading(
        name: &str,
        file: &str,
        has_filename_attr: bool,
        line: i64,
        col: i64,
    ) -> Self {
        Presence {
            function: !name.is_empty(),
            abs_path: has_filename_attr,
            filename: has_filename_attr || !file.is_empty(),
            lineno: line != 0,
            colno: col != 0,
        }
    }

    fn names(self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (set, name) in [
            (self.function, field::FUNCTION),
            (self.abs_path, field::ABS_PATH),
            (self.filename, field::FILENAME),
            (self.lineno, field::LINENO),
            (self.colno, field::COLNO),
        ] {
            if set {
                v.push(name);
            }
        }
        v
    }

    fn from_names<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let mut p = Presence::default();
        for n in names {
            match n {
                field::FUNCTION => p.function = true,
                field::ABS_PATH => p.abs_path = true,
                field::FILENAME => p.filename = true,
                field::LINENO => p.lineno = true,
                field::COLNO => p.colno = true,
                _ => {}
            }
        }
        p
    }
}

/// An image's address range.
struct ImageRange {
    start: u64,
    end: u64,
    image: usize,
    /// The slot base when profilink placed the image (0 otherwise).
    base: u64,
}

/// Interns the frames of one profile as locations, caching by frame index.
pub(crate) struct FrameInterner<'a> {
    frames: &'a [Arc<Frame>],
    platform: &'a str,
    images: &'a [DebugImage],
    ranges: Vec<ImageRange>,
    mapping_cache: Vec<Option<i32>>,
    location_cache: Vec<Option<i32>>,
}

impl<'a> FrameInterner<'a> {
    /// An interner for `frames` of a profile of `platform` with debug `images`.
    pub(crate) fn new(
        frames: &'a [Arc<Frame>],
        platform: &'a str,
        images: &'a [DebugImage],
    ) -> Self {
        let ranges = images
            .iter()
            .enumerate()
            .filter_map(|(image, img)| {
                let start = parse_instruction_addr(img.image_addr.as_deref()?)?;
                let size = img.image_size.filter(|s| *s > 0)?;
                let base = synthetic_image_base(start, size, img.code_id.as_deref()).unwrap_or(0);
                Some(ImageRange {
                    start,
                    end: start.saturating_add(size),
                    image,
                    base,
                })
            })
            .collect();
        FrameInterner {
            frames,
            platform,
            images,
            ranges,
            mapping_cache: vec![None; images.len()],
            location_cache: vec![None; frames.len()],
        }
    }

    /// The location index of frame `index` (which the caller has bounds-checked).
    pub(crate) fn location(&mut self, b: &mut DictionaryBuilder, index: usize) -> i32 {
        if let Some(Some(i)) = self.location_cache.get(index) {
            return *i;
        }
        let Some(frame) = self.frames.get(index) else {
            return 0;
        };
        let loc = self.build_location(b, frame);
        let i = b.location(loc);
        if let Some(slot) = self.location_cache.get_mut(index) {
            *slot = Some(i);
        }
        i
    }

    /// The mapping of the image holding `address` (0 for none) and that image's slot base (0
    /// when it is not a synthetic image).
    fn mapping(&mut self, b: &mut DictionaryBuilder, address: u64) -> (i32, u64) {
        let Some(image) = self
            .ranges
            .iter()
            .find(|r| r.start <= address && address < r.end)
            .map(|r| (r.image, r.start, r.end, r.base))
        else {
            return (0, 0);
        };
        let (idx, start, end, base) = image;
        if let Some(Some(m)) = self.mapping_cache.get(idx) {
            return (*m, base);
        }
        let img = &self.images[idx];
        let mut attrs = Vec::new();
        if let Some(code_id) = &img.code_id {
            attrs.push(b.attribute_str(PROCESS_EXECUTABLE_BUILD_ID_GNU, code_id));
        }
        attrs.push(b.attribute_str(SENTRY_DEBUG_IMAGE_TYPE, &img.image_type));
        if let Some(d) = &img.debug_id {
            attrs.push(b.attribute_str(SENTRY_DEBUG_IMAGE_DEBUG_ID, d));
        }
        if let Some(v) = &img.image_vmaddr {
            attrs.push(b.attribute_str(SENTRY_DEBUG_IMAGE_VMADDR, v));
        }
        if let Some(serde_json::Value::String(arch)) = img.other.get("arch") {
            attrs.push(b.attribute_str(SENTRY_DEBUG_IMAGE_ARCH, arch));
        }
        if base != 0 {
            // The base is below 2^63, so it fits an i64.
            attrs.push(b.attribute_int(SENTRY_DEBUG_IMAGE_SLOT_BASE, base as i64));
        }
        let filename_strindex = img.code_file.as_deref().map_or(0, |f| b.string(f));
        let m = b.mapping(Mapping {
            memory_start: start - base,
            memory_limit: end - base,
            file_offset: 0,
            filename_strindex,
            attribute_indices: attrs,
        });
        self.mapping_cache[idx] = Some(m);
        (m, base)
    }

    fn build_location(&mut self, b: &mut DictionaryBuilder, f: &Frame) -> Location {
        let mut attrs = Vec::new();
        let ftype = frame_type(f.platform.as_deref().unwrap_or(self.platform));
        if !ftype.is_empty() {
            attrs.push(b.attribute_str(PROFILE_FRAME_TYPE, ftype));
        }
        if let Some(p) = &f.platform {
            attrs.push(b.attribute_str(SENTRY_FRAME_PLATFORM, p));
        }
        if let Some(in_app) = f.in_app {
            attrs.push(b.attribute_bool(SENTRY_FRAME_IN_APP, in_app));
        }
        if let Some(m) = &f.module {
            attrs.push(b.attribute_str(SENTRY_FRAME_MODULE, m));
        }
        if let Some(p) = &f.package {
            attrs.push(b.attribute_str(SENTRY_FRAME_PACKAGE, p));
        }

        let (file, filename_attr) = match (&f.abs_path, &f.filename) {
            (Some(a), name) => (&**a, name.as_deref()),
            (None, Some(n)) => (&**n, None),
            (None, None) => ("", None),
        };
        if let Some(n) = filename_attr {
            attrs.push(b.attribute_str(SENTRY_FRAME_FILENAME, n));
        }

        let (address, addr_attr) = match &f.instruction_addr {
            None => (0, None),
            Some(s) => match parse_instruction_addr(s) {
                Some(a) if a != 0 && format_instruction_addr(a) == **s => (a, None),
                parsed => (parsed.unwrap_or(0), Some(&**s)),
            },
        };
        if let Some(s) = addr_attr {
            attrs.push(b.attribute_str(SENTRY_FRAME_INSTRUCTION_ADDR, s));
        }

        let actual = Presence {
            function: f.function.is_some(),
            abs_path: f.abs_path.is_some(),
            filename: f.filename.is_some(),
            lineno: f.lineno.is_some(),
            colno: f.colno.is_some(),
        };
        let mut lines = Vec::new();
        if actual.any() {
            let name = f.function.as_deref().unwrap_or("");
            let line = i64::from(f.lineno.unwrap_or(0));
            let column = i64::from(f.colno.unwrap_or(0));
            let default =
                Presence::default_reading(name, file, filename_attr.is_some(), line, column);
            if default != actual {
                let names = actual.names().into_iter().map(str_value).collect();
                attrs.push(b.attribute(SENTRY_FRAME_PRESENT, array_value(names)));
            }
            let name_strindex = b.string(name);
            let filename_strindex = b.string(file);
            let function_index = b.function(Function {
                name_strindex,
                system_name_strindex: 0,
                filename_strindex,
                start_line: 0,
            });
            lines.push(Line {
                function_index,
                line,
                column,
            });
        }

        let (mapping_index, base) = if address != 0 {
            self.mapping(b, address)
        } else {
            (0, 0)
        };
        if base != 0 && address == base && addr_attr.is_none() {
            // ELF address 0 would read as "no address": keep the string.
            if let Some(s) = &f.instruction_addr {
                attrs.push(b.attribute_str(SENTRY_FRAME_INSTRUCTION_ADDR, s));
            }
        }
        let address = address - base;
        if lines.is_empty() && address == 0 && mapping_index == 0 && attrs.is_empty() {
            // Would be Location{}, the zero entry: keep it distinct with an all-zero line.
            lines.push(Line::default());
        }
        Location {
            mapping_index,
            address,
            lines,
            attribute_indices: attrs,
        }
    }
}

fn u32_field(value: i64, field: &'static str) -> Result<u32, TranslateError> {
    u32::try_from(value).map_err(|_| Malformed::FrameField { field, value }.into())
}

/// The [`SENTRY_DEBUG_IMAGE_SLOT_BASE`] of mapping `index` (0 when absent).
fn slot_base_of(dict: &Dictionary<'_>, index: i32) -> Result<u64, TranslateError> {
    let Some(m) = dict.mapping(index)? else {
        return Ok(0);
    };
    for a in dict.attributes(&m.attribute_indices)? {
        if let (SENTRY_DEBUG_IMAGE_SLOT_BASE, AttrValue::Int(v)) = (a.key, &a.value) {
            return u64::try_from(*v).map_err(|_| {
                Malformed::NegativeSlotBase {
                    key: SENTRY_DEBUG_IMAGE_SLOT_BASE,
                    value: *v,
                }
                .into()
            });
        }
    }
    Ok(0)
}

/// Rebuilds the Sentry frame of a location written by [`FrameInterner`] (see the module docs).
pub(crate) fn decode_location(
    dict: &Dictionary<'_>,
    loc: &Location,
) -> Result<Frame, TranslateError> {
    let mut frame = Frame::default();
    let mut filename_attr: Option<&str> = None;
    let mut addr_attr: Option<&str> = None;
    let mut present: Option<Presence> = None;
    for a in dict.attributes(&loc.attribute_indices)? {
        match (a.key, &a.value) {
            (SENTRY_FRAME_PLATFORM, AttrValue::Str(s)) => frame.platform = Some((*s).into()),
            (SENTRY_FRAME_IN_APP, AttrValue::Bool(v)) => frame.in_app = Some(*v),
            (SENTRY_FRAME_MODULE, AttrValue::Str(s)) => frame.module = Some((*s).into()),
            (SENTRY_FRAME_PACKAGE, AttrValue::Str(s)) => frame.package = Some((*s).into()),
            (SENTRY_FRAME_FILENAME, AttrValue::Str(s)) => filename_attr = Some(s),
            (SENTRY_FRAME_INSTRUCTION_ADDR, AttrValue::Str(s)) => addr_attr = Some(s),
            (SENTRY_FRAME_PRESENT, AttrValue::Array(items)) => {
                present = Some(Presence::from_names(
                    items.iter().filter_map(AttrValue::as_str),
                ));
            }
            _ => {}
        }
    }
    frame.instruction_addr = match addr_attr {
        Some(s) => Some(s.into()),
        None if loc.address != 0 => {
            let base = slot_base_of(dict, loc.mapping_index)?;
            Some(format_instruction_addr(base.wrapping_add(loc.address)).into())
        }
        None => None,
    };
    if let Some(line) = loc.lines.last() {
        let (name, file) = match dict.function(line.function_index)? {
            Some(f) => (
                dict.string(f.name_strindex)?,
                dict.string(f.filename_strindex)?,
            ),
            None => ("", ""),
        };
        let p = present.unwrap_or_else(|| {
            Presence::default_reading(name, file, filename_attr.is_some(), line.line, line.column)
        });
        frame.function = p.function.then(|| name.into());
        frame.abs_path = p.abs_path.then(|| file.into());
        frame.filename = p.filename.then(|| {
            if p.abs_path {
                filename_attr.unwrap_or("").into()
            } else {
                file.into()
            }
        });
        frame.lineno = if p.lineno {
            Some(u32_field(line.line, "line")?)
        } else {
            None
        };
        frame.colno = if p.colno {
            Some(u32_field(line.column, "column")?)
        } else {
            None
        };
    }
    Ok(frame)
}

#[cfg(test)]
mod tests;
