//! `receivers.pyroscope`: the listener of the Pyroscope doors (Grafana Alloy's
//! `pyroscope.receive_http`), with the Collector's `confighttp` server keys.

use crate::config::{MIB, TlsConfig};
use crate::server::http::http_listener_config;
use serde::Deserialize;

http_listener_config! {
    /// The Pyroscope receiver (`POST /ingest`, `POST /push.v1.PusherService/Push`).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct PyroscopeReceiverConfig {
        /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:4040` (the
        /// Pyroscope server's port, which the SDKs' `server_address` names by default).
        pub endpoint: String = "127.0.0.1:4040".into(),
        /// Largest accepted body, after decompression, in MiB; also the most that the gzipped
        /// profiles of one request may inflate to, together. Default 64.
        pub max_request_body_size_mib: usize = 64,
        /// TLS; plaintext when absent.
        pub tls: Option<TlsConfig> = None,
    }
}

impl PyroscopeReceiverConfig {
    /// The body size limit in bytes.
    pub fn max_request_body_size(&self) -> usize {
        self.max_request_body_size_mib.saturating_mul(MIB)
    }
}
