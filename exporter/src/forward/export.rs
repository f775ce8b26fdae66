//! The forwarder itself: [`Forwarder::start`] (the durable queue and its sender task), the
//! receiver's [`Upstream`] it implements (queue before answering, hand back upstream rate
//! limits) and its shutdown.

use super::config::ForwardConfig;
use super::limits::UpstreamLimits;
use super::metrics::ForwardMetrics;
use super::queue::{self, ForwardQueue, PushError};
use super::send::{self, Outcome};
use crate::retry::Backoff;
use crate::start_error::StartError;
use profilink_consumer::{ForwardError, ForwardFuture, ForwardRequest, Upstream, UpstreamLimit};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// How long SDKs are asked to wait when the queue is full.
pub const FULL_RETRY_AFTER: Duration = Duration::from_secs(5);

struct Inner {
    cfg: ForwardConfig,
    queue: ForwardQueue,
    limits: UpstreamLimits,
    metrics: Arc<ForwardMetrics>,
    client: reqwest::Client,
    wake: Notify,
    closed: AtomicBool,
    log_every: Duration,
    last_log: std::sync::Mutex<Option<Instant>>,
}

impl Inner {
    fn gauges(&self) {
        self.metrics
            .queue_bytes
            .store(self.queue.bytes(), Ordering::Relaxed);
    }

    /// Logs a given-up request, at most once per `log_every`.
    fn log_drop(&self, project: u64, reason: &str, detail: &str) {
        let mut last = self.last_log.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < self.log_every) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            project_id = project,
            reason,
            detail,
            "upstream did not take a forwarded request; dropped (counted in profilink_receiver_upstream_dropped_requests_total)"
        );
    }
}

/// The receiver's upstream: a durable queue and its sender.
pub struct Forwarder {
    inner: Arc<Inner>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("endpoint", &self.inner.cfg.endpoint)
            .field("queued", &self.inner.queue.len())
            .finish()
    }
}

fn client(cfg: &ForwardConfig) -> Result<reqwest::Client, StartError> {
    let rustls = cfg
        .tls
        .rustls_config(profilink_tls::ALPN_HTTP)
        .map_err(|source| StartError::Tls {
            context: "tls: ",
            source,
        })?;
    reqwest::Client::builder()
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout.min(Duration::from_secs(10)))
        .pool_max_idle_per_host(cfg.num_consumers.max(1))
        .tcp_nodelay(true)
        .use_preconfigured_tls(rustls)
        .build()
        .map_err(|e| StartError::client("upstream HTTP client: ", e))
}

impl Forwarder {
    /// Opens the queue (sending on what an earlier run left) and starts the sender.
    pub async fn start(cfg: ForwardConfig) -> Result<Forwarder, StartError> {
        cfg.validate()?;
        let client = client(&cfg)?;
        let qcfg = cfg.sending_queue.clone();
        let (queue, recovered) =
            tokio::task::spawn_blocking(move || ForwardQueue::open(&qcfg)).await??;
        let metrics = Arc::new(ForwardMetrics::default());
        metrics
            .queue_capacity
            .store(queue.capacity(), Ordering::Relaxed);
        metrics.replayed.store(recovered.records, Ordering::Relaxed);
        if recovered.records > 0 || recovered.corrupt > 0 {
            tracing::info!(
                requests = recovered.records,
                corrupt = recovered.corrupt,
                "forward queue: sending on what an earlier run left"
            );
        }
        let inner = Arc::new(Inner {
            cfg,
            queue,
            limits: UpstreamLimits::default(),
            metrics,
            client,
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            log_every: Duration::from_secs(10),
            last_log: std::sync::Mutex::new(None),
        });
        inner.gauges();
        let task = tokio::spawn(run(inner.clone()));
        Ok(Forwarder {
            inner,
            task: std::sync::Mutex::new(Some(task)),
        })
    }

    /// The counters.
    pub fn metrics(&self) -> Arc<ForwardMetrics> {
        self.inner.metrics.clone()
    }

    /// The upstream's base URL.
    pub fn endpoint(&self) -> &str {
        &self.inner.cfg.endpoint
    }

    /// Requests still queued.
    pub fn queued(&self) -> usize {
        self.inner.queue.len()
    }

    /// Stops taking requests and sends what it can until `deadline`; what is left stays in the
    /// queue for the next start (or, for an in-memory queue, is reported lost).
    pub async fn shutdown(&self, deadline: Duration) {
        let until = tokio::time::Instant::now() + deadline;
        while !self.inner.queue.is_empty() && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(left.max(Duration::from_millis(200)), task)
                .await
                .is_err()
            {
                tracing::warn!("forwarder: requests in flight did not finish in time");
            }
        }
        let left = self.inner.queue.len();
        if left > 0 {
            if self.inner.cfg.sending_queue.enabled {
                tracing::info!(requests = left, "forward queue: kept for the next start");
            } else {
                tracing::warn!(
                    requests = left,
                    "forward queue in memory: requests not yet sent are lost"
                );
            }
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

impl Upstream for Forwarder {
    fn forward(&self, request: ForwardRequest) -> ForwardFuture {
        let inner = self.inner.clone();
        Box::pin(async move {
            if inner.closed.load(Ordering::SeqCst) {
                return Err(ForwardError::Failed("the forwarder is shut down".into()));
            }
            let project = request.project_id;
            let record = queue::encode(&request);
            drop(request);
            let q = inner.clone();
            let pushed = tokio::task::spawn_blocking(move || q.queue.push(project, &record))
                .await
                .map_err(|e| ForwardError::Failed(e.to_string()))?;
            match pushed {
                Ok(()) => {
                    ForwardMetrics::inc(&inner.metrics.queued);
                    inner.gauges();
                    inner.wake.notify_one();
                    Ok(())
                }
                Err(PushError::Full { .. }) => {
                    ForwardMetrics::inc(&inner.metrics.refused_full);
                    Err(ForwardError::Full {
                        retry_after: FULL_RETRY_AFTER,
                    })
                }
                Err(e) => Err(ForwardError::Failed(e.to_string())),
            }
        })
    }

    fn check_ready(&self) -> Result<(), ForwardError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(ForwardError::Failed("the forwarder is shut down".into()));
        }
        if !self.inner.queue.has_room(0) {
            ForwardMetrics::inc(&self.inner.metrics.refused_full);
            return Err(ForwardError::Full {
                retry_after: FULL_RETRY_AFTER,
            });
        }
        Ok(())
    }

