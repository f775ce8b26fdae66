//! OTLP traces as the receivers ingest them ([`IngestSignal`] for [`Traces`]): the span
//! validation that splits a request into its valid and invalid spans.
//!
//! * A span is invalid when its `trace_id` is not 16 bytes, its `span_id` not 8 bytes, or its
//!   `parent_span_id` neither empty nor 8 bytes (the lengths the trace proto prescribes; a
//!   Sentry or OTLP backend cannot index such a span). Invalid spans are removed and counted in
//!   `partial_success.rejected_spans`, with the first findings in `error_message`; scopes and
//!   resources left without spans are dropped. Nothing else is checked: attributes, events and
//!   links go on as they are.
//! * The rest (partial success, the consumer, counting) is [`crate::otlp::ingest`]'s.

use crate::otlp::ingest::{
    BodyDecodeError, IngestSignal, MESSAGE_FINDINGS, Refused, Split, Tally, rejection_message,
};
use crate::profiles_version::VersionError;
use crate::stats::Counters;
use profilink_consumer::{Consumer, Payload};
use profilink_proto::otlp::{ExportTraceServiceRequest, Span};
use profilink_proto::otlp_json::OtlpJsonError;
use profilink_proto::signal::{ItemCounts, Signal, Traces};
use prost::Message;

/// Trace id length in bytes.
pub const TRACE_ID_LEN: usize = 16;
/// Span id length in bytes.
pub const SPAN_ID_LEN: usize = 8;

impl IngestSignal for Traces {
    /// [`Consumer::accepts_traces`].
    fn accepted_by<C: Consumer>(consumer: &C) -> bool {
        consumer.accepts_traces()
    }

    /// Traces are not versioned.
    type Version = ();

    /// Always `Ok`: traces are not versioned, their requests' metadata is not read.
    fn request_version(_headers: &http::HeaderMap) -> Result<(), VersionError> {
        Ok(())
    }

    fn decode_protobuf<B: bytes::Buf>(
        _version: (),
        body: B,
    ) -> Result<ExportTraceServiceRequest, BodyDecodeError> {
        Ok(ExportTraceServiceRequest::decode(body)?)
    }

    fn decode_json(_version: (), body: &[u8]) -> Result<ExportTraceServiceRequest, OtlpJsonError> {
        Traces::decode_json_request(body)
    }

    /// Never refuses a whole request: see `ingest_traces`.
    fn ingest(request: ExportTraceServiceRequest) -> Result<Split, Refused> {
        Ok(ingest_traces(request))
    }

    fn count_accepted(counters: &Counters, tally: &Tally) {
        counters.accept_spans(tally.counts.items);
    }

    fn count_refused(counters: &Counters, tally: &Tally) {
        counters.refuse_spans(tally.counts.items);
    }
}

/// What is wrong with a span's ids, if anything.
pub fn span_problem(span: &Span) -> Option<String> {
    if span.trace_id.len() != TRACE_ID_LEN {
        return Some(format!(
            "trace_id is {} bytes, expected {TRACE_ID_LEN}",
            span.trace_id.len()
        ));
    }
    if span.span_id.len() != SPAN_ID_LEN {
        return Some(format!(
            "span_id is {} bytes, expected {SPAN_ID_LEN}",
            span.span_id.len()
        ));
    }
    if !span.parent_span_id.is_empty() && span.parent_span_id.len() != SPAN_ID_LEN {
        return Some(format!(
            "parent_span_id is {} bytes, expected 0 or {SPAN_ID_LEN}",
            span.parent_span_id.len()
        ));
    }
    None
}

/// Validates `request` and splits off its invalid spans (the payload is
/// [`Payload::Traces`]).
pub fn ingest_traces(mut request: ExportTraceServiceRequest) -> Split {
    let mut valid = ItemCounts::default();
    let mut rejected = ItemCounts::default();
    let mut findings: Vec<String> = Vec::new();
    for (r, rs) in request.resource_spans.iter_mut().enumerate() {
        for (s, ss) in rs.scope_spans.iter_mut().enumerate() {
            let mut i = 0usize;
            ss.spans.retain(|span| {
                let index = i;
                i += 1;
                match span_problem(span) {
                    None => {
                        valid.items += 1;
                        true
                    }
                    Some(problem) => {
                        rejected.items += 1;
                        if findings.len() < MESSAGE_FINDINGS {
                            findings.push(format!(
                                "resource_spans[{r}].scope_spans[{s}].spans[{index}]: {problem}"
                            ));
                        }
                        false
                    }
                }
            });
        }
        rs.scope_spans.retain(|ss| !ss.spans.is_empty());
    }
    request
        .resource_spans
        .retain(|rs| !rs.scope_spans.is_empty());
    let error_message = if rejected.items > 0 {
        rejection_message(rejected.items, "span(s)", &findings, rejected.items, "")
    } else {
        String::new()
    };
    Split {
        payload: Payload::Traces(request),
        valid: Tally {
            counts: valid,
            records: Default::default(),
        },
        rejected: Tally {
            counts: rejected,
            records: Default::default(),
        },
        error_message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{ResourceSpans, ScopeSpans};

    fn span(trace: usize, span: usize, parent: usize) -> Span {
        Span {
            trace_id: vec![1; trace],
            span_id: vec![2; span],
            parent_span_id: vec![3; parent],
            name: format!("{trace}/{span}/{parent}"),
            ..Span::default()
        }
    }

    #[test]
    fn invalid_spans_are_split_off_and_empty_containers_dropped() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    scope_spans: vec![
                        ScopeSpans {
                            spans: vec![span(16, 8, 0), span(15, 8, 0), span(16, 8, 8)],
                            ..ScopeSpans::default()
                        },
                        ScopeSpans {
                            spans: vec![span(16, 9, 0)],
                            ..ScopeSpans::default()
                        },
                    ],
                    ..ResourceSpans::default()
                },
                ResourceSpans {
                    scope_spans: vec![ScopeSpans {
                        spans: vec![span(16, 8, 4), span(0, 0, 0)],
                        ..ScopeSpans::default()
                    }],
                    ..ResourceSpans::default()
                },
            ],
        };
        let out = ingest_traces(request);
        assert_eq!((out.valid.counts.items, out.rejected.counts.items), (2, 4));
        let Payload::Traces(kept) = &out.payload else {
            panic!("not traces: {:?}", out.payload)
        };
        assert_eq!(kept.resource_spans.len(), 1);
        assert_eq!(kept.resource_spans[0].scope_spans.len(), 1);
        let names: Vec<&str> = kept.resource_spans[0].scope_spans[0]
            .spans
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["16/8/0", "16/8/8"]);
        assert_eq!(
            out.error_message,
            "4 invalid span(s) rejected: \
             resource_spans[0].scope_spans[0].spans[1]: trace_id is 15 bytes, expected 16; \
             resource_spans[0].scope_spans[1].spans[0]: span_id is 9 bytes, expected 8; \
             resource_spans[1].scope_spans[0].spans[0]: parent_span_id is 4 bytes, expected 0 or 8 \
             (and 1 more)"
        );
    }

    #[test]
    fn valid_requests_pass_unchanged() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span(16, 8, 0)],
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let out = ingest_traces(request.clone());
        assert_eq!(out.payload, Payload::Traces(request));
        assert_eq!((out.valid.counts.items, out.rejected.counts.items), (1, 0));
        assert!(out.error_message.is_empty());
    }
}
