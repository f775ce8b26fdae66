//! The service configuration: YAML in the OpenTelemetry Collector's shape.
//!
//! Loading runs in three steps, each of whose errors names the offending key:
//! 1. parse the YAML into a tree;
//! 2. expand `${env:VAR}` in string values ([`mod@env`]);
//! 3. read the tree into [`Config`] (unknown keys are errors), then check that every component
//!    id has a known type and every pipeline references defined components.
//!
//! Component sections stay as YAML values here; [`typed`] reads one into the component's own
//! config struct (owned by the receiver/exporter crates) when the pipeline is built.

pub mod env;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Known component types per section.
pub const RECEIVER_TYPES: &[&str] = &["otlp", "sentry"];
/// Known processor types.
pub const PROCESSOR_TYPES: &[&str] = &["batch", "profile_sampling", "profile_linking"];
/// Known exporter types.
pub const EXPORTER_TYPES: &[&str] = &["sentry", "otlp", "otlp_http", "file"];
/// Known extension types.
pub const EXTENSION_TYPES: &[&str] = &["health_check", "profile_store", "flamegraph_api"];
/// Known pipeline signals.
pub const SIGNALS: &[&str] = &["profiles", "traces"];

/// A configuration error: one line naming the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Receivers by component id (`type` or `type/name`).
    #[serde(default)]
    pub receivers: BTreeMap<String, Value>,
    /// Processors by component id.
    #[serde(default)]
    pub processors: BTreeMap<String, Value>,
    /// Exporters by component id.
    #[serde(default)]
    pub exporters: BTreeMap<String, Value>,
    /// Extensions by component id.
    #[serde(default)]
    pub extensions: BTreeMap<String, Value>,
    /// Which components run, wired how.
    pub service: Service,
}

/// The `service` section.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Extensions to start.
    #[serde(default)]
    pub extensions: Vec<String>,
    /// Pipelines by id (`profiles`, `profiles/name`, `traces/name`).
    pub pipelines: BTreeMap<String, Pipeline>,
    /// Self-telemetry.
    #[serde(default)]
    pub telemetry: Telemetry,
}

/// One pipeline.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// Receiver ids.
    pub receivers: Vec<String>,
    /// Processor ids, in order.
    #[serde(default)]
    pub processors: Vec<String>,
    /// Exporter ids.
    pub exporters: Vec<String>,
}

/// `service.telemetry`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    /// Prometheus metrics endpoint.
    #[serde(default)]
    pub metrics: MetricsTelemetry,
    /// Logging.
    #[serde(default)]
    pub logs: LogsTelemetry,
}

/// `service.telemetry.metrics`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsTelemetry {
    /// Address of the `/metrics` endpoint; `none` disables it.
    #[serde(default = "default_metrics_address")]
    pub address: String,
}

impl Default for MetricsTelemetry {
    fn default() -> Self {
        MetricsTelemetry {
            address: default_metrics_address(),
        }
    }
}

fn default_metrics_address() -> String {
    "127.0.0.1:8888".into()
}

/// `service.telemetry.logs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsTelemetry {
    /// `trace`, `debug`, `info`, `warn` or `error` (an `EnvFilter` directive also works).
    #[serde(default = "default_log_level")]
    pub level: String,
    /// `console` (default) or `json`.
    #[serde(default = "default_log_encoding")]
    pub encoding: String,
}

impl Default for LogsTelemetry {
    fn default() -> Self {
        LogsTelemetry {
            level: default_log_level(),
            encoding: default_log_encoding(),
        }
    }
}

fn default_log_level() -> String {
    "info".into()
}

fn default_log_encoding() -> String {
    "console".into()
}

/// The type part of a component id (`otlp/2` -> `otlp`).
pub fn component_type(id: &str) -> &str {
    id.split_once('/').map_or(id, |(t, _)| t)
}

/// Reads a component's section into its typed config, naming the key of any error.
pub fn typed<T: DeserializeOwned>(value: &Value, path: &str) -> Result<T, ConfigError> {
    let value = if value.is_null() {
        Value::Mapping(Default::default())
    } else {
        value.clone()
    };
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let at = if inner == "." {
            path.to_owned()
        } else {
            format!("{path}.{inner}")
        };
        ConfigError(format!("{at}: {}", e.into_inner()))
    })
}

