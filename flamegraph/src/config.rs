//! Configuration of the `profile_store` and `flamegraph_api` extensions.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// Where and how long profile chunks are kept (`profile_store` extension).
///
/// ```yaml
/// path: ./profilink-data/store.db
/// retention: 72h
/// max_size_mib: 1024
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// SQLite database file; its directory is created when missing.
    pub path: PathBuf,
    /// Chunks received longer ago than this are deleted (e.g. `72h`, `7d`).
    #[serde(with = "humantime_serde")]
    pub retention: Duration,
    /// Upper bound of the stored (compressed) chunk data in MiB; the oldest chunks are deleted
    /// first when it is exceeded.
    pub max_size_mib: u64,
    /// Memory for decoded call trees kept between queries, in MiB (0 disables the cache).
    pub cache_mib: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            path: PathBuf::from("./profilink-data/store.db"),
            retention: Duration::from_secs(72 * 3600),
            max_size_mib: 1024,
            cache_mib: 128,
        }
    }
}

/// The HTTP endpoint serving Sentry's flamegraph API and the viewer (`flamegraph_api`
/// extension).
///
/// ```yaml
/// endpoint: 127.0.0.1:8080
/// bearer_token: s3cret   # optional
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// Listen address (`host:port`).
    pub endpoint: String,
    /// When set, every request must carry `Authorization: Bearer <token>` (the viewer also
    /// accepts the token from its login form, kept in a cookie).
    pub bearer_token: Option<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            endpoint: "127.0.0.1:8080".into(),
            bearer_token: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_durations() {
        let cfg: StoreConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, StoreConfig::default());
        let cfg: StoreConfig =
            serde_json::from_str(r#"{"path":"/tmp/x.db","retention":"7d","max_size_mib":5}"#)
                .unwrap();
        assert_eq!(cfg.retention, Duration::from_secs(7 * 86400));
        assert_eq!(cfg.max_size_mib, 5);
        assert!(serde_json::from_str::<StoreConfig>(r#"{"retention_days":3}"#).is_err());
        let api: ApiConfig = serde_json::from_str(r#"{"bearer_token":"t"}"#).unwrap();
        assert_eq!(api.endpoint, "127.0.0.1:8080");
        assert_eq!(api.bearer_token.as_deref(), Some("t"));
        assert!(serde_json::from_str::<ApiConfig>(r#"{"token":"t"}"#).is_err());
    }
}
