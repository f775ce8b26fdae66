//! Native frames of eBPF-profiler-shaped OTLP symbolicate to the right functions in Sentry.
//!
//! The test builds small ELF binaries (gcc with its default linker, PIE and non-PIE; gcc with
//! lld, PIE and non-PIE, using the Rust toolchain's `rust-lld`; a rustc binary), takes the
//! system libc and libm, and for each binary writes one process the way the eBPF profiler
//! reports it: the executable `PT_LOAD` segment mapped at a randomized base, then converted
//! back to ELF space as the profiler does (`memory_start = Vaddr - Bias`, with `Bias` from the
//! executable segments' file offset to virtual address mapping), `Location.address` = the ELF
//! virtual address of a known function plus a small offset, build id attribute
//! `process.executable.build_id.gnu`, `profile.frame.type = native`. It translates the request
//! and resolves every chunk frame with Symbolicator's rules, using Sentry's `symbolic` crate to
//! read the objects:
//!
//! * the image is the last one (by `image_addr`) starting at or below `instruction_addr`,
//!   rejected when the address is past `image_addr + image_size`;
//! * it must be the object with that `debug_id` and `code_id`;
//! * the lookup address is `instruction_addr - image_addr`, looked up in the object's symbol
//!   map, whose addresses are relative to the object's `load_address()` (its first `PT_LOAD`
//!   address), as Symbolicator's symbol caches are.
//!
//! Every frame must resolve to the function it was made from, and `profilink validate`'s chunk
//! rules find nothing (no overlapping images, no frame outside its image). Without gcc the test says so and
//! skips, unless `PROFILINK_REQUIRE_GCC` is set (as `scripts/test.sh` does), then it fails
//! (as it does when the toolchain's `rust-lld` is missing). x86_64 Linux only.

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, KeyValueAndUnit, Location, Mapping, Profile,
    ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
    any_value,
};
use profilink_proto::sentry::parse_instruction_addr;
use profilink_proto::sentry::{DebugImage, ProfileChunk};
use profilink_proto::validate::validate_chunk;
use profilink_translator::otlp_to_sentry::{ChunkOptions, request_to_chunks};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use symbolic_debuginfo::Object;

const PAGE: u64 = 0x1000;

const C_SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long work_alpha(long x) {
    long s = 0;
    for (long i = 0; i < x * 1000; i++) s += (i * x) ^ (s >> 3);
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
    printf("%ld\n", work_gamma(argc) + work_alpha(argc * 2));
    return 0;
}
"#;

