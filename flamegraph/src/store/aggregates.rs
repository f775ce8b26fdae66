//! The precomputed call trees read back for the flamegraph: candidate selection in SQL, the
//! in-memory cache of decoded call trees (least recently used evicted first) and its warm-up,
//! and rebuilding a call tree stored by an older version.

use super::*;

/// Chunks aggregated at most per query (the newest are used); also the most call trees the
/// cache warm-up loads.
pub(crate) const MAX_CHUNKS: usize = 10_000;

/// SQL-level candidate selection (the query's search terms are applied afterwards).
#[derive(Debug, Clone, Default)]
pub(crate) struct CandidateFilter {
    /// Project ids, `None` for all.
    pub projects: Option<Vec<u64>>,
    /// Environments (any of), empty for all.
    pub environments: Vec<String>,
    /// Chunks must end at or after this time (Unix seconds).
    pub start: f64,
    /// Chunks must start before this time (Unix seconds).
    pub end: f64,
    /// Only chunks linked to at least one transaction.
    pub linked_only: bool,
    /// Only chunks containing a function with this fingerprint (either variant).
    pub fingerprint: Option<u32>,
}

/// A candidate chunk row.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub id: i64,
    pub info: StoredChunkInfo,
}

/// Decoded call trees kept between queries, least recently used evicted first.
pub(super) struct AggCache {
    map: HashMap<i64, (Arc<ChunkAgg>, usize, u64)>,
    bytes: usize,
    cap: usize,
    tick: u64,
}

impl AggCache {
    /// An empty cache of at most `cap` bytes.
    pub(super) fn new(cap: usize) -> Self {
        AggCache {
            map: HashMap::new(),
            bytes: 0,
            cap,
            tick: 0,
        }
    }

    pub(super) fn get(&mut self, id: i64) -> Option<Arc<ChunkAgg>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&id).map(|e| {
            e.2 = tick;
            e.0.clone()
        })
    }

    pub(super) fn put(&mut self, id: i64, agg: Arc<ChunkAgg>) {
        if self.cap == 0 {
            return;
        }
        let size = agg.approx_size();
        self.tick += 1;
        if let Some(old) = self.map.insert(id, (agg, size, self.tick)) {
            self.bytes -= old.1;
        }
        self.bytes += size;
        if self.bytes > self.cap {
            let mut by_age: Vec<(u64, i64)> = self.map.iter().map(|(k, v)| (v.2, *k)).collect();
            by_age.sort_unstable();
            let target = self.cap / 10 * 9;
            for (_, k) in by_age {
                if self.bytes <= target {
                    break;
                }
                if let Some(e) = self.map.remove(&k) {
                    self.bytes -= e.1;
                }
            }
        }
    }

    pub(super) fn remove(&mut self, id: i64) {
        if let Some(e) = self.map.remove(&id) {
            self.bytes -= e.1;
        }
    }
}

impl ProfileStore {
    /// Loads the call trees of the newest chunks into memory, up to the cache budget, so the
    /// first queries after a restart need not read them from SQLite (call it from a background
    /// task after [`ProfileStore::open`]). Returns the number of chunks loaded.
    pub fn warm_cache(&self) -> Result<usize> {
        let ids = {
            let conn = self.reader();
            select_ids(
                &conn,
                "SELECT id FROM chunks ORDER BY start_ts DESC, id DESC LIMIT ?1",
                [MAX_CHUNKS as i64],
            )?
        };
        let mut loaded = 0;
        for batch in ids.chunks(256) {
            loaded += self.load_aggs(batch)?.len();
            let cache = lock(&self.cache);
            if cache.bytes >= cache.cap / 10 * 9 {
                break;
            }
        }
        Ok(loaded)
    }

