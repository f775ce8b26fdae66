//! Pure translation between OTLP profiles and Sentry profile chunks, both ways. No I/O.
//!
//! * [`otlp_to_sentry`]: OTLP `ProfilesData` -> Sentry Sample Format V2 chunks.
//! * [`sentry_to_otlp`]: Sentry V2 chunks and V1 profiles -> OTLP, with trace links from
//!   transactions.
//! * [`dictionary`]: bounds-checked resolution of the OTLP dictionary.
//! * [`from_bytes`]: the common job in one call, from encoded bytes (format detected):
//!   [`otlp_bytes_to_chunks`] and [`sentry_bytes_to_otlp`].
#![warn(missing_docs)]

pub mod dictionary;
pub mod error;
pub mod from_bytes;
pub mod linking;
pub mod otlp_to_sentry;
pub mod sample_link;
pub mod sentry_to_otlp;
pub mod span_stamping;

pub use error::TranslateError;
pub use from_bytes::{
    InputError, SentryParts, decode_otlp, otlp_bytes_to_chunks, sentry_bytes_to_otlp,
};
pub use sample_link::SampleLink;