const RUST_SOURCE: &str = r#"
#[inline(never)]
#[no_mangle]
pub extern "C" fn work_alpha(x: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..x * 1000 { s = s.wrapping_add((i * x) ^ (s >> 3)); }
    s
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn work_beta(x: u64) -> u64 {
    let mut s = 1u64;
    for i in 1..x * 700 { s = s.wrapping_mul(31).wrapping_add(i / (x + 1)); }
    s.wrapping_add(work_alpha(x.saturating_sub(1)))
}
#[inline(never)]
#[no_mangle]
pub extern "C" fn work_gamma(x: u64) -> u64 {
    let mut s = 7u64;
    for i in 0..x * 300 { s ^= (s << 5).wrapping_add(i); }
    s.wrapping_add(work_beta(x + 1))
}
fn main() {
    let n = std::env::args().count() as u64;
    println!("{}", work_gamma(n).wrapping_add(work_alpha(n * 2)));
}
"#;

const APP_FUNCTIONS: [&str; 3] = ["work_alpha", "work_beta", "work_gamma"];
const LIBC_FUNCTIONS: [&str; 8] = [
    "fopen",
    "qsort",
    "getenv",
    "strtol",
    "malloc",
    "fclose",
    "setlocale",
    "printf",
];
const LIBM_FUNCTIONS: [&str; 8] = [
    "fmod",
    "atan2",
    "cbrt",
    "hypot",
    "erf",
    "tgamma",
    "lgamma",
    "remainder",
];

/// An ELF file read for the test.
struct Elf {
    name: String,
    data: Vec<u8>,
}

/// One planned native frame: its object, the function's ELF address and the frame's address.
#[derive(Debug, Clone)]
struct Planned {
    object: usize,
    function: String,
    function_addr: u64,
    address: u64,
}

/// The executable `PT_LOAD` segments (offset, vaddr, filesz, memsz) of an ELF64 little-endian
/// file, read from the program headers.
fn exec_segments(data: &[u8]) -> Vec<(u64, u64, u64, u64)> {
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([data[o], data[o + 1]]));
    let u32_at = |o: usize| u64::from(u32::from_le_bytes(data[o..o + 4].try_into().unwrap()));
    let u64_at = |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap());
    assert_eq!(&data[..4], b"\x7fELF");
    assert_eq!(data[4], 2, "ELF64 only");
    assert_eq!(data[5], 1, "little-endian only");
    let phoff = u64_at(0x20) as usize;
    let phentsize = u16_at(0x36) as usize;
    let phnum = u16_at(0x38) as usize;
    let mut out = Vec::new();
    for i in 0..phnum {
        let p = phoff + i * phentsize;
        let (p_type, p_flags) = (u32_at(p), u32_at(p + 4));
        if p_type == 1 && p_flags & 1 != 0 {
            out.push((
                u64_at(p + 8),
                u64_at(p + 16),
                u64_at(p + 32),
                u64_at(p + 40),
            ));
        }
    }
    out
}

/// The mapping the eBPF profiler reports for the executable segment `seg` loaded at
/// `runtime_base`: the kernel maps whole pages (`Vaddr`, `Length`, `FileOffset`), the profiler
/// computes `Bias = Vaddr - FileOffsetToVirtualAddress(FileOffset)` over the executable
/// segments and reports `[Vaddr - Bias, + Length)` and `FileOffset`.
fn ebpf_mapping(data: &[u8], runtime_base: u64) -> (u64, u64, u64) {
    let segments = exec_segments(data);
    let &(p_offset, p_vaddr, _, p_memsz) = segments.first().expect("an executable segment");
    let vaddr = runtime_base + (p_vaddr & !(PAGE - 1));
    let length = ((p_vaddr + p_memsz + PAGE - 1) & !(PAGE - 1)) - (p_vaddr & !(PAGE - 1));
    let file_offset = p_offset & !(PAGE - 1);
    let elf_va = segments
        .iter()
        .find(|&&(off, _, filesz, _)| {
            file_offset >= off & !(PAGE - 1) && file_offset < off + filesz
        })
        .map(|&(off, va, _, _)| va - (off - file_offset))
        .expect("the mapped offset is in an executable segment");
    let bias = vaddr - elf_va;
    let start = vaddr - bias;
    (start, start + length, file_offset)
}

fn build_id(obj: &Object<'_>) -> String {
    obj.code_id().expect("a GNU build id").as_str().to_owned()
}

