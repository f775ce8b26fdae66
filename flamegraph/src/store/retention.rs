//! Retention: chunks older than the retention period go first, then the oldest until the
//! stored data fits `max_size_mib`.

use super::*;

impl ProfileStore {
    /// Deletes chunks received longer ago than the retention period, then the oldest chunks
    /// until the stored data fits `max_size_mib`, and returns freed pages to the file system.
    pub fn enforce_retention(&self) -> Result<RetentionStats> {
        let mut conn = lock(&self.writer);
        let mut stats = RetentionStats::default();
        let cutoff = now_secs() - self.cfg.retention.as_secs_f64();
        let mut deleted_ids = Vec::new();
        loop {
            let ids = select_ids(
                &conn,
                "SELECT id FROM chunks WHERE received < ?1 ORDER BY received, id LIMIT ?2",
                params![cutoff, DELETE_BATCH],
            )?;
            if ids.is_empty() {
                break;
            }
            stats.deleted_by_age += ids.len() as u64;
            delete_ids(&mut conn, &ids)?;
            deleted_ids.extend(ids);
        }
        let max = self.max_bytes();
        loop {
            let total: i64 = conn.query_row(
                "SELECT COALESCE(SUM(stored_size), 0) FROM chunks",
                [],
                |r| r.get(0),
            )?;
            let total = total as u64;
            self.stored_bytes.store(total, Ordering::Relaxed);
            if total <= max {
                break;
            }
            // Delete the oldest rows whose sizes cover the excess (at least one).
            let mut stmt = conn.prepare_cached(
                "SELECT id, stored_size FROM chunks ORDER BY received, id LIMIT ?1",
            )?;
            let rows = stmt
                .query_map([DELETE_BATCH], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            drop(stmt);
            let mut excess = total - max;
            let mut ids = Vec::new();
            for (id, size) in rows {
                ids.push(id);
                excess = excess.saturating_sub(size as u64);
                if excess == 0 {
                    break;
                }
            }
            if ids.is_empty() {
                break;
            }
            stats.deleted_by_size += ids.len() as u64;
            delete_ids(&mut conn, &ids)?;
            deleted_ids.extend(ids);
        }
        conn.execute(
            "DELETE FROM transactions WHERE received < ?1",
            params![cutoff],
        )?;
        if !deleted_ids.is_empty() {
            conn.execute_batch("PRAGMA incremental_vacuum;")?;
            let mut cache = lock(&self.cache);
            for id in &deleted_ids {
                cache.remove(*id);
            }
            tracing::info!(
                by_age = stats.deleted_by_age,
                by_size = stats.deleted_by_size,
                "profile store retention deleted chunks"
            );
        }
        let (count, bytes) = conn.query_row(
            "SELECT COUNT(*), COALESCE(SUM(stored_size), 0) FROM chunks",
            [],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
        )?;
        stats.remaining_chunks = count;
        stats.remaining_bytes = bytes;
        Ok(stats)
    }

    /// Runs [`ProfileStore::enforce_retention`] every `every` on the Tokio runtime until the
    /// returned task is aborted. Needs a Tokio runtime.
    pub fn spawn_retention_task(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let store = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let s = Arc::clone(&store);
                match tokio::task::spawn_blocking(move || s.enforce_retention()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "profile store retention failed"),
                    Err(e) => tracing::warn!(error = %e, "profile store retention task failed"),
                }
            }
        })
    }
}

pub(super) fn delete_ids(conn: &mut Connection, ids: &[i64]) -> Result<()> {
    let tx = conn.transaction()?;
    {
        let mut del_chunk = tx.prepare_cached("DELETE FROM chunks WHERE id = ?1")?;
        let mut del_blob = tx.prepare_cached("DELETE FROM chunk_blobs WHERE chunk_rowid = ?1")?;
        let mut del_fns =
            tx.prepare_cached("DELETE FROM chunk_functions WHERE chunk_rowid = ?1")?;
        for id in ids {
            del_chunk.execute([id])?;
            del_blob.execute([id])?;
            del_fns.execute([id])?;
        }
    }
    tx.commit()?;
    Ok(())
}
