//! debuginfod client: background downloads of `GET <url>/buildid/<hex>/debuginfo` into the
//! [`DiskCache`], never on the caller's thread.
//!
//! [`Fetcher::status`] answers from the disk cache at once, or queues a download and says
//! `Pending`; callers wait for their downloads at most their budget ([`Fetcher::wait`]).
//! Downloads run on at most `max_concurrent_fetches` threads (one build id is fetched once at a
//! time; at most [`MAX_QUEUED`] wait), each bounded while it streams ([`download`]: the size
//! bound `max_file_size_mib`, the time budget `debuginfod.timeout`, into a temporary part of
//! the cache, renamed only when whole and of the build id requested). Servers are tried in
//! order; when every server answers 404 a negative entry goes to disk. A failed download is
//! counted by reason, logged once per build id (a warning; later ones at debug), remembered in
//! memory and on disk (a `.failed` entry) for `retry_after`, so neither a later request nor a
//! restarted process fetches it again at once.
//!
//! [`download`]: crate::sources::download

use crate::config::SymbolizerConfig;
use crate::metrics::SymbolizerMetrics;
use crate::sources::disk_cache::DiskCache;
use crate::sources::download::Downloader;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Downloads waiting for a thread at most; more are not started (counted as failed lookups by
/// the caller, and asked again by a later request).
pub(crate) const MAX_QUEUED: usize = 256;

/// Build ids whose failure was logged as a warning at most; past it, failures log at debug.
const MAX_WARNED: usize = 4096;

/// Where a build id stands with debuginfod.
#[derive(Debug)]
pub(crate) enum FetchStatus {
    /// In the disk cache: the debug file.
    Cached(Vec<u8>),
    /// A download is queued or running.
    Pending,
    /// Not on any server, or the download failed recently.
    Failed,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Vec<u8>>,
    in_flight: HashSet<Vec<u8>>,
    failed: HashMap<Vec<u8>, Instant>,
    warned: HashSet<Vec<u8>>,
    threads: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    /// Set when the fetcher is dropped: running downloads stop.
    cancel: AtomicBool,
    urls: Vec<String>,
    cache: DiskCache,
    timeout: Duration,
    max_size: u64,
    max_threads: usize,
    retry_after: Duration,
    metrics: Arc<SymbolizerMetrics>,
}

/// See the module docs.
pub(crate) struct Fetcher {
    shared: Arc<Shared>,
}

/// How long dropping a [`Fetcher`] waits for its threads to stop their downloads (and remove
/// their partial files).
const STOP_WAIT: Duration = Duration::from_secs(2);

impl Drop for Fetcher {
    fn drop(&mut self) {
        let sh = &self.shared;
        let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        s.shutdown = true;
        s.queue.clear();
        sh.cancel.store(true, Ordering::Relaxed);
        sh.cond.notify_all();
        let deadline = Instant::now() + STOP_WAIT;
        while s.threads > 0 {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            s = sh
                .cond
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Fetcher {
    pub(crate) fn new(cfg: &SymbolizerConfig, metrics: Arc<SymbolizerMetrics>) -> Fetcher {
        let d = &cfg.debuginfod;
        Fetcher {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                cond: Condvar::new(),
                cancel: AtomicBool::new(false),
                urls: d
                    .effective_urls()
                    .into_iter()
                    .map(|u| u.trim_end_matches('/').to_owned())
                    .collect(),
                cache: DiskCache::new(
                    d.effective_cache_dir(),
                    d.cache_max_size_mib.saturating_mul(1 << 20),
                    (d.negative_ttl, cfg.retry_after),
                    cfg.max_file_size(),
                    // No live download goes this long without writing.
                    d.timeout + Duration::from_secs(60),
                ),
                timeout: d.timeout,
                max_size: cfg.max_file_size(),
                max_threads: d.max_concurrent_fetches.max(1),
                retry_after: cfg.retry_after,
                metrics,
            }),
        }
    }

    /// Whether any server is configured.
    pub(crate) fn enabled(&self) -> bool {
        !self.shared.urls.is_empty()
    }

    /// The debug file of `build_id` from the cache, or the state of its download (started
    /// here when none is running).
    pub(crate) fn status(&self, build_id: &[u8]) -> FetchStatus {
        let sh = &self.shared;
        if let Some(d) = sh.cache.get(build_id) {
            return FetchStatus::Cached(d);
        }
        if sh.cache.is_negative(build_id) {
            return FetchStatus::Failed;
        }
        let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.in_flight.contains(build_id) {
            return FetchStatus::Pending;
        }
        if let Some(at) = s.failed.get(build_id) {
            if at.elapsed() < sh.retry_after {
                return FetchStatus::Failed;
            }
            s.failed.remove(build_id);
        }
        if s.queue.len() >= MAX_QUEUED || s.shutdown {
            return FetchStatus::Failed;
        }
        s.in_flight.insert(build_id.to_vec());
        s.queue.push_back(build_id.to_vec());
        if s.threads < sh.max_threads && s.threads < s.in_flight.len() {
            s.threads += 1;
            let shared = Arc::clone(sh);
            let spawned = std::thread::Builder::new()
                .name("symbolizer-fetch".into())
                .spawn(move || worker(shared));
            if spawned.is_err() {
                s.threads -= 1;
            }
        }
        sh.cond.notify_all();
        FetchStatus::Pending
    }

    /// Waits until none of `build_ids` is being downloaded, or until `deadline`.
    pub(crate) fn wait(&self, build_ids: &[Vec<u8>], deadline: Instant) {
        let sh = &self.shared;
        let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if !build_ids.iter().any(|b| s.in_flight.contains(b)) {
                return;
            }
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            s = sh
                .cond
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A download thread: takes build ids from the queue until shut down (idle threads wait).
fn worker(sh: Arc<Shared>) {
    let downloader = match Downloader::new(sh.timeout, sh.max_size) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!(error = %e, "symbolize: cannot build the debuginfod HTTP client");
            None
        }
    };
    loop {
        let id = {
            let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if s.shutdown {
                    s.threads -= 1;
                    sh.cond.notify_all();
                    return;
                }
                if let Some(id) = s.queue.pop_front() {
                    break id;
                }
                s = sh.cond.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        let result = match &downloader {
            Some(d) => fetch(&sh, d, &id),
            None => Err(Lookup::Failed("no HTTP client".to_owned())),
        };
        let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {}
            Err(Lookup::Cancelled) => {}
            Err(Lookup::NotFound) => {
                s.failed.insert(id.clone(), Instant::now());
            }
            Err(Lookup::Failed(e)) => {
                let first = s.warned.len() < MAX_WARNED && s.warned.insert(id.clone());
                let build_id = hex::encode(&id);
                if first {
                    tracing::warn!(%build_id, error = %e, retry_after = ?sh.retry_after, "symbolize: debuginfod download failed; frames of this build id stay unsymbolized (fetch_failed)");
                } else {
                    tracing::debug!(%build_id, error = %e, "symbolize: debuginfod download failed");
                }
                s.failed.insert(id.clone(), Instant::now());
            }
        }
        s.in_flight.remove(&id);
        sh.cond.notify_all();
    }
}

/// Why a lookup ended without a file.
enum Lookup {
    /// Every server answered 404 (a negative entry is on disk).
    NotFound,
    /// A download failed (counted by reason; a `.failed` entry is on disk): the detail.
    Failed(String),
    /// The fetcher is shutting down: nothing counted or remembered.
    Cancelled,
}

/// Downloads `id` from the servers in order; `Ok` when stored.
fn fetch(sh: &Shared, downloader: &Downloader, id: &[u8]) -> Result<(), Lookup> {
    let hex = hex::encode(id);
    let mut errors = Vec::new();
    let mut last_reason = None;
    for url in &sh.urls {
        let url = format!("{url}/buildid/{hex}/debuginfo");
        match downloader.get(&sh.cache, &url, id, &sh.cancel) {
            Ok(Some((part, len))) => match sh.cache.commit(id, part) {
                Ok(()) => {
                    SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_ok, 1);
                    SymbolizerMetrics::inc(&sh.metrics.debuginfod_bytes, len);
                    return Ok(());
                }
                Err(e) => {
                    let reason = crate::metrics::FetchFailure::CacheWrite;
                    sh.metrics.add_fetch_error(reason);
                    last_reason = Some(reason);
                    errors.push(format!(
                        "{url}: {}: cannot write the cache: {e}",
                        reason.label()
                    ));
                }
            },
            Ok(None) => {}
            Err(f) => {
                let Some(reason) = f.reason else {
                    return Err(Lookup::Cancelled);
                };
                sh.metrics.add_fetch_error(reason);
                last_reason = Some(reason);
                errors.push(format!("{url}: {}: {}", reason.label(), f.detail));
            }
        }
    }
    let Some(reason) = last_reason else {
        SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_not_found, 1);
        // Remembered on disk; the in-memory entry makes the caller's next look cheap.
        let _ = sh.cache.put_negative(id);
        return Err(Lookup::NotFound);
    };
    SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_failed, 1);
    if let Err(e) = sh.cache.put_failed(id, reason.label()) {
        errors.push(format!("cannot write the negative entry: {e}"));
    }
    Err(Lookup::Failed(errors.join("; ")))
}
