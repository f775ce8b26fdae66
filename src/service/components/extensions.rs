//! `extensions.<id>`: [`ExtensionSpec`].

use crate::config::{ConfigError, component_type, typed};
use crate::telemetry::health::HealthCheckConfig;
use profilink_flamegraph::{ApiConfig, StoreConfig};
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
}

fn err(msg: String) -> ConfigError {
    ConfigError(msg)
}

/// Reads `extensions.<id>`.
pub fn read_extension(id: &str, value: &Value) -> Result<ExtensionSpec, ConfigError> {
    let at = format!("extensions.{id}");
    match component_type(id) {
        "health_check" => Ok(ExtensionSpec::HealthCheck(typed(value, &at)?)),
        "profile_store" => Ok(ExtensionSpec::ProfileStore(typed(value, &at)?)),
        "flamegraph_api" => Ok(ExtensionSpec::FlamegraphApi(typed(value, &at)?)),
        other => Err(err(format!(
            "{at}: extension type {other:?} is not available in this version of profilink"
        ))),
    }
}
