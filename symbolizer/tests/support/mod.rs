//! Test support: ELF files built at test time, eBPF-profiler-shaped OTLP made from them, and
//! elfutils' `eu-addr2line -f -i -C` as the independent reference.
//!
//! The OTLP is shaped as in the translator's `native_symbolication` test: one mapping per
//! object in ELF space (`memory_start = p_vaddr` of the executable segment, page-aligned),
//! `process.executable.build_id.gnu` (or only `.htlhash`) on the mapping, the mapping's file
//! name a base name, `profile.frame.type = native` on each location, no lines.

#![allow(dead_code)]

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, KeyValueAndUnit, Location, Mapping, Profile,
    ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
    any_value,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the tools exist; without them the test skips, unless `PROFILINK_REQUIRE_GCC` is set
/// (as `scripts/test.sh` sets it), then it fails.
pub fn tools_present(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| Command::new(t).arg("--version").output().is_err())
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("PROFILINK_REQUIRE_GCC").is_none(),
        "PROFILINK_REQUIRE_GCC is set but {missing:?} are not installed (Debian: gcc g++ elfutils debuginfod binutils)"
    );
    eprintln!("SKIPPED {test}: {missing:?} not installed");
    false
}

pub fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch directory removed at drop.
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("profilink-sym-{name}-"))
        .tempdir()
        .unwrap()
}

/// The toolchain's `rust-lld`, linked as `ld.lld` into `dir` for `gcc -B dir -fuse-ld=lld`.
pub fn lld_dir(dir: &Path) -> Option<PathBuf> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(sysroot.stdout).ok()?;
    let lib = Path::new(sysroot.trim()).join("lib/rustlib");
    let lld = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin/rust-lld"))
        .find(|p| p.exists())?;
    let bin = dir.join("lld-bin");
    std::fs::create_dir_all(&bin).ok()?;
    std::os::unix::fs::symlink(lld, bin.join("ld.lld")).ok()?;
    Some(bin)
}

pub const C_SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static inline long mix(long s, long i) { return (s * 31) ^ (i >> 2); }
__attribute__((noinline)) long work_alpha(long x) {
    long s = 0;
    for (long i = 0; i < x * 1000; i++) s = mix(s, i * x);
    return s;
}
__attribute__((noinline)) long work_beta(long x) {
    long s = 1;
    for (long i = 1; i < x * 700; i++) s = s * 31 + i / (x + 1);
    return s + work_alpha(x - 1);
}
__attribute__((noinline)) long work_gamma(long x) {
    long s = 7;
    for (long i = 0; i < x * 300; i++) s ^= (s << 5) + i;
    return s + work_beta(x + 1);
}
int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] == 's') { printf("ready\n"); fflush(stdout); sleep(600); }
    printf("%ld\n", work_gamma(argc) + work_alpha(argc * 2));
    return 0;
}
"#;

pub const CPP_SOURCE: &str = r#"
#include <cstdio>
#include <vector>
#include <map>
#include <string>
namespace shapes {
template <typename T> struct Acc {
  T v;
  inline void add(T x) { for (int i = 0; i < 50; i++) v = v * 31 + x + i; }
};
template <typename T> static inline T sum(const std::vector<T>& xs) {
  Acc<T> a{0};
  for (auto x : xs) a.add(x);
  return a.v;
}
template <typename K> __attribute__((noinline)) long count(const std::map<K, long>& m) {
  long n = 0;
  for (auto& kv : m) n += kv.second;
  return n;
}
}
__attribute__((noinline)) long run(int n) {
  std::vector<long> xs;
  for (int i = 0; i < n; i++) xs.push_back(i);
  std::map<std::string, long> m;
  for (int i = 0; i < n % 7; i++) m[std::to_string(i)] = i;
  return shapes::sum(xs) + shapes::count(m);
}
int main(int argc, char**) { std::printf("%ld\n", run(argc * 1000)); }
"#;

pub const RUST_SOURCE: &str = r#"
#[inline(never)]
pub fn work_alpha(x: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..x * 1000 { s = s.wrapping_add((i * x) ^ (s >> 3)); }
    s
}
#[inline(never)]
pub fn work_beta(v: &mut Vec<u64>, x: u64) -> u64 {
    for i in 0..x { v.push(i * 3); }
    v.iter().map(|y| y.wrapping_mul(7)).sum::<u64>().wrapping_add(work_alpha(x))
}
fn main() {
    let n = std::env::args().count() as u64;
    let mut v = Vec::new();
    println!("{}", work_beta(&mut v, n * 10));
}
"#;

