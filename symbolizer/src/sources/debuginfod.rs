//! debuginfod client: background downloads of `GET <url>/buildid/<hex>/debuginfo` into the
//! [`DiskCache`], never on the caller's thread.
//!
//! [`Fetcher::status`] answers from the disk cache at once, or queues a download and says
//! `Pending`; callers wait for their downloads at most their budget ([`Fetcher::wait`]).
//! Downloads run on at most `max_concurrent_fetches` threads (one build id is fetched once at a
//! time; at most [`MAX_QUEUED`] wait), each with its timeout and a size bound (a
//! `Content-Length` above it is refused before the body is read, a longer body is cut and
//! refused). A body is kept only when its GNU build id is the one requested. Servers are tried
//! in order; when every server answers 404 a negative entry goes to disk. Transport failures are
//! remembered in memory for `retry_after`.

use crate::config::SymbolizerConfig;
use crate::file_id::ObjectId;
use crate::metrics::SymbolizerMetrics;
use crate::sources::disk_cache::DiskCache;
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Downloads waiting for a thread at most; more are not started (counted as failed lookups by
/// the caller, and asked again by a later request).
pub(crate) const MAX_QUEUED: usize = 256;

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
    threads: usize,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
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

impl Drop for Fetcher {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        s.shutdown = true;
        s.queue.clear();
        self.shared.cond.notify_all();
    }
}

impl Fetcher {
    pub(crate) fn new(cfg: &SymbolizerConfig, metrics: Arc<SymbolizerMetrics>) -> Fetcher {
        let d = &cfg.debuginfod;
        Fetcher {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                cond: Condvar::new(),
                urls: d
                    .effective_urls()
                    .into_iter()
                    .map(|u| u.trim_end_matches('/').to_owned())
                    .collect(),
                cache: DiskCache::new(
                    d.effective_cache_dir(),
                    d.cache_max_size_mib.saturating_mul(1 << 20),
                    d.negative_ttl,
                    cfg.max_file_size(),
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
    let client = match client(sh.timeout) {
        Ok(c) => Some(c),
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
                    return;
                }
                if let Some(id) = s.queue.pop_front() {
                    break id;
                }
                s = sh.cond.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        };
        let result = match &client {
            Some(c) => fetch(&sh, c, &id),
            None => Err("no HTTP client".to_owned()),
        };
        let mut s = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(()) => {}
            Err(e) => {
                tracing::debug!(build_id = %hex::encode(&id), error = %e, "symbolize: debuginfod fetch failed");
                s.failed.insert(id.clone(), Instant::now());
            }
        }
        s.in_flight.remove(&id);
        sh.cond.notify_all();
    }
}

fn client(timeout: Duration) -> Result<reqwest::blocking::Client, String> {
    let tls = profilink_tls::ClientTlsConfig::default()
        .rustls_config(&[b"http/1.1"])
        .map_err(|e| e.to_string())?;
    reqwest::blocking::Client::builder()
        .use_preconfigured_tls(tls)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("profilink/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())
}

/// Downloads `id` from the servers in order; `Ok` when stored or when every server answered
/// "not found" (negative entry stored), `Err` for a failure worth retrying later.
fn fetch(sh: &Shared, client: &reqwest::blocking::Client, id: &[u8]) -> Result<(), String> {
    let hex = hex::encode(id);
    let mut errors = Vec::new();
    for url in &sh.urls {
        let url = format!("{url}/buildid/{hex}/debuginfo");
        match fetch_one(sh, client, &url, id) {
            Ok(Some(data)) => {
                SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_ok, 1);
                SymbolizerMetrics::inc(&sh.metrics.debuginfod_bytes, data.len() as u64);
                sh.cache
                    .put(id, &data)
                    .map_err(|e| format!("cannot write the cache: {e}"))?;
                return Ok(());
            }
            Ok(None) => {}
            Err(e) => errors.push(format!("{url}: {e}")),
        }
    }
    if errors.is_empty() {
        SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_not_found, 1);
        let _ = sh.cache.put_negative(id);
        // Remembered on disk; the in-memory entry makes the caller's next look cheap.
        return Err("not found on any server".to_owned());
    }
    SymbolizerMetrics::inc(&sh.metrics.debuginfod_fetches_failed, 1);
    Err(errors.join("; "))
}

/// One server: `Ok(None)` for 404, the checked body for 200.
fn fetch_one(
    sh: &Shared,
    client: &reqwest::blocking::Client,
    url: &str,
    id: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let resp = client.get(url).send().map_err(|e| e.to_string())?;
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    if resp.content_length().is_some_and(|l| l > sh.max_size) {
        return Err(format!("larger than {} bytes", sh.max_size));
    }
    let mut data = Vec::new();
    resp.take(sh.max_size + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() as u64 > sh.max_size {
        return Err(format!("larger than {} bytes", sh.max_size));
    }
    if !ObjectId::Gnu(id.to_vec()).matches(&data) {
        return Err("the answer's build id is not the one asked for".to_owned());
    }
    Ok(Some(data))
}
