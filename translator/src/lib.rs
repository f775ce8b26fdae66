//! Pure translation between OTLP profiles and Sentry profile chunks, both ways. No I/O.
//!
//! * [`otlp_to_sentry`]: OTLP `ProfilesData` -> Sentry Sample Format V2 chunks.
//! * [`sentry_to_otlp`]: Sentry V2 chunks and V1 profiles -> OTLP, with trace links from
//!   transactions.
//! * [`dictionary`]: bounds-checked resolution of the OTLP dictionary.
#![warn(missing_docs)]

pub mod dictionary;
pub mod error;
pub mod linking;
pub mod otlp_to_sentry;
pub mod sample_link;
pub mod sentry_to_otlp;
pub mod span_stamping;

pub use error::TranslateError;
pub use sample_link::SampleLink;
