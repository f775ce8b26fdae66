//! A loaded object: the DWARF of its debug file (through `addr2line`) and its symbol tables,
//! looked up by ELF virtual address.
//!
//! Parsing never trusts the file: section sizes are checked against the file, a compressed
//! section's declared size is checked against the bound before it is inflated, and the symbol
//! table and MiniDebugInfo are bounded (see [`crate::symbols`]).

use crate::symbols::SymbolTable;

use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Largest single DWARF section inflated from a compressed section.
const MAX_SECTION: u64 = 1 << 30;
/// Frames kept per address (an inline chain deeper than this is cut at the outer end).
pub(crate) const MAX_INLINE_DEPTH: usize = 128;

/// One resolved frame (an inline level), innermost first in a lookup's result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SymFrame {
    /// Demangled function name.
    pub function: Arc<str>,
    /// The raw (mangled) name, as the object spells it.
    pub system_name: Arc<str>,
    /// Source file path, empty when unknown.
    pub file: Arc<str>,
    /// Source line, 0 when unknown.
    pub line: u32,
}

/// Why an object could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Not an ELF file, or a malformed one.
    #[error("not a readable ELF file: {0}")]
    Parse(#[from] object::Error),
    /// No file was given.
    #[error("no file")]
    NoFile,
}

/// A loaded object (see the module docs).
pub struct LoadedObject {
    dwarf: Option<Mutex<addr2line::Context<Reader>>>,
    symbols: SymbolTable,
    cost: usize,
}

impl std::fmt::Debug for LoadedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedObject")
            .field("dwarf", &self.dwarf.is_some())
            .field("symbols", &!self.symbols.is_empty())
            .field("cost", &self.cost)
            .finish()
    }
}

/// The `.gnu_debuglink` of an ELF file: the debug file's name and CRC32.
pub(crate) fn debuglink(data: &[u8]) -> Option<(Vec<u8>, u32)> {
    let file = object::File::parse(data).ok()?;
    let (name, crc) = file.gnu_debuglink().ok().flatten()?;
    Some((name.to_vec(), crc))
}

/// Whether an ELF file has DWARF (a non-empty `.debug_info`).
pub(crate) fn has_dwarf(data: &[u8]) -> bool {
    object::File::parse(data).is_ok_and(|f| {
        f.section_by_name(".debug_info")
            .or_else(|| f.section_by_name(".zdebug_info"))
            .is_some_and(|s| s.size() > 0 && s.kind() != object::SectionKind::UninitializedData)
    })
}

impl LoadedObject {
    /// Loads an object from its files: `files[0]` is the object itself (or its debug file),
    /// the others more files of the same object (a debug file found through a build-id
    /// directory or `.gnu_debuglink`). DWARF comes from the first file that has it; symbols
    /// from all.
    pub fn load(files: &[&[u8]]) -> Result<LoadedObject, ObjectError> {
        let mut symbols = SymbolTable::default();
        let mut dwarf = None;
        let mut cost = 0usize;
        let mut parsed_any = false;
        let mut first_err = None;
        for data in files {
            let file = match object::File::parse(*data) {
                Ok(f) => f,
                Err(e) => {
                    first_err.get_or_insert(e);
                    continue;
                }
            };
            parsed_any = true;
            symbols.add_file(&file);
            if dwarf.is_none()
                && let Some((ctx, c)) = load_dwarf(&file)
            {
                dwarf = Some(Mutex::new(ctx));
                cost += c;
            }
        }
        if !parsed_any {
            return Err(first_err.map_or(ObjectError::NoFile, ObjectError::Parse));
        }
        symbols.finish();
        cost += symbols.cost() + 256;
        Ok(LoadedObject {
            dwarf,
            symbols,
            cost,
        })
    }

    /// Whether the object has DWARF.
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// Whether the object has neither DWARF nor symbols.
    pub fn is_empty(&self) -> bool {
        self.dwarf.is_none() && self.symbols.is_empty()
    }