pub const LIB_SOURCE: &str = r#"
long lib_one(long x) { long s = 0; for (long i = 0; i < x; i++) s += i * x; return s; }
long lib_two(long x) { long s = 1; for (long i = 0; i < x; i++) s = s * 7 + lib_one(i); return s; }
"#;

/// One built object.
#[derive(Debug, Clone)]
pub struct Built {
    /// A name for messages; also the mapping's file name.
    pub name: String,
    /// The file a process maps (what the profiler hashes and names).
    pub object: PathBuf,
    /// The file with the debug information (`eu-addr2line -e` reads it); may be `object`.
    pub debug: PathBuf,
    /// Whether the debug file is separate (stripped object).
    pub separate_debug: bool,
    /// Only functions whose raw name contains this are checked (the rustc binary: the
    /// application's own code; its precompiled standard library uses v0 mangling, which the
    /// Debian 12 elfutils does not demangle).
    pub only: Option<&'static str>,
}

fn gcc(dir: &Path, cc: &str, src: &Path, name: &str, flags: &[&str]) -> Built {
    let path = dir.join(name);
    run(Command::new(cc)
        .args(["-g", "-Wl,--build-id=sha1", "-o"])
        .arg(&path)
        .arg(src)
        .args(flags));
    Built {
        name: name.to_owned(),
        object: path.clone(),
        debug: path,
        separate_debug: false,
        only: None,
    }
}

/// Builds every kind of object the tests check: gcc PIE and non-PIE, gcc with lld, rustc, C++
/// `-O2` with templates and inlining, a stripped binary with a separate debug file, and a
/// shared library with only `.dynsym`.
pub fn build_all(dir: &Path) -> Vec<Built> {
    let c = dir.join("app.c");
    std::fs::write(&c, C_SOURCE).unwrap();
    let cpp = dir.join("app.cpp");
    std::fs::write(&cpp, CPP_SOURCE).unwrap();
    let mut out = vec![
        gcc(dir, "gcc", &c, "gcc-pie", &["-O1", "-fPIE", "-pie"]),
        gcc(dir, "gcc", &c, "gcc-nopie", &["-O1", "-fno-pie", "-no-pie"]),
        gcc(dir, "g++", &cpp, "cxx-o2", &["-O2"]),
    ];
    match lld_dir(dir) {
        Some(bin) => {
            let b = format!("-B{}", bin.display());
            out.push(gcc(
                dir,
                "gcc",
                &c,
                "gcc-lld-pie",
                &["-O1", &b, "-fuse-ld=lld", "-fPIE", "-pie"],
            ));
        }
        None => assert!(
            std::env::var_os("PROFILINK_REQUIRE_GCC").is_none(),
            "PROFILINK_REQUIRE_GCC is set but the toolchain's rust-lld was not found"
        ),
    }
    let rs = dir.join("app.rs");
    std::fs::write(&rs, RUST_SOURCE).unwrap();
    let rbin = dir.join("rustc-bin");
    run(Command::new("rustc")
        .args([
            "-g",
            "-C",
            "opt-level=1",
            "-C",
            "link-arg=-Wl,--build-id=sha1",
            "-o",
        ])
        .arg(&rbin)
        .arg(&rs));
    out.push(Built {
        name: "rustc-bin".into(),
        object: rbin.clone(),
        debug: rbin,
        separate_debug: false,
        only: Some("3app"),
    });
    out.push(stripped(dir, &c));
    out.push(dynsym_only(dir));
    out
}

/// gcc `-O2`, then split: the debug file (`objcopy --only-keep-debug`) and the stripped binary
/// with a `.gnu_debuglink`.
pub fn stripped(dir: &Path, c: &Path) -> Built {
    let full = gcc(dir, "gcc", c, "gcc-stripped.full", &["-O2"]);
    let debug = dir.join("gcc-stripped.debug");
    let object = dir.join("gcc-stripped");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full.object)
        .arg(&debug));
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&full.object)
        .arg(&object));
    Built {
        name: "gcc-stripped".into(),
        object,
        debug,
        separate_debug: true,
        only: None,
    }
}

