//! The `tls:` section of a receiver and the rustls server config it makes, with client
//! certificate verification and certificate reloading.

use crate::pem::{add_roots, certs_from_file, private_key_from_file};
use crate::{TlsError, TlsVersion, provider};
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A receiver's `tls:` (the Collector's `configtls.ServerConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTlsConfig {
    /// PEM certificate chain, leaf first (required).
    pub cert_file: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) (required).
    pub key_file: PathBuf,
    /// PEM CAs of client certificates: when set, clients must present a certificate one of
    /// them signed, or the handshake fails (mTLS). Default: no client certificates.
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// Oldest TLS version (default `1.2`).
    #[serde(default)]
    pub min_version: TlsVersion,
    /// Re-read `cert_file` and `key_file` this long after they were last read, at the next
    /// handshake, so renewed certificates are served without a restart (default: never).
    #[serde(default, with = "humantime_serde")]
    pub reload_interval: Option<Duration>,
}

impl ServerTlsConfig {
    /// A config with only a certificate and its key.
    pub fn new(cert_file: impl Into<PathBuf>, key_file: impl Into<PathBuf>) -> Self {
        ServerTlsConfig {
            cert_file: cert_file.into(),
            key_file: key_file.into(),
            client_ca_file: None,
            min_version: TlsVersion::default(),
            reload_interval: None,
        }
    }

    /// The rustls server config offering `alpn`. Reads every file now, so a bad one is an
    /// error naming its key.
    pub fn rustls_config(&self, alpn: &[&[u8]]) -> Result<rustls::ServerConfig, TlsError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(self.min_version.protocol_versions())
            .map_err(|e| TlsError::invalid("min_version", e.to_string()))?;
        let builder = match &self.client_ca_file {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                add_roots(
                    "client_ca_file",
                    &mut roots,
                    certs_from_file("client_ca_file", path)?,
                )?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .map_err(|e| TlsError::invalid("client_ca_file", e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let resolver = ReloadingCert::load(
            &self.cert_file,
            &self.key_file,
            self.reload_interval,
            provider,
        )?;
        let mut config = builder.with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// Loads every file of the config (for `profilink check`).
    pub fn check(&self) -> Result<(), TlsError> {
        self.rustls_config(crate::ALPN_HTTP).map(|_| ())
    }
}

fn certified_key(
    cert_file: &Path,
    key_file: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let certs = certs_from_file("cert_file", cert_file)?;
    let key = private_key_from_file("key_file", key_file)?;
    CertifiedKey::from_der(certs, key, provider)
        .map_err(|e| TlsError::invalid("key_file", format!("does not fit cert_file: {e}")))
}

#[derive(Debug)]
struct Current {
    key: Arc<CertifiedKey>,
    read_at: Instant,
}

/// The server certificate, re-read from its files at the first handshake after
/// `reload_interval` has passed (as the Collector's reloader does). A reload that fails
/// keeps the previous certificate and logs a warning.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_file: PathBuf,
    key_file: PathBuf,
    interval: Option<Duration>,
    provider: Arc<CryptoProvider>,
    current: Mutex<Current>,
}

impl ReloadingCert {
    /// Reads the certificate and key now.
    pub fn load(
        cert_file: &Path,
        key_file: &Path,
        interval: Option<Duration>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let key = certified_key(cert_file, key_file, &provider)?;
        Ok(ReloadingCert {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            interval,
            provider,
            current: Mutex::new(Current {
                key: Arc::new(key),
                read_at: Instant::now(),
            }),
        })
    }

    /// The certificate to serve now (reloaded first when due).
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(interval) = self.interval
            && cur.read_at.elapsed() >= interval
        {
            cur.read_at = Instant::now();
            match certified_key(&self.cert_file, &self.key_file, &self.provider) {
                Ok(key) => {
                    if key.cert != cur.key.cert {
                        tracing::info!(cert_file = %self.cert_file.display(), "TLS certificate reloaded");
                    }
                    cur.key = Arc::new(key);
                }
                Err(error) => {
                    tracing::warn!(%error, "TLS certificate reload failed; serving the previous certificate")
                }
            }
        }
        cur.key.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_collector_keys() {
        let c: ServerTlsConfig = serde_json::from_str(
            r#"{"cert_file":"c","key_file":"k","client_ca_file":"ca","min_version":"1.3","reload_interval":"1h"}"#,
        )
        .unwrap();
        assert_eq!(c.client_ca_file, Some(PathBuf::from("ca")));
        assert_eq!(c.min_version, TlsVersion::V1_3);
        assert_eq!(c.reload_interval, Some(Duration::from_secs(3600)));
        let d: ServerTlsConfig =
            serde_json::from_str(r#"{"cert_file":"c","key_file":"k"}"#).unwrap();
        assert_eq!(d, ServerTlsConfig::new("c", "k"));
        assert!(serde_json::from_str::<ServerTlsConfig>(r#"{"cert_file":"c"}"#).is_err());
    }

    #[test]
    fn reload_picks_up_new_files_and_keeps_the_old_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let write = |name: &str| {
            let g = rcgen::generate_simple_self_signed(vec![name.into()]).unwrap();
            std::fs::write(&cert, g.cert.pem()).unwrap();
            std::fs::write(&key, g.key_pair.serialize_pem()).unwrap();
            g.cert.der().to_vec()
        };
        let first = write("a");
        let r = ReloadingCert::load(&cert, &key, Some(Duration::ZERO), provider()).unwrap();
        assert_eq!(r.current().cert[0].as_ref(), &first[..]);
        let second = write("b");
        assert_eq!(r.current().cert[0].as_ref(), &second[..]);
        std::fs::write(&cert, "broken").unwrap();
        assert_eq!(r.current().cert[0].as_ref(), &second[..]);
        // Without an interval the files are read once.
        let once = ReloadingCert::load(&cert, &key, None, provider());
        assert_eq!(once.unwrap_err().key(), "cert_file");
    }
}
