//! Wire models for profilink.
//!
//! * [`otlp`]: the OTLP profiles (proto 1.10) and collector-service types, re-exported from
//!   `opentelemetry-proto`.
//! * [`sentry`]: Sentry's Sample Format V2 profile chunk, the deprecated V1 profile, transactions
//!   (for trace linking) and envelopes.
//! * [`otlp_json`]: an OTLP/JSON codec for the profiles messages that follows the OTLP/JSON rules
//!   (hex ids, 64-bit integers as strings, omitted defaults, unknown fields ignored).
//! * [`validate`]: conformance checks for OTLP profiles and Sentry chunks/envelopes.
//! * [`wire`]: lenient binary decoding of OTLP profiles requests (invalid UTF-8 repaired, the
//!   proto 1.9 `Sample` layout detected).
//! * [`input`]: detection of the input format of a byte buffer.
#![warn(missing_docs)]

pub mod input;
pub mod otlp;
pub mod otlp_json;
pub mod sentry;
pub mod signal;
pub mod validate;
pub mod wire;
