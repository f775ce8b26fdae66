//! [`Fanout`]: the consumer of one receiver, handing every batch to each pipeline that lists
//! the receiver. It succeeds only when every pipeline (and every exporter) accepted; a refusal
//! (queue full) makes the client retry, and exporters that had already accepted will see that
//! data again (at-least-once, as the Collector's fan-out).

use crate::each::each;
use crate::profiles::Pipeline;
use crate::traces::TracesPipeline;
use profilink_consumer::{Batch, ConsumeError, Consumer, Payload};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long a client is asked to wait when too many requests are being processed.
pub(crate) const BUSY_RETRY_AFTER: Duration = Duration::from_millis(200);

/// The consumer of one receiver: hands every batch to each pipeline that lists it.
///
/// It also bounds the requests being translated and exported at once
/// ([`Fanout::max_in_flight`]): beyond that, requests are refused before their body is read
/// ([`ConsumeError::Full`] with a short delay), so an overload costs memory for at most that
/// many decoded requests.
#[derive(Debug)]
pub struct Fanout {
    pipelines: Vec<Arc<Pipeline>>,
    traces: Vec<Arc<TracesPipeline>>,
    in_flight: AtomicUsize,
    max_in_flight: usize,
}

/// The default bound on requests in the pipelines at once: 4 per CPU, at least 8.
pub(crate) fn default_max_in_flight() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (4 * cpus).max(8)
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Fanout {
    /// A fan-out to `pipelines` (at least one), bounded by the default (4 requests in flight per CPU, at least 8).
    pub fn new(pipelines: Vec<Arc<Pipeline>>) -> Self {
        Self::with_traces(pipelines, Vec::new())
    }

    /// A fan-out of profiles to `pipelines` and of traces to `traces` pipelines (a receiver
    /// with no traces pipeline refuses traces, as the Collector's does).
    pub fn with_traces(pipelines: Vec<Arc<Pipeline>>, traces: Vec<Arc<TracesPipeline>>) -> Self {
        Fanout {
            pipelines,
            traces,
            in_flight: AtomicUsize::new(0),
            max_in_flight: default_max_in_flight(),
        }
    }

    /// Requests in the pipelines at once beyond which new ones are refused.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }
}

impl Consumer for Fanout {
    async fn consume(&self, batch: Batch) -> Result<(), ConsumeError> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _guard = InFlight(&self.in_flight);
        if let Payload::Traces(req) = batch.payload {
            for (p, r) in each(&self.traces, req) {
                p.consume(r).await?;
            }
            return Ok(());
        }
        if self.pipelines.is_empty() {
            return Err(ConsumeError::Rejected(
                "no profiles pipeline uses this receiver".into(),
            ));
        }
        for (p, payload) in each(&self.pipelines, batch.payload) {
            p.consume(payload).await?;
        }
        Ok(())
    }

    fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.in_flight.load(Ordering::Acquire) >= self.max_in_flight {
            return Err(ConsumeError::Full {
                retry_after: BUSY_RETRY_AFTER,
            });
        }
        self.pipelines.iter().try_for_each(|p| p.check_ready())
    }

    fn accepts_traces(&self) -> bool {
        !self.traces.is_empty()
    }
}
