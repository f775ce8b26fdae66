//! OTLP profiles types (proto 1.10, `v1development`), re-exported from `opentelemetry-proto`.
//!
//! `ProfilesData` and `ExportProfilesServiceRequest` share one wire layout (field 1
//! `resource_profiles`, field 2 `dictionary`), so either decodes the other's bytes.

pub use opentelemetry_proto::tonic::collector::profiles::v1development::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    profiles_service_client, profiles_service_server,
};
pub use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, any_value,
};
pub use opentelemetry_proto::tonic::profiles::v1development::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesData,
    ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
pub use opentelemetry_proto::tonic::resource::v1::Resource;

// OTLP traces (stable `v1`), for trace linking: the collector service and the data model.
// `span::{Event, Link, SpanKind}` and `status::StatusCode` are reached through their modules
// (`span::Link` is not the profiles `Link`).
pub use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_client, trace_service_server,
};
pub use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, SpanFlags, Status, TracesData, span, status,
};

/// The gRPC method path of the OTLP profiles export service.
pub const EXPORT_PATH: &str =
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";

/// The OTLP/HTTP path for profiles.
pub const HTTP_PATH: &str = "/v1development/profiles";

/// The request metadata naming the OTLP profiles development version (gRPC metadata key;
/// over HTTP the same header, `OTLP-Profiles-Development-Version`, case-insensitive). A
/// request without it is version 1. See opentelemetry-proto's "Profiles development version".
pub const PROFILES_VERSION_HEADER: &str = "otlp-profiles-development-version";

/// The OTLP profiles development version of the types above (opentelemetry-proto 0.33, proto
/// 1.10): what exporters send in [`PROFILES_VERSION_HEADER`]. Bump it together with an
/// incompatible schema change.
pub const PROFILES_DEVELOPMENT_VERSION: u32 = 1;

/// Converts a `ProfilesData` into the equivalent export request (same fields, no copy of tables).
pub fn request_from_data(data: ProfilesData) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    }
}

/// Converts an export request into the equivalent `ProfilesData`.
pub fn data_from_request(req: ExportProfilesServiceRequest) -> ProfilesData {
    ProfilesData {
        resource_profiles: req.resource_profiles,
        dictionary: req.dictionary,
    }
}
