//! Reading PEM certificates and private keys, with errors that name the config key.

use crate::TlsError;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.to_path_buf(),
        source,
    })
}

/// The certificates of PEM text `pem` (from the value of `key`); at least one.
pub fn certs_from_pem(
    key: &'static str,
    pem: &[u8],
    what: &str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::invalid(key, format!("invalid PEM certificate in {what}: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::invalid(
            key,
            format!("no PEM certificate in {what}"),
        ));
    }
    Ok(certs)
}

/// The certificates of the PEM file `path` (the value of `key`); at least one.
pub fn certs_from_file(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certs_from_pem(key, &read(key, path)?, &path.display().to_string())
}

/// The private key (PKCS#8, PKCS#1 or SEC1) of the PEM file `path` (the value of `key`).
pub fn private_key_from_file(
    key: &'static str,
    path: &Path,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(key, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsError::invalid(
            key,
            format!("no usable PEM private key in {}: {e}", path.display()),
        )
    })
}

/// Adds `certs` (the CAs of `key`) to `roots`; every one must be a usable trust anchor.
pub fn add_roots(
    key: &'static str,
    roots: &mut RootCertStore,
    certs: Vec<CertificateDer<'static>>,
) -> Result<(), TlsError> {
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| TlsError::invalid(key, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(())
}
