//! OTLP locations to Sentry frames, memoized per location.
//!
//! # Frames
//!
//! One Sentry frame per `Location.lines` entry, in the order of `lines` (`lines[0]` is the
//! innermost inlined callee, the last entry its caller), so stacks stay leaf-first. A location
//! without lines gives one frame.
//!
//! * `function`: `Function.name` (falling back to `system_name`); unset when empty.
//! * `abs_path`/`filename`: from `Function.filename`. An absolute path (starting with `/`, `\`
//!   or a drive letter like `C:\`) gives `abs_path` = the path and `filename` = its base name;
//!   a relative path gives `filename` = the path as given and no `abs_path`. Empty names and the
//!   JVM placeholder `<unknown>` are omitted.
//! * `lineno`/`colno`: `Line.line`/`Line.column` when in `1..=u32::MAX`.
//! * `instruction_addr`: for frames without a function name (unsymbolized native code), and
//!   for every frame of a `native` location with lines (named by a symbolizer such as
//!   profilink's `symbolize`: each inline level gets the same address), whose
//!   `Location.address` is not 0, that address as lowercase `"0x…"`: moved into its image's
//!   slot when the mapping has a debug image and the address lies in the image (see
//!   [`super::debug_images`]), else unchanged. Address 0 is proto3's "unset": such a frame
//!   (e.g. an anonymous JavaScript function, with only file/line/column) gets no
//!   `instruction_addr`. No function name is synthesized, so Sentry can symbolicate the address
//!   (for the `rust` and `cocoa` platforms, with `debug_meta`).
//! * `package`: for native-family and unspecified frames, the mapping's file name when the
//!   location has a mapping with a name (native libraries, executables, `vmlinux` and kernel
//!   modules). Managed frames (Go, JVM, …) use `module` instead.
//! * `module`: JVM frames: the class (`int java.util.Random.next(int)` -> `java.util.Random`);
//!   Go frames: the package path (`github.com/a/b.(*T).M` -> `github.com/a/b`).
//! * `in_app`: always set (see [`super::in_app`]).
//! * `platform`: set per chunk, only for foreign runtimes (see [`super::platform`]).
//!
//! Frames are deduplicated by content (frame fields + runtime + mapping). Each location is
//! resolved once per request (a `Vec` indexed by location index), and keeps at most
//! `max_stack_depth` frames (a location with more inlined lines than that can only appear
//! truncated anyway; the extra lines' function indices are still bounds-checked).

use super::debug_images::{MappingInfo, resolve_mapping};
use super::frame_cache::{self, FrameFacts, LineKey};
use super::ids::mix64;
use super::in_app::{basename, go_package, is_in_app, jvm_class};
use super::platform::Runtime;
use crate::dictionary::Dictionary;
use crate::error::TranslateError;
use hashbrown::HashMap;
use hashbrown::hash_map::Entry;
use profilink_proto::sentry::Frame;
use profilink_proto::sentry::format_instruction_addr;
use std::sync::Arc;

/// Location attribute naming the frame's runtime.
pub const FRAME_TYPE_KEY: &str = "profile.frame.type";

const UNRESOLVED: u32 = u32::MAX;

/// A deduplicated frame with what chunk building needs.
#[derive(Debug, Clone)]
pub(crate) struct FrameInfo {
    /// The frame, `platform` unset (the frame cache's canonical copy).
    pub frame: Arc<Frame>,
    /// Its runtime.
    pub runtime: Runtime,
    /// Index into [`FrameTable::mappings`], or `u32::MAX` without a mapping.
    pub mapping: u32,
    /// Serialized JSON length of `frame`.
    pub json_len: usize,
    /// 64-bit content digest (of the JSON's digest, runtime and mapping).
    pub digest: u64,
    /// Where this thread's frame cache keeps it (for the shared `Arc<Frame>` chunks hold).
    pub slot: super::frame_cache::Slot,
}

#[derive(Debug, Clone, Copy)]
struct LocSpan {
    start: u32,
    len: u32,
    truncated: bool,
}

/// Location -> frames resolution with per-index memoization.
pub(crate) struct FrameTable<'a> {
    dict: Dictionary<'a>,
    max_depth: usize,
    loc_slot: Vec<u32>,
    loc_spans: Vec<LocSpan>,
    loc_frames: Vec<u32>,
    /// Deduplicated frames.
    pub frames: Vec<FrameInfo>,
    frame_ids: HashMap<(Arc<Frame>, Runtime, u32), u32>,
    map_slot: Vec<u32>,
    /// Resolved mappings (referenced by [`FrameInfo::mapping`]).
    pub mappings: Vec<MappingInfo>,
}

