//! The embedded profile store: SQLite (WAL) with chunk metadata indexed for the flamegraph
//! API's filters, zstd-compressed payloads, and each chunk's precomputed call trees.

use crate::calltree::{self, AGG_VERSION, CallTreeError, ChunkAgg};
use crate::config::StoreConfig;
use profilink_proto::sentry::ProfileChunk;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

mod aggregates;
mod records;
mod retention;

use aggregates::AggCache;
pub(crate) use aggregates::{Candidate, CandidateFilter, MAX_CHUNKS};
pub use records::{ChunkMeta, Facets, RetentionStats, StoredChunkInfo, TransactionLink};

/// Per-row overhead (metadata, indexes) counted on top of the blobs against `max_size_mib`.
const ROW_OVERHEAD: u64 = 256;
/// zstd level for payloads and call trees.
const ZSTD_LEVEL: i32 = 3;
/// Rows deleted per statement during retention.
const DELETE_BATCH: i64 = 200;
/// Read connections (queries run concurrently with inserts in WAL mode).
const READERS: usize = 2;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Creating the store's directory or compressing failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The chunk cannot be turned into call trees (bad indices, no samples).
    #[error("invalid chunk: {0}")]
    InvalidChunk(#[from] CallTreeError),
    /// A stored row could not be read back.
    #[error("corrupt stored chunk {id}: {reason}")]
    Corrupt {
        /// Row id.
        id: i64,
        /// What was wrong.
        reason: String,
    },
}

/// Result type of the store.
pub type Result<T> = std::result::Result<T, StoreError>;

/// The embedded profile store. Cheap to share behind an [`Arc`]; every method is blocking
/// (call it from `spawn_blocking` in async code).
pub struct ProfileStore {
    cfg: StoreConfig,
    writer: Mutex<Connection>,
    readers: Vec<Mutex<Connection>>,
    next_reader: AtomicUsize,
    cache: Mutex<AggCache>,
    stored_bytes: AtomicU64,
}

