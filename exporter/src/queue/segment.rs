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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 4] = [0xFF, 0x50, 0x4C, 0x51];
const HEADER: usize = 12;
const ACK_LEN: usize = 12;
/// Largest record accepted (a sanity bound on the length field).
pub const MAX_RECORD: usize = 256 << 20;

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
        let mut buf = vec![0u8; self.len as usize];
        file.read_exact(&mut buf)?;
        let ok = buf.get(..4) == Some(&MAGIC[..])
            && u32_at(&buf, 8).is_some_and(|crc| crc32fast::hash(&buf[HEADER..]) == crc)
            && u64_at(&buf, HEADER) == Some(self.id);
        if !ok {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("queue record {} is corrupt", self.id),
            ));
        }
        buf.drain(..HEADER + 8);
        Ok(Some(buf))
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

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn find_magic(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(MAGIC.len())
        .position(|w| w == MAGIC)
        .map(|p| p + from)
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let b: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let b: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Frames one record.
pub fn frame(id: u64, body: &[u8], out: &mut Vec<u8>) {
    let len = (8 + body.len()) as u32;
    let mut h = crc32fast::Hasher::new();
    h.update(&id.to_le_bytes());
    h.update(body);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(body);
}

/// Parses every valid record of `buf`, calling `f(id, offset of frame, body)`.
fn scan(buf: &[u8], stats: &mut ScanStats, name: &str, mut f: impl FnMut(u64, u64, &[u8])) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let mut torn = false;
        if rest.len() < HEADER {
            // A header cut short by a crash starts like the magic.
            torn = rest.iter().zip(MAGIC.iter()).all(|(a, b)| a == b);
        } else if rest[..4] == MAGIC {
            let len = u32_at(rest, 4).unwrap_or(0) as usize;
            let crc = u32_at(rest, 8).unwrap_or(0);
            let len_ok = (8..=MAX_RECORD).contains(&len);
            if len_ok && HEADER + len <= rest.len() {
                let payload = &rest[HEADER..HEADER + len];
                if crc32fast::hash(payload) == crc {
                    let id = u64_at(payload, 0).unwrap_or(0);
                    f(id, pos as u64, &payload[8..]);
                    pos += HEADER + len;
                    continue;
                }
            } else if len_ok {
                torn = true;
            }
        }
        match find_magic(buf, pos + 1) {
            Some(next) => {
                tracing::warn!(
                    segment = name,
                    offset = pos,
                    "queue: skipping a corrupt record"
                );
                stats.corrupt += 1;
                pos = next;
            }
            None => {
                if torn {
                    stats.torn_tails += 1;
                    tracing::warn!(
                        segment = name,
                        offset = pos,
                        "queue: ignoring a partial record at the end of a segment (crash mid-append)"
                    );
                } else {
                    stats.corrupt += 1;
                    tracing::warn!(
                        segment = name,
                        offset = pos,
                        "queue: skipping a corrupt record"
                    );
                }
                return;
            }
        }
    }
}

/// Cuts an acknowledgement file back to a whole number of entries. Entries are read in
/// steps of [`ACK_LEN`] from the start, so a partial one (a write cut short by a full disk,
/// or a crash mid-write) would put every entry appended after it out of step: their ids
/// would not read, and their records would come back after a restart.
fn whole_entries(file: &File) -> io::Result<()> {
    let len = file.metadata()?.len();
    let extra = len % ACK_LEN as u64;
    if extra != 0 {
        file.set_len(len - extra)?;
    }
    Ok(())
}

