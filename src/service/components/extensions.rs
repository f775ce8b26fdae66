//! `extensions.<id>`: [`ExtensionSpec`].

use super::storage::FileStorageConfig;
use crate::config::{ConfigError, component_type, typed};
use crate::pprof::PprofConfig;
use crate::telemetry::health::HealthCheckConfig;
use profilink_flamegraph::{ApiConfig, StoreConfig};
use profilink_receiver::auth::{BearerTokenAuth, BearerTokenAuthConfig};
use serde_yaml_ng::Value;

/// An extension's typed config.
#[derive(Debug, Clone, PartialEq)]
pub enum ExtensionSpec {
    /// `health_check`.
    HealthCheck(HealthCheckConfig),
    /// `profile_store`: the embedded store of every chunk profilink exports or receives.
    ProfileStore(StoreConfig),
    /// `flamegraph_api`: Sentry's flamegraph API and the viewer over the store.
    FlamegraphApi(ApiConfig),
    /// `file_storage`: a directory for the durable queues of the exporters whose
    /// `sending_queue.storage` names it.
    FileStorage(FileStorageConfig),
    /// `bearertokenauth`: the authenticator `auth:` settings of receivers and exporters name.
    BearerTokenAuth(BearerTokenAuthConfig),
    /// `pprof`: CPU profiles of profilink itself.
    Pprof(PprofConfig),
}

fn err(msg: String) -> ConfigError {
    ConfigError::line(msg)
}

/// Reads `extensions.<id>`.
pub fn read_extension(id: &str, value: &Value) -> Result<ExtensionSpec, ConfigError> {
    let at = format!("extensions.{id}");
    match component_type(id) {
        "health_check" => Ok(ExtensionSpec::HealthCheck(typed(value, &at)?)),
        "profile_store" => Ok(ExtensionSpec::ProfileStore(typed(value, &at)?)),
        "flamegraph_api" => Ok(ExtensionSpec::FlamegraphApi(typed(value, &at)?)),
        "file_storage" => {
            let c: FileStorageConfig = typed(value, &at)?;
            c.check(&at)?;
            Ok(ExtensionSpec::FileStorage(c))
        }
        "bearertokenauth" => {
            let c: BearerTokenAuthConfig = typed(value, &at)?;
            c.validate().map_err(|e| err(format!("{at}.{e}")))?;
            // The token file is read now, so a missing one fails `check` with its key.
            if c.filename.is_some() {
                BearerTokenAuth::new(&c).map_err(|e| err(format!("{at}.filename: {e}")))?;
            }
            Ok(ExtensionSpec::BearerTokenAuth(c))
        }
        "pprof" => {
            let c: PprofConfig = typed(value, &at)?;
            c.validate().map_err(|e| err(format!("{at}.{e}")))?;
            Ok(ExtensionSpec::Pprof(c))
        }
        other => Err(ConfigError::at(
            at,
            format!("extension type {other:?} is not available in this version of profilink"),
        )),
    }
}