impl std::fmt::Debug for ProfileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileStore")
            .field("path", &self.cfg.path)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS chunks (
    id                INTEGER PRIMARY KEY,
    project_id        INTEGER NOT NULL,
    chunk_id          TEXT NOT NULL,
    profiler_id       TEXT NOT NULL,
    environment       TEXT,
    release           TEXT,
    platform          TEXT NOT NULL,
    start_ts          REAL NOT NULL,
    end_ts            REAL NOT NULL,
    received          REAL NOT NULL,
    thread_ids        TEXT NOT NULL,
    transaction_names TEXT NOT NULL,
    has_transactions  INTEGER NOT NULL,
    sample_count      INTEGER NOT NULL,
    payload_size      INTEGER NOT NULL,
    stored_size       INTEGER NOT NULL,
    UNIQUE (project_id, chunk_id)
);
CREATE INDEX IF NOT EXISTS chunks_by_start ON chunks (start_ts);
CREATE INDEX IF NOT EXISTS chunks_by_project ON chunks (project_id, start_ts);
CREATE INDEX IF NOT EXISTS chunks_by_environment ON chunks (environment, start_ts);
CREATE INDEX IF NOT EXISTS chunks_by_received ON chunks (received, id);
CREATE INDEX IF NOT EXISTS chunks_by_profiler ON chunks (profiler_id, start_ts);
CREATE TABLE IF NOT EXISTS chunk_blobs (
    chunk_rowid       INTEGER PRIMARY KEY,
    payload           BLOB NOT NULL,
    aggregate         BLOB NOT NULL,
    aggregate_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunk_functions (
    chunk_rowid        INTEGER NOT NULL,
    fingerprint        INTEGER NOT NULL,
    legacy_fingerprint INTEGER NOT NULL,
    PRIMARY KEY (chunk_rowid, fingerprint)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunk_functions_by_fingerprint ON chunk_functions (fingerprint);
CREATE INDEX IF NOT EXISTS chunk_functions_by_legacy ON chunk_functions (legacy_fingerprint);
CREATE TABLE IF NOT EXISTS transactions (
    profiler_id TEXT NOT NULL,
    start_ts    REAL NOT NULL,
    end_ts      REAL NOT NULL,
    name        TEXT NOT NULL,
    received    REAL NOT NULL,
    PRIMARY KEY (profiler_id, start_ts, end_ts, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS transactions_by_received ON transactions (received);
PRAGMA user_version = 1;
";

const INFO_COLUMNS: &str = "id, project_id, chunk_id, profiler_id, environment, release, platform, \
     start_ts, end_ts, received, thread_ids, transaction_names, payload_size";

fn row_info(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, StoredChunkInfo)> {
    let json_list = |s: String| serde_json::from_str::<Vec<String>>(&s).unwrap_or_default();
    Ok((
        row.get(0)?,
        StoredChunkInfo {
            project_id: row.get::<_, i64>(1)? as u64,
            chunk_id: row.get(2)?,
            profiler_id: row.get(3)?,
            environment: row.get(4)?,
            release: row.get(5)?,
            platform: row.get(6)?,
            start: row.get(7)?,
            end: row.get(8)?,
            received: row.get(9)?,
            thread_ids: json_list(row.get(10)?),
            transaction_names: json_list(row.get(11)?),
            payload_size: row.get::<_, i64>(12)? as u64,
        },
    ))
}

/// Names of the transactions already known (see [`ProfileStore::link_transactions`]) that
/// link to a chunk of `profiler_id` spanning `[start, end]`.
fn linked_names(conn: &Connection, profiler_id: &str, start: f64, end: f64) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT name FROM transactions \
         WHERE profiler_id = ?1 AND start_ts <= ?3 AND end_ts >= ?2",
    )?;
    let names = stmt
        .query_map(params![profiler_id, start, end], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names)
}

impl ProfileStore {
    /// Opens (creating when needed) the store at `cfg.path`, then applies retention once.
    pub fn open(cfg: &StoreConfig) -> Result<Self> {
        if let Some(dir) = cfg.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let writer = open_connection(&cfg.path)?;
        // auto_vacuum only takes effect before the first table exists.
        writer.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        let mode: String =
            writer.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(mode, "profile store: WAL mode unavailable");
        }
        writer.execute_batch(SCHEMA)?;
        let readers = (0..READERS)
            .map(|_| open_connection(&cfg.path).map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        let stored: i64 = writer.query_row(
            "SELECT COALESCE(SUM(stored_size), 0) FROM chunks",
            [],
            |r| r.get(0),
        )?;
        let store = ProfileStore {
            cache: Mutex::new(AggCache::new(
                usize::try_from(cfg.cache_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            )),
            cfg: cfg.clone(),
            writer: Mutex::new(writer),
            readers,
            next_reader: AtomicUsize::new(0),
            stored_bytes: AtomicU64::new(stored as u64),
        };
        store.enforce_retention()?;
        Ok(store)
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.readers.len() {
            if let Ok(g) = self.readers[(start + i) % self.readers.len()].try_lock() {
                return g;
            }
        }
        lock(&self.readers[start % self.readers.len()])
    }

    /// Stores `chunk`. Storing a chunk whose (project, chunk_id) is already stored does nothing.
    /// Fails for chunks whose call trees cannot be built (no samples, indices out of range).
    pub fn insert(&self, chunk: &ProfileChunk, meta: &ChunkMeta) -> Result<()> {
        if self.contains(meta.project_id, &chunk.chunk_id)? {
            return Ok(());
        }
        // Aggregate exactly what is stored (serde_json's float parsing may differ from the
        // in-memory value by one ulp), so rebuilding from the payload gives the same trees.
        let json = chunk.to_json();
        let chunk = &ProfileChunk::from_json(&json)
            .map_err(|e| StoreError::InvalidChunk(CallTreeError::Unreadable(e.to_string())))?;
        let agg = calltree::build(chunk)?;
        let received = if meta.received.is_finite() && meta.received > 0.0 {
            meta.received
        } else {
            now_secs()
        };
        let (start, end) = chunk
            .profile
            .samples
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(s.timestamp), hi.max(s.timestamp))
            });
        let thread_ids: BTreeSet<&str> = chunk
            .profile
            .samples
            .iter()
            .map(|s| s.thread_id.as_str())
            .collect();
        let mut names: BTreeSet<String> = meta.transaction_names.iter().cloned().collect();
        let mut fingerprints: BTreeSet<(u32, u32)> = BTreeSet::new();
        for t in &agg.threads {
            for n in &t.nodes {
                let f = &agg.frames[n.frame as usize];
                fingerprints.insert((f.fingerprint, f.legacy_fingerprint));
            }
        }
        let payload = zstd::bulk::compress(&json, ZSTD_LEVEL)?;
        let aggregate = zstd::bulk::compress(&agg.encode(), ZSTD_LEVEL)?;
        let stored_size = payload.len() as u64 + aggregate.len() as u64 + ROW_OVERHEAD;

        let inserted = {
            let mut conn = lock(&self.writer);
            let tx = conn.transaction()?;
            // Under the writer lock, so a concurrent `link_transactions` is either seen here or
            // sees this row.
            if start <= end {
                names.extend(linked_names(&tx, &chunk.profiler_id, start, end)?);
            }
            let n = tx.execute(
                "INSERT OR IGNORE INTO chunks (project_id, chunk_id, profiler_id, environment, \
                 release, platform, start_ts, end_ts, received, thread_ids, transaction_names, \
                 has_transactions, sample_count, payload_size, stored_size) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
                params![
                    meta.project_id as i64,
                    chunk.chunk_id,
                    chunk.profiler_id,
                    chunk.environment,
                    chunk.release,
                    chunk.platform,
                    start,
                    end,
                    received,
                    serde_json::to_string(&thread_ids).unwrap_or_else(|_| "[]".into()),
                    serde_json::to_string(&names).unwrap_or_else(|_| "[]".into()),
                    !names.is_empty(),
                    chunk.profile.samples.len() as i64,
                    json.len() as i64,
                    stored_size as i64,
                ],
            )?;
            if n == 1 {
                let id = tx.last_insert_rowid();
                tx.execute(
                    "INSERT INTO chunk_blobs (chunk_rowid, payload, aggregate, aggregate_version) \
                     VALUES (?1, ?2, ?3, ?4)",
                    params![id, payload, aggregate, AGG_VERSION],
                )?;
                let mut stmt = tx.prepare_cached(
                    "INSERT OR IGNORE INTO chunk_functions (chunk_rowid, fingerprint, \
                     legacy_fingerprint) VALUES (?1, ?2, ?3)",
                )?;
                for (fp, legacy) in &fingerprints {
                    stmt.execute(params![id, fp, legacy])?;
                }
                drop(stmt);
            }
            tx.commit()?;
            n == 1
        };
        if inserted {
            let total = self.stored_bytes.fetch_add(stored_size, Ordering::Relaxed) + stored_size;
            if total > self.max_bytes() {
                self.enforce_retention()?;
            }
        }
        Ok(())
    }

    /// Records transactions and links them to the stored chunks they overlap, whichever
    /// arrives first: chunks stored later pick the names up at insert. Transactions are kept
    /// for the retention period. Returns the number of chunks whose names changed.
    pub fn link_transactions(&self, links: &[TransactionLink]) -> Result<u64> {
        let received = now_secs();
        let mut conn = lock(&self.writer);
        let tx = conn.transaction()?;
        let mut changed = 0u64;
        {
            let mut insert = tx.prepare_cached(
                "INSERT OR IGNORE INTO transactions (profiler_id, start_ts, end_ts, name, received) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut select = tx.prepare_cached(
                "SELECT id, transaction_names FROM chunks \
                 WHERE profiler_id = ?1 AND start_ts <= ?3 AND end_ts >= ?2",
            )?;
            let mut update = tx.prepare_cached(
                "UPDATE chunks SET transaction_names = ?2, has_transactions = 1 WHERE id = ?1",
            )?;
            for l in links {
                if l.profiler_id.is_empty()
                    || l.name.is_empty()
                    || !(l.start.is_finite() && l.end.is_finite() && l.start <= l.end)
                {
                    continue;
                }
                insert.execute(params![l.profiler_id, l.start, l.end, l.name, received])?;
                let rows = select
                    .query_map(params![l.profiler_id, l.start, l.end], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                for (id, names) in rows {
                    let mut set: BTreeSet<String> =
                        serde_json::from_str(&names).unwrap_or_default();
                    if set.insert(l.name.clone()) {
                        let json = serde_json::to_string(&set).unwrap_or_else(|_| "[]".into());
                        update.execute(params![id, json])?;
                        changed += 1;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(changed)
    }

    fn max_bytes(&self) -> u64 {
        self.cfg.max_size_mib.saturating_mul(1 << 20)
    }

    /// Whether the chunk `chunk_id` of `project_id` is stored.
    pub fn contains(&self, project_id: u64, chunk_id: &str) -> Result<bool> {
        let conn = self.reader();
        Ok(conn
            .prepare_cached("SELECT 1 FROM chunks WHERE project_id = ?1 AND chunk_id = ?2")?
            .query_row(params![project_id as i64, chunk_id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Reads a stored chunk back.
    pub fn get_chunk(&self, project_id: u64, chunk_id: &str) -> Result<Option<ProfileChunk>> {
        let conn = self.reader();
        let row: Option<(i64, Vec<u8>)> = conn
            .prepare_cached(
                "SELECT c.id, b.payload FROM chunks c JOIN chunk_blobs b ON b.chunk_rowid = c.id \
                 WHERE c.project_id = ?1 AND c.chunk_id = ?2",
            )?
            .query_row(params![project_id as i64, chunk_id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()?;
        drop(conn);
        row.map(|(id, blob)| decode_payload(id, &blob)).transpose()
    }

    /// Metadata of every stored chunk, oldest start first.
    pub fn list(&self) -> Result<Vec<StoredChunkInfo>> {
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {INFO_COLUMNS} FROM chunks ORDER BY start_ts, id"
        ))?;
        let rows = stmt.query_map([], row_info)?;
        rows.map(|r| r.map(|(_, info)| info).map_err(StoreError::from))
            .collect()
    }

    /// Distinct projects, environments, releases and platforms, and the stored time range.
    pub fn facets(&self) -> Result<Facets> {
        let conn = self.reader();
        let strings = |sql: &str| -> Result<Vec<String>> {
            let mut stmt = conn.prepare_cached(sql)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.map(|r| r.map_err(StoreError::from)).collect()
        };
        let environments = strings(
            "SELECT DISTINCT environment FROM chunks WHERE environment IS NOT NULL ORDER BY 1",
        )?;
        let releases =
            strings("SELECT DISTINCT release FROM chunks WHERE release IS NOT NULL ORDER BY 1")?;
        let platforms = strings("SELECT DISTINCT platform FROM chunks ORDER BY 1")?;
        let mut stmt = conn.prepare_cached("SELECT DISTINCT project_id FROM chunks ORDER BY 1")?;
        let projects = stmt
            .query_map([], |r| r.get::<_, i64>(0))?
            .map(|r| r.map(|v| v as u64).map_err(StoreError::from))
            .collect::<Result<Vec<_>>>()?;
        drop(stmt);
        let (chunks, first, last) = conn.query_row(
            "SELECT COUNT(*), MIN(start_ts), MAX(end_ts) FROM chunks",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, r.get(2)?)),
        )?;
        Ok(Facets {
            projects,
            environments,
            releases,
            platforms,
            chunks,
            first,
            last,
        })
    }
}

fn decode_payload(id: i64, blob: &[u8]) -> Result<ProfileChunk> {
    let json = zstd::stream::decode_all(blob)?;
    ProfileChunk::from_json(&json).map_err(|e| StoreError::Corrupt {
        id,
        reason: e.to_string(),
    })
}

fn select_ids(conn: &Connection, sql: &str, args: impl rusqlite::Params) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(args, |r| r.get::<_, i64>(0))?;
    rows.map(|r| r.map_err(StoreError::from)).collect()
}
