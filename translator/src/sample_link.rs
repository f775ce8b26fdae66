//! A trace link attached to one observation, carried between the two directions.
//!
//! A Sentry chunk cannot carry trace links (Relay drops unknown keys), so OTLP -> Sentry
//! translation returns the links beside the chunks, and Sentry -> OTLP translation accepts them
//! (or derives them from transactions) to rebuild OTLP `Link`s.

/// The span an observation `(profiler_id, thread_id, timestamp)` belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleLink {
    /// Sentry profiler id (32 lowercase hex).
    pub profiler_id: String,
    /// Sentry thread id (decimal string).
    pub thread_id: String,
    /// Observation time, Unix nanoseconds.
    pub timestamp_ns: u64,
    /// Trace id.
    pub trace_id: [u8; 16],
    /// Span id.
    pub span_id: [u8; 8],
}
