//! The state a Sentry → OTLP pipeline keeps for trace linking: the [`JoinBuffer`], the
//! translated requests its OTLP exporters refused (retried on every tick, and the pipeline
//! refuses new data while any wait), and the counters behind the `profilink_join_*` metrics.
//!
//! **Durable join.** With a join log ([`log::JoinLog`], [`SentryJoin::with_log`]) the buffer
//! is on disk as well as in memory: the chunks and spans of a request are appended and synced
//! before [`SentryJoin::add`] returns (so before the `sentry` receiver answers 200; a write
//! that fails refuses the request instead). A chunk's record is acknowledged once the OTLP
//! exporters accepted the translated request carrying it ([`SentryJoin::ack_chunks`]: a parked
//! request keeps its chunks unacknowledged), a spans record once all its spans left the
//! buffer. After a crash the records still there are held again with their original arrival
//! time (wall clock), so each chunk waits out the rest of its window and finds the same spans.

pub(crate) mod buffer;
pub(crate) mod log;
pub(crate) mod record;
pub(crate) mod writer;

use buffer::{JoinBuffer, JoinConfig, JoinCounts, Release};
use log::JoinLog;
use profilink_consumer::{ConsumeError, DEFAULT_RETRY_AFTER};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::SpanInterval;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use writer::JoinWriter;

/// How often a pipeline's join buffer is checked for due chunks.
pub(crate) const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// Upper bound of translated requests waiting for a refusing OTLP exporter.
pub(crate) const MAX_PARKED: usize = 64;

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
    /// Translated requests dropped from memory because too many were waiting (with a join
    /// log their chunks stay in it and come back at the next start).
    pub dropped_requests: AtomicU64,
    /// Chunks read back from the join log at start.
    pub restored_chunks: AtomicU64,
    /// Spans read back from the join log at start.
    pub restored_spans: AtomicU64,
    /// Join log records skipped at start because they did not read.
    pub log_corrupt: AtomicU64,
    /// Requests refused because the join log could not write them.
    pub log_append_failures: AtomicU64,
    /// Acknowledgements the join log could not write (those records come back at the next
    /// start).
    pub log_ack_failures: AtomicU64,
    /// Bytes of live join log records on disk.
    pub log_bytes: AtomicU64,
}

/// A translated request waiting for a refusing exporter, with the join log records of its
/// chunks (acknowledged once an exporter accepts it).
#[derive(Debug)]
pub struct Parked {
    /// The request.
    pub req: ExportProfilesServiceRequest,
    /// Its chunks' join log records (0: not logged).
    pub records: Vec<u64>,
}

/// One pipeline's join state. See the module docs.
#[derive(Debug)]
pub struct SentryJoin {
    buffer: Mutex<JoinBuffer>,
    parked: Mutex<VecDeque<Parked>>,
    metrics: Arc<JoinMetrics>,
    log: Option<Durable>,
}

/// The join log of a durable join, with its group-commit writer.
#[derive(Debug)]
struct Durable {
    log: Arc<JoinLog>,
    writer: JoinWriter,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Wall-clock time as Unix ns.
fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The `Instant` of a wall-clock arrival time, given the two clocks now: as long ago as the
/// wall clock says (a time in the future counts as now).
fn arrived_at(arrived_unix_ns: u64, now: Instant, wall_now: u64) -> Instant {
    let age = Duration::from_nanos(wall_now.saturating_sub(arrived_unix_ns));
    now.checked_sub(age).unwrap_or(now)
}

/// What a failed join log write answers the client: a full disk asks it to come back later,
/// anything else is the log's failure, with the I/O error (both 503 / `UNAVAILABLE`).
fn refusal(e: std::io::Error) -> ConsumeError {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => ConsumeError::Full {
            retry_after: DEFAULT_RETRY_AFTER,
        },
        _ => ConsumeError::Log {
            log: "join log",
            source: Arc::new(e),
        },
    }
}

impl SentryJoin {
    /// A join with `cfg`, in memory.
    pub fn new(cfg: JoinConfig) -> Self {
        SentryJoin {
            buffer: Mutex::new(JoinBuffer::new(cfg)),
            parked: Mutex::new(VecDeque::new()),
            metrics: Default::default(),
            log: None,
        }
    }

    /// This join with its buffer kept in the join log in `dir` (created if missing, locked):
    /// what an earlier run left there is held again, each chunk from its original arrival.
    /// Blocking I/O.
    pub fn with_log(mut self, dir: &Path) -> std::io::Result<Self> {
        let (log, replay) = JoinLog::open(dir)?;
        let (now, wall) = (Instant::now(), unix_ns(SystemTime::now()));
        let (mut chunks, mut spans) = (0u64, 0u64);
        {
            let mut b = lock(&self.buffer);
            for (id, r) in replay.spans {
                spans += r.spans.len() as u64;
                b.add_logged_spans(r.spans, arrived_at(r.arrived_unix_ns, now, wall), id);
            }
            for (id, r) in replay.chunks {
                chunks += 1;
                let at = arrived_at(r.arrived_unix_ns, now, wall);
                b.add_logged_chunk(r.chunk, r.project_id, at, id);
            }
            self.publish(&b);
        }
        let m = &self.metrics;
        m.restored_chunks.store(chunks, Ordering::Relaxed);
        m.restored_spans.store(spans, Ordering::Relaxed);
        m.log_corrupt.store(replay.corrupt, Ordering::Relaxed);
        m.log_bytes.store(log.live_bytes(), Ordering::Relaxed);
        tracing::info!(
            dir = %dir.display(),
            chunks,
            spans,
            corrupt = replay.corrupt,
            torn_tails = replay.torn_tails,
            "join log opened"
        );
        let log = Arc::new(log);
        let writer = JoinWriter::start(log.clone())?;
        self.log = Some(Durable { log, writer });
        Ok(self)
    }

