//! ELF symbol tables (`.symtab`, `.dynsym`, and the `.symtab` of MiniDebugInfo) as one sorted
//! address -> name table, for addresses DWARF does not cover (or files without DWARF).

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::io::Write;

/// Largest MiniDebugInfo (`.gnu_debugdata`) accepted after decompression.
const MAX_MINIDEBUGINFO: u64 = 64 << 20;
/// Symbols kept per object (a hostile file cannot make the table grow without bound).
const MAX_SYMBOLS: usize = 4 << 20;

/// One function symbol.
#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    /// Exclusive end; for symbols without a size, the next symbol's start.
    end: u64,
    /// Mangled name.
    name: Box<str>,
}

/// A sorted table of function symbols.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    syms: Vec<Sym>,
}

impl SymbolTable {
    /// Adds the function symbols of `file`'s `.symtab` and `.dynsym`, and of its MiniDebugInfo.
    pub(crate) fn add_file(&mut self, file: &object::File<'_>) {
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if self.syms.len() >= MAX_SYMBOLS {
                break;
            }
            if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.address() == 0 {
                continue;
            }
            let Ok(name) = sym.name() else { continue };
            if name.is_empty() {
                continue;
            }
            let end = if sym.size() > 0 {
                sym.address().saturating_add(sym.size())
            } else {
                0
            };
            self.syms.push(Sym {
                start: sym.address(),
                end,
                name: name.into(),
            });
        }
        if let Some(mini) = minidebuginfo(file)
            && let Ok(inner) = object::File::parse(mini.as_slice())
        {
            {
                // MiniDebugInfo holds no MiniDebugInfo of its own.
                for sym in inner.symbols() {
                    if self.syms.len() >= MAX_SYMBOLS {
                        break;
                    }
                    if sym.kind() != SymbolKind::Text || !sym.is_definition() {
                        continue;
                    }
                    if let Ok(name) = sym.name()
                        && !name.is_empty()
                        && sym.address() != 0
                    {
                        let end = if sym.size() > 0 {
                            sym.address().saturating_add(sym.size())
                        } else {
                            0
                        };
                        self.syms.push(Sym {
                            start: sym.address(),
                            end,
                            name: name.into(),
                        });
                    }
                }
            }
        }
    }

    /// Sorts the table, drops duplicates (sized symbols and `.symtab` first) and gives
    /// sizeless symbols the room up to the next symbol.
    pub(crate) fn finish(&mut self) {
        self.syms.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then((b.end > a.start).cmp(&(a.end > a.start)))
        });
        self.syms.dedup_by(|b, a| a.start == b.start);
        for i in 0..self.syms.len() {
            if self.syms[i].end <= self.syms[i].start {
                let next = self.syms.get(i + 1).map_or(u64::MAX, |s| s.start);
                self.syms[i].end = next;
            }
        }
        self.syms.shrink_to_fit();
    }

    /// The mangled name of the function symbol covering `addr`.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = self.syms.get(i.checked_sub(1)?)?;
        (addr < s.end).then_some(&*s.name)
    }

    /// Whether the table has no symbol.
    pub(crate) fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Approximate heap bytes.
    pub(crate) fn cost(&self) -> usize {
        self.syms
            .iter()
            .map(|s| std::mem::size_of::<Sym>() + s.name.len())
            .sum()
    }
}

/// The decompressed `.gnu_debugdata` section (an xz stream holding an ELF file), bounded.
pub(crate) fn minidebuginfo(file: &object::File<'_>) -> Option<Vec<u8>> {
    let section = file.section_by_name(".gnu_debugdata")?;
    let data = section.data().ok()?;
    let mut out = BoundedWriter {
        buf: Vec::new(),
        max: MAX_MINIDEBUGINFO,
    };
    let mut input = std::io::BufReader::new(data);
    lzma_rs::xz_decompress(&mut input, &mut out).ok()?;
    Some(out.buf)
}

/// A `Write` into memory that fails past `max` bytes (a decompression bomb stops there).
struct BoundedWriter {
    buf: Vec<u8>,
    max: u64,
}

impl Write for BoundedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if (self.buf.len() + data.len()) as u64 > self.max {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                "decompressed data above the bound",
            ));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_and_sizeless_symbols() {
        let mut t = SymbolTable {
            syms: vec![
                Sym {
                    start: 0x200,
                    end: 0,
                    name: "b".into(),
                },
                Sym {
                    start: 0x100,
                    end: 0x110,
                    name: "a".into(),
                },
                Sym {
                    start: 0x100,
                    end: 0,
                    name: "a_alias".into(),
                },
                Sym {
                    start: 0x300,
                    end: 0x310,
                    name: "c".into(),
                },
            ],
        };
        t.finish();
        assert_eq!(t.lookup(0x0ff), None);
        assert_eq!(t.lookup(0x100), Some("a"));
        assert_eq!(t.lookup(0x110), None);
        assert_eq!(t.lookup(0x2ff), Some("b"));
        assert_eq!(t.lookup(0x30f), Some("c"));
        assert_eq!(t.lookup(0x310), None);
    }

    #[test]
    fn bounded_writer_stops() {
        let mut w = BoundedWriter {
            buf: Vec::new(),
            max: 4,
        };
        assert!(w.write(b"abcd").is_ok());
        assert!(w.write(b"e").is_err());
    }
}
