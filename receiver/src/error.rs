//! Why a receiver could not start or stopped with an error (binding, TLS, serving), shared by
//! the listener layer (`server::tls`) and the servers.

use std::io;
use thiserror::Error;

/// Why a receiver could not start or stopped with an error.
#[derive(Debug, Error)]
pub enum ReceiverError {
    /// The endpoint could not be bound.
    #[error("cannot listen on {endpoint}: {source}")]
    Bind {
        /// The configured `host:port`.
        endpoint: String,
        /// The socket error.
        source: io::Error,
    },
    /// The TLS certificate or key could not be loaded (or the TLS settings are not usable).
    #[error("TLS: {0}")]
    Tls(#[source] profilink_tls::TlsError),
    /// The listener's configuration cannot be served (an `auth` whose authenticator was not
    /// resolved).
    #[error("configuration: {0}")]
    Config(String),
    /// The server failed while running (or its task panicked).
    #[error("server error: {0}")]
    Serve(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ReceiverError {
    /// [`ReceiverError::Serve`] caused by `e`.
    pub(crate) fn serve(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        ReceiverError::Serve(Box::new(e))
    }
}