/// A shared library stripped of everything but `.dynsym`.
pub fn dynsym_only(dir: &Path) -> Built {
    let src = dir.join("lib.c");
    std::fs::write(&src, LIB_SOURCE).unwrap();
    let path = dir.join("libdyn.so");
    run(Command::new("gcc")
        .args(["-O1", "-shared", "-fPIC", "-s", "-Wl,--build-id=sha1", "-o"])
        .arg(&path)
        .arg(&src));
    Built {
        name: "libdyn.so".into(),
        object: path.clone(),
        debug: path,
        separate_debug: false,
        only: None,
    }
}

/// Places `b` in `debug_dir` in the build-id layout: the object as `.build-id/ab/cdef…` and,
/// when separate, the debug file as `.build-id/ab/cdef….debug`.
pub fn install_build_id(debug_dir: &Path, b: &Built) {
    let id = hex::encode(build_id(&std::fs::read(&b.object).unwrap()));
    let d = debug_dir.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&d).unwrap();
    if b.separate_debug {
        std::fs::copy(&b.debug, d.join(format!("{}.debug", &id[2..]))).unwrap();
    } else {
        std::fs::copy(&b.object, d.join(&id[2..])).unwrap();
    }
}

pub fn build_id(data: &[u8]) -> Vec<u8> {
    let f = object::File::parse(data).unwrap();
    f.build_id().unwrap().expect("a build id").to_vec()
}

/// Addresses to look up in `b`'s debug file: for each function symbol, up to `per_fn` addresses spread over it (its start included), skipping the C
/// runtime's own functions.
pub fn addresses(b: &Built, per_fn: u64) -> Vec<u64> {
    let data = std::fs::read(&b.debug).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let skip = [
        "_start",
        "_init",
        "_fini",
        "deregister_tm_clones",
        "register_tm_clones",
        "__do_global_dtors_aux",
        "frame_dummy",
        "_dl_relocate_static_pie",
    ];
    let mut out = Vec::new();
    for s in f.symbols().chain(f.dynamic_symbols()) {
        if s.kind() != SymbolKind::Text || s.size() == 0 || !s.is_definition() {
            continue;
        }
        let name = s.name().unwrap_or("");
        if skip.contains(&name)
            || name.starts_with("__libc_csu")
            || b.only.is_some_and(|o| !name.contains(o))
        {
            continue;
        }
        let step = (s.size() / per_fn).max(1);
        let mut a = s.address();
        while a < s.address() + s.size() && out.len() < 4000 {
            out.push(a);
            a += step;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// One frame as compared: function, file, line.
pub type Expected = (String, String, u32);

/// `eu-addr2line -f -i -C -a -e file addrs…`: per address, its frames innermost first;
/// `??` / `??:0` become empty strings and 0.
pub fn eu_addr2line(file: &Path, addrs: &[u64]) -> Vec<Vec<Expected>> {
    eu_addr2line_with(file, addrs, true)
}

/// As [`eu_addr2line`], without `-C` when `demangle` is false (raw linkage names).
pub fn eu_addr2line_with(file: &Path, addrs: &[u64], demangle: bool) -> Vec<Vec<Expected>> {
    let mut all = Vec::new();
    let flags: &[&str] = if demangle {
        &["-f", "-i", "-C", "-a", "-e"]
    } else {
        &["-f", "-i", "-a", "-e"]
    };
    for chunk in addrs.chunks(500) {
        let out = Command::new("eu-addr2line")
            .args(flags)
            .arg(file)
            .args(chunk.iter().map(|a| format!("{a:#x}")))
            .output()
            .expect("eu-addr2line runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut cur: Option<Vec<Expected>> = None;
        let mut lines = text.lines();
        while let Some(l) = lines.next() {
            if l.starts_with("0x") && !l.contains(' ') {
                if let Some(c) = cur.take() {
                    all.push(c);
                }
                cur = Some(Vec::new());
                continue;
            }
            let func = l.split(" inlined at ").next().unwrap_or(l).trim();
            let loc = lines.next().unwrap_or("??:0");
            let (file, line) = loc.rsplit_once(':').map_or((loc, "0"), |(f, l)| (f, l));
            // `file:line:column`: drop the column.
            let (file, line) = match file.rsplit_once(':') {
                Some((f, l2)) if l2.chars().all(|c| c.is_ascii_digit()) && !l2.is_empty() => {
                    (f, l2)
                }
                _ => (file, line),
            };
            let func = if func == "??" { "" } else { func };
            let file = if file == "??" { "" } else { file };
            cur.as_mut().expect("an address line first").push((
                func.to_owned(),
                file.to_owned(),
                line.parse().unwrap_or(0),
            ));
        }
        if let Some(c) = cur.take() {
            all.push(c);
        }
    }
    assert_eq!(
        all.len(),
        addrs.len(),
        "one eu-addr2line answer per address"
    );
    all
}

/// A dictionary builder.
pub struct Dict {
    pub d: ProfilesDictionary,
    pub strings: HashMap<String, i32>,
}

impl Default for Dict {
    fn default() -> Self {
        Self::new()
    }
}

impl Dict {
    pub fn new() -> Self {
        let mut d = Dict {
            d: ProfilesDictionary::default(),
            strings: HashMap::new(),
        };
        d.s("");
        d.d.mapping_table.push(Mapping::default());
        d.d.location_table.push(Location::default());
        d.d.function_table.push(Default::default());
        d.d.link_table.push(Default::default());
        d.d.attribute_table.push(KeyValueAndUnit::default());
        d.d.stack_table.push(Stack::default());
        d
    }

    pub fn s(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        self.d.string_table.push(s.to_owned());
        let i = (self.d.string_table.len() - 1) as i32;
        self.strings.insert(s.to_owned(), i);
        i
    }

    pub fn attr(&mut self, key: &str, v: &str) -> i32 {
        let key_strindex = self.s(key);
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.to_owned())),
            }),
            unit_strindex: 0,
        });
        (self.d.attribute_table.len() - 1) as i32
    }

    /// A mapping for `data` named `name` as the eBPF profiler sends it; `gnu` false sends only
    /// the file id.
    pub fn mapping(&mut self, name: &str, data: &[u8], gnu: bool) -> i32 {
        let f = object::File::parse(data).unwrap();
        let seg = f
            .segments()
            .find(|s| matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & 1 != 0))
            .expect("an executable segment");
        let start = seg.address() & !0xfff;
        let limit = (seg.address() + seg.size() + 0xfff) & !0xfff;
        let offset = seg.file_range().0 & !0xfff;
        let mut attrs = vec![self.attr(
            "process.executable.build_id.htlhash",
            &hex::encode(profilink_symbolizer::file_id::htlhash(data)),
        )];
        if gnu {
            attrs.push(self.attr(
                "process.executable.build_id.gnu",
                &hex::encode(build_id(data)),
            ));
        }
        let filename_strindex = self.s(name);
        self.d.mapping_table.push(Mapping {
            memory_start: start,
            memory_limit: limit,
            file_offset: offset,
            filename_strindex,
            attribute_indices: attrs,
        });
        (self.d.mapping_table.len() - 1) as i32
    }

    /// A native location per address; returns their indices.
    pub fn locations(&mut self, mapping: i32, addrs: &[u64]) -> Vec<i32> {
        let native = self.attr("profile.frame.type", "native");
        addrs
            .iter()
            .map(|&a| {
                self.d.location_table.push(Location {
                    mapping_index: mapping,
                    address: a,
                    lines: vec![],
                    attribute_indices: vec![native],
                });
                (self.d.location_table.len() - 1) as i32
            })
            .collect()
    }
}

