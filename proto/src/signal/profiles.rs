//! OTLP profiles (`v1development`) as a [`Signal`].

use super::{ItemCounts, Signal};
use crate::otlp::{
    EXPORT_PATH, ExportProfilesPartialSuccess, ExportProfilesServiceRequest,
    ExportProfilesServiceResponse, HTTP_PATH, PROFILES_VERSION_HEADER, Profile, ResourceProfiles,
};
use crate::otlp_json::{self, OtlpJsonError};

/// The OTLP profiles signal: `ProfilesService/Export`, `POST /v1development/profiles`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Profiles;

/// Observations in one profile: per sample, its timestamps or values, whichever are more.
pub fn profile_samples(profile: &Profile) -> u64 {
    profile
        .samples
        .iter()
        .map(|s| s.timestamps_unix_nano.len().max(s.values.len()) as u64)
        .sum()
}

/// Profiles and observations in `resource_profiles` (of a request or a `ProfilesData`).
pub fn profile_counts(resource_profiles: &[ResourceProfiles]) -> ItemCounts {
    let mut counts = ItemCounts::default();
    for p in resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
    {
        counts.items += 1;
        counts.samples += profile_samples(p);
    }
    counts
}

impl Signal for Profiles {
    type Request = ExportProfilesServiceRequest;
    type Response = ExportProfilesServiceResponse;
    type PartialSuccess = ExportProfilesPartialSuccess;

    const NAME: &'static str = "profiles";
    const ITEMS: &'static str = "profiles";
    const SERVICE_NAME: &'static str =
        "opentelemetry.proto.collector.profiles.v1development.ProfilesService";
    const GRPC_PATH: &'static str = EXPORT_PATH;
    const HTTP_PATH: &'static str = HTTP_PATH;
    const REQUEST_NAME: &'static str = "ExportProfilesServiceRequest";
    /// `PROFILES_DEVELOPMENT_VERSION` (1) as text; a test below keeps the two equal.
    const VERSION_METADATA: Option<(&'static str, &'static str)> =
        Some((PROFILES_VERSION_HEADER, "1"));

    fn counts(request: &Self::Request) -> ItemCounts {
        profile_counts(&request.resource_profiles)
    }

    fn partial_success(rejected: u64, error_message: String) -> Self::PartialSuccess {
        ExportProfilesPartialSuccess {
            rejected_profiles: i64::try_from(rejected).unwrap_or(i64::MAX),
            error_message,
        }
    }

    fn response(partial_success: Option<Self::PartialSuccess>) -> Self::Response {
        ExportProfilesServiceResponse { partial_success }
    }

    fn into_partial(response: Self::Response) -> Option<Self::PartialSuccess> {
        response.partial_success
    }

    fn rejected(partial: &Self::PartialSuccess) -> (i64, &str) {
        (partial.rejected_profiles, &partial.error_message)
    }

    fn decode_json_request(bytes: &[u8]) -> Result<Self::Request, OtlpJsonError> {
        otlp_json::decode_request(bytes)
    }

    fn encode_json_request(request: &Self::Request) -> Vec<u8> {
        otlp_json::encode_request(request)
    }

    fn decode_json_response(bytes: &[u8]) -> Result<Self::Response, OtlpJsonError> {
        otlp_json::decode_response(bytes)
    }

    fn encode_json_response(response: &Self::Response) -> Vec<u8> {
        otlp_json::encode_response(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::PROFILES_DEVELOPMENT_VERSION;

    #[test]
    fn version_metadata_names_the_compiled_in_version() {
        let (key, value) = Profiles::VERSION_METADATA.unwrap();
        assert_eq!(key, "otlp-profiles-development-version");
        assert_eq!(value, PROFILES_DEVELOPMENT_VERSION.to_string());
        assert_eq!(super::super::Traces::VERSION_METADATA, None);
    }
}
