//! `traces` pipelines: OTLP traces from the `otlp` receiver, stamped for Sentry's trace linking
//! by a `profile_linking` processor, to traces exporters.
//!
//! * Exporters: a `sentry` exporter in a traces pipeline sends to Sentry's OTLP traces
//!   endpoint with the same DSN (`/api/{project}/integration/otlp/v1/traces`); `otlp` and
//!   `otlp_http` exporters send OTLP traces to the same endpoint as their profiles. Each is its
//!   own instance (a bounded in-memory queue), separate from the profiles instance of the same
//!   id.
//! * Stamping ([`stamp_traces`](profilink_translator::stamp_traces)): every span gets `sentry.profiler_id`
//!   and, when profile samples linked to it were seen, `thread.id`. Spans wait up to the
//!   processor's `wait` (default 10 s) so the profiles of the same moment can arrive first; a
//!   `wait` of 0 stamps at once. Waiting requests are bounded by `max_wait_mib`: beyond it
//!   they are stamped and sent at once. The span → thread memory is fed by every profiles
//!   pipeline that translates OTLP to chunks.
//! * Without a `profile_linking` processor traces are forwarded unchanged.

use crate::each::each;
use crate::export::{TraceExporter, consume_error};
use crate::linking::LinkingConfig;
use profilink_consumer::ExportError;
use profilink_consumer::{ConsumeError, DEFAULT_RETRY_AFTER};
use profilink_proto::otlp::ExportTraceServiceRequest;
use profilink_translator::{SpanThreads, stamp_traces};
use prost::Message;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often waiting traces are checked.
pub(crate) const TICK: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counters of the stamping of one traces pipeline.
#[derive(Debug, Default)]
pub struct StampCounters {
    /// Spans that went through the pipeline.
    pub spans: AtomicU64,
    /// Spans given `sentry.profiler_id` from their linked samples.
    pub profiler_from_samples: AtomicU64,
    /// Spans given `sentry.profiler_id` derived from their resource.
    pub profiler_from_resource: AtomicU64,
    /// Spans given `thread.id`.
    pub thread_ids: AtomicU64,
    /// Bytes of trace data waiting (gauge).
    pub waiting_bytes: AtomicU64,
    /// Requests stamped early because too much was waiting.
    pub early: AtomicU64,
}

struct Waiting {
    due: Instant,
    req: ExportTraceServiceRequest,
    bytes: u64,
}

/// The span → thread memory shared by the profiles pipelines (writers) and the traces
/// pipelines (readers).
pub type SharedSpanThreads = Arc<Mutex<SpanThreads>>;

/// A new shared memory sized by `cfg`.
pub fn span_threads(cfg: &LinkingConfig) -> SharedSpanThreads {
    Arc::new(Mutex::new(SpanThreads::new(
        cfg.max_links,
        cfg.link_retention,
    )))
}

/// One `traces` pipeline. See the module docs.
#[derive(Debug)]
pub struct TracesPipeline {
    name: String,
    exporters: Vec<Arc<TraceExporter>>,
    stamping: Option<(LinkingConfig, SharedSpanThreads)>,
    waiting: Mutex<VecDeque<Waiting>>,
    counters: Arc<StampCounters>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Waiting({} bytes)", self.bytes)
    }
}

impl TracesPipeline {
    /// A traces pipeline to `exporters`, stamping with `linking` over `known` when it has a
    /// `profile_linking` processor.
    pub fn new(
        name: &str,
        exporters: Vec<Arc<TraceExporter>>,
        stamping: Option<(LinkingConfig, SharedSpanThreads)>,
    ) -> Self {
        TracesPipeline {
            name: name.to_string(),
            exporters,
            stamping,
            waiting: Mutex::new(VecDeque::new()),
            counters: Default::default(),
        }
    }

    /// The pipeline id.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stamping counters.
    pub fn counters(&self) -> Arc<StampCounters> {
        self.counters.clone()
    }

