//! profilink's processing stage: what happens between a receiver accepting data and the
//! exporters taking it.
//!
//! ```text
//! receiver ──► Fanout ──► profiles::Pipeline ──► ChunkExporter   (sentry, file)
//!   (one per       │        sampling, OTLP ⇄ Sentry   └──► ProfileExporter (otlp)
//!    receiver id)  │        translation, join buffer
//!                  └────► traces::TracesPipeline ──► TraceExporter
//!                           span stamping
//! ```
//!
//! * [`fanout`]: the [`Consumer`](profilink_receiver::Consumer) of one receiver, handing each
//!   batch to every pipeline that lists the receiver, bounding the requests in flight.
//! * [`profiles`]: a `profiles` pipeline: sampling, translation both ways, the trace-linking
//!   [`join`] buffer of Sentry → OTLP pipelines, and the [`store`] writer of the
//!   `profile_store` extension.
//! * [`traces`]: a `traces` pipeline: span stamping for Sentry's trace linking.
//! * [`sampling`], [`linking`], [`spec`]: the processors' configs (`profile_sampling`,
//!   `profile_linking`, `batch`).
//! * [`export`]: the one [`Export`] trait every exporter is driven through; [`adapters`]
//!   implements it for the exporter crate's exporters.
//! * [`counters`]: the pipelines' shared counters; [`translation`]: what they translate with.
//!
//! The `profilink` binary builds these from its configuration (see its `service` module).

pub mod adapters;
pub mod counters;
pub mod export;
pub mod fanout;
pub mod join;
pub mod linking;
pub mod profiles;
pub mod sampling;
pub mod spec;
pub mod store;
pub mod traces;
pub mod translation;

pub use adapters::Backpressure;
pub use counters::ServiceCounters;
pub use export::{ChunkExporter, Export, Exporter, ProfileExporter, TraceExporter};
pub use fanout::Fanout;
pub use join::JoinMetrics;
pub use linking::LinkingConfig;
pub use profiles::Pipeline;
pub use sampling::{Sampler, SamplingConfig};
pub use spec::{BatchConfig, ProcessorSpec};
pub use store::{StoreCounters, StoreWriter};
pub use traces::{SharedSpanThreads, StampCounters, TracesPipeline, span_threads};
pub use translation::otlp_to_sentry_options;
