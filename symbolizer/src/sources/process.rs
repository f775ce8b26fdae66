//! The live process's own files (profilink next to the profiled processes).
//!
//! The eBPF profiler names a mapping's file by its base name only. The process that sent the
//! frame (`process.pid`) knows the path: `<proc_root>/<pid>/maps` lists it, and the file is
//! opened inside `<proc_root>/<pid>/root` (the process's own root: its container's files), with
//! `..` and symlinks resolved inside that root ([`crate::fsutil::open_in_root`]). A file is used
//! only when its GNU build id, or without one its eBPF-profiler file id, is the mapping's.
//! Without DWARF in it, its debug file is looked for through `.gnu_debuglink` and the build-id
//! layout inside the same root.

use crate::file_id::ObjectId;
use crate::fsutil::{open_in_root, read_file_bounded};
use crate::object::{debuglink, has_dwarf};
use crate::sources::debug_dirs::{build_id_paths, find_debuglink};
use std::path::{Path, PathBuf};

/// Largest `/proc/<pid>/maps` read.
const MAX_MAPS: u64 = 16 << 20;
/// Distinct candidate paths tried per process.
const MAX_CANDIDATES: usize = 8;

/// What the process source found.
#[derive(Debug)]
pub(crate) enum ProcessFind {
    /// The object (and its debug file, when found), identity checked.
    Found(Vec<Vec<u8>>),
    /// Files with the mapping's name exist, none with its identity.
    Mismatch,
    /// No such process or file (or not readable).
    NotFound,
}

/// The paths in `maps` text whose base name is `filename` (or that are `filename`).
pub(crate) fn paths_named(maps: &str, filename: &str) -> Vec<String> {
    let want = filename.rsplit('/').next().unwrap_or(filename);
    let mut out: Vec<String> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode pathname (the path may hold spaces).
        let mut rest = line;
        for _ in 0..5 {
            rest = rest.trim_start();
            rest = rest.split_once(' ').map_or("", |(_, r)| r);
        }
        let path = rest.trim_start();
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        if !path.starts_with('/') {
            continue;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        if (base == want || path == filename) && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
            if out.len() >= MAX_CANDIDATES {
                break;
            }
        }
    }
    out
}

/// Looks for the object of `id` named `filename` in the processes `pids` under `proc_root`.
pub(crate) fn find(
    proc_root: &Path,
    pids: &[u32],
    filename: &str,
    id: &ObjectId,
    host_debug_dirs: &[PathBuf],
    max: u64,
) -> ProcessFind {
    let mut mismatch = false;
    for &pid in pids {
        if pid == 0 {
            continue;
        }
        let dir = proc_root.join(pid.to_string());
        let Ok(maps) = read_proc_text(&dir.join("maps")) else {
            continue;
        };
        let root = dir.join("root");
        for path in paths_named(&maps, filename) {
            let Ok(data) =
                open_in_root(&root, Path::new(&path)).and_then(|f| read_file_bounded(f, max))
            else {
                continue;
            };
            if !id.matches(&data) {
                mismatch = true;
                continue;
            }
            let mut files = Vec::new();
            if !has_dwarf(&data)
                && let Some(debug) =
                    debug_file(&root, Path::new(&path), &data, id, host_debug_dirs, max)
            {
                files.push(debug);
            }
            files.insert(0, data);
            return ProcessFind::Found(files);
        }
    }
    if mismatch {
        ProcessFind::Mismatch
    } else {
        ProcessFind::NotFound
    }
}

/// The debug file of an object found in a process: the build-id layout under the process's
/// `/usr/lib/debug`, then `.gnu_debuglink`.
fn debug_file(
    root: &Path,
    path: &Path,
    data: &[u8],
    id: &ObjectId,
    host_debug_dirs: &[PathBuf],
    max: u64,
) -> Option<Vec<u8>> {
    if let Some(build_id) = id.gnu() {
        let [debug, _] = build_id_paths(Path::new("/usr/lib/debug"), build_id);
        if let Ok(d) = open_in_root(root, &debug).and_then(|f| read_file_bounded(f, max))
            && id.matches(&d)
        {
            return Some(d);
        }
    }
    let (name, crc) = debuglink(data)?;
    find_debuglink(Some(root), path, (&name, crc), host_debug_dirs, max)
}

/// `/proc` text files report size 0: read up to the bound whatever `metadata` says.
fn read_proc_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut s = String::new();
    f.take(MAX_MAPS).read_to_string(&mut s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_paths() {
        let maps = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1234   /usr/bin/my app
55d0c0a01000-55d0c0a02000 r-xp 00001000 fd:01 1234   /usr/bin/my app
7f00-7f01 r-xp 00000000 fd:01 99 /lib/x86_64-linux-gnu/libc.so.6
7f02-7f03 r-xp 00000000 fd:01 98 /tmp/libc.so.6 (deleted)
7f04-7f05 rw-p 00000000 00:00 0
7ffd-7ffe r-xp 00000000 00:00 0 [vdso]
";
        assert_eq!(paths_named(maps, "my app"), vec!["/usr/bin/my app"]);
        assert_eq!(
            paths_named(maps, "libc.so.6"),
            vec!["/lib/x86_64-linux-gnu/libc.so.6", "/tmp/libc.so.6"]
        );
        assert!(paths_named(maps, "[vdso]").is_empty());
    }
}
