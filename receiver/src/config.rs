//! Receiver configuration, deserialized from the service's YAML (`serde`).
//!
//! Every field has a default, so `{}` is a valid config; unknown keys are errors (typos surface
//! at start-up instead of being ignored).

use serde::Deserialize;
use std::collections::BTreeMap;

/// One MiB.
pub const MIB: usize = 1024 * 1024;

/// TLS for a listener (`tls:`): `cert_file`, `key_file`, `client_ca_file`, `min_version`,
/// `reload_interval`, with the Collector's `configtls` meaning (see [`profilink_tls`]).
pub use profilink_tls::ServerTlsConfig as TlsConfig;

/// The OTLP/gRPC receiver (`ProfilesService/Export`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpGrpcConfig {
    /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:4317`.
    pub endpoint: String,
    /// Largest accepted message, after decompression, in MiB. Default 64.
    pub max_recv_msg_size_mib: usize,
    /// TLS; plaintext (h2c) when absent.
    pub tls: Option<TlsConfig>,
    /// When set, requests must carry metadata `authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
}

impl Default for OtlpGrpcConfig {
    fn default() -> Self {
        OtlpGrpcConfig {
            endpoint: "127.0.0.1:4317".into(),
            max_recv_msg_size_mib: 64,
            tls: None,
            bearer_token: None,
        }
    }
}

impl OtlpGrpcConfig {
    /// The message size limit in bytes.
    pub fn max_recv_msg_size(&self) -> usize {
        self.max_recv_msg_size_mib.saturating_mul(MIB)
    }
}

/// The OTLP/HTTP receiver (`POST /v1development/profiles`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpHttpConfig {
    /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:4318`.
    pub endpoint: String,
    /// Largest accepted body, after decompression, in MiB. Default 64.
    pub max_request_body_size_mib: usize,
    /// TLS; plaintext when absent.
    pub tls: Option<TlsConfig>,
    /// When set, requests must carry `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
}

impl Default for OtlpHttpConfig {
    fn default() -> Self {
        OtlpHttpConfig {
            endpoint: "127.0.0.1:4318".into(),
            max_request_body_size_mib: 64,
            tls: None,
            bearer_token: None,
        }
    }
}

impl OtlpHttpConfig {
    /// The body size limit in bytes.
    pub fn max_request_body_size(&self) -> usize {
        self.max_request_body_size_mib.saturating_mul(MIB)
    }
}

/// The Sentry envelope receiver (`POST /api/{project_id}/envelope/`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentryReceiverConfig {
    /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:9000`.
    pub endpoint: String,
    /// Largest accepted envelope, after decompression, in MiB. Default 100 (Sentry's published
    /// limit for a decompressed envelope).
    pub max_envelope_size_mib: usize,
    /// Public keys allowed per project id. A project that is not listed, or an empty map, allows
    /// every well-formed key; a listed project allows only its keys (others get 401).
    pub allowed_keys: BTreeMap<u64, Vec<String>>,
    /// TLS; plaintext when absent.
    pub tls: Option<TlsConfig>,
    /// The Sentry or Relay the SDKs' data belongs to (`{ endpoint, timeout, forward_profiles,
    /// sending_queue, retry_on_failure, tls }`). Kept as a raw value here: the service types
    /// and validates it (`profilink_exporter::forward::ForwardConfig`) and hands the receiver
    /// an [`Upstream`](crate::Upstream). Without one, items no pipeline consumes are dropped
    /// (counted and logged).
    pub upstream: Option<serde_json::Value>,
}

impl Default for SentryReceiverConfig {
    fn default() -> Self {
        SentryReceiverConfig {
            endpoint: "127.0.0.1:9000".into(),
            max_envelope_size_mib: 100,
            allowed_keys: BTreeMap::new(),
            tls: None,
            upstream: None,
        }
    }
}

impl SentryReceiverConfig {
    /// The envelope size limit in bytes.
    pub fn max_envelope_size(&self) -> usize {
        self.max_envelope_size_mib.saturating_mul(MIB)
    }

    /// True when `public_key` may send to `project_id`.
    pub fn key_allowed(&self, project_id: u64, public_key: &str) -> bool {
        match self.allowed_keys.get(&project_id) {
            None => true,
            Some(keys) if keys.is_empty() => true,
            Some(keys) => keys.iter().any(|k| k == public_key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_parsing() {
        let g: OtlpGrpcConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(g, OtlpGrpcConfig::default());
        assert_eq!(g.max_recv_msg_size(), 64 * MIB);
        let h: OtlpHttpConfig = serde_json::from_str(
            r#"{"endpoint":"0.0.0.0:1","bearer_token":"t","tls":{"cert_file":"c","key_file":"k"}}"#,
        )
        .unwrap();
        assert_eq!(h.endpoint, "0.0.0.0:1");
        assert_eq!(h.max_request_body_size_mib, 64);
        assert_eq!(h.tls.unwrap().key_file, std::path::PathBuf::from("k"));
        let s: SentryReceiverConfig =
            serde_json::from_str(r#"{"allowed_keys":{"42":["a"],"7":[]}}"#).unwrap();
        assert_eq!(s.max_envelope_size(), 100 * MIB);
        assert!(s.key_allowed(42, "a"));
        assert!(!s.key_allowed(42, "b"));
        assert!(s.key_allowed(7, "b"));
        assert!(s.key_allowed(8, "b"));
        assert!(serde_json::from_str::<OtlpGrpcConfig>(r#"{"endpoit":"x"}"#).is_err());
    }
}