/// Picks up to `n` functions of `names` that the object defines with a size, with their
/// address and the frame address (a few bytes into the function).
fn plan(obj: &Object<'_>, object: usize, names: &[&str], n: usize) -> Vec<Planned> {
    let symbols: Vec<_> = obj.symbols().collect();
    let mut out = Vec::new();
    for name in names {
        let Some(sym) = symbols
            .iter()
            .find(|s| s.name() == Some(*name) && s.size >= 8)
        else {
            continue;
        };
        // symbolic's symbol addresses are relative to the load address; the profiler's are
        // ELF virtual addresses.
        let function_addr = obj.load_address() + sym.address;
        out.push(Planned {
            object,
            function: (*name).to_owned(),
            function_addr,
            address: function_addr + (sym.size / 2).min(5),
        });
        if out.len() == n {
            break;
        }
    }
    assert_eq!(
        out.len(),
        n,
        "found {out:?} of {names:?} in {:?}",
        obj.code_id()
    );
    out
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn has_gcc() -> bool {
    Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The toolchain's `rust-lld`, linked as `ld.lld` into `dir` for `gcc -B dir -fuse-ld=lld`.
fn lld_dir(dir: &Path) -> Option<PathBuf> {
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

fn system_library(name: &str) -> PathBuf {
    let out = Command::new("ldconfig").arg("-p").output();
    if let Ok(out) = out {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line.trim_start().starts_with(name)
                && line.contains("x86-64")
                && let Some((_, path)) = line.rsplit_once(" => ")
            {
                return PathBuf::from(path.trim());
            }
        }
    }
    for dir in [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
    ] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} not found (ldconfig -p, /lib/x86_64-linux-gnu)");
}

/// Builds the test binaries into `dir`: (name, path).
fn build_binaries(dir: &Path) -> Vec<(String, PathBuf)> {
    let src = dir.join("app.c");
    std::fs::write(&src, C_SOURCE).unwrap();
    let mut out = Vec::new();
    let gcc = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        run(Command::new("gcc")
            .args(["-O1", "-Wl,--build-id=sha1", "-o"])
            .arg(&path)
            .arg(&src)
            .args(extra));
        (name.to_owned(), path)
    };
    out.push(gcc("gcc-pie", &["-fPIE", "-pie"]));
    out.push(gcc("gcc-nopie", &["-fno-pie", "-no-pie"]));
    match lld_dir(dir) {
        Some(bin) => {
            let b = format!("-B{}", bin.display());
            out.push(gcc("gcc-lld-pie", &[&b, "-fuse-ld=lld", "-fPIE", "-pie"]));
            out.push(gcc(
                "gcc-lld-nopie",
                &[&b, "-fuse-ld=lld", "-fno-pie", "-no-pie"],
            ));
        }
        None => {
            assert!(
                std::env::var_os("PROFILINK_REQUIRE_GCC").is_none(),
                "PROFILINK_REQUIRE_GCC is set but the toolchain's rust-lld was not found"
            );
            eprintln!("native_symbolication: rust-lld not found, lld binaries skipped");
        }
    }
    let rs = dir.join("app.rs");
    std::fs::write(&rs, RUST_SOURCE).unwrap();
    let path = dir.join("rustc-bin");
    run(Command::new("rustc")
        .args([
            "-C",
            "opt-level=1",
            "-C",
            "link-arg=-Wl,--build-id=sha1",
            "-o",
        ])
        .arg(&path)
        .arg(&rs));
    out.push(("rustc-bin".to_owned(), path));
    out
}

/// A small OTLP dictionary builder for this test.
#[derive(Default)]
struct Dict {
    d: ProfilesDictionary,
    strings: HashMap<String, i32>,
}

impl Dict {
    fn new() -> Self {
        let mut d = Dict::default();
        d.d.string_table.push(String::new());
        d.strings.insert(String::new(), 0);
        d.d.mapping_table.push(Mapping::default());
        d.d.location_table.push(Location::default());
        d.d.function_table.push(Default::default());
        d.d.link_table.push(Default::default());
        d.d.attribute_table.push(KeyValueAndUnit::default());
        d.d.stack_table.push(Stack::default());
        d
    }

    fn s(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        self.d.string_table.push(s.to_owned());
        let i = (self.d.string_table.len() - 1) as i32;
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn attr(&mut self, key: &str, v: &str) -> i32 {
        let key_strindex = self.s(key);
        self.d.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(str_value(v)),
            unit_strindex: 0,
        });
        (self.d.attribute_table.len() - 1) as i32
    }
}

fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.to_owned())),
    }
}

fn int_kv(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(v)),
        }),
        key_strindex: 0,
    }
}

