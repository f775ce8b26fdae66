//! pprof (`google/pprof` profile.proto) <-> OTLP profiles.
//!
//! * [`pprof_bytes_to_otlp`]: a pprof profile (raw or gzipped) -> OTLP `ProfilesData`,
//!   following the Collector contrib's `pkg/translator/pprof` mapping: one OTLP `Profile` per
//!   pprof sample type, all in one `ScopeProfiles`, each with the same time, duration, period
//!   and samples in the same order (values-only samples); labels become sample attributes
//!   (numeric labels keep their unit); mappings, locations with their inline lines, and
//!   functions go to the dictionary; the profile's comments, `drop_frames`, `keep_frames` and
//!   `doc_url` become `pprof.profile.*` attributes, the default sample type the scope
//!   attribute `pprof.scope.default_sample_type`. See docs/pprof.md for the full table.
//! * [`otlp_to_pprof`]: OTLP (e.g. from Sentry chunks) -> one pprof profile whose samples
//!   aggregate the CPU/wall stacks into `samples/count`, plus a time type (count x period, in
//!   nanoseconds) when the period is known; [`PprofOutput::to_gzip`] writes what `go tool
//!   pprof` reads.
//!
//! Bounds: the inflated size of gzipped input is capped by
//! [`PprofOptions::max_inflated_bytes`]; every id and string index is checked; what one
//! profile expands to (samples x sample types, plus their attributes) is capped by
//! [`PprofOptions::max_expanded_items`]. Errors are [`PprofError`].

mod decode;
mod from_otlp;
mod message;
mod to_otlp;

pub use decode::{decode_pprof, is_gzip};
pub use from_otlp::{PprofOutput, ToPprofOptions, otlp_to_pprof, request_to_pprof};
pub use message::{
    PprofFunction, PprofLabel, PprofLine, PprofLocation, PprofMapping, PprofProfile, PprofSample,
    PprofValueType,
};
pub use to_otlp::pprof_to_otlp;

use profilink_proto::otlp::ProfilesData;
use thiserror::Error;

/// The `original_payload_format` name of pprof, as the Collector writes it.
pub const PPROF_FORMAT: &str = "pprof";

/// Limits of the pprof -> OTLP translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PprofOptions {
    /// Largest size gzipped input may inflate to (bytes); raw input larger than this is
    /// refused too. Receivers set it from their amplification budget.
    pub max_inflated_bytes: u64,
    /// Largest number of OTLP items one profile may expand to: samples x sample types, plus
    /// the attribute references they carry.
    pub max_expanded_items: u64,
}

impl Default for PprofOptions {
    /// 64 MiB inflated, 16 Mi expanded items.
    fn default() -> Self {
        PprofOptions {
            max_inflated_bytes: 64 << 20,
            max_expanded_items: 16 << 20,
        }
    }
}

/// A pprof profile that could not be read or translated.
#[derive(Debug, Error)]
pub enum PprofError {
    /// The gzip stream is corrupt.
    #[error("invalid gzip")]
    Gzip(#[source] std::io::Error),
    /// The (inflated) profile is larger than [`PprofOptions::max_inflated_bytes`].
    #[error("the pprof profile is larger than {limit} bytes")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// Not a pprof protobuf message.
    #[error("not a pprof profile (perftools.profiles.Profile)")]
    Decode(#[source] prost::DecodeError),
    /// A string index outside the string table.
    #[error("{what}: string index {index} is out of range (the string table has {len})")]
    StringIndex {
        /// Which field holds it.
        what: &'static str,
        /// The index.
        index: i64,
        /// The table's length.
        len: usize,
    },
    /// The string table does not start with "".
    #[error("the string table does not start with the empty string")]
    StringTable,
    /// A mapping, location or function id that is not defined (or defined twice).
    #[error("{what} id {id} is {problem}")]
    Id {
        /// `mapping`, `location` or `function`.
        what: &'static str,
        /// The id.
        id: u64,
        /// `not defined`, `defined twice`, `zero`.
        problem: &'static str,
    },
    /// A sample without one value per sample type.
    #[error("sample {sample} has {got} values for {expected} sample types")]
    ValueCount {
        /// The sample's index.
        sample: usize,
        /// Its number of values.
        got: usize,
        /// The number of sample types.
        expected: usize,
    },
    /// OTLP input with an index outside its table (OTLP -> pprof).
    #[error("invalid OTLP")]
    Otlp(#[source] crate::TranslateError),
    /// The profile would expand beyond [`PprofOptions::max_expanded_items`].
    #[error("the profile would expand to {items} OTLP items, more than the limit of {limit}")]
    Expansion {
        /// What it would expand to.
        items: u64,
        /// The limit.
        limit: u64,
    },
}

/// Translates a pprof profile, raw or gzipped, into OTLP ([`decode_pprof`], then
/// [`pprof_to_otlp`]).
///
/// ```
/// use profilink_translator::pprof::{PprofOptions, PprofProfile, PprofValueType};
/// use prost::Message;
/// let profile = PprofProfile {
///     sample_type: vec![PprofValueType { r#type: 1, unit: 2 }],
///     string_table: vec!["".into(), "samples".into(), "count".into()],
///     ..Default::default()
/// };
/// let data = profilink_translator::pprof_bytes_to_otlp(&profile.encode_to_vec(), &PprofOptions::default()).unwrap();
/// assert_eq!(data.resource_profiles[0].scope_profiles[0].profiles.len(), 1);
/// ```
pub fn pprof_bytes_to_otlp(bytes: &[u8], opts: &PprofOptions) -> Result<ProfilesData, PprofError> {
    let profile = decode_pprof(bytes, opts)?;
    pprof_to_otlp(&profile, opts)
}
