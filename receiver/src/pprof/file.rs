//! The pprof receiver's `file` mode: pprof files (raw or gzipped) matching the `include` glob,
//! looked for every `collection_interval`.
//!
//! Unlike the Collector's file scraper, which reads every match again at every interval (so a
//! file left in place is sent again and again), each file is read once, and again only when
//! its size or modification time changed. A file over `max_file_size_mib`, one that cannot be
//! read, or one that is not pprof is counted in `profilink_receiver_scrape_failures_total`
//! (`transport="file"`) and logged as a warning, once per version of the file.

use crate::converted::pprof_to_otlp;
use crate::error::ReceiverError;
use crate::pprof::config::PprofFileConfig;
use crate::pprof::pull::{deliver, every};
use crate::server::ServerHandle;
use crate::stats::Stats;
use crate::stats::scrape::ScrapeFailure;
use profilink_consumer::{Consumer, Transport};
use std::collections::BTreeMap;
use std::future::Future;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What identifies a version of a file: its size and modification time.
type Version = (u64, Option<SystemTime>);

/// Starts looking for `config.include` into `consumer` until `shutdown` resolves. Counts into
/// `stats.pprof_file`.
pub fn start_pprof_file<C: Consumer, F: Future<Output = ()> + Send + 'static>(
    config: &PprofFileConfig,
    consumer: Arc<C>,
    stats: Arc<Stats>,
    shutdown: F,
) -> Result<ServerHandle, ReceiverError> {
    config.check().map_err(ReceiverError::Config)?;
    let reader = Arc::new(FileReader {
        include: config.include.clone(),
        limit: config.max_file_size(),
        seen: Mutex::new(BTreeMap::new()),
    });
    let (delay, interval) = (config.initial_delay, config.collection_interval);
    let task = tokio::spawn(async move {
        every(delay, interval, shutdown, || {
            let (reader, consumer, stats) = (reader.clone(), consumer.clone(), stats.clone());
            async move { reader.look(&*consumer, &stats).await }
        })
        .await;
        Ok(())
    });
    tracing::info!(include = %config.include, interval = ?interval, "pprof receiver reading files");
    Ok(ServerHandle::without_listener(task))
}

struct FileReader {
    include: String,
    limit: usize,
    /// The version of each matching file read last (matches that are gone are forgotten).
    seen: Mutex<BTreeMap<PathBuf, Version>>,
}

impl FileReader {
    /// One look at the glob: every new or changed file is read and delivered.
    async fn look<C: Consumer + ?Sized>(&self, consumer: &C, stats: &Stats) {
        let counters = &stats.pprof_file;
        let include = self.include.clone();
        let listed = tokio::task::spawn_blocking(move || list(&include)).await;
        let matches = match listed {
            Ok(Ok(m)) => m,
            other => {
                let message = match other {
                    Ok(Err(m)) => m,
                    _ => "listing the glob failed".to_string(),
                };
                counters.scrapes.failure(ScrapeFailure::File);
                tracing::warn!(include = %self.include, %message, "pprof file glob failed");
                return;
            }
        };
        let fresh: Vec<(PathBuf, Version)> = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.retain(|p, _| matches.iter().any(|(m, _)| m == p));
            matches
                .into_iter()
                .filter(|(p, v)| seen.get(p) != Some(v))
                .collect()
        };
        for (path, version) in fresh {
            let outcome = async {
                let limit = self.limit;
                let p = path.clone();
                let bytes = tokio::task::spawn_blocking(move || read_bounded(&p, limit))
                    .await
                    .map_err(|_| (ScrapeFailure::File, "reading the file failed".into()))??;
                let mut budget = self.limit;
                let data = pprof_to_otlp(&bytes, &mut budget)
                    .map_err(|e| (ScrapeFailure::Invalid, format!("not a pprof profile: {e}")))?;
                drop(bytes);
                deliver(consumer, counters, Transport::File, data).await
            }
            .await;
            match outcome {
                Ok(samples) => {
                    counters.scrapes.success();
                    tracing::debug!(file = %path.display(), samples, "pprof file delivered");
                }
                Err((reason, message)) => {
                    counters.scrapes.failure(reason);
                    tracing::warn!(file = %path.display(), reason = reason.as_str(), %message, "pprof file not delivered");
                    // A full or failing pipeline may take the same file later.
                    if matches!(reason, ScrapeFailure::Full | ScrapeFailure::Unavailable) {
                        continue;
                    }
                }
            }
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.insert(path, version);
        }
    }
}

/// The regular files matching `include`, with their versions, in path order.
fn list(include: &str) -> Result<Vec<(PathBuf, Version)>, String> {
    let paths = glob::glob(include).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for entry in paths.flatten() {
        if let Ok(meta) = std::fs::metadata(&entry)
            && meta.is_file()
        {
            out.push((entry, (meta.len(), meta.modified().ok())));
        }
    }
    Ok(out)
}

/// The contents of `path`, refused past `limit` bytes (never reading more than one byte past
/// it).
fn read_bounded(path: &std::path::Path, limit: usize) -> Result<Vec<u8>, (ScrapeFailure, String)> {
    let file = std::fs::File::open(path).map_err(|e| (ScrapeFailure::File, e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (ScrapeFailure::File, e.to_string()))?;
    if bytes.len() > limit {
        return Err((
            ScrapeFailure::TooLarge,
            format!("the file is larger than the limit of {limit} bytes"),
        ));
    }
    Ok(bytes)
}
