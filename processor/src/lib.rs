//! profilink's processing stage: what happens between a receiver accepting data and the
//! exporters taking it.
//!
//! ```text
//! receiver ──► Fanout ──► Pipeline (profiles) ──► ChunkExporter   (sentry, file)
//!   (one per       │        sampling, OTLP ⇄ Sentry   └──► ProfileExporter (otlp)
//!    receiver id)  │        translation, join buffer
//!                  └────► TracesPipeline ──► TraceExporter
//!                           span stamping
//! ```
//!
//! * [`Fanout`]: the [`Consumer`](profilink_consumer::Consumer) of one receiver, handing each
//!   batch to every pipeline that lists the receiver, bounding the requests in flight.
//! * [`Pipeline`]: a `profiles` pipeline: its processor chain (sampling,
//!   symbolization) and one route per kind of data and exporter (OTLP → chunks, OTLP
//!   forwarded, Sentry chunks passed through, Sentry → OTLP with the trace-linking join buffer
//!   ([`JoinConfig`], [`JoinMetrics`])), and the [`StoreWriter`] of the `profile_store`
//!   extension.
//! * [`start_timers`]: the pipelines' periodic work (join releases, waiting traces).
//! * [`TracesPipeline`]: a `traces` pipeline: span stamping for Sentry's trace linking.
//! * [`ProcessorSpec`]: the processors' configs (`batch`: [`BatchConfig`],
//!   `profile_sampling`: [`SamplingConfig`], `profile_linking`: [`LinkingConfig`],
//!   `symbolize`: the symbolizer's config).
//! * [`Exporter`]: one running exporter by its component id, driven through the contract's
//!   `Export` trait (`profilink-consumer`), which every exporter implements itself.
//! * [`ServiceCounters`]: the counters every profiles pipeline shares.
//! * [`Budget`]: the amplification budget bounding what OTLP -> chunks translation may hold.
//!
//! The `profilink` binary builds these from its configuration (see its `service` module).

#![warn(missing_docs)]

mod budget;
mod counters;
mod each;
mod export;
mod fanout;
mod join;
mod linking;
mod profiles;
mod sampling;
mod spec;
mod store;
mod symbolize;
pub mod telemetry;
mod timers;
mod traces;
mod translation;

pub use budget::Budget;
pub use counters::ServiceCounters;
pub use export::{ChunkExporter, Exporter, ProfileExporter, TraceExporter};
pub use fanout::Fanout;
pub use join::JoinMetrics;
pub use join::buffer::JoinConfig;
pub use linking::LinkingConfig;
pub use profiles::Pipeline;
pub use sampling::SamplingConfig;
pub use spec::{BatchConfig, ProcessorSpec};
pub use store::{StoreCounters, StoreWriter};
pub use timers::start_timers;
pub use traces::{SharedSpanThreads, StampCounters, TracesPipeline, span_threads};
pub use translation::otlp_to_sentry_options;
