//! What both OTLP transports do with a decoded traces request: validate its spans, split off
//! the invalid ones (partial success), hand the rest to the consumer, and count.
//!
//! * A span is invalid when its `trace_id` is not 16 bytes, its `span_id` not 8 bytes, or its
//!   `parent_span_id` neither empty nor 8 bytes (the lengths the trace proto prescribes; a
//!   Sentry or OTLP backend cannot index such a span). Invalid spans are removed and counted in
//!   `partial_success.rejected_spans`, with the first findings in `error_message`; scopes and
//!   resources left without spans are dropped. Nothing else is checked: attributes, events and
//!   links go on as they are.
//! * A full success has no `partial_success`. When every span is invalid the answer is still a
//!   partial success (all rejected), as the OTLP spec asks: the client must not retry it.
//! * A request with no (valid) spans is answered without calling the consumer.

use crate::batch::{Batch, ConsumeError, Consumer, Payload, ReceiverKind, Transport};
use crate::otlp_ingest::MESSAGE_FINDINGS;
use crate::stats::Counters;
use profilink_proto::otlp::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse, Span,
};

/// Trace id length in bytes.
pub const TRACE_ID_LEN: usize = 16;
/// Span id length in bytes.
pub const SPAN_ID_LEN: usize = 8;

/// The valid part of a traces request and what was rejected.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IngestedTraces {
    /// The valid spans, in their resources and scopes.
    pub request: ExportTraceServiceRequest,
    /// Spans in `request`.
    pub spans: u64,
    /// Spans removed as invalid.
    pub rejected_spans: u64,
    /// The first findings of the removed spans (empty when none were removed).
    pub error_message: String,
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

/// Validates `request` and splits off its invalid spans.
pub fn ingest_traces(mut request: ExportTraceServiceRequest) -> IngestedTraces {
    let mut out = IngestedTraces::default();
    let mut findings: Vec<String> = Vec::new();
    for (r, rs) in request.resource_spans.iter_mut().enumerate() {
        for (s, ss) in rs.scope_spans.iter_mut().enumerate() {
            let mut i = 0usize;
            ss.spans.retain(|span| {
                let index = i;
                i += 1;
                match span_problem(span) {
                    None => {
                        out.spans += 1;
                        true
                    }
                    Some(problem) => {
                        out.rejected_spans += 1;
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
    if out.rejected_spans > 0 {
        let more = out.rejected_spans.saturating_sub(findings.len() as u64);
        let mut message = format!(
            "{} invalid span(s) rejected: {}",
            out.rejected_spans,
            findings.join("; ")
        );
        if more > 0 {
            message.push_str(&format!(" (and {more} more)"));
        }
        out.error_message = message;
    }
    out.request = request;
    out
}

/// Validates `request`, hands its valid spans to `consumer`, counts into `counters`, and
/// returns the response to send (with `partial_success` only when spans were rejected).
///
/// The caller has checked [`Consumer::accepts_traces`].
pub async fn export_traces<C: Consumer>(
    consumer: &C,
    counters: &Counters,
    transport: Transport,
    request: ExportTraceServiceRequest,
) -> Result<ExportTraceServiceResponse, ConsumeError> {
    let IngestedTraces {
        request,
        spans,
        rejected_spans,
        error_message,
    } = ingest_traces(request);
    if spans > 0 {
        let batch = Batch {
            receiver: ReceiverKind::Otlp,
            transport,
            payload: Payload::Traces(request),
            samples: 0,
            profiles: 0,
        };
        if let Err(e) = consumer.consume(batch).await {
            counters.refuse_spans(spans + rejected_spans);
            tracing::debug!(%transport, error = %e, "OTLP traces refused by the pipeline");
            return Err(e);
        }
    }
    counters.accept_spans(spans);
    counters.refuse_spans(rejected_spans);
    let partial_success = if rejected_spans > 0 {
        tracing::debug!(%transport, rejected_spans, message = %error_message, "OTLP spans rejected");
        Some(ExportTracePartialSuccess {
            rejected_spans: i64::try_from(rejected_spans).unwrap_or(i64::MAX),
            error_message,
        })
    } else {
        None
    };
    Ok(ExportTraceServiceResponse { partial_success })
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
        assert_eq!((out.spans, out.rejected_spans), (2, 4));
        assert_eq!(out.request.resource_spans.len(), 1);
        assert_eq!(out.request.resource_spans[0].scope_spans.len(), 1);
        let names: Vec<&str> = out.request.resource_spans[0].scope_spans[0]
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
        assert_eq!(out.request, request);
        assert_eq!((out.spans, out.rejected_spans), (1, 0));
        assert!(out.error_message.is_empty());
    }
}
