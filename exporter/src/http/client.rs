//! The pooled HTTP client of the HTTP exporters, and the text of a failed request.

use crate::{SDK_NAME, VERSION};
use profilink_consumer::ExportError;
use profilink_tls::ClientTlsConfig;
use std::error::Error as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static TLS_HANDSHAKE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// TLS handshakes of exporters that failed (bad or untrusted certificate, no common version,
/// …) since the process started.
pub fn tls_handshake_failures() -> u64 {
    TLS_HANDSHAKE_FAILURES.load(Ordering::Relaxed)
}

/// Counts and logs one failed handshake with `peer`.
pub(crate) fn handshake_failed(peer: &str, error: &dyn std::fmt::Display) {
    TLS_HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(%peer, %error, "TLS handshake failed; retrying like a network error");
}

/// True when `e` or one of its sources is a rustls error (a failed handshake). `io::Error`s
/// are looked into: their `source()` skips the error they wrap.
pub(crate) fn is_tls_error(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<profilink_tls::rustls::Error>() {
            return true;
        }
        cur = match err.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => None,
            },
            None => err.source(),
        };
    }
    false
}

/// `e` with its sources (`reqwest`'s own text does not say why a request failed). A TLS
/// handshake failure is logged with the peer and counted.
pub fn request_error(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if is_tls_error(e) {
        let peer = e.url().map_or_else(
            || "unknown".to_string(),
            |u| {
                format!(
                    "{}:{}",
                    u.host_str().unwrap_or(""),
                    u.port_or_known_default().unwrap_or(0)
                )
            },
        );
        handshake_failed(&peer, &text);
    }
    text
}

/// A pooled client: `timeout` per request (and to connect), up to `pool` idle connections per
/// host, TLS per `tls` (the server is verified against `ca_file` / `ca_pem` or the system
/// roots; `cert_file` / `key_file` are presented when asked). Proxies come from the
/// environment. `tls.insecure` does not apply: the URL's scheme decides.
pub fn client(
    timeout: Duration,
    pool: usize,
    tls: &ClientTlsConfig,
) -> Result<reqwest::Client, ExportError> {
    let rustls = tls
        .rustls_config(profilink_tls::ALPN_HTTP)
        .map_err(|e| ExportError::Config(e.to_string()))?;
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(pool.max(1))
        .user_agent(format!("{SDK_NAME}/{VERSION}"))
        .use_preconfigured_tls(rustls)
        .build()
        .map_err(|e| ExportError::Config(format!("HTTP client: {e}")))
}
