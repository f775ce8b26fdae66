//! The on-disk cache of debuginfod downloads: `<dir>/<build id>.debug` files (written whole,
//! then renamed into place), `<dir>/<build id>.missing` negative entries (every server said
//! "not found"; they expire after `negative_ttl`), bounded in bytes: past the bound, the files
//! used longest ago go first (a read touches a file's modification time).

use crate::file_id::ObjectId;
use crate::fsutil::read_bounded;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    negative_ttl: Duration,
    max_file: u64,
}

impl DiskCache {
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, negative_ttl: Duration, max_file: u64) -> Self {
        DiskCache {
            dir,
            max_bytes,
            negative_ttl,
            max_file,
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

    /// Whether a fresh negative entry says `build_id` is on no server.
    pub(crate) fn is_negative(&self, build_id: &[u8]) -> bool {
        let p = self.path(build_id, "missing");
        let Ok(meta) = fs::metadata(&p) else {
            return false;
        };
        let fresh = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age < self.negative_ttl);
        if !fresh {
            let _ = fs::remove_file(&p);
        }
        fresh
    }

    /// Stores a downloaded debug file, then trims the cache to its bound.
    pub(crate) fn put(&self, build_id: &[u8], data: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let dest = self.path(build_id, "debug");
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            hex::encode(build_id),
            std::process::id()
        ));
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &dest)?;
        let _ = fs::remove_file(self.path(build_id, "missing"));
        self.trim();
        Ok(())
    }

    /// Records that no server has `build_id`.
    pub(crate) fn put_negative(&self, build_id: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        fs::write(self.path(build_id, "missing"), b"")
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