/// The frame of one location line (see the module docs).
fn make_frame(key: &LineKey<'_>) -> Frame {
    let LineKey {
        runtime,
        name,
        file,
        line,
        column: col,
        address,
        package,
    } = *key;
    // Borrowed until the frame is built: each string is copied once, into its `Arc`.
    let function = (!name.is_empty()).then_some(name);
    let (abs_path, filename) = if file.is_empty() || file == "<unknown>" {
        (None, None)
    } else if is_absolute(file) {
        (Some(file), Some(basename(file)))
    } else {
        (None, Some(file))
    };
    let module = match (runtime, function) {
        (Runtime::Jvm, Some(f)) => jvm_class(f),
        (Runtime::Go, Some(f)) => go_package(f),
        _ => None,
    };
    let path = abs_path.or(filename);
    let in_app = is_in_app(runtime, function, path, package);
    Frame {
        // Named native frames (symbolized before translation) keep their address too, so
        // Sentry can symbolicate again with the project's own debug files.
        instruction_addr: address
            .filter(|_| function.is_none() || runtime == Runtime::Native)
            .map(|a| format_instruction_addr(a).into()),
        abs_path: abs_path.map(Arc::from),
        colno: positive_u32(col),
        filename: filename.map(Arc::from),
        function: function.map(Arc::from),
        in_app: Some(in_app),
        lineno: positive_u32(line),
        module: module.map(Arc::from),
        package: (runtime.is_native_family() || runtime == Runtime::Unspecified)
            .then(|| package.map(Arc::from))
            .flatten(),
        platform: None,
    }
}

fn is_absolute(path: &str) -> bool {
    let b = path.as_bytes();
    path.starts_with('/')
        || path.starts_with('\\')
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && (b[2] == b'\\' || b[2] == b'/'))
}

fn positive_u32(v: i64) -> Option<u32> {
    u32::try_from(v).ok().filter(|v| *v > 0)
}

impl<'a> FrameTable<'a> {
    pub(crate) fn new(dict: Dictionary<'a>, max_depth: usize) -> Self {
        let (locs, maps) = dict
            .raw()
            .map_or((0, 0), |d| (d.location_table.len(), d.mapping_table.len()));
        FrameTable {
            dict,
            max_depth,
            loc_slot: vec![UNRESOLVED; locs],
            loc_spans: Vec::new(),
            loc_frames: Vec::new(),
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            map_slot: vec![UNRESOLVED; maps],
            mappings: Vec::new(),
        }
    }

