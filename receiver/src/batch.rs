//! What the receivers hand to the pipeline: [`Batch`], the [`Consumer`] trait it goes through,
//! and [`ChannelConsumer`], a bounded-channel consumer that never waits.

use profilink_proto::otlp::{ExportTraceServiceRequest, ProfilesData};
use profilink_proto::sentry::{ProfileChunk, SampleProfileV1, SpanItem, Transaction};
use profilink_proto::signal::{ItemCounts, Signal, Traces};
use std::future::Future;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;

/// One accepted request, ready for the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Which receiver took it.
    pub receiver: ReceiverKind,
    /// Over which transport.
    pub transport: Transport,
    /// The data.
    pub payload: Payload,
    /// Number of observations: one per timestamp or value of an OTLP sample, one per sample of a
    /// Sentry chunk or V1 profile; 0 for traces.
    pub samples: u64,
    /// Number of profiles: OTLP `Profile` messages, or Sentry chunks plus V1 profiles; 0 for
    /// traces (see [`trace_span_count`] for their spans).
    pub profiles: u64,
}

/// The receiver that took a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReceiverKind {
    /// The OTLP receiver (profiles and traces).
    Otlp,
    /// The Sentry envelope receiver.
    Sentry,
    /// The Kafka receiver (profilink-kafka).
    Kafka,
}

impl ReceiverKind {
    /// The receiver's component type as in the configuration: `otlp`, `sentry`, `kafka`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverKind::Otlp => "otlp",
            ReceiverKind::Sentry => "sentry",
            ReceiverKind::Kafka => "kafka",
        }
    }
}

impl std::fmt::Display for ReceiverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transport a [`Batch`] arrived over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// gRPC (HTTP/2).
    Grpc,
    /// Plain HTTP (OTLP/HTTP, Sentry's envelope endpoint).
    Http,
    /// Messages of a Kafka topic.
    Kafka,
}