    /// Refuses while an exporter's queue is full or too much is waiting.
    pub fn check_ready(&self) -> Result<(), ConsumeError> {
        let waiting_full = self.stamping.as_ref().is_some_and(|(c, _)| {
            self.counters.waiting_bytes.load(Ordering::Relaxed)
                >= c.max_wait_mib.saturating_mul(1 << 20)
        });
        if waiting_full || self.exporters.iter().any(|e| e.is_full()) {
            return Err(ConsumeError::Full {
                retry_after: DEFAULT_RETRY_AFTER,
            });
        }
        Ok(())
    }

    fn stamp(&self, req: &mut ExportTraceServiceRequest) {
        let Some((_, known)) = &self.stamping else {
            return;
        };
        let s = stamp_traces(req, &lock(known));
        let c = &self.counters;
        c.spans.fetch_add(s.spans, Ordering::Relaxed);
        c.profiler_from_samples
            .fetch_add(s.profiler_from_samples, Ordering::Relaxed);
        c.profiler_from_resource
            .fetch_add(s.profiler_from_resource, Ordering::Relaxed);
        c.thread_ids.fetch_add(s.thread_ids, Ordering::Relaxed);
    }

    async fn export(&self, req: ExportTraceServiceRequest) -> Result<(), (String, ExportError)> {
        for (e, r) in each(&self.exporters, req) {
            e.export(r).await.map_err(|err| (e.id().to_string(), err))?;
        }
        Ok(())
    }

    /// Exports `req` and maps a refusal to what the receiver answers the client.
    async fn export_for_client(&self, req: ExportTraceServiceRequest) -> Result<(), ConsumeError> {
        self.export(req)
            .await
            .map_err(|(id, e)| consume_error(&id, e))
    }

    /// Takes one request: stamps and exports it now, or lets it wait (see the module docs).
    pub async fn consume(&self, mut req: ExportTraceServiceRequest) -> Result<(), ConsumeError> {
        self.check_ready()?;
        let Some((cfg, _)) = &self.stamping else {
            return self.export_for_client(req).await;
        };
        let bytes = req.encoded_len() as u64;
        let max = cfg.max_wait_mib.saturating_mul(1 << 20);
        let waiting = self.counters.waiting_bytes.load(Ordering::Relaxed);
        if cfg.wait.is_zero() || waiting + bytes > max {
            if !cfg.wait.is_zero() {
                self.counters.early.fetch_add(1, Ordering::Relaxed);
            }
            self.stamp(&mut req);
            return self.export_for_client(req).await;
        }
        self.counters
            .waiting_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        lock(&self.waiting).push_back(Waiting {
            due: Instant::now() + cfg.wait,
            req,
            bytes,
        });
        Ok(())
    }

    /// Stamps and exports the requests whose wait is over (`all`: every request). A request an
    /// exporter refuses stays first in line for the next tick.
    pub async fn release(&self, all: bool) {
        loop {
            let next = {
                let mut w = lock(&self.waiting);
                match w.front() {
                    Some(f) if all || f.due <= Instant::now() => w.pop_front(),
                    _ => None,
                }
            };
            let Some(mut item) = next else {
                return;
            };
            self.stamp(&mut item.req);
            let bytes = item.bytes;
            match self.export(item.req.clone()).await {
                Ok(()) => {
                    self.counters
                        .waiting_bytes
                        .fetch_sub(bytes, Ordering::Relaxed);
                }
                Err((id, e)) => {
                    if all {
                        tracing::warn!(pipeline = %self.name, exporter = %id, error = %e, "traces dropped at shutdown");
                        self.counters
                            .waiting_bytes
                            .fetch_sub(bytes, Ordering::Relaxed);
                        continue;
                    }
                    tracing::debug!(pipeline = %self.name, exporter = %id, error = %e, "traces exporter refused; retrying");
                    // Stamped already: stamping again keeps what is there.
                    lock(&self.waiting).push_front(item);
                    return;
                }
            }
        }
    }

    /// Whether traces wait (the service runs a ticker for such pipelines).
    pub fn waits(&self) -> bool {
        self.stamping
            .as_ref()
            .is_some_and(|(c, _)| !c.wait.is_zero())
    }
}