    fn rate_limits(&self, project_id: u64, public_key: &str) -> Vec<UpstreamLimit> {
        self.inner
            .limits
            .active(project_id, public_key, Instant::now())
    }

    fn forward_profiles(&self) -> bool {
        self.inner.cfg.forward_profiles
    }
}

/// The sender: starts the head request of every idle project, handles the answers.
async fn run(inner: Arc<Inner>) {
    let mut inflight: JoinSet<(u64, u64, Outcome, bool)> = JoinSet::new();
    let mut busy: HashSet<u64> = HashSet::new();
    let mut waiting: HashMap<u64, (Backoff, Instant)> = HashMap::new();
    loop {
        let closed = inner.closed.load(Ordering::SeqCst);
        if closed && inflight.is_empty() {
            break;
        }
        let now = Instant::now();
        if !closed {
            let room = inner.cfg.num_consumers.saturating_sub(inflight.len());
            let heads = inner
                .queue
                .heads(|p| !busy.contains(&p) && waiting.get(&p).is_none_or(|(_, at)| *at <= now));
            for (project, id) in heads.into_iter().take(room) {
                busy.insert(project);
                inflight.spawn(attempt(inner.clone(), project, id));
            }
        }
        let next = waiting
            .values()
            .map(|(_, at)| *at)
            .filter(|at| *at > now)
            .min();
        let sleep = tokio::time::sleep(next.map_or(Duration::from_secs(3600), |at| at - now));
        tokio::select! {
            Some(done) = inflight.join_next(), if !inflight.is_empty() => {
                let Ok((project, id, outcome, limited)) = done else { continue };
                busy.remove(&project);
                if limited {
                    ForwardMetrics::inc(&inner.metrics.rate_limited);
                }
                settle(&inner, &mut waiting, project, id, outcome).await;
            }
            _ = inner.wake.notified() => {}
            _ = sleep => {}
        }
    }
}

async fn settle(
    inner: &Arc<Inner>,
    waiting: &mut HashMap<u64, (Backoff, Instant)>,
    project: u64,
    id: u64,
    outcome: Outcome,
) {
    let ack = |inner: &Arc<Inner>| {
        let q = inner.clone();
        async move {
            let r = tokio::task::spawn_blocking({
                let q = q.clone();
                move || q.queue.ack(project, id)
            })
            .await;
            if let Ok(Err(e)) | Err(e) = r.map_err(std::io::Error::other) {
                tracing::warn!(error = %e, "forward queue: acknowledgement failed");
            }
            q.gauges();
        }
    };
    match outcome {
        Outcome::Sent => {
            ForwardMetrics::inc(&inner.metrics.sent);
            waiting.remove(&project);
            ack(inner).await;
        }
        Outcome::Drop(reason, detail) => {
            inner.metrics.drop_request(reason);
            inner.log_drop(project, reason, &detail);
            waiting.remove(&project);
            ack(inner).await;
        }
        Outcome::Retry(hint, detail) => {
            ForwardMetrics::inc(&inner.metrics.send_failed);
            let now = Instant::now();
            let retry = &inner.cfg.retry_on_failure;
            let (backoff, _) = waiting
                .entry(project)
                .or_insert_with(|| (Backoff::new(retry), now));
            match backoff.next(retry, now, hint) {
                Some(wait) => {
                    ForwardMetrics::inc(&inner.metrics.retries);
                    tracing::debug!(
                        project_id = project,
                        ?wait,
                        detail,
                        "forwarding failed; retrying"
                    );
                    if let Some(e) = waiting.get_mut(&project) {
                        e.1 = now + wait;
                    }
                }
                None => {
                    inner.metrics.drop_request("retries_exhausted");
                    inner.log_drop(project, "retries_exhausted", &detail);
                    waiting.remove(&project);
                    ack(inner).await;
                }
            }
        }
    }
}

async fn attempt(inner: Arc<Inner>, project: u64, id: u64) -> (u64, u64, Outcome, bool) {
    let q = inner.clone();
    let record = tokio::task::spawn_blocking(move || q.queue.read(id)).await;
    let request = match record {
        Ok(Ok(Some(r))) => queue::decode(r),
        Ok(Ok(None)) => return (project, id, Outcome::Sent, false),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(std::io::Error::other(e)),
    };
    let request = match request {
        Ok(r) => r,
        Err(e) => return (project, id, Outcome::Drop("corrupt", e.to_string()), false),
    };
    let (outcome, limited) =
        send::send(&inner.client, &inner.cfg.endpoint, request, &inner.limits).await;
    (project, id, outcome, limited)
}
