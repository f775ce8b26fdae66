//! `receivers.pprof`: the Collector contrib `pprofreceiver`'s keys. Each mode is a section of
//! its own and any of them may be set (at least one): `server` (a listener for pushed pprof),
//! `remote` (scrapes of a Go service's `net/http/pprof` endpoints) and `file` (pprof files
//! matching a glob). The Collector's `self` mode (profiling the Collector's own Go runtime) has
//! no equivalent: profilink's own CPU profile is the `pprof` extension's.

use crate::config::{MIB, TlsConfig};
use crate::server::http::http_listener_config;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The `pprof` receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofReceiverConfig {
    /// `server`: `POST /v1/pprof` on a listener of its own.
    pub server: Option<PprofServerConfig>,
    /// `remote`: scrape an HTTP endpoint serving pprof.
    pub remote: Option<PprofRemoteConfig>,
    /// `file`: read pprof files matching a glob.
    pub file: Option<PprofFileConfig>,
}

impl PprofReceiverConfig {
    /// The problem with this config, as `<key>: <problem>`, if any.
    pub fn check(&self) -> Result<(), String> {
        if self.server.is_none() && self.remote.is_none() && self.file.is_none() {
            return Err("server: at least one of server, remote, file is required".into());
        }
        if let Some(r) = &self.remote {
            r.check().map_err(|e| format!("remote.{e}"))?;
        }
        if let Some(f) = &self.file {
            f.check().map_err(|e| format!("file.{e}"))?;
        }
        Ok(())
    }
}

http_listener_config! {
    /// `server:` of the pprof receiver (the Collector's `confighttp` server settings).
    #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct PprofServerConfig {
        /// `host:port` to listen on; port 0 picks a free port. Default `127.0.0.1:4319`.
        pub endpoint: String = "127.0.0.1:4319".into(),
        /// Largest accepted body, after decompression, in MiB. Default 64. A gzipped pprof
        /// (as Go writes them) may inflate to this much too.
        pub max_request_body_size_mib: usize = 64,
        /// TLS; plaintext when absent.
        pub tls: Option<TlsConfig> = None,
    }
}

impl PprofServerConfig {
    /// The body size limit in bytes.
    pub fn max_request_body_size(&self) -> usize {
        self.max_request_body_size_mib.saturating_mul(MIB)
    }
}

/// `remote:` of the pprof receiver: the Collector's scraper controller keys
/// (`collection_interval`, `initial_delay`, `timeout`) and HTTP client keys (`endpoint`,
/// `headers`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofRemoteConfig {
    /// The URL scraped, e.g. `http://127.0.0.1:6060/debug/pprof/profile?seconds=10` (a CPU
    /// profile of 10 s), or `.../debug/pprof/heap`, `allocs`, `mutex`, `block`. Required.
    pub endpoint: String,
    /// Time between the starts of two scrapes. Default 10s (the Collector's). A CPU profile's
    /// `seconds` should be at most this.
    #[serde(with = "humantime_serde")]
    pub collection_interval: Duration,
    /// Wait before the first scrape. Default 1s.
    #[serde(with = "humantime_serde")]
    pub initial_delay: Duration,
    /// Longest time one scrape may take, from connecting to the last byte of the body.
    /// Default `0s`: the `collection_interval` plus 5 s (a CPU profile of `seconds=N` takes N
    /// seconds to answer).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Headers sent with every scrape (e.g. `Authorization`).
    pub headers: BTreeMap<String, String>,
    /// Largest accepted response body, in MiB, counted as it streams (and what a gzipped
    /// profile may inflate to). Default 64. (profilink's key.)
    pub max_response_body_size_mib: usize,
}

impl Default for PprofRemoteConfig {
    fn default() -> Self {
        PprofRemoteConfig {
            endpoint: String::new(),
            collection_interval: Duration::from_secs(10),
            initial_delay: Duration::from_secs(1),
            timeout: Duration::ZERO,
            headers: BTreeMap::new(),
            max_response_body_size_mib: 64,
        }
    }
}