    /// The location indices of OTLP stack `index` (`None` for index 0).
    pub(crate) fn stack_locations(&self, index: i32) -> Result<Option<&'a [i32]>, TranslateError> {
        Ok(self
            .dict
            .stack(index)?
            .map(|s| s.location_indices.as_slice()))
    }

    /// Bounds-checks a location index without resolving it.
    pub(crate) fn check_location(&self, index: i32) -> Result<(), TranslateError> {
        self.dict.location(index).map(|_| ())
    }

    /// The frames of location `index` (leaf-first) and whether they were capped at the maximum
    /// depth. Index 0 (no location) has no frames.
    pub(crate) fn location(&mut self, index: i32) -> Result<(&[u32], bool), TranslateError> {
        let slot = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.loc_slot.len());
        if let Some(s) = slot.map(|i| self.loc_slot[i]).filter(|s| *s != UNRESOLVED) {
            let span = self.loc_spans[s as usize];
            let start = span.start as usize;
            return Ok((
                &self.loc_frames[start..start + span.len as usize],
                span.truncated,
            ));
        }
        let Some(loc) = self.dict.location(index)? else {
            return Ok((&[], false));
        };
        let mut runtime = Runtime::Unspecified;
        for a in loc
            .attribute_indices
            .iter()
            .map(|&i| self.dict.attribute(i))
        {
            let Some(a) = a? else { continue };
            if a.key == FRAME_TYPE_KEY
                && let Some(t) = a.value.as_str()
            {
                runtime = Runtime::from_frame_type(t);
            }
        }
        // Index 0 is `mapping_table[0]` when that is a real mapping (see `Dictionary`).
        let mapping = self.mapping(loc.mapping_index)?;
        let package = (mapping != UNRESOLVED)
            .then(|| self.mappings[mapping as usize].filename.as_str())
            .filter(|f| !f.is_empty())
            .map(str::to_owned);
        let placement = (mapping != UNRESOLVED)
            .then(|| self.mappings[mapping as usize].placement)
            .flatten();
        // 0 is "unset" (proto3): no address rather than a made-up `0x0`.
        let address = (loc.address != 0)
            .then(|| placement.and_then(|p| p.place(loc.address)))
            .map(|placed| placed.unwrap_or(loc.address));

        // (function, filename, line, column) per kept line.
        let mut lines: Vec<(&'a str, &'a str, i64, i64)> =
            Vec::with_capacity(loc.lines.len().min(self.max_depth));
        let mut truncated = false;
        for line in &loc.lines {
            let f = self.dict.function(line.function_index)?;
            if lines.len() >= self.max_depth {
                truncated = true;
                continue;
            }
            let (name, file) = match f {
                Some(f) => {
                    let mut name = self.dict.string(f.name_strindex)?;
                    if name.is_empty() {
                        name = self.dict.string(f.system_name_strindex)?;
                    }
                    (name, self.dict.string(f.filename_strindex)?)
                }
                None => ("", ""),
            };
            lines.push((name, file, line.line, line.column));
        }
        if lines.is_empty() {
            lines.push(("", "", 0, 0));
        }
        if runtime == Runtime::Unspecified
            && lines.iter().all(|l| l.0.is_empty())
            && (mapping != UNRESOLVED || loc.address != 0)
        {
            runtime = Runtime::Native;
        }

        let start = self.loc_frames.len();
        for (name, file, line, column) in lines {
            let key = LineKey {
                runtime,
                name,
                file,
                line,
                column,
                address,
                package: package.as_deref(),
            };
            let facts = frame_cache::facts_of(&key, || make_frame(&key));
            let id = self.intern(facts, runtime, mapping);
            self.loc_frames.push(id);
        }
        let span = LocSpan {
            start: start as u32,
            len: (self.loc_frames.len() - start) as u32,
            truncated,
        };
        if let Some(i) = slot {
            self.loc_slot[i] = self.loc_spans.len() as u32;
        }
        self.loc_spans.push(span);
        Ok((&self.loc_frames[start..], truncated))
    }

    fn intern(&mut self, facts: FrameFacts, runtime: Runtime, mapping: u32) -> u32 {
        // One hash of the frame (its strings) per location line: look up and insert at once.
        let entry = match self.frame_ids.entry((facts.frame, runtime, mapping)) {
            Entry::Occupied(e) => return *e.get(),
            Entry::Vacant(v) => v,
        };
        // The JSON's digest is the frame's own (remembered across requests); runtime and
        // mapping are this request's, mixed in.
        let digest = mix64(
            facts
                .json_digest
                .wrapping_add(mix64((u64::from(runtime as u8) << 32) | u64::from(mapping))),
        );
        let id = self.frames.len() as u32;
        self.frames.push(FrameInfo {
            frame: Arc::clone(&entry.key().0),
            runtime,
            mapping,
            json_len: facts.json_len,
            digest,
            slot: facts.slot,
        });
        entry.insert(id);
        id
    }

    fn mapping(&mut self, index: i32) -> Result<u32, TranslateError> {
        let slot = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.map_slot.len());
        if let Some(s) = slot.map(|i| self.map_slot[i]).filter(|s| *s != UNRESOLVED) {
            return Ok(s);
        }
        let Some(m) = self.dict.mapping(index)? else {
            return Ok(UNRESOLVED);
        };
        let info = resolve_mapping(&self.dict, m)?;
        let id = self.mappings.len() as u32;
        self.mappings.push(info);
        if let Some(i) = slot {
            self.map_slot[i] = id;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths() {
        assert!(is_absolute("/usr/lib/x.so"));
        assert!(is_absolute("C:\\x\\y.cs"));
        assert!(is_absolute("c:/x"));
        assert!(!is_absolute("runtime/proc.go"));
        assert!(!is_absolute("Random.java"));
        assert_eq!(positive_u32(0), None);
        assert_eq!(positive_u32(-3), None);
        assert_eq!(positive_u32(7), Some(7));
        assert_eq!(positive_u32(i64::MAX), None);
    }
}
