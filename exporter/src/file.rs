//! The file exporter: one `<chunk_id>.envelope` per merged chunk in a directory, written
//! atomically (temporary file in the same directory, fsync, rename, directory fsync). It
//! accumulates and queues exactly like the Sentry exporter; it is the default when no DSN is
//! configured.

use crate::chunk_engine::start_engine;
use crate::clock::{SharedClock, system_clock};
use crate::config::FileExporterConfig;
use crate::engine::{Delivery, Engine, Sink};
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::ReadyMeta;
use crate::start_error::StartError;
use crate::{SDK_NAME, VERSION};
use profilink_consumer::{ExportChunk, ExportError};
use profilink_proto::sentry::Envelope;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

struct FileSink {
    dir: PathBuf,
}

impl Sink for FileSink {
    fn blocked_until(&self, _route: &str, _category: &str, _now: Instant) -> Option<Instant> {
        None
    }

    async fn deliver(&self, meta: ReadyMeta, json: Vec<u8>) -> Delivery {
        let dir = self.dir.clone();
        let name = envelope_file_name(&meta.chunk_id);
        let res = tokio::task::spawn_blocking(move || {
            let bytes =
                Envelope::for_chunk_json(json, &meta.platform, SDK_NAME, VERSION).to_bytes();
            write_atomic(&dir, &name, &bytes)
        })
        .await;
        match res {
            Ok(Ok(_)) => Delivery::Delivered,
            Ok(Err(e)) => Delivery::Retry {
                after: None,
                reason: DiscardReason::SendError,
                message: format!("writing envelope file: {e}"),
            },
            Err(e) => Delivery::Retry {
                after: None,
                reason: DiscardReason::SendError,
                message: format!("writing envelope file: {e}"),
            },
        }
    }

    fn discarded(&self, _meta: &ReadyMeta, _reason: DiscardReason, _n: u64) {}
}

/// Writes merged chunks as envelope files.
pub struct FileExporter {
    engine: Engine<FileSink>,
    metrics: Arc<ExporterMetrics>,
    /// `sending_queue.overflow: backpressure`: refuse requests up front near full.
    backpressure: bool,
}

impl FileExporter {
    /// Opens the queue (replaying what a previous run left) and starts writing.
    pub async fn start(cfg: FileExporterConfig) -> Result<Self, StartError> {
        Self::start_with_clock(cfg, system_clock()).await
    }

    /// [`FileExporter::start`] with an injected clock.
    pub async fn start_with_clock(
        cfg: FileExporterConfig,
        clock: SharedClock,
    ) -> Result<Self, StartError> {
        cfg.check().map_err(|e| e.under("exporters.file"))?;
        let metrics = Arc::new(ExporterMetrics::default());
        let backpressure = cfg.sending_queue.overflow() == crate::Overflow::Backpressure;
        let sink = Arc::new(FileSink {
            dir: cfg.path.clone(),
        });
        let engine = start_engine(&cfg, sink, Default::default(), clock, metrics.clone()).await?;
        Ok(FileExporter {
            engine,
            metrics,
            backpressure,
        })
    }

    /// Durably queues chunks; `Ok` once they are on disk.
    pub async fn export(&self, chunks: Vec<ExportChunk>) -> Result<(), ExportError> {
        self.engine.export_chunks(chunks, |_| String::new()).await
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ExporterMetrics> {
        self.metrics.clone()
    }

    /// True while requests should be refused before they are read: with
    /// `sending_queue.overflow: backpressure`, once the durable queue is within its headroom of
    /// full (16 MiB, or a tenth of the capacity when that is less).
    pub fn is_full(&self) -> bool {
        self.backpressure && crate::contract::within_headroom(&self.metrics)
    }

    /// Flushes open sessions and writes what it can before `deadline`.
    pub async fn shutdown(self, deadline: Duration) {
        self.engine.shutdown(deadline).await;
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
