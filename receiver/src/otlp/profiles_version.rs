//! The OTLP profiles development version of a request: the one place both OTLP transports
//! read it, refuse what they cannot decode, and pick the decoder.
//!
//! OTLP profiles keep the `v1development` service and path while their schema still changes
//! incompatibly; clients name the schema of a request in the `otlp-profiles-development-version`
//! gRPC metadata (HTTP header `OTLP-Profiles-Development-Version`,
//! [`PROFILES_VERSION_HEADER`]). The rule (opentelemetry-proto's "Profiles development
//! version", Collector v0.163):
//!
//! * no value: version 1; exactly one value: that version;
//! * the value is a positive decimal integer without leading zeros (`1`, `2`, … — not `01`,
//!   `+1`, `1.0`, ` 1`, `1, 1`, or empty);
//! * a repeated, malformed or unsupported value is refused **before the body is read or
//!   decoded** (gRPC `INVALID_ARGUMENT`, HTTP 400), with a message naming the supported
//!   versions; clients must not retry it. A body of another version decoded as version 1
//!   could be read wrong without any error (version 2 moves data into the dictionary).
//!
//! Traces are not versioned: their requests never reach this module.
//!
//! To support version 2: add `ProfilesVersion::V2`, map `2` to it in
//! [`ProfilesVersion::from_number`], list it in [`SUPPORTED`], and give it its decoders in
//! [`ProfilesVersion::decode_protobuf`] and [`ProfilesVersion::decode_json`] (turning the
//! request into the model profilink works on).

use http::HeaderMap;
use profilink_proto::otlp::{ExportProfilesServiceRequest, PROFILES_VERSION_HEADER};
use profilink_proto::otlp_json::OtlpJsonError;
use profilink_proto::signal::{Profiles, Signal};
use profilink_proto::wire::{WireDecodeError, decode_profiles_request};
use thiserror::Error;

/// A development version of OTLP profiles this receiver decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfilesVersion {
    /// Version 1: opentelemetry-proto 0.33's `v1development` (proto 1.10), and requests
    /// without the metadata.
    V1,
}

/// Every version this receiver decodes, oldest first.
pub const SUPPORTED: &[ProfilesVersion] = &[ProfilesVersion::V1];

impl ProfilesVersion {
    /// Its number on the wire.
    pub fn number(self) -> u64 {
        match self {
            ProfilesVersion::V1 => 1,
        }
    }

    /// The version numbered `n`, when this receiver decodes it.
    pub fn from_number(n: u64) -> Option<ProfilesVersion> {
        SUPPORTED.iter().copied().find(|v| v.number() == n)
    }

    /// Decodes a protobuf request body of this version: leniently
    /// ([`profilink_proto::wire::decode_profiles_request`]: invalid UTF-8 replaced with U+FFFD
    /// and counted, the proto 1.9 `Sample` layout detected and counted, refused naming both
    /// layouts when neither fits). A contiguous body (what both transports hold) is decoded in
    /// place; another is copied first.
    pub fn decode_protobuf<B: bytes::Buf>(
        self,
        mut body: B,
    ) -> Result<ExportProfilesServiceRequest, WireDecodeError> {
        match self {
            ProfilesVersion::V1 => {
                let n = body.remaining();
                let result = if body.chunk().len() == n {
                    decode_profiles_request(&body.chunk()[..n])
                } else {
                    let copy = body.copy_to_bytes(n);
                    decode_profiles_request(&copy)
                };
                if body.remaining() == n {
                    body.advance(n);
                }
                result.map(|(request, _)| request)
            }
        }
    }

    /// Decodes an OTLP/JSON request body of this version.
    pub fn decode_json(self, body: &[u8]) -> Result<ExportProfilesServiceRequest, OtlpJsonError> {
        match self {
            ProfilesVersion::V1 => Profiles::decode_json_request(body),
        }
    }
}

