//! OTLP/JSON for the OTLP traces messages (`opentelemetry.proto.trace.v1`,
//! `opentelemetry.proto.collector.trace.v1`): the OTLP/HTTP `POST /v1/traces` body and answer.
//!
//! The rules are the codec's (see [`crate::otlp_json`]): `traceId`, `spanId`, `parentSpanId`
//! and the link ids are lowercase hex; `startTimeUnixNano`, `endTimeUnixNano`,
//! `timeUnixNano` and `rejectedSpans` are decimal strings; `flags` (fixed32) and
//! `droppedAttributesCount` & co. are numbers; `kind` and `status.code` are integers (value
//! names such as `"SPAN_KIND_SERVER"` are accepted when reading). Every field of the traces
//! protos is covered.

mod decode;
mod encode;

use super::OtlpJsonError;
use crate::otlp::{ExportTraceServiceRequest, ExportTraceServiceResponse, TracesData};

/// Decodes an OTLP/JSON `ExportTraceServiceRequest` (the OTLP/HTTP `/v1/traces` request body).
pub fn decode_traces_request(bytes: &[u8]) -> Result<ExportTraceServiceRequest, OtlpJsonError> {
    Ok(ExportTraceServiceRequest {
        resource_spans: decode::traces_data(bytes)?,
    })
}

/// Encodes an `ExportTraceServiceRequest` as OTLP/JSON.
pub fn encode_traces_request(req: &ExportTraceServiceRequest) -> Vec<u8> {
    encode::traces_data(&req.resource_spans)
}

/// Decodes an OTLP/JSON `TracesData` (same fields as the export request).
pub fn decode_traces_data(bytes: &[u8]) -> Result<TracesData, OtlpJsonError> {
    Ok(TracesData {
        resource_spans: decode::traces_data(bytes)?,
    })
}

/// Encodes a `TracesData` as OTLP/JSON.
pub fn encode_traces_data(data: &TracesData) -> Vec<u8> {
    encode::traces_data(&data.resource_spans)
}

/// Decodes an OTLP/JSON `ExportTraceServiceResponse`.
pub fn decode_traces_response(bytes: &[u8]) -> Result<ExportTraceServiceResponse, OtlpJsonError> {
    super::decode::response(bytes)
}

/// Encodes an `ExportTraceServiceResponse` as OTLP/JSON; a full success (no
/// `partial_success`) is `{}`.
pub fn encode_traces_response(resp: &ExportTraceServiceResponse) -> Vec<u8> {
    super::encode::response(resp)
}

#[cfg(test)]
mod tests;