/// A request with one resource per (pid, location indices): one sample whose stack holds
/// them (location indices may repeat across resources).
pub fn request(mut dict: Dict, per_pid: &[(i64, Vec<i32>)]) -> ExportProfilesServiceRequest {
    let mut resources = Vec::new();
    for (pid, locs) in per_pid {
        dict.d.stack_table.push(Stack {
            location_indices: locs.clone(),
        });
        let stack_index = (dict.d.stack_table.len() - 1) as i32;
        let st = ValueType {
            type_strindex: dict.s("samples"),
            unit_strindex: dict.s("count"),
        };
        let t0 = 1_700_000_000_000_000_000u64;
        resources.push(ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "process.pid".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::IntValue(*pid)),
                    }),
                    key_strindex: 0,
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(st),
                    samples: vec![Sample {
                        stack_index,
                        timestamps_unix_nano: vec![t0, t0 + 50_000_000],
                        ..Default::default()
                    }],
                    time_unix_nano: t0,
                    duration_nano: 1_000_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            schema_url: String::new(),
        });
    }
    ExportProfilesServiceRequest {
        resource_profiles: resources,
        dictionary: Some(dict.d),
    }
}

/// The raw (system) names OTLP now holds for location `li`, innermost first.
pub fn system_names_of(d: &ProfilesDictionary, li: i32) -> Vec<String> {
    d.location_table[li as usize]
        .lines
        .iter()
        .map(|l| {
            let f = &d.function_table[l.function_index as usize];
            d.string_table[f.system_name_strindex as usize].clone()
        })
        .collect()
}