/// Resolves `addr` in `images` with Symbolicator's rules; returns the image and the lookup
/// address relative to the image.
fn find_image(images: &[DebugImage], addr: u64) -> Option<(&DebugImage, u64)> {
    let mut sorted: Vec<(u64, &DebugImage)> = images
        .iter()
        .map(|i| {
            let a = parse_instruction_addr(i.image_addr.as_deref().expect("image_addr"))
                .expect("image_addr parses");
            (a, i)
        })
        .collect();
    sorted.sort_by_key(|(a, _)| *a);
    let (start, image) = sorted.into_iter().rev().find(|(a, _)| *a <= addr)?;
    if let Some(size) = image.image_size.filter(|s| *s > 0)
        && addr >= start + size
    {
        return None;
    }
    Some((image, addr - start))
}

#[test]
#[cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    ignore = "builds and reads x86_64 Linux ELF files"
)]
fn native_frames_resolve_to_their_functions() {
    if !has_gcc() {
        assert!(
            std::env::var_os("PROFILINK_REQUIRE_GCC").is_none(),
            "PROFILINK_REQUIRE_GCC is set but gcc is not installed"
        );
        eprintln!("SKIPPED native_symbolication: gcc is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("profilink-native-sym-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let mut elfs: Vec<Elf> = Vec::new();
    let libc_path = system_library("libc.so.6");
    let libm_path = system_library("libm.so.6");
    for (name, path) in [("libc.so.6", &libc_path), ("libm.so.6", &libm_path)] {
        elfs.push(Elf {
            name: name.to_owned(),
            data: std::fs::read(path).unwrap(),
        });
    }
    for (name, path) in build_binaries(&dir) {
        elfs.push(Elf {
            name,
            data: std::fs::read(&path).unwrap(),
        });
    }
    let objects: Vec<Object<'_>> = elfs
        .iter()
        .map(|e| Object::parse(&e.data).unwrap_or_else(|err| panic!("{}: {err}", e.name)))
        .collect();
    let by_code_id: HashMap<String, usize> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| (build_id(o), i))
        .collect();

    // One process per built binary: the binary, libc and libm.
    let libc_plan = plan(&objects[0], 0, &LIBC_FUNCTIONS, 3);
    let libm_plan = plan(&objects[1], 1, &LIBM_FUNCTIONS, 2);
    let mut dict = Dict::new();
    let native = dict.attr("profile.frame.type", "native");
    let mut resources = Vec::new();
    let mut planned_stacks: Vec<Vec<Planned>> = Vec::new();
    // Page-aligned pseudo-random runtime bases, as ASLR would pick them.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next_base = |pie: bool| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let r = (seed >> 20) & 0xf_ffff_f000;
        if pie { 0x7f00_0000_0000 + r } else { 0 }
    };
    for app in 2..objects.len() {
        let mut mapping_of = HashMap::new();
        for obj in [app, 0, 1] {
            // ET_EXEC objects load at their link address; PIE and shared objects anywhere.
            let fixed = objects[obj].load_address() != 0;
            let (start, limit, offset) = ebpf_mapping(&elfs[obj].data, next_base(!fixed));
            let filename_strindex = dict.s(&elfs[obj].name);
            let build = dict.attr("process.executable.build_id.gnu", &build_id(&objects[obj]));
            dict.d.mapping_table.push(Mapping {
                memory_start: start,
                memory_limit: limit,
                file_offset: offset,
                filename_strindex,
                attribute_indices: vec![build],
            });
            mapping_of.insert(obj, (dict.d.mapping_table.len() - 1) as i32);
        }
        let mut stack = plan(&objects[app], app, &APP_FUNCTIONS, 3);
        stack.extend(libc_plan.iter().cloned());
        stack.extend(libm_plan.iter().cloned());
        let mut locations = Vec::new();
        for p in &stack {
            dict.d.location_table.push(Location {
                mapping_index: mapping_of[&p.object],
                address: p.address,
                lines: vec![],
                attribute_indices: vec![native],
            });
            locations.push((dict.d.location_table.len() - 1) as i32);
        }
        dict.d.stack_table.push(Stack {
            location_indices: locations,
        });
        let stack_index = (dict.d.stack_table.len() - 1) as i32;
        let samples_type = ValueType {
            type_strindex: dict.s("samples"),
            unit_strindex: dict.s("count"),
        };
        let t0 = 1_700_000_000_000_000_000u64;
        let profile = Profile {
            sample_type: Some(samples_type),
            samples: vec![Sample {
                stack_index,
                timestamps_unix_nano: vec![t0, t0 + 50_000_000, t0 + 100_000_000],
                ..Default::default()
            }],
            time_unix_nano: t0,
            duration_nano: 1_000_000_000,
            ..Default::default()
        };
        resources.push(ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![int_kv("process.pid", 1000 + app as i64)],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![profile],
                ..Default::default()
            }],
            schema_url: String::new(),
        });
        planned_stacks.push(stack);
    }
    let req = ExportProfilesServiceRequest {
        resource_profiles: resources,
        dictionary: Some(dict.d),
    };
    let t = request_to_chunks(&req, &ChunkOptions::default());
    assert!(t.rejected.is_empty(), "{:?}", t.rejected);
    assert_eq!(t.chunks.len(), planned_stacks.len());

    let mut report = Vec::new();
    for (chunk, planned) in t.chunks.iter().zip(&planned_stacks) {
        let app = &elfs[planned[0].object].name;
        // No finding at all: no overlapping images, no frame outside its image.
        let findings = validate_chunk(chunk);
        assert!(findings.is_empty(), "{app}: {findings:#?}");
        let resolved = resolve_chunk(chunk, planned, &objects, &by_code_id, &elfs);
        report.push(format!("{app}: {resolved}/{} frames", planned.len()));
        assert_eq!(resolved, planned.len(), "{app}");
    }
    eprintln!("native_symbolication: {}", report.join(", "));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Resolves every frame of the chunk's (only) stack and checks it against the plan; returns
