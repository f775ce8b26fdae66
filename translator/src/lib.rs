//! Pure translation between OTLP profiles and Sentry profile chunks, both ways. No I/O.
//!
//! * [`otlp_to_sentry`]: OTLP `ProfilesData` -> Sentry Sample Format V2 chunks
//!   ([`otlp_to_sentry::to_chunks`], with its [`ChunkOptions`](otlp_to_sentry::ChunkOptions)).
//! * [`sentry_to_otlp`]: Sentry V2 chunks and V1 profiles -> OTLP
//!   ([`sentry_to_otlp::to_otlp`], with its [`OtlpOptions`](sentry_to_otlp::OtlpOptions)),
//!   with trace links from transactions, and the lossless way back for OTLP that came from
//!   chunks ([`sentry_to_otlp::restore_chunk`]).
//! * The common job in one call, from encoded bytes (format detected): [`otlp_bytes_to_chunks`]
//!   and [`sentry_bytes_to_otlp`] ([`decode_otlp`], [`SentryParts`] for the steps).
//! * [`pprof`]: pprof <-> OTLP ([`pprof_bytes_to_otlp`], [`otlp_to_pprof`]); [`folded`]:
//!   folded stacks -> OTLP ([`folded_to_otlp`]); straight to chunks:
//!   [`pprof_bytes_to_chunks`], [`folded_bytes_to_chunks`].
//! * The link rule, which span a sample `(profiler_id, thread_id, time)` belongs to:
//!   [`LinkSource`], answered by [`TransactionLinks`] (from transactions or [`SpanInterval`]s),
//!   [`ExactLinks`] (replaying known [`SampleLink`]s) or [`NoLinks`].
//! * Span stamping for traces: [`stamp_traces`] writes `thread.id` on spans that profile
//!   samples linked to ([`SpanThreads`]).
//! * [`Dictionary`]: bounds-checked resolution of the OTLP dictionary.
//!
//! Errors: [`TranslateError`] (a profile that cannot be translated), [`InputError`] (bytes
//! that cannot be read), [`PprofError`] and [`FoldedError`] (pprof and folded input).
#![warn(missing_docs)]

mod dictionary;
mod error;
pub mod folded;
mod from_bytes;
mod fx_hash;
mod linking;
pub mod otlp_to_sentry;
pub mod pprof;
mod sample_link;
pub mod sentry_to_otlp;
mod span_stamping;

pub use dictionary::{Attr, AttrValue, Dictionary};
pub use error::{JsonError, Limit, Malformed, TimestampError, TranslateError};
pub use folded::{FoldedError, FoldedOptions, folded_to_otlp};
pub use from_bytes::{
    InputError, SentryParts, decode_otlp, decode_otlp_report, folded_bytes_to_chunks, ndjson_chunk,
    ndjson_lines, otlp_bytes_to_chunks, pprof_bytes_to_chunks, sentry_bytes_to_otlp,
};
pub use linking::{
    ExactLinks, LinkIds, LinkSource, NoLinks, SpanInterval, ThreadLinks, TransactionLinks,
    span_intervals, span_item_interval,
};
pub use pprof::{PprofError, PprofOptions, otlp_to_pprof, pprof_bytes_to_otlp};
pub use sample_link::SampleLink;
pub use span_stamping::{SpanThread, SpanThreads, StampStats, resource_profiler_id, stamp_traces};

#[doc(hidden)]
pub mod testing {
    //! The link rule as a plain linear scan, the oracle the crate's tests and fuzz targets
    //! check [`TransactionLinks`](crate::TransactionLinks) against; and the OTLP -> Sentry
    //! translation holding each session whole (every observation read, then sorted and cut),
    //! the oracle the window-by-window translation is checked against. Not part of the API
    //! (hidden from the docs, may change with any release).
    pub use crate::linking::link_sample;
    pub use crate::otlp_to_sentry::to_chunks_whole;
}
