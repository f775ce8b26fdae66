//! The native objects `--symbolize` profiles "run": real ELF files compiled at start from the
//! generated sources (`native_source`), with their debug files in a build-id directory, as a
//! distribution's `-dbgsym` packages install them.
//!
//! Three objects stand in for the fixture's native mappings (see `native_frames`): a C++
//! executable (`node`, `PerformanceTest`), a C++ shared library (`libjvm.so`, `libstdc++`) and
//! a C shared library (`libc`, `libpthread`, the vDSO). Each is compiled `-g -O2` with a GNU
//! build id, then split as packagers do: `objcopy --only-keep-debug` gives
//! `DIR/.build-id/ab/cdef….debug`, and the stripped object is what the profiled process maps
//! (the eBPF profiler's file id is computed from it). The addresses frames get are spread over
//! every function of the object's `.symtab`.

use crate::native_source;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

/// Addresses taken per function (spread over its bytes; fewer for short functions).
const ADDRESSES_PER_FUNCTION: u64 = 12;

/// What a fixture mapping becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A C++ executable.
    Executable,
    /// A C++ shared library.
    CxxLibrary,
    /// A C shared library.
    CLibrary,
}

/// One built object.
pub struct NativeObject {
    pub kind: Kind,
    /// The mapping's file name.
    pub name: String,
    /// GNU build id.
    pub build_id: Vec<u8>,
    /// The eBPF profiler's file id of the stripped object.
    pub htlhash: Vec<u8>,
    /// The executable segment in ELF space, as the profiler sends the mapping:
    /// (`memory_start`, `memory_limit`, `file_offset`), page-aligned.
    pub segment: (u64, u64, u64),
    /// Function symbols in `.symtab` (clones such as `.cold` and `.isra` included).
    pub functions: usize,
    /// Addresses in those functions, sorted.
    pub addresses: Vec<u64>,
}

/// The objects and the debug directory holding their debug files.
pub struct Objects {
    /// `DIR` of `DIR/.build-id/ab/cdef….debug`.
    pub debug_dir: PathBuf,
    pub objects: Vec<NativeObject>,
    _dir: tempfile::TempDir,
}

impl Objects {
    /// The object of `kind`.
    pub fn get(&self, kind: Kind) -> &NativeObject {
        self.objects
            .iter()
            .find(|o| o.kind == kind)
            .expect("every kind is built")
    }
}

struct Plan {
    kind: Kind,
    name: &'static str,
    compiler: &'static str,
    ext: &'static str,
    flags: &'static [&'static str],
    units: Vec<String>,
}

fn wait_ok(what: &str, mut child: Child) {
    let status = child.wait().expect("compiler runs");
    assert!(status.success(), "compiling {what} failed: {status}");
}

