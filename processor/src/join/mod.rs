//! The state a Sentry → OTLP pipeline keeps for trace linking: the [`JoinBuffer`], the
//! translated requests its OTLP exporters refused (retried on every tick, and the pipeline
//! refuses new data while any wait), and the counters behind the `profilink_join_*` metrics.

pub(crate) mod buffer;

use buffer::{JoinBuffer, JoinConfig, JoinCounts, Release};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::SpanInterval;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// How often a pipeline's join buffer is checked for due chunks.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// Upper bound of translated requests waiting for a refusing OTLP exporter.
pub const MAX_PARKED: usize = 64;

/// Counters of one pipeline's join buffer, plus its current size.
#[derive(Debug, Default)]
pub struct JoinMetrics {
    /// Chunks released because their session's spans showed that none overlapping them is
    /// still to come (see [`JoinConfig`]).
    pub released_covered: AtomicU64,
    /// Chunks released when their window ran out.
    pub released_window: AtomicU64,
    /// Chunks released early to stay within the bounds.
    pub released_overflow: AtomicU64,
    /// Chunks released at shutdown.
    pub released_shutdown: AtomicU64,
    /// Chunks released with no span of their profiler overlapping them.
    pub unlinked: AtomicU64,
    /// Spans forgotten early to stay within `max_spans`.
    pub spans_evicted: AtomicU64,
    /// Estimated bytes of the held chunks.
    pub held_bytes: AtomicU64,
    /// Held chunks.
    pub held_chunks: AtomicU64,
    /// Kept spans.
    pub kept_spans: AtomicU64,
    /// Translated requests waiting for a refusing exporter.
    pub parked_requests: AtomicU64,
    /// Translated requests dropped because too many were waiting.
    pub dropped_requests: AtomicU64,
}

/// One pipeline's join state. See the module docs.
#[derive(Debug)]
pub struct SentryJoin {
    buffer: Mutex<JoinBuffer>,
    parked: Mutex<VecDeque<ExportProfilesServiceRequest>>,
    metrics: std::sync::Arc<JoinMetrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SentryJoin {
    /// A join with `cfg`.
    pub fn new(cfg: JoinConfig) -> Self {
        SentryJoin {
            buffer: Mutex::new(JoinBuffer::new(cfg)),
            parked: Mutex::new(VecDeque::new()),
            metrics: Default::default(),
        }
    }

    /// The counters.
    pub fn metrics(&self) -> std::sync::Arc<JoinMetrics> {
        self.metrics.clone()
    }

    fn publish(&self, b: &JoinBuffer) {
        let m = &self.metrics;
        let JoinCounts {
            released_covered,
            released_window,
            released_overflow,
            unlinked,
            spans_evicted,
        } = b.counts();
        m.released_covered
            .store(released_covered, Ordering::Relaxed);
        m.released_window.store(released_window, Ordering::Relaxed);
        m.released_overflow
            .store(released_overflow, Ordering::Relaxed);
        m.unlinked.store(unlinked, Ordering::Relaxed);
        m.spans_evicted.store(spans_evicted, Ordering::Relaxed);
        m.held_bytes.store(b.held_bytes(), Ordering::Relaxed);
        m.held_chunks
            .store(b.held_chunks() as u64, Ordering::Relaxed);
        m.kept_spans.store(b.kept_spans() as u64, Ordering::Relaxed);
    }

    /// Adds spans and chunks that arrived now and returns what is due.
    pub fn add(
        &self,
        chunks: Vec<ProfileChunk>,
        project_id: u64,
        spans: Vec<SpanInterval>,
    ) -> Vec<Release> {
        let now = Instant::now();
        let mut b = lock(&self.buffer);
        b.add_spans(spans, now);
        for c in chunks {
            b.add_chunk(c, project_id, now);
        }
        let out = b.take_ready(now);
        self.publish(&b);
        out
    }

    /// What is due now.
    pub fn due(&self) -> Vec<Release> {
        let now = Instant::now();
        let mut b = lock(&self.buffer);
        let out = b.take_ready(now);
        self.publish(&b);
        out
    }

    /// Every held chunk (shutdown).
    pub fn all(&self) -> Vec<Release> {
        let now = Instant::now();
        let mut b = lock(&self.buffer);
        let out = b.take_all(now);
        let n: usize = out.iter().map(|r| r.chunks.len()).sum();
        self.metrics
            .released_shutdown
            .fetch_add(n as u64, Ordering::Relaxed);
        self.publish(&b);
        out
    }

    /// Whether the pipeline should refuse new data: requests are waiting for a refusing
    /// exporter, or the buffer is at a bound.
    pub fn is_full(&self) -> bool {
        !lock(&self.parked).is_empty() || lock(&self.buffer).is_full()
    }

    /// Keeps `req` for a later retry (dropping the oldest beyond [`MAX_PARKED`]).
    pub fn park(&self, req: ExportProfilesServiceRequest) {
        let mut p = lock(&self.parked);
        p.push_back(req);
        while p.len() > MAX_PARKED {
            p.pop_front();
            self.metrics
                .dropped_requests
                .fetch_add(1, Ordering::Relaxed);
        }
        self.metrics
            .parked_requests
            .store(p.len() as u64, Ordering::Relaxed);
    }

    /// Takes the parked requests (oldest first).
    pub fn unpark(&self) -> Vec<ExportProfilesServiceRequest> {
        let mut p = lock(&self.parked);
        let out: Vec<_> = p.drain(..).collect();
        self.metrics.parked_requests.store(0, Ordering::Relaxed);
        out
    }
}
