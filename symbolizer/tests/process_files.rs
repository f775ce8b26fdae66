//! The live process's own files: real processes are started, the request's `process.pid` is
//! theirs, and their native frames are named from the files their `/proc/<pid>/maps` lists,
//! opened inside `/proc/<pid>/root` (only the `process` source is on, no debug directory).
//! Checked against `eu-addr2line -f -i -C`, for a binary with DWARF, a stripped binary whose
//! debug file is found through `.gnu_debuglink`, and a mapping that carries only the eBPF
//! profiler's file id. A mapping claiming another build id for the same file name is counted as
//! `build_id_mismatch`. The proc root is configurable (here also a directory of symlinks).

mod support;

use profilink_symbolizer::{Outcome, SourceKind, Symbolizer, SymbolizerConfig};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use support::*;

/// A started process, killed at drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(path: &std::path::Path) -> Proc {
    let mut child = Command::new(path)
        .arg("sleep")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Proc(child)
}

#[test]
#[cfg_attr(
    not(all(target_os = "linux", target_arch = "x86_64")),
    ignore = "x86_64 Linux ELF"
)]
fn frames_are_named_from_the_processes_files() {
    if !tools_present("process_files", &["gcc", "eu-addr2line", "objcopy"]) {
        return;
    }
    let dir = scratch("proc");
    let c = dir.path().join("app.c");
    std::fs::write(&c, C_SOURCE).unwrap();
    let run_dir = dir.path().join("bin");
    std::fs::create_dir_all(&run_dir).unwrap();
    let with_dwarf = {
        let p = run_dir.join("app-dwarf");
        run(Command::new("gcc")
            .args(["-g", "-O2", "-Wl,--build-id=sha1", "-o"])
            .arg(&p)
            .arg(&c));
        p
    };
    let stripped = stripped(&run_dir, &c);
    // The debug file next to the binary, where `.gnu_debuglink` is looked for.
    assert_eq!(stripped.debug.parent(), Some(run_dir.as_path()));
    let procs = [start(&with_dwarf), start(&stripped.object)];
    let pids: Vec<i64> = procs.iter().map(|p| i64::from(p.0.id())).collect();

    let cases = [
        (with_dwarf.clone(), with_dwarf.clone(), true, pids[0]),
        (
            stripped.object.clone(),
            stripped.debug.clone(),
            true,
            pids[1],
        ),
        // Only the file id (as the profiler sends for files without a build id).
        (with_dwarf.clone(), with_dwarf.clone(), false, pids[0]),
    ];
    let mut dict = Dict::new();
    let mut plan = Vec::new();
    let mut per_pid = Vec::new();
    for (object, debug, gnu, pid) in &cases {
        let b = Built {
            name: object.file_name().unwrap().to_string_lossy().into_owned(),
            object: object.clone(),
            debug: debug.clone(),
            separate_debug: object != debug,
            only: Some("work_"),
        };
        let addrs = addresses(&b, 8);
        let expected = eu_addr2line(debug, &addrs);
        let raw = eu_addr2line_with(debug, &addrs, false);
        let m = dict.mapping(&b.name, &std::fs::read(object).unwrap(), *gnu);
        let locs = dict.locations(m, &addrs);
        per_pid.push((*pid, locs.clone()));
        plan.push((b.name, addrs, locs, expected, raw));
    }
    // A mapping that claims another build id for the running binary's name.
    let liar = {
        let attr = dict.attr(
            "process.executable.build_id.gnu",
            "00112233445566778899aabbccddeeff00112233",
        );
        let name = dict.s("app-dwarf");
        dict.d.mapping_table.push(profilink_proto::otlp::Mapping {
            memory_start: 0x1000,
            memory_limit: 0x2000,
            file_offset: 0x1000,
            filename_strindex: name,
            attribute_indices: vec![attr],
        });
        let m = (dict.d.mapping_table.len() - 1) as i32;
        dict.locations(m, &[0x1100, 0x1200])
    };
    per_pid.push((pids[0], liar));

    for proc_root in [
        std::path::PathBuf::from("/proc"),
        symlinked_proc(dir.path(), &pids),
    ] {
        let sym = Symbolizer::new(SymbolizerConfig {
            sources: vec![SourceKind::Process],
            debug_dirs: vec![],
            proc_root: proc_root.clone(),
            ..Default::default()
        });
        let mut req = request(
            Dict {
                d: dict.d.clone(),
                ..Dict::new()
            },
            &per_pid,
        );
        let summary = sym.symbolize_request(&mut req);
        let d = req.dictionary.as_ref().unwrap();
        let mut frames = 0;
        for (name, addrs, locs, expected, raw) in &plan {
            let c = compare(name, d, locs, addrs, expected, raw, false);
            assert!(
                c.mismatches.is_empty(),
                "{proc_root:?}: {:#?}",
                c.mismatches
            );
            frames += c.frames;
        }
        let m = sym.metrics();
        assert_eq!(m.frames(Outcome::BuildIdMismatch), 2, "{summary:?}");
        assert_eq!(m.frames(Outcome::Symbolized), summary.symbolized);
        eprintln!(
            "process_files ({}): {frames} frames named, {summary:?}",
            proc_root.display()
        );
    }
    drop(procs);
}

/// A directory with `<pid> -> /proc/<pid>` symlinks: a proc root mounted elsewhere.
fn symlinked_proc(dir: &std::path::Path, pids: &[i64]) -> std::path::PathBuf {
    let root = dir.join("hostproc");
    std::fs::create_dir_all(&root).unwrap();
    for p in pids {
        std::os::unix::fs::symlink(format!("/proc/{p}"), root.join(p.to_string())).unwrap();
    }
    root
}
