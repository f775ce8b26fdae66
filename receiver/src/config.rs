//! Receiver configuration, deserialized from the service's YAML (`serde`).
//!
//! Every field has a default, so `{}` is a valid config; unknown keys are errors (typos surface
//! at start-up instead of being ignored).

use crate::auth::{AuthSettings, Authenticator};
use crate::server::connections::DEFAULT_HANDSHAKE_TIMEOUT;
use crate::server::cors::CorsConfig;
use crate::server::http::{HttpServerSettings, http_listener_config};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

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
    /// When set, requests must carry metadata `authorization: Bearer <token>` (shorthand for
    /// a `bearertokenauth` extension with this one token; excludes `auth`).
    pub bearer_token: Option<String>,
    /// `auth: { authenticator: bearertokenauth[/name] }`: requests must pass that extension's
    /// check (`UNAUTHENTICATED` otherwise).
    pub auth: Option<AuthSettings>,
    /// The authenticator `auth` names, resolved by the service (not read from the YAML). A
    /// listener with `auth` but without it refuses to start.
    #[serde(skip)]
    pub authenticator: Option<Authenticator>,
    /// `keepalive.server_parameters` (the Collector's `configgrpc` keys).
    pub keepalive: GrpcKeepalive,
    /// Most concurrent calls (HTTP/2 streams) per connection. Default 100.
    pub max_concurrent_streams: u32,
    /// Most connections open at once on this listener. At the bound, the oldest connection
    /// that never started a call is closed for each new client. Default 1024.
    pub max_connections: usize,
    /// Close a connection that has not started a call (HTTP/2 preface, settings and first
    /// `HEADERS`) this long after it was accepted, as grpc-go's `ConnectionTimeout` (120 s
    /// there, for the preface alone). Default 10s; `0s`: never. (profilink's key.)
    #[serde(with = "humantime_serde")]
    pub handshake_timeout: Duration,
    /// Longest time for one call, from its headers to its answer (reading the request message
    /// included): a call not done within this ends with `CANCELLED` and its stream is freed, so
    /// a request message sent at a byte per second cannot hold a stream and its buffer. A
    /// client's shorter `grpc-timeout` wins. Default 1m; `0s`: none. (profilink's key: the
    /// Collector's `configgrpc` has no server-side call timeout.)
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
}

/// `keepalive:` of the gRPC receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcKeepalive {
    /// `server_parameters:`.
    pub server_parameters: GrpcServerParameters,
}

/// `keepalive.server_parameters:` of the gRPC receiver, as in the Collector's `configgrpc`.
/// Durations are humantime strings; `0s` disables.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcServerParameters {
    /// Close a connection without a byte either way for this long. Default 5m.
    #[serde(with = "humantime_serde")]
    pub max_connection_idle: Duration,
    /// Close a connection (gracefully: GOAWAY, calls finish) after this long. Default `0s`
    /// (never).
    #[serde(with = "humantime_serde")]
    pub max_connection_age: Duration,
    /// How long calls may finish after `max_connection_age`. Default `0s` (unbounded).
    #[serde(with = "humantime_serde")]
    pub max_connection_age_grace: Duration,
    /// Ping a connection after this long without activity. Default 2h.
    #[serde(with = "humantime_serde")]
    pub time: Duration,
    /// Close the connection when a ping is not answered within this. Default 20s.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl Default for GrpcServerParameters {
    fn default() -> Self {
        GrpcServerParameters {
            max_connection_idle: Duration::from_secs(300),
            max_connection_age: Duration::ZERO,
            max_connection_age_grace: Duration::ZERO,
            time: Duration::from_secs(2 * 3600),
            timeout: Duration::from_secs(20),
        }
    }
}

impl Default for OtlpGrpcConfig {
    fn default() -> Self {
        OtlpGrpcConfig {
            keepalive: GrpcKeepalive::default(),
            max_concurrent_streams: 100,
            max_connections: 1024,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            request_timeout: Duration::from_secs(60),
            endpoint: "127.0.0.1:4317".into(),
            max_recv_msg_size_mib: 64,
            tls: None,
            bearer_token: None,
            auth: None,
            authenticator: None,
        }
    }
}

impl OtlpGrpcConfig {
    /// The message size limit in bytes.
    pub fn max_recv_msg_size(&self) -> usize {
        self.max_recv_msg_size_mib.saturating_mul(MIB)
    }
}

