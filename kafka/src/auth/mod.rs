//! `auth` and `tls` of the kafka receiver and exporter: SASL and TLS to the brokers, with the
//! keys and meaning of the OpenTelemetry Collector's `configkafka` (`AuthenticationConfig`,
//! `SASLConfig`, and `configtls.ClientConfig` for `tls`), turned into librdkafka properties
//! ([`ClientConfig::security_properties`](crate::config::ClientConfig::security_properties)).
//!
//! ```yaml
//! tls:                      # (or the deprecated auth.tls, used only without tls)
//!   ca_file: /etc/kafka/ca.pem
//!   cert_file: client.pem   # mutual TLS, with key_file
//!   key_file: client.key
//! auth:
//!   sasl:
//!     mechanism: SCRAM-SHA-512   # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//!     username: profilink
//!     password: ${env:KAFKA_PASSWORD}
//! ```
//!
//! * **TLS** is used when `tls` (or `auth.tls`) is present, unless it says `insecure: true`
//!   without a CA (the Collector's rule). The server's certificate is verified against
//!   `ca_file` / `ca_pem` (else the system's CAs: OpenSSL's default paths, `SSL_CERT_FILE` /
//!   `SSL_CERT_DIR` when set) and its host name against the broker's address, as Go's TLS does;
//!   `insecure_skip_verify: true` turns both off.
//! * **SASL**: `PLAIN`, `SCRAM-SHA-256` and `SCRAM-SHA-512`, over TLS when TLS is on
//!   (`SASL_SSL`), else in clear (`SASL_PLAINTEXT`). `auth.plain_text` (deprecated in the
//!   Collector) is `sasl` with `PLAIN`.
//! * Refused with a message naming the key: `AWS_MSK_IAM_OAUTHBEARER` and `OIDCFILE`
//!   mechanisms, `auth.kerberos` (librdkafka is built without GSSAPI), and the `tls` keys
//!   librdkafka has no setting for (`server_name_override`, `min_version: "1.3"`,
//!   `include_system_ca_certs_pool` beside a CA).
//!
//! The password is a [`Secret`]: `Debug` shows `<redacted>`, and a password of the wrong type
//! is refused without repeating it.
//!
//! Rooms: the config types are here; [`Secret`] (the password type) is in `secret.rs`, the
//! checks and the librdkafka properties they make (`Security`) in `security.rs`.

mod secret;
mod security;
#[cfg(test)]
mod tests;

pub use secret::Secret;
pub(crate) use security::Security;

use profilink_tls::ClientTlsConfig;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny};

/// A block accepted only to be refused or ignored by name (`auth.kerberos`,
/// `auth.sasl.aws_msk`, `auth.sasl.oidc_file`); its content is not kept (it may hold a
/// password).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Present;

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present)
    }
}

/// `auth.sasl` (the Collector's `SASLConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (required).
    pub mechanism: String,
    /// The user (required).
    pub username: String,
    /// The password (required).
    pub password: Secret,
    /// The Collector's SASL handshake version, 0 (default) or 1: accepted and ignored
    /// (librdkafka uses the handshake the broker supports).
    pub version: i64,
    /// The Collector's `AWS_MSK_IAM_OAUTHBEARER` settings: ignored with the other mechanisms
    /// (that one is refused).
    pub aws_msk: Option<Present>,
    /// The Collector's `OIDCFILE` settings: ignored with the other mechanisms (that one is
    /// refused).
    pub oidc_file: Option<Present>,
}

/// `auth.plain_text` (deprecated in the Collector: `sasl` with `mechanism: PLAIN`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlainTextConfig {
    /// The user (required).
    pub username: String,
    /// The password (required).
    pub password: Secret,
}

/// `auth` (the Collector's `AuthenticationConfig`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// SASL authentication.
    pub sasl: Option<SaslConfig>,
    /// Deprecated spelling of `sasl` with `mechanism: PLAIN`.
    pub plain_text: Option<PlainTextConfig>,
    /// Deprecated place of `tls` (the Collector's v0.124.0 moved it to the top level); used
    /// only when `tls` is not set.
    pub tls: Option<ClientTlsConfig>,
    /// Kerberos (GSSAPI): refused, librdkafka is built without it.
    pub kerberos: Option<Present>,
}

/// The SASL mechanisms profilink's librdkafka speaks.
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