/// Why a request's version metadata was refused (the message names the supported versions).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VersionError {
    /// The metadata was sent more than once.
    #[error(
        "{PROFILES_VERSION_HEADER} was sent {count} times; send it once (supported OTLP profiles development versions: {})",
        supported_list()
    )]
    Repeated {
        /// How many values arrived.
        count: usize,
    },
    /// The value is not a positive integer without leading zeros.
    #[error(
        "{PROFILES_VERSION_HEADER} {value:?} is not a version number (a positive integer without leading zeros; supported OTLP profiles development versions: {})",
        supported_list()
    )]
    Malformed {
        /// The value as received (lossy UTF-8, at most 64 characters).
        value: String,
    },
    /// A well-formed version this receiver does not decode.
    #[error(
        "OTLP profiles development version {version} ({PROFILES_VERSION_HEADER}) is not supported; this receiver supports version {}; the request was refused before decoding",
        supported_list()
    )]
    Unsupported {
        /// The version asked for (its digits).
        version: String,
    },
}

/// `1` (or `1, 2` once there are more).
fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|v| v.number().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The version `headers` (HTTP headers, or the gRPC metadata a request carries as HTTP/2
/// headers) name, by the rules in the module docs.
pub fn request_version(headers: &HeaderMap) -> Result<ProfilesVersion, VersionError> {
    let values: Vec<&http::HeaderValue> = headers.get_all(PROFILES_VERSION_HEADER).iter().collect();
    match values.as_slice() {
        [] => Ok(ProfilesVersion::V1),
        [value] => parse(value.as_bytes()),
        more => Err(VersionError::Repeated { count: more.len() }),
    }
}

fn parse(value: &[u8]) -> Result<ProfilesVersion, VersionError> {
    let well_formed =
        matches!(value.first(), Some(b'1'..=b'9')) && value.iter().all(u8::is_ascii_digit);
    if !well_formed {
        let text: String = String::from_utf8_lossy(value).chars().take(64).collect();
        return Err(VersionError::Malformed { value: text });
    }
    // Digits only, so valid UTF-8; a number past u64 is well-formed and unsupported.
    let digits = String::from_utf8_lossy(value).into_owned();
    digits
        .parse::<u64>()
        .ok()
        .and_then(ProfilesVersion::from_number)
        .ok_or(VersionError::Unsupported { version: digits })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use prost::Message;

    fn version(values: &[&[u8]]) -> Result<ProfilesVersion, VersionError> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                "OTLP-Profiles-Development-Version",
                HeaderValue::from_bytes(v).unwrap(),
            );
        }
        request_version(&h)
    }

    #[test]
    fn absent_and_one_are_version_one() {
        assert_eq!(version(&[]), Ok(ProfilesVersion::V1));
        assert_eq!(version(&[b"1"]), Ok(ProfilesVersion::V1));
    }

    #[test]
    fn unsupported_versions_are_refused_naming_the_supported_one() {
        for v in ["2", "7", "10", "99999999999999999999999"] {
            let e = version(&[v.as_bytes()]).unwrap_err();
            assert_eq!(
                e,
                VersionError::Unsupported {
                    version: v.to_string()
                }
            );
            let message = e.to_string();
            assert!(message.contains("supports version 1"), "{message}");
            assert!(message.contains(PROFILES_VERSION_HEADER), "{message}");
        }
    }

    #[test]
    fn malformed_values_are_refused() {
        for v in [
            &b"01"[..],
            b"0",
            b"x",
            b"",
            b"+1",
            b"-1",
            b"1.0",
            b" 1",
            b"1 ",
            b"1,1",
            b"1, 1",
            b"\xff",
        ] {
            let e = version(&[v]).unwrap_err();
            assert!(matches!(e, VersionError::Malformed { .. }), "{v:?}: {e:?}");
            assert!(
                e.to_string()
                    .contains("supported OTLP profiles development versions: 1")
            );
        }
    }

    #[test]
    fn repeated_values_are_refused_even_when_equal() {
        assert_eq!(
            version(&[b"1", b"1"]),
            Err(VersionError::Repeated { count: 2 })
        );
        assert_eq!(
            version(&[b"1", b"2", b"1"]),
            Err(VersionError::Repeated { count: 3 })
        );
    }

    #[test]
    fn version_one_decodes_protobuf_and_json() {
        let empty = ExportProfilesServiceRequest::default();
        let bytes = empty.encode_to_vec();
        assert_eq!(
            ProfilesVersion::V1.decode_protobuf(bytes.as_slice()),
            Ok(empty.clone())
        );
        assert_eq!(ProfilesVersion::V1.decode_json(b"{}").unwrap(), empty);
        assert_eq!(ProfilesVersion::from_number(1), Some(ProfilesVersion::V1));
        assert_eq!(ProfilesVersion::from_number(2), None);
    }
}