/// Compiles the three objects (the compilers run in parallel) and installs their debug files.
/// Panics when gcc, g++ or objcopy fail (the tools are required by this mode).
pub fn build() -> Objects {
    let dir = tempfile::Builder::new()
        .prefix("profilink-load-native-")
        .tempdir()
        .expect("temp dir");
    let t0 = Instant::now();
    let plans = [
        Plan {
            kind: Kind::Executable,
            name: "node",
            compiler: "g++",
            ext: "cpp",
            flags: &["-fPIE", "-pie"],
            units: native_source::cxx_units(640, 8, 1, true),
        },
        Plan {
            kind: Kind::CxxLibrary,
            name: "libjvm.so",
            compiler: "g++",
            ext: "cpp",
            flags: &["-shared", "-fPIC"],
            units: native_source::cxx_units(160, 2, 5, false),
        },
        Plan {
            kind: Kind::CLibrary,
            name: "libc.so.6",
            compiler: "gcc",
            ext: "c",
            flags: &["-shared", "-fPIC"],
            units: native_source::c_units(400, 4),
        },
    ];
    // Compile every unit to an object file, two compilers at a time (the machine's cores).
    let mut jobs: Vec<(String, Command)> = Vec::new();
    for p in &plans {
        for (u, src) in p.units.iter().enumerate() {
            let src_path = dir.path().join(format!("{}-{u}.{}", p.name, p.ext));
            std::fs::write(&src_path, src).expect("write source");
            let mut c = Command::new(p.compiler);
            c.args(["-g", "-O2", "-c", "-o"])
                .arg(src_path.with_extension("o"))
                .arg(&src_path)
                .args(p.flags.iter().filter(|f| **f != "-shared" && **f != "-pie"));
            jobs.push((src_path.display().to_string(), c));
        }
    }
    for pair in jobs.chunks_mut(2) {
        let running: Vec<_> = pair
            .iter_mut()
            .map(|(what, c)| (what.clone(), c.spawn().expect("gcc/g++ installed")))
            .collect();
        for (what, child) in running {
            wait_ok(&what, child);
        }
    }
    let debug_dir = dir.path().join("debug");
    let mut objects = Vec::new();
    let mut debug_bytes = 0;
    for p in &plans {
        let full = dir.path().join(format!("{}.full", p.name));
        let mut link = Command::new(p.compiler);
        link.args(["-g", "-O2", "-Wl,--build-id=sha1", "-o"])
            .arg(&full)
            .args(p.flags);
        for u in 0..p.units.len() {
            link.arg(dir.path().join(format!("{}-{u}.o", p.name)));
        }
        wait_ok(p.name, link.spawn().expect("link"));
        let stripped = dir.path().join(p.name);
        let debug = dir.path().join(format!("{}.debug", p.name));
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&full)
            .arg(&debug));
        run(Command::new("objcopy")
            .arg("--strip-all")
            .arg(&full)
            .arg(&stripped));
        let object = describe(p.kind, p.name, &stripped, &debug);
        let hex = hex::encode(&object.build_id);
        let d = debug_dir.join(".build-id").join(&hex[..2]);
        std::fs::create_dir_all(&d).expect("build-id dir");
        std::fs::copy(&debug, d.join(format!("{}.debug", &hex[2..]))).expect("install");
        debug_bytes += std::fs::metadata(&debug).map_or(0, |m| m.len());
        objects.push(object);
    }
    eprintln!(
        "native objects built in {:.1} s: {}; debug files {:.1} MiB in {}",
        t0.elapsed().as_secs_f64(),
        objects
            .iter()
            .map(|o| format!(
                "{} ({} functions, {} addresses)",
                o.name,
                o.functions,
                o.addresses.len()
            ))
            .collect::<Vec<_>>()
            .join(", "),
        debug_bytes as f64 / f64::from(1 << 20),
        debug_dir.display()
    );
    Objects {
        debug_dir,
        objects,
        _dir: dir,
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("binutils installed");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads what the OTLP needs: identities from the stripped object, segment and addresses from
/// the debug file (which keeps the section and symbol layout).
fn describe(kind: Kind, name: &str, stripped: &Path, debug: &Path) -> NativeObject {
    let data = std::fs::read(stripped).expect("read object");
    let f = object::File::parse(&*data).expect("ELF");
    let build_id = f.build_id().ok().flatten().expect("a build id").to_vec();
    let seg = f
        .segments()
        .find(|s| {
            matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & 1 != 0)
        })
        .expect("an executable segment");
    let segment = (
        seg.address() & !0xfff,
        (seg.address() + seg.size() + 0xfff) & !0xfff,
        seg.file_range().0 & !0xfff,
    );
    let htlhash = profilink_symbolizer::file_id::htlhash(&data).to_vec();
    let dbg = std::fs::read(debug).expect("read debug file");
    let df = object::File::parse(&*dbg).expect("ELF debug file");
    let mut functions = 0;
    let mut addresses = Vec::new();
    for s in df.symbols() {
        if s.kind() != SymbolKind::Text || s.size() == 0 || !s.is_definition() {
            continue;
        }
        // Only the generated code (not the C runtime's or the linker's own functions).
        let n = s.name().unwrap_or("");
        if !(n.contains("step_") || n.contains("cfn_") || n.contains("gen5tally")) {
            continue;
        }
        functions += 1;
        let step = (s.size() / ADDRESSES_PER_FUNCTION).max(1);
        let mut a = s.address();
        while a < s.address() + s.size() {
            addresses.push(a);
            a += step;
        }
    }
    addresses.sort_unstable();
    addresses.dedup();
    NativeObject {
        kind,
        name: name.to_owned(),
        build_id,
        htlhash,
        segment,
        functions,
        addresses,
    }
}
