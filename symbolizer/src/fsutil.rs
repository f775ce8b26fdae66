//! Read-only, size-bounded file reads, and opening a path inside a root it cannot leave.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Reads a whole regular file of at most `max` bytes (opened read-only).
pub(crate) fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_file_bounded(File::open(path)?, max)
}

/// Reads an open file of at most `max` bytes; refuses what is not a regular file.
pub(crate) fn read_file_bounded(file: File, max: u64) -> io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{} bytes, above the bound of {max}", meta.len()),
        ));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // The file may grow while read: never past the bound.
    file.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            "file grew past the bound",
        ));
    }
    Ok(out)
}

/// Opens `path` (absolute or relative, as the process sees it) read-only inside the directory
/// `root`: `..` and symlinks (absolute ones too) resolve as if `root` were `/`, so nothing
/// outside `root` is reached (Linux `openat2` with `RESOLVE_IN_ROOT`, no magic links).
pub(crate) fn open_in_root(root: &Path, path: &Path) -> io::Result<File> {
    let root_c = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root"))?;
    // The root itself may be a magic link (/proc/<pid>/root): following it is the point.
    // SAFETY: a valid C string; the result is checked.
    let dir = unsafe {
        libc::open(
            root_c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dir` is a descriptor this function just opened and owns.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    let rel = path.as_os_str().as_bytes();
    let rel = CString::new(rel)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64,
        mode: 0,
        resolve: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    use std::os::fd::AsRawFd;
    // SAFETY: openat2(2) with a valid directory descriptor, C string and `open_how` of the
    // size passed; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            rel.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat2 just returned, owned by the File from here on.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_IN_ROOT: u64 = 0x10;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Whether `name` is a plain file name (no separator, not `.` or `..`, not empty).
pub(crate) fn is_plain_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn symlinks_and_dotdot_stay_inside_the_root() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::write(outer.path().join("secret"), b"outside").unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("lib/a.so"), b"inside").unwrap();
        std::fs::write(root.join("secret"), b"root's own").unwrap();
        symlink("/secret", root.join("lib/abs")).unwrap();
        symlink("../../secret", root.join("lib/rel")).unwrap();
        let read = |p: &str| {
            let f = open_in_root(&root, Path::new(p)).unwrap();
            String::from_utf8(read_file_bounded(f, 100).unwrap()).unwrap()
        };
        assert_eq!(read("/lib/a.so"), "inside");
        assert_eq!(read("/lib/abs"), "root's own");
        assert_eq!(read("/lib/rel"), "root's own");
        assert_eq!(read("/../../../secret"), "root's own");
        std::fs::remove_file(root.join("secret")).unwrap();
        assert!(open_in_root(&root, Path::new("/lib/abs")).is_err());
        assert!(open_in_root(&root, Path::new("../secret")).is_err());
    }

    #[test]
    fn bounds() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, vec![0u8; 100]).unwrap();
        assert!(read_bounded(&p, 99).is_err());
        assert_eq!(read_bounded(&p, 100).unwrap().len(), 100);
        assert!(read_bounded(d.path(), 100).is_err());
        assert!(is_plain_name(b"x.debug"));
        for bad in [&b""[..], b".", b"..", b"a/b", b"a\0"] {
            assert!(!is_plain_name(bad));
        }
    }
}
