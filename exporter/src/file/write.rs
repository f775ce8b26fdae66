//! Writing envelope files: [`write_atomic`] / [`write_atomic_with`] (temporary file, fsync,
//! rename, directory fsync, with early writeback of large files) and [`envelope_file_name`],
//! the safe name of a chunk's file. The file exporter, the Sentry exporter's dead letters and
//! the CLI write through them.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `dir/name` atomically: a temporary file in `dir`, fsync, rename over the
/// target, fsync of the directory. Readers never see a partial file.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    write_atomic_with(dir, name, |w| w.write_all(bytes)).map(|()| dir.join(name))
}

/// [`write_atomic`] for content produced piece by piece: `write` streams it into a buffered
/// temporary file in `dir` (so the whole content never has to be in memory), which is then
/// flushed, fsynced and renamed over `dir/name`, and the directory fsynced. When `write` or
/// any step fails, the temporary file is removed and `dir/name` is left as it was. Returns
/// what `write` returned.
pub fn write_atomic_with<T>(
    dir: &Path,
    name: &str,
    write: impl FnOnce(&mut BufWriter<WritebackFile>) -> io::Result<T>,
) -> io::Result<T> {
    fs::create_dir_all(dir)?;
    let target = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp-{:016x}", rand::random::<u64>()));
    let result = (|| {
        let file = WritebackFile {
            file: File::create(&tmp)?,
            unflushed: 0,
        };
        let mut w = BufWriter::with_capacity(WRITE_BUFFER, file);
        let out = write(&mut w)?;
        let f = w.into_inner().map_err(io::IntoInnerError::into_error)?.file;
        f.sync_all()?;
        fs::rename(&tmp, &target)?;
        File::open(dir)?.sync_all()?;
        Ok(out)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Buffer of [`write_atomic_with`]'s file writer.
const WRITE_BUFFER: usize = 256 * 1024;

/// Bytes written between two starts of writeback in [`WritebackFile`].
const WRITEBACK_EVERY: usize = 8 << 20;

/// The temporary file [`write_atomic_with`] writes: on Linux, every 8 MiB it asks the kernel to
/// start writing the file's dirty pages to disk (`sync_file_range(SYNC_FILE_RANGE_WRITE)`,
/// which does not wait), so the disk works while the content is still being produced and the
/// final fsync of a large file waits for its tail only.
#[derive(Debug)]
pub struct WritebackFile {
    file: File,
    unflushed: usize,
}

impl Write for WritebackFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.unflushed += n;
        if self.unflushed >= WRITEBACK_EVERY {
            self.unflushed = 0;
            start_writeback(&self.file);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(target_os = "linux")]
fn start_writeback(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: `file` is an open descriptor for the duration of the call, which only schedules
    // I/O. A failure is ignored: the final fsync then writes everything, as without this.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File) {}

/// The file name of a chunk's envelope: `<chunk_id>.envelope`, with the id reduced to at most
/// 64 characters of `[A-Za-z0-9_-]` so that no input can name a path outside the directory.
pub fn envelope_file_name(chunk_id: &str) -> String {
    format!("{}.envelope", safe_file_stem(chunk_id))
}

fn safe_file_stem(chunk_id: &str) -> String {
    let stem: String = chunk_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(64)
        .collect();
    if stem.is_empty() {
        "chunk".into()
    } else {
        stem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_with_streams_a_large_file_into_place() {
        let dir = tempfile::tempdir().unwrap();
        // More than one writeback interval, written in uneven pieces.
        let piece: Vec<u8> = (0..=250u8).cycle().take(1_000_003).collect();
        let pieces = WRITEBACK_EVERY / piece.len() + 3;
        let n = write_atomic_with(dir.path(), "out.ndjson", |w| {
            for _ in 0..pieces {
                w.write_all(&piece)?;
            }
            Ok(pieces)
        })
        .unwrap();
        assert_eq!(n, pieces);
        let bytes = fs::read(dir.path().join("out.ndjson")).unwrap();
        assert_eq!(bytes.len(), piece.len() * pieces);
        assert!(bytes.chunks(piece.len()).all(|c| c == piece.as_slice()));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temporary file left"
        );
    }

    #[test]
    fn a_failed_write_leaves_the_target_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        write_atomic(dir.path(), "out", b"old").unwrap();
        let err = write_atomic_with(dir.path(), "out", |w| {
            w.write_all(b"partial new content")?;
            Err::<(), _>(io::Error::other("producer failed"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "producer failed");
        assert_eq!(fs::read(dir.path().join("out")).unwrap(), b"old");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temporary file left"
        );
    }
}