/// the number of frames that resolved to their function.
fn resolve_chunk(
    chunk: &ProfileChunk,
    planned: &[Planned],
    objects: &[Object<'_>],
    by_code_id: &HashMap<String, usize>,
    elfs: &[Elf],
) -> usize {
    assert_eq!(chunk.platform, "rust");
    let images = &chunk.debug_meta.as_ref().expect("debug_meta").images;
    assert_eq!(images.len(), 3);
    let stack = &chunk.profile.stacks[chunk.profile.samples[0].stack_id];
    assert_eq!(stack.len(), planned.len());
    let mut ok = 0;
    for (&fi, p) in stack.iter().zip(planned) {
        let frame = &chunk.profile.frames[fi];
        assert!(frame.function.is_none());
        let addr = parse_instruction_addr(frame.instruction_addr.as_deref().expect("address"))
            .expect("address parses");
        let what = format!("{} {} (frame {addr:#x})", elfs[p.object].name, p.function);
        let Some((image, rel)) = find_image(images, addr) else {
            eprintln!("{what}: no image");
            continue;
        };
        let code_id = image.code_id.as_deref().expect("code_id");
        let Some(&obj) = by_code_id.get(code_id) else {
            eprintln!("{what}: image {code_id} is not a test object");
            continue;
        };
        let o = &objects[obj];
        assert_eq!(
            image.debug_id.as_deref(),
            Some(o.debug_id().to_string().as_str()),
            "{what}: debug_id"
        );
        if obj != p.object {
            eprintln!("{what}: resolved into {}", elfs[obj].name);
            continue;
        }
        // Symbol tables (and Symbolicator's symcache) are relative to the load address.
        let map = o.symbol_map();
        match map.lookup(rel) {
            Some(sym) if o.load_address() + sym.address == p.function_addr => ok += 1,
            other => eprintln!("{what}: resolved to {other:?}"),
        }
    }
    ok
}
