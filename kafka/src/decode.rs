//! A Kafka message to what the pipeline takes: the OTLP profiles version rule applied to the
//! message's headers (the `otlp-profiles-development-version` header, as the OTLP receivers
//! read their metadata: absent means version 1, a repeated, malformed or unsupported value
//! refuses the message before its payload is decoded), the payload decoded (`otlp_proto` or
//! `otlp_json`), header extraction, and the receivers' validation
//! ([`IngestSignal::ingest`]: invalid items split off and counted).
//!
//! A message that fails any of this can never be accepted: a [`Permanent`] error, which the
//! receiver counts, logs, marks as `message_marking.on_permanent_error` says, and skips.

use crate::config::Encoding;
use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, ExportTraceServiceRequest, KeyValue, Resource,
    any_value,
};
use profilink_receiver::{IngestSignal, Refused, Split};
use thiserror::Error;

/// Why a message can never be accepted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Permanent {
    /// Its version header is repeated, malformed or unsupported.
    #[error("{0}")]
    Version(String),
    /// Its payload does not decode.
    #[error("the payload does not decode as {encoding}: {message}")]
    Undecodable {
        /// The configured encoding.
        encoding: &'static str,
        /// The decoder's error.
        message: String,
    },
    /// The request is unusable as a whole (e.g. a broken dictionary).
    #[error("the request is invalid: {0}")]
    Invalid(String),
    /// The pipeline refused it for good.
    #[error("the pipeline rejected it: {0}")]
    Rejected(String),
}

/// Requests whose resources can take attributes copied from message headers.
pub trait WithResources {
    /// Adds `attributes` to every resource (creating it when absent).
    fn add_resource_attributes(&mut self, attributes: &[(String, String)]);
}

fn add(resource: &mut Option<Resource>, attributes: &[(String, String)]) {
    let r = resource.get_or_insert_with(Resource::default);
    for (k, v) in attributes {
        r.attributes.push(KeyValue {
            key: k.clone(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.clone())),
            }),
            ..Default::default()
        });
    }
}

impl WithResources for ExportProfilesServiceRequest {
    fn add_resource_attributes(&mut self, attributes: &[(String, String)]) {
        for rp in &mut self.resource_profiles {
            add(&mut rp.resource, attributes);
        }
    }
}

impl WithResources for ExportTraceServiceRequest {
    fn add_resource_attributes(&mut self, attributes: &[(String, String)]) {
        for rs in &mut self.resource_spans {
            add(&mut rs.resource, attributes);
        }
    }
}

/// Decodes and validates one message of signal `S`; `headers` are the message's headers
/// (names as sent), `extracted` the `kafka.header.*` attributes to add.
pub fn decode_message<S>(
    payload: &[u8],
    headers: &[(String, Vec<u8>)],
    encoding: Encoding,
    extracted: &[(String, String)],
) -> Result<Split, Permanent>
where
    S: IngestSignal,
    S::Request: WithResources,
{
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        } else if name.eq_ignore_ascii_case(profilink_proto::otlp::PROFILES_VERSION_HEADER) {
            // A version value that is not even a header value is malformed.
            return Err(Permanent::Version(format!(
                "{} {:?} is not a version number",
                profilink_proto::otlp::PROFILES_VERSION_HEADER,
                String::from_utf8_lossy(value)
            )));
        }
    }
    let version = S::request_version(&map).map_err(|e| Permanent::Version(e.to_string()))?;
    let mut request = match encoding {
        Encoding::OtlpProto => {
            S::decode_protobuf(version, payload).map_err(|e| Permanent::Undecodable {
                encoding: encoding.as_str(),
                message: e.to_string(),
            })?
        }
        Encoding::OtlpJson => {
            S::decode_json(version, payload).map_err(|e| Permanent::Undecodable {
                encoding: encoding.as_str(),
                message: e.to_string(),
            })?
        }
    };
    if !extracted.is_empty() {
        request.add_resource_attributes(extracted);
    }
    S::ingest(request).map_err(|Refused { message, .. }| Permanent::Invalid(message))
}

/// A Kafka message's headers as (key, value) pairs (a header without a value as empty).
pub fn message_headers(m: &impl rdkafka::message::Message) -> Vec<(String, Vec<u8>)> {
    use rdkafka::message::Headers;
    m.headers()
        .map(|h| {
            h.iter()
                .map(|x| (x.key.to_string(), x.value.unwrap_or_default().to_vec()))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::signal::Profiles;
    use prost::Message;

    #[test]
    fn version_header_rule_applies() {
        let body = ExportProfilesServiceRequest::default().encode_to_vec();
        let h = |v: &str| {
            vec![(
                "otlp-profiles-development-version".to_string(),
                v.as_bytes().to_vec(),
            )]
        };
        assert!(decode_message::<Profiles>(&body, &[], Encoding::OtlpProto, &[]).is_ok());
        assert!(decode_message::<Profiles>(&body, &h("1"), Encoding::OtlpProto, &[]).is_ok());
        for bad in ["2", "01", "x"] {
            let e =
                decode_message::<Profiles>(&body, &h(bad), Encoding::OtlpProto, &[]).unwrap_err();
            assert!(matches!(e, Permanent::Version(_)), "{bad}: {e:?}");
        }
        let mut twice = h("1");
        twice.extend(h("1"));
        assert!(matches!(
            decode_message::<Profiles>(&body, &twice, Encoding::OtlpProto, &[]),
            Err(Permanent::Version(_))
        ));
        assert!(matches!(
            decode_message::<Profiles>(b"\xff\xff\xff", &[], Encoding::OtlpProto, &[]),
            Err(Permanent::Undecodable { .. })
        ));
        assert!(matches!(
            decode_message::<Profiles>(b"{", &[], Encoding::OtlpJson, &[]),
            Err(Permanent::Undecodable { .. })
        ));
    }
}