    /// Approximate memory held, in bytes (DWARF sections and the symbol table).
    pub fn cost(&self) -> usize {
        self.cost
    }

    /// The frames at ELF virtual address `addr`, innermost inline level first; empty when
    /// neither DWARF nor a symbol covers it.
    pub fn lookup(&self, addr: u64) -> Vec<SymFrame> {
        let mut out = Vec::new();
        // addr2line probes `[addr, addr + 1)`: the last address would overflow (no object has
        // code there; found by the hostile-ELF test).
        if let Some(ctx) = self.dwarf.as_ref().filter(|_| addr < u64::MAX) {
            let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(mut frames) = ctx.find_frames(addr).skip_all_loads() {
                while let Ok(Some(frame)) = frames.next() {
                    if out.len() >= MAX_INLINE_DEPTH {
                        break;
                    }
                    let (function, system_name) = match &frame.function {
                        Some(f) => {
                            let raw = f.raw_name().map(Cow::into_owned).unwrap_or_default();
                            let dem = f.demangle().map(Cow::into_owned).unwrap_or_default();
                            (dem, raw)
                        }
                        None => (String::new(), String::new()),
                    };
                    let (file, line) = frame
                        .location
                        .as_ref()
                        .map_or(("", 0), |l| (l.file.unwrap_or(""), l.line.unwrap_or(0)));
                    out.push(SymFrame {
                        function: function.into(),
                        system_name: system_name.into(),
                        file: file.into(),
                        line,
                    });
                }
            }
        }
        // DWARF without a function for the address (or none at all): the symbol table names
        // the outermost function.
        let unnamed_outer = out.last().is_none_or(|f| f.function.is_empty());
        if unnamed_outer && let Some(name) = self.symbols.lookup(addr) {
            let function: Arc<str> = addr2line::demangle_auto(Cow::Borrowed(name), None).into();
            match out.last_mut() {
                Some(f) => {
                    f.function = function;
                    f.system_name = name.into();
                }
                None => out.push(SymFrame {
                    function,
                    system_name: name.into(),
                    file: "".into(),
                    line: 0,
                }),
            }
        }
        if out.iter().all(|f| f.function.is_empty()) {
            out.clear();
        }
        out
    }
}

/// The DWARF of `file` as an `addr2line` context, with the bytes its sections hold; `None`
/// without `.debug_info` or when a section cannot be read within the bounds.
fn load_dwarf(file: &object::File<'_>) -> Option<(addr2line::Context<Reader>, usize)> {
    let info = file
        .section_by_name(".debug_info")
        .or_else(|| file.section_by_name(".zdebug_info"))?;
    if info.size() == 0 || info.kind() == object::SectionKind::UninitializedData {
        return None;
    }
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut cost = 0usize;
    let mut load = |id: gimli::SectionId| -> Result<Reader, ()> {
        let data = section_data(file, id.name()).unwrap_or(Cow::Borrowed(&[]));
        cost += data.len();
        Ok(Reader::new(Arc::from(data.as_ref()), endian))
    };
    let dwarf = gimli::Dwarf::load(&mut load).ok()?;
    let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
    Some((ctx, cost))
}

/// A section's bytes, inflated when compressed (`SHF_COMPRESSED` or `.zdebug_*`), refusing a
/// declared size above [`MAX_SECTION`] or the file's own size bound.
fn section_data<'d>(file: &object::File<'d>, name: &str) -> Option<Cow<'d, [u8]>> {
    let section = file.section_by_name(name).or_else(|| {
        name.strip_prefix(".debug_")
            .and_then(|rest| file.section_by_name(&format!(".zdebug_{rest}")))
    })?;
    if section.kind() == object::SectionKind::UninitializedData {
        return None;
    }
    let range = section.compressed_file_range().ok()?;
    if range.uncompressed_size > MAX_SECTION {
        return None;
    }
    section.uncompressed_data().ok()
}
