//! The request exporter: one queue consumer and retry loop behind every exporter that sends
//! whole requests from a [`SendQueue`] (the OTLP profiles exporter, the traces exporters, and
//! profilink-kafka's exporter), after the OpenTelemetry Collector's `exporterhelper`.
//!
//! An exporter supplies only its [`RequestSender`]: how to send one request once (and, where
//! it has them, a gate before each attempt such as an active rate limit, and the wait it
//! suggests to producers when the queue is full). [`RequestExporter`] owns the rest:
//!
//! * the queue ([`queue_sender`], the Collector's `queue_sender`): `export` pushes requests
//!   with their item counts (accepted or refused by a full queue, counted either way);
//!   `num_consumers` tasks claim the oldest request and remove it once it is delivered or
//!   given up; a record that does not read back is counted, logged and removed;
//! * the retries ([`retry_sender`], the Collector's `retry_sender`): a failed attempt is
//!   classified by the OTLP rules ([`retry_rules::after_failure`]) and retried after the
//!   `retry_on_failure` backoff (or the server's longer delay) until the retry budget runs out;
//!   a rate-limited attempt waits at the sender's gate and costs no backoff;
//! * the counters ([`RequestMetrics`], the Collector's `obsreport`): accepted and refused
//!   requests and items, delivered, failed attempts, retries, partial successes, drops by
//!   reason, attempt durations by outcome, and the queue gauges;
//! * the life cycle: `start` opens the queue (replaying what a durable one kept) and starts the
//!   consumers; `shutdown(deadline)` refuses new requests, lets the consumers send what is
//!   queued until the deadline, then stops them. What is left stays in a durable queue for the
//!   next start; an in-memory queue's rest is dropped and counted (under
//!   [`RequestSender::shutdown_reason`]). Dropping the exporter stops it like a crash.
//!
//! Every outcome of a request is counted before its last await, and the request is removed
//! from the queue in the same poll (for an in-memory queue), so a shutdown that aborts a
//! consumer never counts a request twice.

mod metrics;
mod queue_sender;
pub mod retry_rules;
mod retry_sender;

pub use metrics::{QueueLevels, RequestMetrics};
pub use queue_sender::{RequestExporter, RequestSettings};
pub use retry_rules::AttemptError;

use crate::durations::AttemptOutcome;
use crate::metrics::DiscardReason;
use crate::send_queue::SendQueue;
use crate::send_queue::record::Queued;
use profilink_consumer::DEFAULT_RETRY_AFTER;
use std::future::Future;
use std::time::Duration;

/// How one attempt to send a request ended, as its [`RequestSender`] classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Delivered; the items the destination reported as rejected in a partial success, when
    /// it reported one (the sender has logged it). Never retried.
    Delivered(Option<u64>),
    /// A rate limit that covers the request is active now: the request waits at
    /// [`RequestSender::ready`] and is sent again, without spending backoff.
    RateLimited,
    /// Failed, retryable or for good.
    Failed(AttemptError),
}

/// What an exporter supplies to a [`RequestExporter`]: how to send one request once.
pub trait RequestSender: Send + Sync + 'static {
    /// What the sending queue holds.
    type Request: Queued;
    /// The exporter's counters.
    type Metrics: RequestMetrics;
    /// The exporter's name in log lines (`OTLP`, `traces`, `Kafka`).
    const NAME: &'static str;

    /// Where requests go (no credentials), for log lines.
    fn destination(&self) -> &str;

    /// Sends `request` once.
    fn attempt(&self, request: &Self::Request) -> impl Future<Output = SendOutcome> + Send;

    /// Waits until an attempt may start (an active rate limit has passed). A sender that can
    /// answer [`SendOutcome::RateLimited`] must wait here; the default starts at once.
    fn ready(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// The outcome under which a failed attempt's duration is recorded; by default a
    /// retryable network failure is a `network_error`, anything else a `send_error`.
    fn failure_outcome(&self, error: &AttemptError) -> AttemptOutcome {
        AttemptOutcome::of_error(error)
    }

    /// The wait suggested to producers whose request a full queue refused (default
    /// [`DEFAULT_RETRY_AFTER`], 1 s).
    fn full_retry_after(&self) -> Duration {
        DEFAULT_RETRY_AFTER
    }

    /// Why an in-memory queue's requests still unsent at shutdown are dropped (default
    /// `network_error`).
    fn shutdown_reason(&self) -> DiscardReason {
        DiscardReason::NetworkError
    }
}

/// The sending queue of sender `S`.
type Queue<S> = SendQueue<<S as RequestSender>::Request>;
