//! An append-only segment log with out-of-order acknowledgements.
//!
//! Layout of a log directory:
//! * `seg-<seq:016x>.log`: records, each framed as
//!   `magic (4 bytes, FF 50 4C 51) | length (u32 LE) | CRC32 of payload (u32 LE) | payload`,
//!   where the payload starts with the record id (u64 LE).
//! * `seg-<seq:016x>.ack`: acknowledged ids of that segment, each `id (u64 LE) | CRC32 (u32 LE)`,
//!   kept a whole number of entries (a partial one, from a full disk, is cut off).
//! * `lock`: locked (an exclusive `flock`) while a log is open on the directory. A second
//!   opener, another process sharing the directory by mistake, is refused: two writers
//!   would append to and delete each other's segments. The kernel drops the lock when the
//!   process dies, so a crash never leaves the directory locked.
//!
//! Appends are written and (with `fsync`) `sync_data`ed before they return; new files are made
//! durable by syncing the directory too. Acknowledgements are written but not synced: a
//! process crash keeps them (they are in the page cache), and a power loss can only lose
//! recent ones, which makes those records come back once more, never lose one (at-least-once).
//! Syncing them cost one `fdatasync` per delivered batch, most of the queue's syncs. A segment whose records are all acknowledged is
//! deleted (with its ack file) once it is no longer the active one. On open, every segment is
//! scanned: a record with a bad frame or CRC is skipped (logged and counted) by searching for
//! the next magic, a torn tail (a crash mid-append, never acknowledged to anyone) is ignored,
//! and appends always go to a fresh segment so nothing is written after garbage.
//!
//! Inside: `framing` writes, checks and finds record frames; `acks` reads and writes the
//! acknowledgement files.

mod acks;
mod framing;
#[cfg(test)]
mod tests;

use acks::{read_acks, whole_entries};
use framing::{MAX_RECORD, framed_len, header, scan};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy)]
struct Loc {
    seq: u64,
    offset: u64,
    len: u32,
}

#[derive(Debug, Default)]
struct Segment {
    live: HashSet<u64>,
    ack: Option<File>,
}

/// What [`SegmentLog::open`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanStats {
    /// Records that could not be read (bad frame or CRC) and were skipped.
    pub corrupt: u64,
    /// Segments that ended in a partial record (a crash mid-append).
    pub torn_tails: u64,
    /// Live (unacknowledged) records.
    pub live: u64,
}

/// The place of one record, read with [`RecordRef::read`] after the log's lock is released.
#[derive(Debug, Clone)]
pub struct RecordRef {
    path: PathBuf,
    offset: u64,
    len: u32,
    id: u64,
}

impl RecordRef {
    /// Reads and verifies the record (magic, CRC, id). `Ok(None)` when its segment is gone
    /// (the record was acknowledged in the meantime).
    pub fn read(&self) -> io::Result<Option<Vec<u8>>> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        // Read into spare capacity: a record is a whole chunk's JSON, and zero-filling a
        // buffer the read overwrites at once is a second pass over it.
        let mut buf = Vec::with_capacity(self.len as usize);
        file.take(u64::from(self.len)).read_to_end(&mut buf)?;
        if buf.len() != self.len as usize {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("queue record {} is cut short", self.id),
            ));
        }
        match framing::body(buf, self.id) {
            Some(body) => Ok(Some(body)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("queue record {} is corrupt", self.id),
            )),
        }
    }
}

/// One directory of segments. Not thread-safe; the queue wraps it in a mutex.
#[derive(Debug)]
pub struct SegmentLog {
    dir: PathBuf,
    fsync: bool,
    segment_bytes: u64,
    segments: BTreeMap<u64, Segment>,
    index: HashMap<u64, Loc>,
    active: Option<(u64, File, u64)>,
    next_seq: u64,
    live_bytes: u64,
    /// Held for the life of the log (see the module docs).
    _lock: File,
}

/// Locks `dir/lock`, refusing a directory another open log holds.
fn lock_dir(dir: &Path) -> io::Result<File> {
    let path = dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "queue directory {} is in use by another queue (its lock file is held, \
                 most likely by another profilink process): give each queue its own directory",
                dir.display()
            ),
        )),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

