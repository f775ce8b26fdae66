//! The hand-off from receivers to the pipeline: the [`Consumer`] trait a receiver offers every
//! accepted [`Batch`] to, why a consumer refuses one ([`ConsumeError`]), and
//! [`ChannelConsumer`], a bounded-channel consumer that never waits.

use crate::batch::Batch;
use crate::export::ExportError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;

/// Why a [`Consumer`] did not take a batch.
///
/// Receivers answer three ways: [`Full`](ConsumeError::Full) asks the client to retry later,
/// [`Rejected`](ConsumeError::Rejected) refuses the data for good, and every other variant
/// is a failure of the pipeline the client may retry past (gRPC `UNAVAILABLE` without
/// `RetryInfo`, HTTP 503), answered with the error's text.
#[derive(Debug, Clone, Error)]
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
    /// The pipeline is closed (its receiving end is gone: the service is stopping).
    #[error("the pipeline is closed")]
    Closed,
    /// An exporter of the pipeline is shutting down.
    #[error("exporter {exporter} is shutting down")]
    ExporterClosed {
        /// The exporter's component id.
        exporter: String,
    },
    /// An exporter of the pipeline failed to take the data (its queue could not persist it).
    #[error("exporter {exporter}: {source}")]
    Export {
        /// The exporter's component id.
        exporter: String,
        /// The exporter's error.
        #[source]
        source: ExportError,
    },
    /// A stage's task failed (it panicked or was cancelled), and the batch with it.
    #[error("{stage}: {source}")]
    Task {
        /// The stage (`symbolize`).
        stage: &'static str,
        /// The task's failure.
        #[source]
        source: Arc<tokio::task::JoinError>,
    },
    /// The pipeline's own durable log could not persist the batch (other than a full disk,
    /// which is [`Full`](ConsumeError::Full)).
    #[error("{log}: {source}")]
    Log {
        /// The log (`join log`).
        log: &'static str,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
}

/// Two consume errors are equal when they are the same variant and say the same (their text:
/// the sources, I/O and task errors, have no equality of their own).
impl PartialEq for ConsumeError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Eq for ConsumeError {}

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

    /// Whether this consumer takes OTLP traces ([`Payload::Traces`](crate::Payload::Traces)). When false (the default),
    /// the receivers refuse traces as the Collector does for a receiver no traces pipeline
    /// uses: gRPC `UNIMPLEMENTED` for `TraceService/Export`, HTTP 404 for `/v1/traces`, before
    /// authentication and without reading the body.
    fn accepts_traces(&self) -> bool {
        false
    }
}

/// A [`Consumer`] that puts batches into a bounded tokio channel with `try_send`: a full
/// channel is [`ConsumeError::Full`], a closed one [`ConsumeError::Closed`].
///
/// It takes traces only when built [`with_traces`](ChannelConsumer::with_traces)`(true)`.
#[derive(Debug, Clone)]
pub struct ChannelConsumer {
    sender: mpsc::Sender<Batch>,
    retry_after: Duration,
    traces: bool,
}

/// How long a producer is asked to wait before it retries (1 s) when a stage refuses its data
/// because it is full and knows no better delay: the default of [`ChannelConsumer`], and what
/// the pipelines (their amplification budget, join log and waiting traces) and the exporters
/// (their full queues) answer with [`ConsumeError::Full`] and
/// [`ExportError::Full`](crate::ExportError::Full). Receivers turn it into gRPC `RetryInfo`
/// or HTTP `Retry-After`. Defined once here, so every stage asks for the same wait.
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
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ConsumeError::Closed),
        };
        std::future::ready(result)
    }

    fn check_ready(&self) -> Result<(), ConsumeError> {
        if self.sender.is_closed() {
            Err(ConsumeError::Closed)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Payload, ReceiverKind, Transport};
    use profilink_proto::otlp::ProfilesData;

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
        let closed = c.consume(batch()).await;
        assert!(matches!(closed, Err(ConsumeError::Closed)), "{closed:?}");
        assert_eq!(closed.unwrap_err().to_string(), "the pipeline is closed");
        assert!(matches!(c.check_ready(), Err(ConsumeError::Closed)));
    }
}
