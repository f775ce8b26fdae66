//! The on-disk cache of debuginfod downloads: `<dir>/<build id>.debug` files, `<dir>/<build
//! id>.missing` negative entries (every server said "not found"; they expire after
//! `negative_ttl`) and `<dir>/<build id>.failed` ones (a download broke its size bound or time
//! budget, or was cut short, or had another build id: the file holds the reason; they expire
//! after `retry_after`, so a process that restarts does not fetch the same file again at
//! once), bounded in bytes: past the bound, the files used longest ago go first (a read
//! touches a file's modification time).
//!
//! A download streams into `<dir>/.<build id>.<pid>.<n>.part` ([`Part`]), is checked (its
//! build id) and only then renamed to `.debug`: a partial file never has a cache name, and a
//! dropped [`Part`] removes its file. Parts a killed process left are removed when the cache
//! is opened, once older than `stale_after`.

use crate::file_id::ObjectId;
use crate::fsutil::read_bounded;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Numbers the parts of this process (two downloads never share a name).
static PART_SEQ: AtomicU64 = AtomicU64::new(0);

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    negative_ttl: Duration,
    failed_ttl: Duration,
    max_file: u64,
}

/// A download being written (see the module docs): removed when dropped uncommitted.
#[derive(Debug)]
pub(crate) struct Part {
    path: PathBuf,
    file: Option<fs::File>,
}

impl Part {
    /// Appends bytes of the body.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.write_all(data),
            None => Err(io::Error::other("part already closed")),
        }
    }

    /// The file so far (for checking it).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        self.file = None;
        let _ = fs::remove_file(&self.path);
    }
}

impl DiskCache {
    /// A cache in `dir`; parts older than `stale_after` are removed now.
    pub(crate) fn new(
        dir: PathBuf,
        max_bytes: u64,
        (negative_ttl, failed_ttl): (Duration, Duration),
        max_file: u64,
        stale_after: Duration,
    ) -> Self {
        let cache = DiskCache {
            dir,
            max_bytes,
            negative_ttl,
            failed_ttl,
            max_file,
        };
        cache.remove_stale_parts(stale_after);
        cache
    }

    fn remove_stale_parts(&self, stale_after: Duration) {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with('.') && name.ends_with(".part")) {
                continue;
            }
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age >= stale_after);
            if old {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    fn path(&self, build_id: &[u8], ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", hex::encode(build_id)))
    }

    /// The cached debug file of `build_id`, checked again (a corrupt file is removed).
    pub(crate) fn get(&self, build_id: &[u8]) -> Option<Vec<u8>> {
        let p = self.path(build_id, "debug");
        let data = read_bounded(&p, self.max_file).ok()?;
        if !ObjectId::Gnu(build_id.to_vec()).matches(&data) {
            let _ = fs::remove_file(&p);
            return None;
        }
        if let Ok(f) = fs::File::options().append(true).open(&p) {
            let _ = f.set_modified(SystemTime::now());
        }
        Some(data)
    }

    /// Whether a fresh negative entry says `build_id` is on no server, or that its download
    /// failed recently.
    pub(crate) fn is_negative(&self, build_id: &[u8]) -> bool {
        self.fresh(build_id, "missing", self.negative_ttl)
            || self.fresh(build_id, "failed", self.failed_ttl)
    }

    fn fresh(&self, build_id: &[u8], ext: &str, ttl: Duration) -> bool {
        let p = self.path(build_id, ext);
        let Ok(meta) = fs::metadata(&p) else {
            return false;
        };
        let fresh = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age < ttl);
        if !fresh {
            let _ = fs::remove_file(&p);
        }
        fresh
    }

    /// A new, empty part for a download of `build_id`.
    pub(crate) fn part(&self, build_id: &[u8]) -> io::Result<Part> {
        fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(format!(
            ".{}.{}.{}.part",
            hex::encode(build_id),
            std::process::id(),
            PART_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = fs::File::options()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Part {
            path,
            file: Some(file),
        })
    }

    /// Stores a whole, checked download under its cache name, then trims the cache to its
    /// bound; the entries saying it was missing or failed go.
    pub(crate) fn commit(&self, build_id: &[u8], mut part: Part) -> io::Result<()> {
        if let Some(f) = part.file.take() {
            f.sync_all()?;
        }
        fs::rename(&part.path, self.path(build_id, "debug"))?;
        let _ = fs::remove_file(self.path(build_id, "missing"));
        let _ = fs::remove_file(self.path(build_id, "failed"));
        self.trim();
        Ok(())
    }

    /// Records that no server has `build_id`.
    pub(crate) fn put_negative(&self, build_id: &[u8]) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        fs::write(self.path(build_id, "missing"), b"")
    }

    /// Records that a download of `build_id` failed, and why (one reason label).
    pub(crate) fn put_failed(&self, build_id: &[u8], reason: &str) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        fs::write(self.path(build_id, "failed"), reason.as_bytes())
    }

    /// Removes the least recently used debug files until the total is within the bound.
    fn trim(&self) {
        let Ok(rd) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".debug"))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn parts_never_take_a_cache_name_and_failures_are_remembered() {
        let d = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let c = DiskCache::new(d.path().to_path_buf(), 1 << 20, (hour, hour), 1 << 20, hour);
        let id = [0xab, 0xcd];
        let mut p = c.part(&id).unwrap();
        p.write(b"half").unwrap();
        assert!(names(d.path())[0].ends_with(".part"));
        drop(p);
        assert!(names(d.path()).is_empty(), "a dropped part is removed");

        c.put_failed(&id, "too_large").unwrap();
        assert!(c.is_negative(&id));
        assert_eq!(
            fs::read_to_string(d.path().join("abcd.failed")).unwrap(),
            "too_large"
        );
        let mut p = c.part(&id).unwrap();
        p.write(b"whole").unwrap();
        c.commit(&id, p).unwrap();
        assert_eq!(
            names(d.path()),
            ["abcd.debug"],
            "committed; the failure forgotten"
        );

        // Expired failures are forgotten; stale parts of a killed process are removed.
        let c = DiskCache::new(
            d.path().to_path_buf(),
            1 << 20,
            (hour, Duration::ZERO),
            1 << 20,
            hour,
        );
        c.put_failed(&id, "timeout").unwrap();
        assert!(!c.is_negative(&id));
        std::mem::forget(c.part(&id).unwrap());
        assert_eq!(names(d.path()).len(), 2);
        DiskCache::new(d.path().to_path_buf(), 1 << 20, (hour, hour), 1 << 20, hour);
        assert_eq!(names(d.path()).len(), 2, "a fresh part stays");
        DiskCache::new(
            d.path().to_path_buf(),
            1 << 20,
            (hour, hour),
            1 << 20,
            Duration::ZERO,
        );
        assert_eq!(names(d.path()), ["abcd.debug"]);
    }
}