    /// Whether the buffer is kept in a join log.
    pub fn is_durable(&self) -> bool {
        self.log.is_some()
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

    /// Writes a request's chunks and spans to the join log (with the requests arriving
    /// meanwhile: one sync per log for the group) and gives them their record ids.
    async fn append(
        &self,
        d: &Durable,
        wall: u64,
        project_id: u64,
        chunks: &[ProfileChunk],
        spans: &[SpanInterval],
    ) -> Result<(Vec<u64>, u64), ConsumeError> {
        if chunks.is_empty() && spans.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let encoded: Vec<Vec<u8>> = chunks
            .iter()
            .map(|c| record::encode_chunk(wall, project_id, c))
            .collect();
        let body = (!spans.is_empty()).then(|| record::encode_spans(wall, spans));
        let written = d.writer.append(encoded, body).await;
        self.metrics
            .log_bytes
            .store(d.log.live_bytes(), Ordering::Relaxed);
        written.map_err(|e| {
            self.metrics
                .log_append_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(dir = %d.log.dir().display(), error = %e, "join log: cannot write a request's chunks and spans; refusing it");
            refusal(e)
        })
    }

    /// Adds spans and chunks that arrived now and returns what is due. With a join log they
    /// are on disk first; a write that fails refuses them (nothing is held).
    pub async fn add(
        &self,
        chunks: Vec<ProfileChunk>,
        project_id: u64,
        spans: Vec<SpanInterval>,
    ) -> Result<Vec<Release>, ConsumeError> {
        let (now, wall) = (Instant::now(), unix_ns(SystemTime::now()));
        let (ids, span_record) = match &self.log {
            Some(d) => self.append(d, wall, project_id, &chunks, &spans).await?,
            None => (Vec::new(), 0),
        };
        let (out, done) = {
            let mut b = lock(&self.buffer);
            b.add_logged_spans(spans, now, span_record);
            let ids = ids.into_iter().chain(std::iter::repeat(0));
            for (c, id) in chunks.into_iter().zip(ids) {
                b.add_logged_chunk(c, project_id, now, id);
            }
            let out = b.take_ready(now);
            let done = b.take_done_span_records();
            self.publish(&b);
            (out, done)
        };
        self.ack(done, false).await;
        Ok(out)
    }

    /// What is due now.
    pub async fn due(&self) -> Vec<Release> {
        let now = Instant::now();
        let (out, done) = {
            let mut b = lock(&self.buffer);
            let out = b.take_ready(now);
            let done = b.take_done_span_records();
            self.publish(&b);
            (out, done)
        };
        self.ack(done, false).await;
        out
    }

    /// Every held chunk (shutdown of a join without a log).
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

    /// Acknowledges the join log records of chunks the exporters accepted (or that left with
    /// a refused request). Records 0 and a join without a log: nothing to do.
    pub async fn ack_chunks(&self, records: Vec<u64>) {
        self.ack(records, true).await;
    }

    async fn ack(&self, mut records: Vec<u64>, chunks: bool) {
        records.retain(|r| *r != 0);
        let Some(d) = &self.log else { return };
        if records.is_empty() {
            return;
        }
        let log = d.log.clone();
        let done = tokio::task::spawn_blocking(move || {
            let r = if chunks {
                log.ack_chunks(&records)
            } else {
                log.ack_spans(&records)
            };
            (r, log.live_bytes(), records.len())
        })
        .await;
        let (e, n) = match done {
            Ok((Ok(()), bytes, _)) => {
                self.metrics.log_bytes.store(bytes, Ordering::Relaxed);
                return;
            }
            Ok((Err(e), _, n)) => (e, n),
            Err(e) => (std::io::Error::other(e), 0),
        };
        self.metrics
            .log_ack_failures
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(records = n, error = %e, "join log: cannot acknowledge records; they come back (and may be sent again) at the next start");
    }

    /// Whether the pipeline should refuse new data: requests are waiting for a refusing
    /// exporter, or the buffer is at a bound.
    pub fn is_full(&self) -> bool {
        !lock(&self.parked).is_empty() || lock(&self.buffer).is_full()
    }

    /// Keeps `p` for a later retry. Beyond [`MAX_PARKED`] the oldest is dropped from memory
    /// (counted, logged); with a join log its chunks stay there and come back at the next
    /// start.
    pub fn park(&self, p: Parked) {
        let mut q = lock(&self.parked);
        q.push_back(p);
        while q.len() > MAX_PARKED {
            let Some(old) = q.pop_front() else { break };
            self.metrics
                .dropped_requests
                .fetch_add(1, Ordering::Relaxed);
            if self.log.is_some() {
                tracing::warn!(
                    chunks = old.records.len(),
                    "OTLP exporters keep refusing; a waiting linked request leaves memory, its chunks stay in the join log for the next start"
                );
            } else {
                tracing::warn!(
                    chunks = old.records.len(),
                    "OTLP exporters keep refusing; a waiting linked request is dropped"
                );
            }
        }
        self.metrics
            .parked_requests
            .store(q.len() as u64, Ordering::Relaxed);
    }

    /// Takes the parked requests (oldest first).
    pub fn unpark(&self) -> Vec<Parked> {
        let mut q = lock(&self.parked);
        let out: Vec<_> = q.drain(..).collect();
        self.metrics.parked_requests.store(0, Ordering::Relaxed);
        out
    }
}

#[cfg(test)]
mod tests;
