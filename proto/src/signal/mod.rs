//! One OTLP signal as receivers and exporters see it: the export request, response and
//! partial-success types, the gRPC method and HTTP path, how items are counted, and the
//! OTLP/JSON codec entry points.
//!
//! Everything in the OTLP export protocol that does not depend on what is exported (the
//! status codes, the retry rules, partial success, compression, the two encodings) is written
//! once, generic over [`Signal`]; a signal is a marker type with a small impl: [`Profiles`]
//! and [`Traces`]. A third signal (logs, if ever) is one more such file.
//!
//! ```
//! use profilink_proto::signal::{Profiles, Signal, Traces};
//! assert_eq!(Traces::HTTP_PATH, "/v1/traces");
//! let partial = Profiles::partial_success(2, "bad".into());
//! let response = Profiles::response(Some(partial));
//! assert_eq!(Profiles::rejected(&Profiles::into_partial(response).unwrap()), (2, "bad"));
//! ```

mod profiles;
mod traces;

pub use profiles::{Profiles, profile_counts, profile_samples};
pub use traces::Traces;

use crate::otlp_json::OtlpJsonError;
use std::fmt::Debug;

/// What a request holds: items (profiles or spans) and, for profiles, their observations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItemCounts {
    /// Profiles (OTLP `Profile` messages) or spans.
    pub items: u64,
    /// Observations of the profiles (one per timestamp or value of a sample); 0 for traces.
    pub samples: u64,
}

impl ItemCounts {
    /// The sum of two counts.
    pub fn plus(self, other: ItemCounts) -> ItemCounts {
        ItemCounts {
            items: self.items + other.items,
            samples: self.samples + other.samples,
        }
    }
}

/// One OTLP signal (see the module docs).
pub trait Signal: Send + Sync + 'static {
    /// The export request (`Export…ServiceRequest`).
    type Request: prost::Message + Default + Clone + PartialEq + Debug + Send + Sync + 'static;
    /// The export response (`Export…ServiceResponse`).
    type Response: prost::Message + Default + Clone + PartialEq + Debug + Send + 'static;
    /// The response's partial success (`Export…PartialSuccess`).
    type PartialSuccess: Clone + PartialEq + Debug + Default + Send + 'static;

    /// The signal's name in logs and messages: `"profiles"`, `"traces"`.
    const NAME: &'static str;
    /// What the items are called in logs and messages: `"profiles"`, `"spans"`.
    const ITEMS: &'static str;
    /// The gRPC service name, e.g. `opentelemetry.proto.collector.trace.v1.TraceService`.
    const SERVICE_NAME: &'static str;
    /// The gRPC method path: `/{SERVICE_NAME}/Export`.
    const GRPC_PATH: &'static str;
    /// The OTLP/HTTP path, e.g. `/v1/traces`.
    const HTTP_PATH: &'static str;
    /// The request message's name, for error messages.
    const REQUEST_NAME: &'static str;
    /// The development-version metadata a client sends with every request of this signal:
    /// `(key, value)`, e.g. `("otlp-profiles-development-version", "1")` for profiles; `None`
    /// for stable signals (traces are not versioned).
    const VERSION_METADATA: Option<(&'static str, &'static str)> = None;

    /// The items in `request`.
    fn counts(request: &Self::Request) -> ItemCounts;

    /// A partial success rejecting `rejected` items, with `error_message`.
    fn partial_success(rejected: u64, error_message: String) -> Self::PartialSuccess;

    /// The response carrying `partial` (a full success has none).
    fn response(partial: Option<Self::PartialSuccess>) -> Self::Response;

    /// The response's partial success, if any.
    fn into_partial(response: Self::Response) -> Option<Self::PartialSuccess>;

    /// The rejected item count and the message of a partial success.
    fn rejected(partial: &Self::PartialSuccess) -> (i64, &str);

    /// Decodes an OTLP/JSON request.
    fn decode_json_request(bytes: &[u8]) -> Result<Self::Request, OtlpJsonError>;

    /// Encodes a request as OTLP/JSON.
    fn encode_json_request(request: &Self::Request) -> Vec<u8>;

    /// Decodes an OTLP/JSON response.
    fn decode_json_response(bytes: &[u8]) -> Result<Self::Response, OtlpJsonError>;

    /// Encodes a response as OTLP/JSON (a full success is `{}`).
    fn encode_json_response(response: &Self::Response) -> Vec<u8>;
}