fn seg_path(dir: &Path, seq: u64, ext: &str) -> PathBuf {
    dir.join(format!("seg-{seq:016x}.{ext}"))
}

/// Writes every byte of `slices` (vectored writes, continued after short ones).
fn write_all_vectored(file: &mut File, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl SegmentLog {
    /// Opens (creating) the log in `dir` and calls `f(id, body)` for every live record, in
    /// append order. Duplicated ids keep their first copy.
    pub fn open(
        dir: &Path,
        fsync: bool,
        segment_bytes: u64,
        mut f: impl FnMut(u64, &[u8]),
    ) -> io::Result<(SegmentLog, ScanStats)> {
        fs::create_dir_all(dir)?;
        let lock = lock_dir(dir)?;
        let mut seqs = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(hex) = name
                .strip_prefix("seg-")
                .and_then(|n| n.strip_suffix(".log"))
                && let Ok(seq) = u64::from_str_radix(hex, 16)
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut log = SegmentLog {
            dir: dir.to_path_buf(),
            fsync,
            segment_bytes: segment_bytes.max(4096),
            segments: BTreeMap::new(),
            index: HashMap::new(),
            active: None,
            next_seq: seqs.last().map_or(1, |s| s + 1),
            live_bytes: 0,
            _lock: lock,
        };
        let mut stats = ScanStats::default();
        for seq in seqs {
            let path = seg_path(dir, seq, "log");
            let buf = fs::read(&path)?;
            let acked = read_acks(&seg_path(dir, seq, "ack"))?;
            let mut seg = Segment::default();
            let name = path.display().to_string();
            scan(&buf, &mut stats, &name, |id, offset, body| {
                if acked.contains(&id) || log.index.contains_key(&id) {
                    return;
                }
                let len = framed_len(body.len());
                log.index.insert(id, Loc { seq, offset, len });
                log.live_bytes += u64::from(len);
                seg.live.insert(id);
                f(id, body);
            });
            if seg.live.is_empty() {
                let _ = fs::remove_file(&path);
                let _ = fs::remove_file(seg_path(dir, seq, "ack"));
            } else {
                log.segments.insert(seq, seg);
            }
        }
        stats.live = log.index.len() as u64;
        Ok((log, stats))
    }

    /// Bytes of live (unacknowledged) records, frames included.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Number of live records.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Number of segment files.
    #[cfg(test)]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    fn rotate_if_needed(&mut self) -> io::Result<()> {
        let full = self
            .active
            .as_ref()
            .is_some_and(|(_, _, size)| *size >= self.segment_bytes);
        if full && let Some((seq, _, _)) = self.active.take() {
            self.maybe_delete(seq)?;
        }
        if self.active.is_none() {
            let seq = self.next_seq;
            self.next_seq += 1;
            let file = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(seg_path(&self.dir, seq, "log"))?;
            if self.fsync {
                sync_dir(&self.dir)?;
            }
            self.segments.insert(seq, Segment::default());
            self.active = Some((seq, file, 0));
        }
        Ok(())
    }

    /// Appends records and makes them durable (one write and one sync for the batch).
    pub fn append(&mut self, records: &[(u64, &[u8])]) -> io::Result<()> {
        let whole: Vec<(u64, [&[u8]; 1])> = records.iter().map(|&(id, b)| (id, [b])).collect();
        let parts: Vec<(u64, &[&[u8]])> = whole.iter().map(|(id, b)| (*id, &b[..])).collect();
        self.append_parts(&parts)
    }

    /// [`SegmentLog::append`] for records whose bodies are each given as parts to be
    /// concatenated (a prefix and a payload, say). The frames are written straight from the
    /// parts with vectored writes: no body is copied into a buffer to be written, which for
    /// large records costs a copy and fresh pages per batch.
    pub fn append_parts(&mut self, records: &[(u64, &[&[u8]])]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut headers = Vec::with_capacity(records.len());
        for (id, parts) in records {
            let body_len: usize = parts.iter().map(|p| p.len()).sum();
            if body_len + 8 > MAX_RECORD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "record too large",
                ));
            }
            headers.push((header(*id, parts), body_len));
        }
        self.rotate_if_needed()?;
        let Some((seq, file, size)) = self.active.as_mut() else {
            return Err(io::Error::other("no active segment"));
        };
        let seq = *seq;
        let mut slices = Vec::with_capacity(records.len() * 3);
        let mut locs = Vec::with_capacity(records.len());
        let mut offset = *size;
        for ((id, parts), (head, body_len)) in records.iter().zip(&headers) {
            slices.push(IoSlice::new(head));
            slices.extend(
                parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .map(|p| IoSlice::new(p)),
            );
            let len = framed_len(*body_len);
            locs.push((*id, Loc { seq, offset, len }));
            offset += u64::from(len);
        }
        if let Err(e) = write_all_vectored(file, &mut slices)
            .and_then(|()| if self.fsync { file.sync_data() } else { Ok(()) })
        {
            // The segment may now end in a partial record: never append after it.
            self.active = None;
            return Err(e);
        }
        *size = offset;
        let seg = self.segments.entry(seq).or_default();
        for (id, loc) in locs {
            seg.live.insert(id);
            self.live_bytes += u64::from(loc.len);
            self.index.insert(id, loc);
        }
        Ok(())
    }

    /// Reads the body of live record `id` (verifying its CRC). `Ok(None)` when it is not live.
    #[cfg(test)]
    pub fn read(&self, id: u64) -> io::Result<Option<Vec<u8>>> {
        match self.locate(id) {
            Some(r) => r.read(),
            None => Ok(None),
        }
    }

    /// Where live record `id` is, to read it without holding the log (see [`RecordRef`]).
    pub fn locate(&self, id: u64) -> Option<RecordRef> {
        let loc = self.index.get(&id).copied()?;
        Some(RecordRef {
            path: seg_path(&self.dir, loc.seq, "log"),
            offset: loc.offset,
            len: loc.len,
            id,
        })
    }

    /// Acknowledges records (durably); fully acknowledged inactive segments are deleted.
    /// Unknown ids are ignored.
    pub fn ack(&mut self, ids: &[u64]) -> io::Result<()> {
        let mut by_seq: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for id in ids {
            if let Some(loc) = self.index.get(id) {
                by_seq.entry(loc.seq).or_default().push(*id);
            }
        }
        for (seq, ids) in by_seq {
            let active = self.active.as_ref().is_some_and(|(s, _, _)| *s == seq);
            let Some(seg) = self.segments.get_mut(&seq) else {
                continue;
            };
            let all_gone =
                ids.iter().all(|id| seg.live.contains(id)) && seg.live.len() == ids.len();
            if !all_gone || active {
                let buf = acks::entries(&ids);
                if seg.ack.is_none() {
                    let path = seg_path(&self.dir, seq, "ack");
                    let file = OpenOptions::new().create(true).append(true).open(path)?;
                    whole_entries(&file)?;
                    seg.ack = Some(file);
                }
                // Written, not synced (see the module docs): a lost acknowledgement only
                // makes a record come back once more after a power loss.
                if let Some(file) = seg.ack.as_mut()
                    && let Err(e) = file.write_all(&buf)
                {
                    // A write cut short (a full disk) leaves part of an entry: cut it off,
                    // or every later entry would be read out of step.
                    let _ = whole_entries(file);
                    return Err(e);
                }
            }
            for id in &ids {
                seg.live.remove(id);
                if let Some(loc) = self.index.remove(id) {
                    self.live_bytes = self.live_bytes.saturating_sub(u64::from(loc.len));
                }
            }
            self.maybe_delete(seq)?;
        }
        Ok(())
    }

    fn maybe_delete(&mut self, seq: u64) -> io::Result<()> {
        let active = self.active.as_ref().is_some_and(|(s, _, _)| *s == seq);
        if active {
            return Ok(());
        }
        if self.segments.get(&seq).is_some_and(|s| s.live.is_empty()) {
            self.segments.remove(&seq);
            fs::remove_file(seg_path(&self.dir, seq, "log"))?;
            match fs::remove_file(seg_path(&self.dir, seq, "ack")) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            if self.fsync {
                sync_dir(&self.dir)?;
            }
        }
        Ok(())
    }
}
