//! OTLP traces (stable `v1`) as a [`Signal`].

use super::{ItemCounts, Signal};
use crate::otlp::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use crate::otlp_json::{self, OtlpJsonError};

/// The OTLP traces signal: `TraceService/Export`, `POST /v1/traces`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traces;

impl Signal for Traces {
    type Request = ExportTraceServiceRequest;
    type Response = ExportTraceServiceResponse;
    type PartialSuccess = ExportTracePartialSuccess;

    const NAME: &'static str = "traces";
    const ITEMS: &'static str = "spans";
    const SERVICE_NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const GRPC_PATH: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    const HTTP_PATH: &'static str = "/v1/traces";
    const REQUEST_NAME: &'static str = "ExportTraceServiceRequest";

    fn counts(request: &Self::Request) -> ItemCounts {
        let items = request
            .resource_spans
            .iter()
            .flat_map(|rs| &rs.scope_spans)
            .map(|ss| ss.spans.len() as u64)
            .sum();
        ItemCounts { items, samples: 0 }
    }

    fn partial_success(rejected: u64, error_message: String) -> Self::PartialSuccess {
        ExportTracePartialSuccess {
            rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
            error_message,
        }
    }

    fn response(partial_success: Option<Self::PartialSuccess>) -> Self::Response {
        ExportTraceServiceResponse { partial_success }
    }

    fn into_partial(response: Self::Response) -> Option<Self::PartialSuccess> {
        response.partial_success
    }

    fn rejected(partial: &Self::PartialSuccess) -> (i64, &str) {
        (partial.rejected_spans, &partial.error_message)
    }

    fn decode_json_request(bytes: &[u8]) -> Result<Self::Request, OtlpJsonError> {
        otlp_json::decode_traces_request(bytes)
    }

    fn encode_json_request(request: &Self::Request) -> Vec<u8> {
        otlp_json::encode_traces_request(request)
    }

    fn decode_json_response(bytes: &[u8]) -> Result<Self::Response, OtlpJsonError> {
        otlp_json::decode_traces_response(bytes)
    }

    fn encode_json_response(response: &Self::Response) -> Vec<u8> {
        otlp_json::encode_traces_response(response)
    }
}