impl PprofRemoteConfig {
    /// The problem with this config, as `<key>: <problem>`, if any.
    pub fn check(&self) -> Result<(), String> {
        if self.endpoint.is_empty() {
            return Err("endpoint: required (the URL to scrape, e.g. \
                 http://127.0.0.1:6060/debug/pprof/profile?seconds=10)"
                .into());
        }
        let lower = self.endpoint.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(format!(
                "endpoint: {:?} is not an http:// or https:// URL",
                self.endpoint
            ));
        }
        if self.collection_interval.is_zero() {
            return Err("collection_interval: must be more than 0s".into());
        }
        for name in self.headers.keys() {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(format!("headers: {name:?} is not a header name"));
            }
        }
        Ok(())
    }

    /// The timeout of one scrape.
    pub fn scrape_timeout(&self) -> Duration {
        if self.timeout.is_zero() {
            self.collection_interval + Duration::from_secs(5)
        } else {
            self.timeout
        }
    }

    /// The body size limit in bytes.
    pub fn max_response_body_size(&self) -> usize {
        self.max_response_body_size_mib.saturating_mul(MIB)
    }
}

/// `file:` of the pprof receiver.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofFileConfig {
    /// Glob of the files to read (`*`, `?`, `[...]`, `**`), e.g. `/var/profiles/*.pb.gz`.
    /// Required.
    pub include: String,
    /// Time between two looks at the glob. Default 10s.
    #[serde(with = "humantime_serde")]
    pub collection_interval: Duration,
    /// Wait before the first look. Default 1s.
    #[serde(with = "humantime_serde")]
    pub initial_delay: Duration,
    /// Largest file read, in MiB (and what a gzipped profile may inflate to). Default 64.
    /// (profilink's key.)
    pub max_file_size_mib: usize,
}

impl Default for PprofFileConfig {
    fn default() -> Self {
        PprofFileConfig {
            include: String::new(),
            collection_interval: Duration::from_secs(10),
            initial_delay: Duration::from_secs(1),
            max_file_size_mib: 64,
        }
    }
}

impl PprofFileConfig {
    /// The problem with this config, as `<key>: <problem>`, if any.
    pub fn check(&self) -> Result<(), String> {
        if self.include.is_empty() {
            return Err("include: required (a glob of pprof files)".into());
        }
        glob::Pattern::new(&self.include).map_err(|e| format!("include: {e}"))?;
        if self.collection_interval.is_zero() {
            return Err("collection_interval: must be more than 0s".into());
        }
        Ok(())
    }

    /// The file size limit in bytes.
    pub fn max_file_size(&self) -> usize {
        self.max_file_size_mib.saturating_mul(MIB)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_with_collector_keys_and_defaults() {
        let c: PprofReceiverConfig = serde_json::from_str(
            r#"{"server":{"endpoint":"127.0.0.1:0"},
                "remote":{"endpoint":"http://127.0.0.1:6060/debug/pprof/profile?seconds=5",
                          "collection_interval":"6s","initial_delay":"0s"},
                "file":{"include":"/tmp/*.pb.gz"}}"#,
        )
        .unwrap();
        c.check().unwrap();
        let r = c.remote.unwrap();
        assert_eq!(r.collection_interval, Duration::from_secs(6));
        assert_eq!(r.scrape_timeout(), Duration::from_secs(11));
        assert_eq!(r.max_response_body_size(), 64 * MIB);
        let f = c.file.unwrap();
        assert_eq!(f.collection_interval, Duration::from_secs(10));
        assert_eq!(c.server.unwrap().max_request_body_size(), 64 * MIB);
    }

    #[test]
    fn problems_name_the_key() {
        let none = PprofReceiverConfig::default();
        assert!(none.check().unwrap_err().contains("at least one"));
        let c: PprofReceiverConfig = serde_json::from_str(r#"{"remote":{}}"#).unwrap();
        assert!(
            c.check()
                .unwrap_err()
                .starts_with("remote.endpoint: required")
        );
        let c: PprofReceiverConfig =
            serde_json::from_str(r#"{"remote":{"endpoint":"ftp://x"}}"#).unwrap();
        assert!(c.check().unwrap_err().starts_with("remote.endpoint:"));
        let c: PprofReceiverConfig = serde_json::from_str(r#"{"file":{"include":"[x"}}"#).unwrap();
        assert!(c.check().unwrap_err().starts_with("file.include:"));
        assert!(serde_json::from_str::<PprofReceiverConfig>(r#"{"self":{}}"#).is_err());
    }
}
