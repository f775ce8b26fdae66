//! OTLP/JSON for the OTLP profiles messages (`opentelemetry.proto.profiles.v1development`,
//! `opentelemetry.proto.collector.profiles.v1development`): the OTLP/HTTP
//! `POST /v1development/profiles` body and answer, and `ProfilesData`. The rules are the
//! codec's (see [`crate::otlp_json`]).

mod decode;
mod encode;

use super::OtlpJsonError;
use crate::otlp::{ExportProfilesServiceRequest, ExportProfilesServiceResponse, ProfilesData};

/// Decodes an OTLP/JSON `ExportProfilesServiceRequest` (the OTLP/HTTP request body).
pub fn decode_request(bytes: &[u8]) -> Result<ExportProfilesServiceRequest, OtlpJsonError> {
    let (resource_profiles, dictionary) = decode::profiles_data(bytes)?;
    Ok(ExportProfilesServiceRequest {
        resource_profiles,
        dictionary,
    })
}

/// Encodes an `ExportProfilesServiceRequest` as OTLP/JSON.
pub fn encode_request(req: &ExportProfilesServiceRequest) -> Vec<u8> {
    encode::profiles_data(&req.resource_profiles, req.dictionary.as_ref())
}

/// Decodes an OTLP/JSON `ProfilesData` (same fields as the export request).
pub fn decode_profiles_data(bytes: &[u8]) -> Result<ProfilesData, OtlpJsonError> {
    let (resource_profiles, dictionary) = decode::profiles_data(bytes)?;
    Ok(ProfilesData {
        resource_profiles,
        dictionary,
    })
}

/// Encodes a `ProfilesData` as OTLP/JSON.
pub fn encode_profiles_data(data: &ProfilesData) -> Vec<u8> {
    encode::profiles_data(&data.resource_profiles, data.dictionary.as_ref())
}

/// Decodes an OTLP/JSON `ExportProfilesServiceResponse`.
pub fn decode_response(bytes: &[u8]) -> Result<ExportProfilesServiceResponse, OtlpJsonError> {
    super::decode::response(bytes)
}

/// Encodes an `ExportProfilesServiceResponse` as OTLP/JSON; a full success (no
/// `partial_success`) is `{}`.
pub fn encode_response(resp: &ExportProfilesServiceResponse) -> Vec<u8> {
    super::encode::response(resp)
}
