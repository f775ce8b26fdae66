//! Debug directories in the build-id layout, and `.gnu_debuglink` next to a found file.
//!
//! `DIR/.build-id/ab/cdef….debug` holds the debug file of build id `abcdef…` (elfutils, gdb
//! and Debian's `-dbgsym` packages use this layout); `DIR/.build-id/ab/cdef…` (no suffix) is
//! the object itself where a directory keeps those too. A file is used only when its build id
//! is the one asked for. Paths are made from the build id's hex digits only, so nothing from
//! the wire reaches the file system.

use crate::file_id::ObjectId;
use crate::fsutil::{is_plain_name, open_in_root, read_bounded, read_file_bounded};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The build-id paths of `id` under `dir`: the debug file, then the object.
pub(crate) fn build_id_paths(dir: &Path, build_id: &[u8]) -> [PathBuf; 2] {
    let hex = hex::encode(build_id);
    let (head, rest) = hex.split_at(2.min(hex.len()));
    let base = dir.join(".build-id").join(head);
    [base.join(format!("{rest}.debug")), base.join(rest)]
}

/// The first file under `dirs` in the build-id layout whose build id is `id`'s.
pub(crate) fn find(dirs: &[PathBuf], id: &ObjectId, max: u64) -> Option<Vec<u8>> {
    let build_id = id.gnu()?;
    for dir in dirs {
        for path in build_id_paths(dir, build_id) {
            if let Ok(data) = read_bounded(&path, max)
                && id.matches(&data)
            {
                return Some(data);
            }
        }
    }
    None
}

/// The debug file that `.gnu_debuglink` (`name`, `crc`) names for an object at `object_path`
/// (inside `root`, as the process sees it), looked for where gdb looks: next to the object, in
/// its `.debug/` subdirectory, and under each debug directory (`root`'s own `/usr/lib/debug`,
/// then the configured ones on this host) followed by the object's directory. A candidate is
/// used when its CRC32 is `crc`.
pub(crate) fn find_debuglink(
    root: Option<&Path>,
    object_path: &Path,
    (name, crc): (&[u8], u32),
    host_dirs: &[PathBuf],
    max: u64,
) -> Option<Vec<u8>> {
    if !is_plain_name(name) {
        return None;
    }
    let name = Path::new(std::ffi::OsStr::from_bytes(name));
    let dir = object_path.parent()?;
    let rel_dir = dir.strip_prefix("/").unwrap_or(dir);
    let in_root = [
        dir.join(name),
        dir.join(".debug").join(name),
        Path::new("/usr/lib/debug").join(rel_dir).join(name),
    ];
    let check = |data: Vec<u8>| (crc32(&data) == crc).then_some(data);
    for p in &in_root {
        let data = match root {
            Some(r) => open_in_root(r, p).and_then(|f| read_file_bounded(f, max)),
            None => read_bounded(p, max),
        };
        if let Some(d) = data.ok().and_then(check) {
            return Some(d);
        }
    }
    for d in host_dirs {
        if let Some(data) = read_bounded(&d.join(rel_dir).join(name), max)
            .ok()
            .and_then(check)
        {
            return Some(data);
        }
    }
    None
}

/// CRC-32 (IEEE, as `.gnu_debuglink` uses).
fn crc32(data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(data);
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let [d, o] = build_id_paths(Path::new("/usr/lib/debug"), &[0xab, 0xcd, 0xef]);
        assert_eq!(d, Path::new("/usr/lib/debug/.build-id/ab/cdef.debug"));
        assert_eq!(o, Path::new("/usr/lib/debug/.build-id/ab/cdef"));
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }
}
