//! The `tls:` section of an exporter and the rustls client config it makes.

use crate::pem::{add_roots, certs_from_file, certs_from_pem, private_key_from_file};
use crate::{TlsError, TlsVersion, provider};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// An exporter's `tls:` (the Collector's `configtls.ClientConfig`). The default verifies the
/// server against the system roots.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientTlsConfig {
    /// gRPC only: dial in cleartext (h2c) when no CA is configured (default false). An
    /// `https://` endpoint uses TLS regardless, an `http://` one never does; HTTP exporters
    /// follow their URL's scheme.
    pub insecure: bool,
    /// Accept any server certificate (expired, self-signed, other name) (default false).
    pub insecure_skip_verify: bool,
    /// PEM file of the CAs that sign the server's certificate (replaces the system roots
    /// unless `include_system_ca_certs_pool`).
    pub ca_file: Option<PathBuf>,
    /// The same as PEM text in the config.
    pub ca_pem: Option<String>,
    /// PEM client certificate chain, for servers that ask for one (mTLS); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// Verify the server's certificate against (and send as SNI, on gRPC) this name instead of
    /// the endpoint's host.
    pub server_name_override: Option<String>,
    /// Oldest TLS version (default `1.2`).
    pub min_version: TlsVersion,
    /// Trust the system roots besides `ca_file` / `ca_pem` (default false).
    pub include_system_ca_certs_pool: bool,
}

impl ClientTlsConfig {
    /// True when a CA is configured (`ca_file` or `ca_pem`).
    pub fn has_ca(&self) -> bool {
        self.ca_file.is_some() || self.ca_pem.is_some()
    }

    /// Whether a gRPC exporter to `endpoint` uses TLS, as the Collector's `configgrpc` decides:
    /// an `https://` endpoint always does, an `http://` one never; otherwise TLS unless
    /// `insecure: true` without a CA.
    pub fn grpc_uses_tls(&self, endpoint: &str) -> bool {
        let e = endpoint.trim();
        if e.starts_with("https://") {
            true
        } else if e.starts_with("http://") {
            false
        } else {
            !self.insecure || self.has_ca()
        }
    }

    /// The rustls client config offering `alpn`. Reads every file now, so a bad one is an
    /// error naming its key.
    pub fn rustls_config(&self, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, TlsError> {
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(self.min_version.protocol_versions())
            .map_err(|e| TlsError::invalid("min_version", e.to_string()))?;
        let verifier = self.verifier(&provider)?;
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&self.cert_file, &self.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let certs = certs_from_file("cert_file", cert)?;
                let key = private_key_from_file("key_file", key)?;
                builder.with_client_auth_cert(certs, key).map_err(|e| {
                    TlsError::invalid("key_file", format!("does not fit cert_file: {e}"))
                })?
            }
            (Some(_), None) => {
                return Err(TlsError::invalid("key_file", "required with cert_file"));
            }
            (None, Some(_)) => {
                return Err(TlsError::invalid("cert_file", "required with key_file"));
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// Loads every file of the config (for `profilink check`); the same errors as
    /// [`ClientTlsConfig::rustls_config`].
    pub fn check(&self) -> Result<(), TlsError> {
        self.rustls_config(crate::ALPN_HTTP).map(|_| ())
    }

    fn verifier(
        &self,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Arc<dyn ServerCertVerifier>, TlsError> {
        let override_name = match &self.server_name_override {
            Some(name) => Some(ServerName::try_from(name.trim().to_string()).map_err(|e| {
                TlsError::invalid("server_name_override", format!("{name:?}: {e}"))
            })?),
            None => None,
        };
        if self.insecure_skip_verify {
            return Ok(Arc::new(FixedVerdict::accept(provider.clone())));
        }
        let mut roots = RootCertStore::empty();
        if let Some(path) = &self.ca_file {
            add_roots("ca_file", &mut roots, certs_from_file("ca_file", path)?)?;
        }
        if let Some(pem) = &self.ca_pem {
            add_roots(
                "ca_pem",
                &mut roots,
                certs_from_pem("ca_pem", pem.as_bytes(), "ca_pem")?,
            )?;
        }
        if !self.has_ca() || self.include_system_ca_certs_pool {
            roots.extend(system_roots().roots.iter().cloned());
        }
        if roots.is_empty() {
            // Only the system can be empty here: a configured CA adds at least one root.
            tracing::warn!(
                "no system CA certificates found: TLS servers cannot be verified (set tls.ca_file, SSL_CERT_FILE or SSL_CERT_DIR)"
            );
            return Ok(Arc::new(FixedVerdict::refuse(
                provider.clone(),
                "no trusted CA certificates: the system has none; set tls.ca_file, SSL_CERT_FILE or SSL_CERT_DIR",
            )));
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| TlsError::invalid("ca_file", e.to_string()))?;
        Ok(match override_name {
            Some(name) => Arc::new(OverrideName {
                inner: webpki,
                name,
            }),
            None => webpki,
        })
    }
}

/// The system's trusted roots, loaded once per process: `SSL_CERT_FILE` / `SSL_CERT_DIR` when
/// set (as OpenSSL-based tools do), else the platform's store. Certificates that cannot be
/// used are skipped with a warning.
pub fn system_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!(%error, "could not load some system CA certificates");
        }
        let mut roots = RootCertStore::empty();
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        if ignored > 0 {
            tracing::warn!(added, ignored, "unusable system CA certificates ignored");
        }
        roots
    })
}

