//! Native symbolization of OTLP profiles.
//!
//! The opentelemetry-ebpf-profiler names interpreted frames itself but sends native frames (C,
//! C++, Rust, libc, libjvm, …) as bare addresses: a `Location` with no `lines`, an address in
//! the object's ELF virtual-address space, and a `Mapping` with the file's base name and its
//! GNU build id (`process.executable.build_id.gnu`) or only the profiler's own file id
//! (`process.executable.build_id.htlhash`, see [`file_id`]). [`Symbolizer::symbolize`] gives
//! such locations their function, file and line, inline chains expanded innermost first,
//! from, in the configured order ([`SymbolizerConfig::sources`]):
//!
//! 1. debug directories in the build-id layout (`/usr/lib/debug/.build-id/ab/cdef….debug`);
//! 2. the live process's own files, found through `/proc/<pid>/maps` and opened inside
//!    `/proc/<pid>/root` (a configurable proc root; nothing outside that root is reached),
//!    with `.gnu_debuglink` followed there, and `.symtab`/`.dynsym` or MiniDebugInfo
//!    (`.gnu_debugdata`) when there is no DWARF;
//! 3. debuginfod servers, downloaded in the background into a bounded on-disk cache;
//!    a request waits for its downloads at most [`SymbolizerConfig::wait`].
//!
//! A file is used only when its identity is the mapping's. DWARF is read with the gimli
//! project's `addr2line` (inline chains, C++ and Rust demangling), ELF with `object`.
//! Loaded objects and looked-up addresses are kept in memory within
//! [`SymbolizerConfig::max_memory_mib`]. Every location is counted by outcome in
//! [`SymbolizerMetrics`].
//!
//! The methods block; the service calls them on blocking threads.

#![warn(missing_docs)]

mod cache;
pub mod config;
pub mod file_id;
mod fsutil;
mod metrics;
mod object;
mod resolve;
mod rewrite;
mod scan;
mod sources;
mod symbolizer;
mod symbols;
pub mod telemetry;

pub use config::{DebuginfodConfig, SourceKind, SymbolizerConfig};
pub use metrics::{FetchFailure, Outcome, SymbolizerMetrics};
pub use object::{LoadedObject, ObjectError, SymFrame};
pub use rewrite::SYMBOLIZED_KEY;
pub use scan::{FRAME_TYPE_KEY, PID_KEY};
pub use symbolizer::{Summary, Symbolizer};

/// Parses hostile bytes as an object and looks up `addresses` in it: what the fuzz target
/// drives. Never panics; allocation is bounded by the input's size and the loaders' bounds.
pub fn fuzz_lookup(data: &[u8], addresses: &[u64]) -> usize {
    let _ = file_id::gnu_build_id(data);
    let _ = object::debuglink(data);
    match LoadedObject::load(&[data]) {
        Ok(o) => addresses.iter().map(|&a| o.lookup(a).len()).sum(),
        Err(_) => 0,
    }
}