fn read_acks(path: &Path) -> io::Result<HashSet<u64>> {
    let mut acked = HashSet::new();
    let buf = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(acked),
        Err(e) => return Err(e),
    };
    for rec in buf.chunks_exact(ACK_LEN) {
        let (Some(id), Some(crc)) = (u64_at(rec, 0), u32_at(rec, 8)) else {
            continue;
        };
        if crc32fast::hash(&id.to_le_bytes()) == crc {
            acked.insert(id);
        }
    }
    Ok(acked)
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
                let len = (HEADER + 8 + body.len()) as u32;
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
        if records.is_empty() {
            return Ok(());
        }
        self.rotate_if_needed()?;
        let Some((seq, file, size)) = self.active.as_mut() else {
            return Err(io::Error::other("no active segment"));
        };
        let seq = *seq;
        let mut buf = Vec::with_capacity(records.iter().map(|(_, b)| b.len() + 20).sum());
        let mut locs = Vec::with_capacity(records.len());
        for (id, body) in records {
            if body.len() + 8 > MAX_RECORD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "record too large",
                ));
            }
            let offset = *size + buf.len() as u64;
            frame(*id, body, &mut buf);
            let len = (HEADER + 8 + body.len()) as u32;
            locs.push((*id, Loc { seq, offset, len }));
        }
        if let Err(e) = file
            .write_all(&buf)
            .and_then(|()| if self.fsync { file.sync_data() } else { Ok(()) })
        {
            // The segment may now end in a partial record: never append after it.
            self.active = None;
            return Err(e);
        }
        *size += buf.len() as u64;
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
                let mut buf = Vec::with_capacity(ids.len() * ACK_LEN);
                for id in &ids {
                    buf.extend_from_slice(&id.to_le_bytes());
                    buf.extend_from_slice(&crc32fast::hash(&id.to_le_bytes()).to_le_bytes());
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> (SegmentLog, Vec<(u64, Vec<u8>)>, ScanStats) {
        let mut got = Vec::new();
        let (log, stats) =
            SegmentLog::open(dir, true, 4096, |id, b| got.push((id, b.to_vec()))).unwrap();
        (log, got, stats)
    }

    #[test]
    fn a_directory_open_in_one_log_is_refused_to_another_until_closed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut first, _, _) = open(dir.path());
        first.append(&[(1, b"kept".as_slice())]).unwrap();
        let err = SegmentLog::open(dir.path(), true, 4096, |_, _| {}).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
        assert!(err.to_string().contains("in use"), "{err}");
        drop(first);
        let (_, got, _) = open(dir.path());
        assert_eq!(got, vec![(1, b"kept".to_vec())]);
    }

    #[test]
    fn append_ack_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, got, _) = open(dir.path());
        assert!(got.is_empty());
        log.append(&[(1, b"one"), (2, b"two")]).unwrap();
        log.append(&[(3, b"three")]).unwrap();
        assert_eq!(log.read(2).unwrap().as_deref(), Some(&b"two"[..]));
        log.ack(&[2]).unwrap();
        assert_eq!(log.read(2).unwrap(), None);
        drop(log);
        let (log, got, stats) = open(dir.path());
        assert_eq!(got, vec![(1, b"one".to_vec()), (3, b"three".to_vec())]);
        assert_eq!(stats.live, 2);
        assert_eq!(log.len(), 2);
    }

    #[test]
    fn fully_acked_segments_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _, _) = open(dir.path());
        let body = vec![7u8; 3000];
        for id in 0..10u64 {
            log.append(&[(id, &body)]).unwrap();
        }
        assert!(log.segment_count() >= 5);
        log.ack(&(0..10).collect::<Vec<_>>()).unwrap();
        assert!(log.segment_count() <= 1);
        assert_eq!(log.live_bytes(), 0);
        drop(log);
        let (_, got, _) = open(dir.path());
        assert!(got.is_empty());
        let files = fs::read_dir(dir.path()).unwrap().count();
        assert!(files <= 2, "{files} files left");
    }

    #[test]
    fn corrupt_record_is_skipped_and_torn_tail_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _, _) = open(dir.path());
        log.append(&[(1, b"aaaa"), (2, b"bbbb"), (3, b"cccc")])
            .unwrap();
        drop(log);
        let path = seg_path(dir.path(), 1, "log");
        let mut bytes = fs::read(&path).unwrap();
        // Flip a payload byte of record 2 and add a torn record at the end.
        let rec = HEADER + 8 + 4;
        bytes[rec + HEADER + 9] ^= 0xff;
        let mut torn = Vec::new();
        frame(4, b"dddd", &mut torn);
        bytes.extend_from_slice(&torn[..torn.len() - 2]);
        fs::write(&path, bytes).unwrap();
        let (_, got, stats) = open(dir.path());
        assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(stats.corrupt, 1);
        assert_eq!(stats.torn_tails, 1);
    }

    #[test]
    fn acknowledgements_after_a_partial_entry_still_count() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _, _) = open(dir.path());
        log.append(&[(1, b"a".as_slice()), (2, b"b"), (3, b"c"), (4, b"d")])
            .unwrap();
        log.ack(&[1]).unwrap();
        drop(log);
        // The disk filled up under the next acknowledgement: part of it was written.
        let ack = seg_path(dir.path(), 1, "ack");
        let mut bytes = fs::read(&ack).unwrap();
        bytes.extend_from_slice(&2u64.to_le_bytes()[..5]);
        fs::write(&ack, bytes).unwrap();
        let (mut log, got, _) = open(dir.path());
        assert_eq!(
            got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        log.ack(&[2, 3]).unwrap();
        drop(log);
        let (_, got, _) = open(dir.path());
        assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![4]);
    }

    #[test]
    fn garbage_file_does_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            seg_path(dir.path(), 5, "log"),
            [0xFFu8, 0x50, 0x4C, 0x51, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2],
        )
        .unwrap();
        fs::write(seg_path(dir.path(), 5, "ack"), [1u8, 2, 3]).unwrap();
        let (mut log, got, _) = open(dir.path());
        assert!(got.is_empty());
        log.append(&[(1, b"x")]).unwrap();
        assert_eq!(log.read(1).unwrap().as_deref(), Some(&b"x"[..]));
    }
}