/// `server_name_override`: the server's certificate is verified against a fixed name.
#[derive(Debug)]
struct OverrideName {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for OverrideName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A verifier without certificate chains: handshake signatures are checked with the provider's
/// algorithms, and every server certificate gets the same verdict.
/// * `insecure_skip_verify` ([`FixedVerdict::accept`]): any certificate is accepted, so the
///   connection is encrypted to whoever holds the presented certificate;
/// * no trusted roots at all (a system without CA certificates and no `ca_file`,
///   [`FixedVerdict::refuse`]): every certificate is refused with an error that says why.
#[derive(Debug)]
struct FixedVerdict {
    provider: Arc<CryptoProvider>,
    refusal: Option<&'static str>,
}

impl FixedVerdict {
    fn accept(provider: Arc<CryptoProvider>) -> Self {
        FixedVerdict {
            provider,
            refusal: None,
        }
    }

    fn refuse(provider: Arc<CryptoProvider>, why: &'static str) -> Self {
        FixedVerdict {
            provider,
            refusal: Some(why),
        }
    }
}

impl ServerCertVerifier for FixedVerdict {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.refusal {
            None => Ok(ServerCertVerified::assertion()),
            Some(why) => Err(rustls::Error::General(why.into())),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_tls_decision_follows_the_collector() {
        let secure = ClientTlsConfig::default();
        let insecure = ClientTlsConfig {
            insecure: true,
            ..Default::default()
        };
        let insecure_with_ca = ClientTlsConfig {
            insecure: true,
            ca_pem: Some("x".into()),
            ..Default::default()
        };
        assert!(secure.grpc_uses_tls("collector:4317"));
        assert!(!insecure.grpc_uses_tls("collector:4317"));
        assert!(insecure_with_ca.grpc_uses_tls("collector:4317"));
        assert!(insecure.grpc_uses_tls("https://collector:4317"));
        assert!(!secure.grpc_uses_tls("http://collector:4317"));
    }

    #[test]
    fn bad_files_name_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let missing = ClientTlsConfig {
            ca_file: Some(dir.path().join("nope.pem")),
            ..Default::default()
        };
        let e = missing.check().unwrap_err();
        assert_eq!(e.key(), "ca_file");
        assert!(e.to_string().starts_with("tls.ca_file: cannot read"), "{e}");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let e = ClientTlsConfig {
            ca_file: Some(junk.clone()),
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        let e = ClientTlsConfig {
            cert_file: Some(junk),
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.key(), "key_file");
        let e = serde_json::from_str::<ClientTlsConfig>(r#"{"min_version": "1.4"}"#).unwrap_err();
        assert!(e.to_string().contains("1.4"), "{e}");
    }

    #[test]
    fn client_certificate_and_key_must_fit() {
        let dir = tempfile::tempdir().unwrap();
        let a = rcgen::generate_simple_self_signed(vec!["a".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b".into()]).unwrap();
        let cert = dir.path().join("a.pem");
        let key = dir.path().join("b.key");
        std::fs::write(&cert, a.cert.pem()).unwrap();
        std::fs::write(&key, b.key_pair.serialize_pem()).unwrap();
        let c = ClientTlsConfig {
            ca_pem: Some(a.cert.pem()),
            cert_file: Some(cert),
            key_file: Some(key.clone()),
            ..Default::default()
        };
        let e = c.check().unwrap_err();
        assert_eq!(e.key(), "key_file", "{e}");
        std::fs::write(&key, a.key_pair.serialize_pem()).unwrap();
        c.check().unwrap();
    }
}
