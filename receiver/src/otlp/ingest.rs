//! What both OTLP transports do with a decoded export request of any signal: validate it,
//! split off the invalid items (partial success), hand the rest to the consumer, and count.
//! What differs between signals (the validation, the payload, the counters) is the
//! [`IngestSignal`] impl: [`profiles`](crate::otlp::profiles) for profiles,
//! [`traces`](crate::otlp::traces) for traces.
//!
//! * A full success has no `partial_success`. When every item is invalid the answer is still a
//!   partial success (all rejected), as the OTLP spec asks: the client must not retry it.
//! * A request with no (valid) items is answered without calling the consumer.
//! * A consumer refusal refuses every item of the request (valid and invalid), and is counted
//!   so: items, observations and sample records.
//!
//! Before any of this, the transports read the request's version metadata
//! ([`IngestSignal::request_version`]) and decode the body with the decoder of that version.

use crate::profiles_version::VersionError;
use crate::sample_records::SampleRecords;
use crate::stats::{Counters, RefusalReason};
use profilink_consumer::{ConsumeError, Consumer, Payload, ReceiverKind, Transport};
use profilink_proto::otlp_json::OtlpJsonError;
use profilink_proto::signal::{ItemCounts, Signal};

/// Why a protobuf body could not be decoded (its message is what the client is told).
pub type BodyDecodeError = Box<dyn std::error::Error + Send + Sync>;

/// How many findings an error message quotes.
pub const MESSAGE_FINDINGS: usize = 3;

/// The request could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// The request is unusable as a whole (e.g. its dictionary is broken).
    Invalid(String),
    /// The consumer refused the valid part.
    Consumer(ConsumeError),
}

/// What part of a request holds, in every unit counted: items and observations
/// ([`ItemCounts`]) and sample records by type (empty for traces).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Items (profiles, spans) and observations.
    pub counts: ItemCounts,
    /// Sample records by `sample_type`.
    pub records: SampleRecords,
}

impl Tally {
    /// The sum of two tallies.
    pub fn plus(&self, other: &Tally) -> Tally {
        let mut records = self.records.clone();
        records.merge(&other.records);
        Tally {
            counts: self.counts.plus(other.counts),
            records,
        }
    }
}

/// The valid part of a request, ready for the consumer, and what was rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The valid items (only offered to the consumer when `valid.counts.items > 0`).
    pub payload: Payload,
    /// What `payload` holds.
    pub valid: Tally,
    /// What was removed as invalid.
    pub rejected: Tally,
    /// The first findings of the removed items (empty when none were removed).
    pub error_message: String,
}

/// A request refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Why, with the first findings.
    pub message: String,
    /// What the request holds.
    pub tally: Tally,
}

/// What the receivers need to know of a signal beyond its wire model.
pub trait IngestSignal: Signal {
    /// Whether `consumer` takes this signal; when not, the receivers answer as a Collector
    /// without a pipeline for it (gRPC "unknown service", HTTP 404) and count nothing.
    fn accepted_by<C: Consumer>(consumer: &C) -> bool;

    /// The schema version a request's decoder must read (`()` for signals that are not
    /// versioned).
    type Version: Copy + Send + Sync + 'static;

    /// The version the request's `headers` (HTTP headers, gRPC metadata) name; refused before
    /// the body is read when it cannot be decoded ([`crate::profiles_version`]).
    fn request_version(headers: &http::HeaderMap) -> Result<Self::Version, VersionError>;

    /// Decodes a protobuf body of `version`.
    fn decode_protobuf<B: bytes::Buf>(
        version: Self::Version,
        body: B,
    ) -> Result<Self::Request, BodyDecodeError>;

    /// Decodes an OTLP/JSON body of `version`.
    fn decode_json(version: Self::Version, body: &[u8]) -> Result<Self::Request, OtlpJsonError>;

    /// Validates `request` and splits off its invalid items.
    fn ingest(request: Self::Request) -> Result<Split, Refused>;

    /// Counts accepted items into `counters`.
    fn count_accepted(counters: &Counters, tally: &Tally);

    /// Counts refused items into `counters` (not the request itself).
    fn count_refused(counters: &Counters, tally: &Tally);
}

/// The [`RefusalReason`] of a consumer refusal, on either transport.
pub(crate) fn consume_reason(error: &ConsumeError) -> RefusalReason {
    match error {
        ConsumeError::Full { .. } => RefusalReason::Full,
        ConsumeError::Rejected(_) => RefusalReason::Rejected,
        _ => RefusalReason::Unavailable,
    }
}

/// Validates `request`, hands its valid part to `consumer`, counts into `counters`, and
/// returns the response to send (with `partial_success` only when items were rejected).
///
/// The caller has checked [`IngestSignal::accepted_by`].
pub async fn export<S: IngestSignal, C: Consumer>(
    consumer: &C,
    counters: &Counters,
    transport: Transport,
    request: S::Request,
) -> Result<S::Response, ExportError> {
    let Split {
        payload,
        valid,
        rejected,
        error_message,
    } = match S::ingest(request) {
        Ok(split) => split,
        Err(Refused { message, tally }) => {
            S::count_refused(counters, &tally);
            tracing::debug!(%transport, signal = S::NAME, %message, "OTLP request refused");
            return Err(ExportError::Invalid(message));
        }
    };
    if valid.counts.items > 0 {
        let batch = payload.into_batch(ReceiverKind::Otlp, transport, valid.counts);
        if let Err(e) = consumer.consume(batch).await {
            S::count_refused(counters, &valid.plus(&rejected));
            tracing::debug!(%transport, signal = S::NAME, error = %e, "OTLP batch refused by the pipeline");
            return Err(ExportError::Consumer(e));
        }
    }
    S::count_accepted(counters, &valid);
    S::count_refused(counters, &rejected);
    let rejected_items = rejected.counts.items;
    let partial_success = (rejected_items > 0).then(|| {
        tracing::debug!(
            %transport,
            signal = S::NAME,
            rejected = rejected_items,
            message = %error_message,
            "OTLP items rejected"
        );
        S::partial_success(rejected_items, error_message)
    });
    Ok(S::response(partial_success))
}

/// The error message of a partial success: `"{n} invalid {noun} rejected: f1; f2; f3"` with
/// `(and {more} more{suffix})` when `total` findings are more than those quoted.
pub fn rejection_message(
    rejected: u64,
    noun: &str,
    quoted: &[String],
    total: u64,
    suffix: &str,
) -> String {
    let mut message = format!("{rejected} invalid {noun} rejected: {}", quoted.join("; "));
    let more = total.saturating_sub(quoted.len() as u64);
    if more > 0 {
        message.push_str(&format!(" (and {more} more{suffix})"));
    }
    message
}
