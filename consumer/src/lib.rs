//! The contract between profilink's stages, below all of them (as the OpenTelemetry
//! Collector's `consumer` package): receivers, the processor and exporters depend on this crate
//! and not on each other.
//!
//! ```text
//! receiver ──Batch──► Consumer (the pipeline) ──T──► Export<T> (an exporter)
//!    │                                                   ▲
//!    └─ForwardRequest─► Upstream (the Sentry forwarder)   └─ ChunkObserver (profile store)
//! ```
//!
//! * [`Consumer`]: what a receiver offers each accepted [`Batch`] to; [`ConsumeError`] is what
//!   its client is answered when the consumer refuses ([`ChannelConsumer`]: a bounded channel).
//! * [`Export`]: what the pipeline hands data to, one trait for every exporter, generic over
//!   the data it takes ([`ExportChunk`]s, OTLP profiles or traces requests); [`ExportError`]
//!   is why it refused.
//! * [`Upstream`]: where the Sentry receiver passes SDK requests on ([`ForwardRequest`]) and
//!   learns the upstream's rate limits ([`UpstreamLimit`]).
//! * [`ChunkObserver`]: sees every merged chunk an exporter queued (the profile store).
//! * [`body`]: bodies read from the network, bounded while they stream ([`body::BodyBound`]):
//!   every client's reads share it.
//! * [`telemetry`]: how a stage's counters show at `/metrics` ([`telemetry::Render`]), with
//!   no exposition format named.

#![warn(missing_docs)]

mod batch;
pub mod body;
mod consume;
mod export;
mod observer;
pub mod telemetry;
mod upstream;

pub use batch::{Batch, Payload, ReceiverKind, SentryBatch, Transport, trace_span_count};
pub use consume::{ChannelConsumer, ConsumeError, Consumer, DEFAULT_RETRY_AFTER};
pub use export::{BoxFuture, Export, ExportChunk, ExportError};
pub use observer::{ChunkObserver, SharedObserver};
pub use upstream::{ForwardError, ForwardFuture, ForwardRequest, Upstream, UpstreamLimit};