impl Config {
    /// Loads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: cannot read: {e}", path.display())))?;
        Self::from_yaml(&text, &|name| std::env::var(name).ok())
    }

    /// Parses, expands and checks configuration text.
    pub fn from_yaml(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut tree: Value =
            serde_yaml_ng::from_str(text).map_err(|e| ConfigError(format!("invalid YAML: {e}")))?;
        env::expand(&mut tree, "", lookup).map_err(ConfigError)?;
        let config: Config = serde_path_to_error::deserialize(tree).map_err(|e| {
            let path = e.path().to_string();
            ConfigError(format!("{path}: {}", e.into_inner()))
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let sections: [(&str, &BTreeMap<String, Value>, &[&str]); 4] = [
            ("receivers", &self.receivers, RECEIVER_TYPES),
            ("processors", &self.processors, PROCESSOR_TYPES),
            ("exporters", &self.exporters, EXPORTER_TYPES),
            ("extensions", &self.extensions, EXTENSION_TYPES),
        ];
        for (section, map, known) in sections {
            for id in map.keys() {
                if !known.contains(&component_type(id)) {
                    return Err(ConfigError(format!(
                        "{section}.{id}: unknown {} type {:?} (known: {})",
                        section.trim_end_matches('s'),
                        component_type(id),
                        known.join(", ")
                    )));
                }
            }
        }
        for id in &self.service.extensions {
            if !self.extensions.contains_key(id) {
                return Err(ConfigError(format!(
                    "service.extensions: extension {id:?} is not defined under extensions"
                )));
            }
        }
        if self.service.pipelines.is_empty() {
            return Err(ConfigError(
                "service.pipelines: at least one pipeline is required".into(),
            ));
        }
        for (name, p) in &self.service.pipelines {
            let at = format!("service.pipelines.{name}");
            if !SIGNALS.contains(&component_type(name)) {
                return Err(ConfigError(format!(
                    "{at}: unknown signal {:?} (known: {})",
                    component_type(name),
                    SIGNALS.join(", ")
                )));
            }
            let refs: [(&str, &[String], &BTreeMap<String, Value>); 3] = [
                ("receivers", &p.receivers, &self.receivers),
                ("processors", &p.processors, &self.processors),
                ("exporters", &p.exporters, &self.exporters),
            ];
            for (section, ids, defined) in refs {
                if section != "processors" && ids.is_empty() {
                    return Err(ConfigError(format!(
                        "{at}.{section}: at least one is required"
                    )));
                }
                for id in ids {
                    if !defined.contains_key(id) {
                        return Err(ConfigError(format!(
                            "{at}.{section}: {} {id:?} is not defined under {section}",
                            section.trim_end_matches('s')
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_yaml(text, &|n| {
            (n == "SENTRY_DSN").then(|| "https://k@o.example/1".into())
        })
    }

    const GOOD: &str = r#"
receivers:
  otlp:
    protocols:
      grpc: { endpoint: 127.0.0.1:4317 }
  sentry: { endpoint: 127.0.0.1:9000 }
processors:
  batch: { timeout: 1s }
exporters:
  sentry: { dsn: "${env:SENTRY_DSN}" }
  otlp/back: { endpoint: 127.0.0.1:4317 }
service:
  pipelines:
    profiles/to_sentry: { receivers: [otlp], processors: [batch], exporters: [sentry] }
    profiles/from_sentry: { receivers: [sentry], exporters: [otlp/back] }
"#;

    #[test]
    fn good_config_loads_and_expands() {
        let c = load(GOOD).unwrap();
        assert_eq!(
            c.exporters["sentry"]["dsn"].as_str(),
            Some("https://k@o.example/1")
        );
        assert_eq!(c.service.pipelines.len(), 2);
        assert_eq!(c.service.telemetry.metrics.address, "127.0.0.1:8888");
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                GOOD.replace("processors: [batch]", "processors: [nope]"),
                "service.pipelines.profiles/to_sentry.processors: processor \"nope\" is not defined under processors",
            ),
            (
                GOOD.replace("exporters: [otlp/back]", "exporters: [otlp/missing]"),
                "service.pipelines.profiles/from_sentry.exporters: exporter \"otlp/missing\" is not defined under exporters",
            ),
            (
                GOOD.replace("${env:SENTRY_DSN}", "${env:UNSET_VAR}"),
                "exporters.sentry.dsn: environment variable UNSET_VAR is not set",
            ),
            (GOOD.replace("service:", "servce: {}\nservice:"), "servce"),
            (
                GOOD.replace("  batch:", "  batsh:"),
                "processors.batsh: unknown processor type",
            ),
            (
                GOOD.replace("profiles/to_sentry:", "logs/x:"),
                "service.pipelines.logs/x: unknown signal",
            ),
        ];
        for (text, expected) in cases {
            let err = load(&text).unwrap_err().0;
            assert!(
                err.contains(expected),
                "{err:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn typed_sections_name_nested_keys() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Grpc {
            #[allow(dead_code)]
            endpoint: String,
        }
        let v: Value = serde_yaml_ng::from_str("{endpoint: x, bogus: 1}").unwrap();
        let err = typed::<Grpc>(&v, "receivers.otlp.protocols.grpc")
            .unwrap_err()
            .0;
        assert!(
            err.starts_with("receivers.otlp.protocols.grpc.bogus: unknown field `bogus`"),
            "{err}"
        );
    }
}