    /// Chunks matching `filter`, newest start first.
    pub(crate) fn candidates(&self, filter: &CandidateFilter) -> Result<Vec<Candidate>> {
        let mut sql =
            format!("SELECT {INFO_COLUMNS} FROM chunks WHERE start_ts < ? AND end_ts >= ?");
        let mut args: Vec<rusqlite::types::Value> = vec![filter.end.into(), filter.start.into()];
        if let Some(projects) = &filter.projects {
            if projects.is_empty() {
                return Ok(Vec::new());
            }
            sql.push_str(&format!(
                " AND project_id IN ({})",
                vec!["?"; projects.len()].join(",")
            ));
            args.extend(projects.iter().map(|&p| (p as i64).into()));
        }
        if !filter.environments.is_empty() {
            sql.push_str(&format!(
                " AND environment IN ({})",
                vec!["?"; filter.environments.len()].join(",")
            ));
            args.extend(filter.environments.iter().map(|e| e.clone().into()));
        }
        if filter.linked_only {
            sql.push_str(" AND has_transactions = 1");
        }
        if let Some(fp) = filter.fingerprint {
            sql.push_str(
                " AND id IN (SELECT chunk_rowid FROM chunk_functions WHERE fingerprint = ? \
                 UNION SELECT chunk_rowid FROM chunk_functions WHERE legacy_fingerprint = ?)",
            );
            args.push(i64::from(fp).into());
            args.push(i64::from(fp).into());
        }
        sql.push_str(" ORDER BY start_ts DESC, id DESC");
        let conn = self.reader();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), row_info)?;
        rows.map(|r| {
            r.map(|(id, info)| Candidate { id, info })
                .map_err(StoreError::from)
        })
        .collect()
    }

    /// The call trees of the chunks `ids` (from the cache, the stored aggregate, or rebuilt
    /// from the payload when the stored one is from an older version). Chunks deleted
    /// meanwhile are skipped.
    pub(crate) fn load_aggs(&self, ids: &[i64]) -> Result<Vec<(i64, Arc<ChunkAgg>)>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        {
            let mut cache = lock(&self.cache);
            for &id in ids {
                match cache.get(id) {
                    Some(a) => out.push((id, a)),
                    None => missing.push(id),
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let mut blobs: Vec<(i64, Vec<u8>, u32)> = Vec::with_capacity(missing.len());
        {
            let conn = self.reader();
            let mut stmt = conn.prepare_cached(
                "SELECT aggregate, aggregate_version FROM chunk_blobs WHERE chunk_rowid = ?1",
            )?;
            for &id in &missing {
                if let Some((blob, version)) = stmt
                    .query_row([id], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, u32>(1)?)))
                    .optional()?
                {
                    blobs.push((id, blob, version));
                }
            }
        }
        // Decode on both cores when there is enough work.
        let decoded: Vec<Result<(i64, Arc<ChunkAgg>)>> = if blobs.len() >= 16 {
            let mid = blobs.len() / 2;
            let (a, b) = blobs.split_at(mid);
            std::thread::scope(|s| {
                let h = s.spawn(|| a.iter().map(|x| self.decode_agg(x)).collect::<Vec<_>>());
                let mut rb: Vec<_> = b.iter().map(|x| self.decode_agg(x)).collect();
                let mut ra = h.join().unwrap_or_default();
                ra.append(&mut rb);
                ra
            })
        } else {
            blobs.iter().map(|x| self.decode_agg(x)).collect()
        };
        let mut cache = lock(&self.cache);
        for r in decoded {
            let (id, agg) = r?;
            cache.put(id, Arc::clone(&agg));
            out.push((id, agg));
        }
        Ok(out)
    }

    fn decode_agg(
        &self,
        (id, blob, version): &(i64, Vec<u8>, u32),
    ) -> Result<(i64, Arc<ChunkAgg>)> {
        if *version == AGG_VERSION {
            let raw = zstd::stream::decode_all(blob.as_slice())?;
            if let Some(agg) = ChunkAgg::decode(&raw) {
                return Ok((*id, Arc::new(agg)));
            }
            tracing::warn!(
                id,
                "stored call trees unreadable, rebuilding from the payload"
            );
        }
        self.rebuild_agg(*id)
    }

    /// Rebuilds a chunk's call trees from its payload and stores them.
    fn rebuild_agg(&self, id: i64) -> Result<(i64, Arc<ChunkAgg>)> {
        let payload: Vec<u8> = {
            let conn = self.reader();
            conn.prepare_cached("SELECT payload FROM chunk_blobs WHERE chunk_rowid = ?1")?
                .query_row([id], |r| r.get(0))?
        };
        let chunk = decode_payload(id, &payload)?;
        let agg = calltree::build(&chunk).map_err(|e| StoreError::Corrupt {
            id,
            reason: e.to_string(),
        })?;
        let blob = zstd::bulk::compress(&agg.encode(), ZSTD_LEVEL)?;
        lock(&self.writer).execute(
            "UPDATE chunk_blobs SET aggregate = ?2, aggregate_version = ?3 WHERE chunk_rowid = ?1",
            params![id, blob, AGG_VERSION],
        )?;
        Ok((id, Arc::new(agg)))
    }
}