http_listener_config! {
    /// The OTLP/HTTP receiver (`POST /v1development/profiles`).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct OtlpHttpConfig {
        /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:4318`.
        pub endpoint: String = "127.0.0.1:4318".into(),
        /// Largest accepted body, after decompression, in MiB. Default 64.
        pub max_request_body_size_mib: usize = 64,
        /// TLS; plaintext when absent.
        pub tls: Option<TlsConfig> = None,
        /// When set, requests must carry `Authorization: Bearer <token>` (shorthand for a
        /// `bearertokenauth` extension with this one token; excludes `auth`).
        pub bearer_token: Option<String> = None,
        /// `auth: { authenticator: bearertokenauth[/name] }`: requests must pass that
        /// extension's check (401 otherwise).
        pub auth: Option<AuthSettings> = None,
        /// The authenticator `auth` names, resolved by the service (not read from the YAML). A
        /// listener with `auth` but without it refuses to start.
        #[serde(skip)]
        pub authenticator: Option<Authenticator> = None,
        /// Cross-origin requests from browsers (`allowed_origins`, `allowed_headers`,
        /// `max_age`; see [`CorsConfig`](crate::CorsConfig)). Off unless an origin is allowed.
        pub cors: Option<CorsConfig> = None,
    }
}

impl OtlpHttpConfig {
    /// The listener's timeouts and connection bound.
    pub fn server_settings(&self) -> HttpServerSettings {
        HttpServerSettings::from(self)
    }

    /// The body size limit in bytes.
    pub fn max_request_body_size(&self) -> usize {
        self.max_request_body_size_mib.saturating_mul(MIB)
    }
}

http_listener_config! {
    /// The Sentry envelope receiver (`POST /api/{project_id}/envelope/`).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct SentryReceiverConfig {
        /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:9000`.
        pub endpoint: String = "127.0.0.1:9000".into(),
        /// Largest accepted envelope, after decompression, in MiB. Default 100 (Sentry's
        /// published limit for a decompressed envelope).
        pub max_envelope_size_mib: usize = 100,
        /// Public keys allowed per project id. A project that is not listed, or an empty map,
        /// allows every well-formed key; a listed project allows only its keys (others get
        /// 401).
        pub allowed_keys: BTreeMap<u64, Vec<String>> = BTreeMap::new(),
        /// TLS; plaintext when absent.
        pub tls: Option<TlsConfig> = None,
        /// The Sentry or Relay the SDKs' data belongs to (`{ endpoint, timeout,
        /// forward_profiles, sending_queue, retry_on_failure, tls }`). Kept as a raw value
        /// here: the service types and validates it (`profilink_exporter::ForwardConfig`) and
        /// hands the receiver an [`Upstream`](profilink_consumer::Upstream). Without one, items no pipeline
        /// consumes are dropped (counted and logged).
        pub upstream: Option<serde_json::Value> = None,
    }
}

impl SentryReceiverConfig {
    /// The listener's timeouts and connection bound.
    pub fn server_settings(&self) -> HttpServerSettings {
        HttpServerSettings::from(self)
    }

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

    #[test]
    fn auth_and_cors_parse_with_collector_names() {
        let g: OtlpGrpcConfig =
            serde_json::from_str(r#"{"auth":{"authenticator":"bearertokenauth/in"}}"#).unwrap();
        assert_eq!(g.auth.unwrap().authenticator, "bearertokenauth/in");
        assert!(g.authenticator.is_none());
        // Resolved by the service only.
        assert!(serde_json::from_str::<OtlpGrpcConfig>(r#"{"authenticator":"x"}"#).is_err());
        let h: OtlpHttpConfig = serde_json::from_str(
            r#"{"auth":{"authenticator":"bearertokenauth"},
                "cors":{"allowed_origins":["https://*.example.com"],"max_age":60}}"#,
        )
        .unwrap();
        assert_eq!(h.cors.unwrap().max_age, 60);
        assert!(serde_json::from_str::<SentryReceiverConfig>(r#"{"auth":{}}"#).is_err());
    }

    #[test]
    fn connection_keys_parse_with_collector_names() {
        let g: OtlpGrpcConfig = serde_json::from_str(
            r#"{"max_connections":7,"max_concurrent_streams":3,
                "keepalive":{"server_parameters":{"max_connection_idle":"1m",
                "max_connection_age":"2h","time":"30s","timeout":"5s"}}}"#,
        )
        .unwrap();
        let p = &g.keepalive.server_parameters;
        assert_eq!(p.max_connection_idle, Duration::from_secs(60));
        assert_eq!(p.max_connection_age, Duration::from_secs(7200));
        assert_eq!(
            (p.time, p.timeout),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        assert_eq!((g.max_connections, g.max_concurrent_streams), (7, 3));
        let h: OtlpHttpConfig = serde_json::from_str(
            r#"{"read_timeout":"10s","read_header_timeout":"2s","idle_timeout":"0s",
                "write_timeout":"1m","max_connections":9}"#,
        )
        .unwrap();
        let settings = h.server_settings();
        assert_eq!(settings.read_timeout, Duration::from_secs(10));
        assert_eq!(settings.read_header_timeout, Duration::from_secs(2));
        let limits = settings.connection_limits();
        assert_eq!(limits.idle_timeout, None);
        assert_eq!(limits.write_timeout, Some(Duration::from_secs(60)));
        assert_eq!(limits.max_connections, 9);
        let s = SentryReceiverConfig::default().server_settings();
        assert_eq!(s, HttpServerSettings::default());
        assert_eq!(s.idle_timeout, Duration::from_secs(60));
        assert!(serde_json::from_str::<OtlpHttpConfig>(r#"{"idle_timeout":"soon"}"#).is_err());
    }
}
