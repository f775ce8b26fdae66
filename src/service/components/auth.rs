//! `auth:` settings: on `otlp` receiver protocols (server side) and `otlp`/`otlp_http` exporters
//! (client side), naming a `bearertokenauth` extension. Read here ([`read_exporter_auth`]) and
//! checked against the extensions ([`check_auth`]). The kafka exporter's `auth` is another key
//! (the Collector's `configkafka` SASL settings), read by its own config.

use super::extensions::ExtensionSpec;
use crate::config::{Config, ConfigError, component_type, typed};
use profilink_receiver::auth::AuthSettings;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

fn err(msg: String) -> ConfigError {
    ConfigError::line(msg)
}

/// `exporters.<id>.auth` of an OTLP exporter, and the exporter's value without it (the
/// exporter's own config does not know the key). The kafka exporter keeps its `auth` (SASL
/// and TLS to the brokers, `profilink_kafka::auth`). Other exporter types with `auth` are an
/// error that says how they authenticate.
pub fn read_exporter_auth(
    id: &str,
    value: &Value,
) -> Result<(Value, Option<AuthSettings>), ConfigError> {
    let at = format!("exporters.{id}.auth");
    let Some(auth) = value.as_mapping().and_then(|m| m.get("auth")) else {
        return Ok((value.clone(), None));
    };
    match component_type(id) {
        "otlp" | "otlp_http" => {}
        "kafka" => return Ok((value.clone(), None)),
        "sentry" => {
            return Err(err(format!(
                "{at}: not available on the sentry exporter, which authenticates with the key \
                 of its dsn"
            )));
        }
        other => {
            return Err(err(format!("{at}: not available on the {other} exporter")));
        }
    }
    let settings: AuthSettings = typed(auth, &at)?;
    let mut rest = value.clone();
    if let Some(m) = rest.as_mapping_mut() {
        m.remove("auth");
    }
    Ok((rest, Some(settings)))
}

/// Each `auth.authenticator` names a `bearertokenauth` extension that is configured and listed
/// in `service.extensions` (the Collector only resolves running extensions). The error names
/// the key.
pub fn check_auth(
    config: &Config,
    references: Vec<(String, &AuthSettings)>,
    extensions: &BTreeMap<String, ExtensionSpec>,
) -> Result<(), ConfigError> {
    for (at, settings) in references {
        let id = &settings.authenticator;
        let at = format!("{at}.authenticator");
        match extensions.get(id) {
            None => {
                return Err(err(format!(
                    "{at}: {id:?} is not configured under extensions (add a bearertokenauth \
                     extension with that id)"
                )));
            }
            Some(ExtensionSpec::BearerTokenAuth(_)) => {}
            Some(_) => {
                return Err(err(format!(
                    "{at}: extensions.{id} is not an authenticator (use a bearertokenauth \
                     extension)"
                )));
            }
        }
        if !config.service.extensions.contains(id) {
            return Err(err(format!(
                "{at}: {id} is not listed in service.extensions"
            )));
        }
    }
    Ok(())
}