/// The frames OTLP now holds for location `li`: (function, file, line) innermost first.
pub fn frames_of(d: &ProfilesDictionary, li: i32) -> Vec<Expected> {
    let loc = &d.location_table[li as usize];
    loc.lines
        .iter()
        .map(|l| {
            let f = &d.function_table[l.function_index as usize];
            (
                d.string_table[f.name_strindex as usize].clone(),
                d.string_table[f.filename_strindex as usize].clone(),
                l.line as u32,
            )
        })
        .collect()
}

/// Names compared as elfutils prints them: Rust's legacy hash suffix (`::h0123…`) dropped
/// (elfutils keeps it, `addr2line` drops it) and spaces removed (`> >` and `>>`).
pub fn normalize(name: &str) -> String {
    let mut s = name.to_owned();
    if let Some(i) = s.rfind("::h")
        && s.len() - i == 19
        && s[i + 3..].chars().all(|c| c.is_ascii_hexdigit())
    {
        s.truncate(i);
    }
    s.replace(' ', "")
}

/// How one object's frames compared.
#[derive(Debug, Default)]
pub struct Compared {
    /// Frames compared (inline levels included).
    pub frames: usize,
    /// Frames whose demangled name differs from libiberty's while the raw name is the same
    /// (`addr2line` demangles C++ with the `cpp_demangle` crate).
    pub demangler_differences: Vec<String>,
    /// Real mismatches: function (raw name), file, line or inline chain.
    pub mismatches: Vec<String>,
}

/// Compares every location with `eu-addr2line`'s answers, demangled (`expected`) and raw
/// (`raw`). With `rust_inlines`, a one-frame answer of elfutils (which does not expand
/// Rust's inlined calls into other compilation units) must be the chain's innermost file and
/// line and its outermost function.
pub fn compare(
    what: &str,
    d: &ProfilesDictionary,
    locs: &[i32],
    addrs: &[u64],
    expected: &[Vec<Expected>],
    raw: &[Vec<Expected>],
    rust_inlines: bool,
) -> Compared {
    let mut c = Compared::default();
    for (((li, a), exp), raw) in locs.iter().zip(addrs).zip(expected).zip(raw) {
        let got = frames_of(d, *li);
        let got_raw = system_names_of(d, *li);
        if !exp.iter().any(|e| !e.0.is_empty()) {
            if !got.is_empty() {
                c.mismatches.push(format!(
                    "{what} {a:#x}: eu-addr2line names nothing, got {got:?}"
                ));
            }
            continue;
        }
        c.frames += exp.len();
        if rust_inlines && exp.len() == 1 && got.len() > 1 {
            let (first, last) = (&got[0], &got[got.len() - 1]);
            if first.1 != exp[0].1
                || first.2 != exp[0].2
                || normalize(&last.0) != normalize(&exp[0].0)
            {
                c.mismatches.push(format!(
                    "{what} {a:#x}:\n  got      {got:?}\n  expected {exp:?}"
                ));
            }
            continue;
        }
        if got.len() != exp.len() {
            c.mismatches.push(format!(
                "{what} {a:#x}: chain length\n  got      {got:?}\n  expected {exp:?}"
            ));
            continue;
        }
        for (i, (g, e)) in got.iter().zip(exp).enumerate() {
            if g.1 != e.1 || g.2 != e.2 {
                c.mismatches.push(format!(
                    "{what} {a:#x} level {i}: got {g:?}, expected {e:?}"
                ));
            } else if normalize(&g.0) != normalize(&e.0) {
                // The raw names must agree; then only the demangler differs.
                let raw_same =
                    got_raw.get(i).map(String::as_str) == raw.get(i).map(|r| r.0.as_str());
                if raw_same {
                    c.demangler_differences
                        .push(format!("{what} {a:#x}: {:?} vs elfutils {:?}", g.0, e.0));
                } else {
                    c.mismatches.push(format!(
                        "{what} {a:#x} level {i}: got {g:?} ({:?}), expected {e:?} ({:?})",
                        got_raw.get(i),
                        raw.get(i)
                    ));
                }
            }
        }
    }
    c
}
