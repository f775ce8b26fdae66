//! TLS settings of every profilink receiver and exporter, with the names, defaults and meaning
//! of the OpenTelemetry Collector's `configtls`, turned into rustls configs.
//!
//! * [`ClientTlsConfig`]: the `tls:` section of an exporter (`insecure`,
//!   `insecure_skip_verify`, `ca_file`, `ca_pem`, `cert_file`, `key_file`,
//!   `server_name_override`, `min_version`, `include_system_ca_certs_pool`). Without a CA the
//!   system roots are trusted ([`system_roots`]: the platform store, or `SSL_CERT_FILE` /
//!   `SSL_CERT_DIR` when set).
//! * [`ServerTlsConfig`]: the `tls:` section of a receiver (`cert_file`, `key_file`,
//!   `client_ca_file`, `min_version`, `reload_interval`). With `client_ca_file`, clients must
//!   present a certificate that CA signed; with `reload_interval`, renewed certificate files are
//!   picked up without a restart ([`ReloadingCert`]).
//!
//! Every error names the key it is about ([`TlsError::key`]), so the service can report
//! `exporters.otlp.tls.ca_file: …` and exit 2.
#![warn(missing_docs)]

mod client;
mod pem;
mod server;
#[cfg(feature = "test-pki")]
pub mod test_pki;

pub use client::{ClientTlsConfig, system_roots};
/// The rustls this crate builds configs for (for connectors that need its types).
pub use rustls;
pub use server::{ReloadingCert, ServerTlsConfig};

use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use thiserror::Error;

/// Why a TLS setting could not be used. Its text starts with the key (`tls.ca_file: …`).
#[derive(Debug, Error)]
pub enum TlsError {
    /// A file named by `key` could not be read.
    #[error("tls.{key}: cannot read {}: {source}", path.display())]
    Read {
        /// The config key (`ca_file`, `cert_file`, …).
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The value of `key` is not usable (no certificate in the file, a key that does not fit
    /// the certificate, a missing companion key, …).
    #[error("tls.{key}: {message}")]
    Invalid {
        /// The config key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl TlsError {
    /// The config key the error is about, without the `tls.` prefix.
    pub fn key(&self) -> &'static str {
        match self {
            TlsError::Read { key, .. } | TlsError::Invalid { key, .. } => key,
        }
    }

    pub(crate) fn invalid(key: &'static str, message: impl Into<String>) -> Self {
        TlsError::Invalid {
            key,
            message: message.into(),
        }
    }
}

/// `min_version`: the oldest TLS version accepted (default `1.2`, as the Collector).
///
/// `1.0` and `1.1` are accepted for compatibility with Collector configurations, but rustls
/// does not speak them: they mean `1.2`, with a warning when the config is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.0 (treated as 1.2).
    #[serde(rename = "1.0")]
    V1_0,
    /// TLS 1.1 (treated as 1.2).
    #[serde(rename = "1.1")]
    V1_1,
    /// TLS 1.2 (default).
    #[default]
    #[serde(rename = "1.2")]
    V1_2,
    /// TLS 1.3 only.
    #[serde(rename = "1.3")]
    V1_3,
}

impl TlsVersion {
    /// The rustls protocol versions from this minimum on.
    pub fn protocol_versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static ALL: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self {
            TlsVersion::V1_0 | TlsVersion::V1_1 => {
                tracing::warn!(
                    "tls.min_version {self:?}: TLS 1.0 and 1.1 are not supported; 1.2 is the oldest version used"
                );
                &ALL
            }
            TlsVersion::V1_2 => &ALL,
            TlsVersion::V1_3 => &TLS13,
        }
    }
}

/// The crypto provider of every profilink TLS config (ring).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// ALPN for gRPC: HTTP/2 only.
pub const ALPN_GRPC: &[&[u8]] = &[b"h2"];
/// ALPN for HTTP: HTTP/2 or HTTP/1.1.
pub const ALPN_HTTP: &[&[u8]] = &[b"h2", b"http/1.1"];
