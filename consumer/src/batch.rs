//! What a receiver hands the pipeline: one [`Batch`] per accepted request, its [`Payload`]
//! (OTLP profiles, a Sentry envelope's profiling content, or OTLP traces) and where it came from
//! ([`ReceiverKind`], [`Transport`]).

use profilink_proto::otlp::{ExportTraceServiceRequest, ProfilesData};
use profilink_proto::sentry::{ProfileChunk, SampleProfileV1, SpanItem, Transaction};
use profilink_proto::signal::{ItemCounts, Signal, Traces};

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
    /// The pprof receiver (pushed, scraped or read pprof profiles, translated to OTLP).
    Pprof,
    /// The Pyroscope receiver (`/ingest` and the push API, translated to OTLP).
    Pyroscope,
}

impl ReceiverKind {
    /// The receiver's component type as in the configuration: `otlp`, `sentry`, `kafka`,
    /// `pprof`, `pyroscope`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverKind::Otlp => "otlp",
            ReceiverKind::Sentry => "sentry",
            ReceiverKind::Kafka => "kafka",
            ReceiverKind::Pprof => "pprof",
            ReceiverKind::Pyroscope => "pyroscope",
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
    /// Pulled by the receiver: the pprof receiver's scrapes of an HTTP endpoint.
    Scrape,
    /// Read by the receiver from files (the pprof receiver's `file` mode).
    File,
}

impl Transport {
    /// The transport's name as in metric labels and logs: `grpc`, `http`, `kafka`, `scrape`,
    /// `file`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Grpc => "grpc",
            Transport::Http => "http",
            Transport::Kafka => "kafka",
            Transport::Scrape => "scrape",
            Transport::File => "file",
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
    /// whose [`Consumer::accepts_traces`](crate::Consumer::accepts_traces) is true; never empty.
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

/// Spans in an OTLP traces request.
pub fn trace_span_count(request: &ExportTraceServiceRequest) -> u64 {
    Traces::counts(request).items
}