impl Transport {
    /// The transport's name as in metric labels and logs: `grpc`, `http`, `kafka`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::Http => "http",
            Transport::Kafka => "kafka",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The data of a [`Batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// OTLP profiles (the request's valid profiles, with its dictionary).
    Otlp(ProfilesData),
    /// The profiling content of one Sentry envelope.
    Sentry(SentryBatch),
    /// OTLP traces (from [`ReceiverKind::Otlp`]): the request's valid spans, as the export request the
    /// traces exporters send on (same wire layout as `TracesData`). Only offered to consumers
    /// whose [`Consumer::accepts_traces`] is true; never empty.
    Traces(ExportTraceServiceRequest),
}

impl Payload {
    /// The batch of this payload from `receiver` over `transport`, holding `counts` (profiles
    /// and observations; a traces batch counts neither, see [`trace_span_count`]).
    pub fn into_batch(
        self,
        receiver: ReceiverKind,
        transport: Transport,
        counts: ItemCounts,
    ) -> Batch {
        let (profiles, samples) = match self {
            Payload::Traces(_) => (0, 0),
            Payload::Otlp(_) | Payload::Sentry(_) => (counts.items, counts.samples),
        };
        Batch {
            receiver,
            transport,
            payload: self,
            samples,
            profiles,
        }
    }
}

/// The profiling content of one Sentry envelope.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SentryBatch {
    /// Project id from the URL path (`/api/{project_id}/envelope/`).
    pub project_id: u64,
    /// The public key the request authenticated with.
    pub public_key: String,
    /// `profile_chunk` (and `profile_chunk_ui`) items, parsed.
    pub chunks: Vec<ProfileChunk>,
    /// `profile` (V1) items, each with the `transaction` item of the same envelope it belongs
    /// to (matched by event id, or the envelope's only transaction), if any.
    pub v1_profiles: Vec<(SampleProfileV1, Option<Transaction>)>,
    /// `transaction` items not paired with a V1 profile (they carry the trace links of
    /// continuous profiling: `contexts.profile.profiler_id`, `thread.id`).
    pub transactions: Vec<Transaction>,
    /// Spans of `span` items (span streaming: V2 span containers and legacy single spans),
    /// parsed; they carry `sentry.profiler_id` and `thread.id` like transactions do.
    pub spans: Vec<SpanItem>,
    /// Spans of `span` items that could not be read (whole items that are not JSON count as
    /// their `item_count` header, or 1): skipped, as Relay drops them with an outcome.
    pub invalid_spans: u64,
    /// Items of any other type (and chunk items in a format not parsed here, such as
    /// Perfetto), accepted and counted only.
    pub other_items: u64,
}

/// Why a [`Consumer`] did not take a batch.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConsumeError {
    /// No room now; the client should retry after `retry_after`. Receivers answer gRPC
    /// `UNAVAILABLE` with `RetryInfo`, HTTP 503 with `Retry-After` (OTLP and Sentry, as Relay).
    #[error("pipeline is full, retry after {retry_after:?}")]
    Full {
        /// How long the client should wait.
        retry_after: Duration,
    },
    /// The data is refused for good; retrying will not help (gRPC `INVALID_ARGUMENT`, HTTP 400).
    #[error("rejected: {0}")]
    Rejected(String),
    /// The pipeline failed (e.g. the queue could not persist); the client may retry (gRPC
    /// `UNAVAILABLE` without `RetryInfo`, HTTP 503).
    #[error("internal error: {0}")]
    Internal(String),
}

/// The pipeline behind the receivers.
///
/// A receiver answers success only after [`Consumer::consume`] returned `Ok`; a durable queue
/// persists the batch before it returns.
pub trait Consumer: Send + Sync + 'static {
    /// Takes one batch. Should not wait for room: return [`ConsumeError::Full`] instead, so the
    /// receiver can push back on the client.
    fn consume(&self, batch: Batch) -> impl Future<Output = Result<(), ConsumeError>> + Send;

    /// A cheap check run before a request body is read. Returning an error (typically
    /// [`ConsumeError::Full`]) refuses the request without reading or decoding it, so an
    /// overloaded pipeline costs the receivers no memory. The default accepts.
    fn check_ready(&self) -> Result<(), ConsumeError> {
        Ok(())
    }

    /// Whether this consumer takes OTLP traces ([`Payload::Traces`]). When false (the default),
    /// the receivers refuse traces as the Collector does for a receiver no traces pipeline
    /// uses: gRPC `UNIMPLEMENTED` for `TraceService/Export`, HTTP 404 for `/v1/traces`, before
    /// authentication and without reading the body.
    fn accepts_traces(&self) -> bool {
        false
    }
}

/// A [`Consumer`] that puts batches into a bounded tokio channel with `try_send`: a full
/// channel is [`ConsumeError::Full`], a closed one [`ConsumeError::Internal`].
///
/// It takes traces only when built [`with_traces`](ChannelConsumer::with_traces)`(true)`.
#[derive(Debug, Clone)]
pub struct ChannelConsumer {
    sender: mpsc::Sender<Batch>,
    retry_after: Duration,
    traces: bool,
}

/// The default `retry_after` of [`ChannelConsumer`].
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

impl ChannelConsumer {
    /// A consumer over a new channel of `capacity` batches (at least 1), and the channel's
    /// receiving end for the pipeline.
    pub fn new(capacity: usize) -> (Self, mpsc::Receiver<Batch>) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (
            ChannelConsumer {
                sender,
                retry_after: DEFAULT_RETRY_AFTER,
                traces: false,
            },
            receiver,
        )
    }

    /// Sets the delay clients are asked to wait when the channel is full.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Sets whether the consumer takes OTLP traces ([`Consumer::accepts_traces`]); default
    /// false.
    #[must_use]
    pub fn with_traces(mut self, accept: bool) -> Self {
        self.traces = accept;
        self
    }
}

impl Consumer for ChannelConsumer {
    fn consume(&self, batch: Batch) -> impl Future<Output = Result<(), ConsumeError>> + Send {
        let result = match self.sender.try_send(batch) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(ConsumeError::Full {
                retry_after: self.retry_after,
            }),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                Err(ConsumeError::Internal("the pipeline is closed".into()))
            }
        };
        std::future::ready(result)
    }

    fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.sender.is_closed() {
            Err(ConsumeError::Internal("the pipeline is closed".into()))
        } else if self.sender.capacity() == 0 {
            Err(ConsumeError::Full {
                retry_after: self.retry_after,
            })
        } else {
            Ok(())
        }
    }

    fn accepts_traces(&self) -> bool {
        self.traces
    }
}

/// Spans in an OTLP traces request.
pub fn trace_span_count(request: &ExportTraceServiceRequest) -> u64 {
    Traces::counts(request).items
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Batch {
        Batch {
            receiver: ReceiverKind::Otlp,
            transport: Transport::Grpc,
            payload: Payload::Otlp(ProfilesData::default()),
            samples: 0,
            profiles: 0,
        }
    }

    #[tokio::test]
    async fn channel_consumer_pushes_back_when_full() {
        let (c, mut rx) = ChannelConsumer::new(1);
        assert!(c.check_ready().is_ok());
        c.consume(batch()).await.unwrap();
        assert!(matches!(c.check_ready(), Err(ConsumeError::Full { .. })));
        assert_eq!(
            c.consume(batch()).await,
            Err(ConsumeError::Full {
                retry_after: DEFAULT_RETRY_AFTER
            })
        );
        assert!(rx.recv().await.is_some());
        c.consume(batch()).await.unwrap();
        drop(rx);
        assert!(matches!(
            c.consume(batch()).await,
            Err(ConsumeError::Internal(_))
        ));
        assert!(matches!(c.check_ready(), Err(ConsumeError::Internal(_))));
    }
}
