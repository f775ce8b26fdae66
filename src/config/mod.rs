//! The service configuration: YAML in the OpenTelemetry Collector's shape.
//!
//! Loading runs in four steps, each of whose errors names the offending key or source:
//! 1. read every `--config` source and merge them in order, then apply `--set` ([`sources`]);
//! 2. expand `${env:...}` and `${file:...}` references in string values ([`expand`]);
//! 3. read the tree into [`Config`] (unknown keys are errors; [`flex`] types wholly-referenced
//!    values as the field wants), then check that every component id has a known type and
//!    every pipeline references defined components.
//!
//! Component sections stay as YAML values here; [`typed`] reads one into the component's own
//! config struct (owned by the receiver/exporter crates) when the pipeline is built.

mod error;
pub mod expand;
pub mod flex;
pub mod sources;

pub use error::ConfigError;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Known component types per section.
pub const RECEIVER_TYPES: &[&str] = &["otlp", "sentry", "kafka", "pprof", "pyroscope"];
/// Known processor types.
pub const PROCESSOR_TYPES: &[&str] = &["batch", "profile_sampling", "profile_linking", "symbolize"];
/// Known exporter types: `otlp_grpc` is the Collector's current name of `otlp`, `otlphttp` its
/// former name of `otlp_http`.
pub const EXPORTER_TYPES: &[&str] = &[
    "sentry",
    "otlp",
    "otlp_grpc",
    "otlp_http",
    "otlphttp",
    "file",
    "kafka",
];
/// Known extension types.
pub const EXTENSION_TYPES: &[&str] = &[
    "health_check",
    "profile_store",
    "flamegraph_api",
    "file_storage",
    "bearertokenauth",
    "pprof",
];
/// Known pipeline signals.
pub const SIGNALS: &[&str] = &["profiles", "traces"];

/// The whole configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Receivers by component id (`type` or `type/name`).
    pub receivers: BTreeMap<String, Value>,
    /// Processors by component id.
    pub processors: BTreeMap<String, Value>,
    /// Exporters by component id.
    pub exporters: BTreeMap<String, Value>,
    /// Extensions by component id.
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

/// `service.telemetry.metrics`, in profilink's spelling (`address`) or the Collector's
/// (`level`, `readers: [{pull: {exporter: {prometheus: {host, port}}}}]`). After loading,
/// [`address`](Self::address) says where `/metrics` is served (`none`: nowhere).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsTelemetry {
    /// Address of the `/metrics` endpoint; `none` disables it.
    #[serde(default = "default_metrics_address")]
    pub address: String,
    /// The Collector's metrics level: `none` serves no metrics; `basic`, `normal` and
    /// `detailed` serve all of profilink's (it has no per-level subsets).
    #[serde(default)]
    pub level: Option<String>,
    /// The Collector's metric readers: one `pull` Prometheus reader gives the address.
    #[serde(default)]
    pub readers: Vec<MetricReader>,
}

/// One entry of `service.telemetry.metrics.readers`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricReader {
    /// A pull reader (`pull: {exporter: {prometheus: {host, port}}}`).
    #[serde(default)]
    pub pull: Option<PullReader>,
    /// A periodic (push) reader: not available in profilink (refused with a message).
    #[serde(default)]
    pub periodic: Option<Value>,
}

/// `readers[].pull`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullReader {
    /// `exporter: {prometheus: {...}}`.
    pub exporter: PullExporter,
}

/// `readers[].pull.exporter`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullExporter {
    /// The Prometheus exporter.
    pub prometheus: PrometheusEndpoint,
}

/// `readers[].pull.exporter.prometheus`.
#[derive(Debug, Clone, Deserialize)]
pub struct PrometheusEndpoint {
    /// Host to listen on (default `localhost`, as the Collector).
    #[serde(default = "default_prometheus_host")]
    pub host: String,
    /// Port (default 8888).
    #[serde(default = "default_prometheus_port")]
    pub port: u16,
    /// Other keys of the Collector's Prometheus exporter (`without_units`, ...) are accepted
    /// and have no effect.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

fn default_prometheus_host() -> String {
    "localhost".into()
}

fn default_prometheus_port() -> u16 {
    8888
}

impl MetricsTelemetry {
    /// Folds `level` and `readers` into `address`, naming the key of anything profilink
    /// cannot honour.
    fn resolve(&mut self) -> Result<(), ConfigError> {
        const AT: &str = "service.telemetry.metrics";
        if let Some(level) = &self.level {
            match level.as_str() {
                "none" => {
                    self.address = "none".into();
                    return Ok(());
                }
                "basic" | "normal" | "detailed" => {}
                other => {
                    return Err(ConfigError::at(
                        format!("{AT}.level"),
                        format!("unknown level {other:?} (none, basic, normal, detailed)"),
                    ));
                }
            }
        }
        let mut pulls = Vec::new();
        for (i, reader) in self.readers.iter().enumerate() {
            match (&reader.pull, &reader.periodic) {
                (Some(pull), None) => pulls.push(&pull.exporter.prometheus),
                (None, Some(_)) => {
                    return Err(ConfigError::at(
                        format!("{AT}.readers[{i}].periodic"),
                        "pushing profilink's own metrics is not available; use a pull reader \
                         (Prometheus) and scrape it",
                    ));
                }
                _ => {
                    return Err(ConfigError::at(
                        format!("{AT}.readers[{i}]"),
                        "give exactly one of pull, periodic",
                    ));
                }
            }
        }
        match pulls.as_slice() {
            [] => Ok(()),
            [p] => {
                let host = if p.host.contains(':') && !p.host.starts_with('[') {
                    format!("[{}]", p.host)
                } else {
                    p.host.clone()
                };
                self.address = format!("{host}:{}", p.port);
                Ok(())
            }
            _ => Err(ConfigError::at(
                format!("{AT}.readers"),
                "profilink serves one Prometheus endpoint; give one pull reader",
            )),
        }
    }
}

impl Default for MetricsTelemetry {
    fn default() -> Self {
        MetricsTelemetry {
            address: default_metrics_address(),
            level: None,
            readers: Vec::new(),
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
    flex::deserialize(&value).map_err(|e| {
        let inner = e.path().to_string();
        let at = if inner == "." {
            path.to_owned()
        } else {
            format!("{path}.{inner}")
        };
        ConfigError::at(at, e.into_inner().to_string())
    })
}

/// The top level as read before the sections are typed: component sections stay trees.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopLevel {
    #[serde(default)]
    receivers: BTreeMap<String, Value>,
    #[serde(default)]
    processors: BTreeMap<String, Value>,
    #[serde(default)]
    exporters: BTreeMap<String, Value>,
    #[serde(default)]
    extensions: BTreeMap<String, Value>,
    service: Value,
}

impl Config {
    /// Loads and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::from_sources(&sources::Sources::file(path))
    }

    /// Loads, merges, expands and checks the configuration of `--config`/`--set` values, with
    /// the process environment and files.
    pub fn from_sources(sources: &sources::Sources) -> Result<Config, ConfigError> {
        let env = |name: &str| std::env::var(name).ok();
        let resolver = expand::Resolver {
            env: &env,
            file: &expand::read_file,
        };
        let tree = sources::merged_tree(sources, &resolver)?;
        Self::from_tree(tree, &resolver)
    }

    /// Parses, expands and checks configuration text; `lookup` reads environment variables
    /// (`${file:...}` reads files).
    pub fn from_yaml(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let tree = sources::parse_document(text)?;
        Self::from_tree(
            tree,
            &expand::Resolver {
                env: lookup,
                file: &expand::read_file,
            },
        )
    }

    fn from_tree(mut tree: Value, resolver: &expand::Resolver<'_>) -> Result<Config, ConfigError> {
        expand::expand(&mut tree, "", resolver)?;
        let top: TopLevel = serde_path_to_error::deserialize(tree).map_err(|e| {
            let path = e.path().to_string();
            ConfigError::at(path, e.into_inner().to_string())
        })?;
        let mut service: Service = typed(&top.service, "service")?;
        service.telemetry.metrics.resolve()?;
        let config = Config {
            receivers: top.receivers,
            processors: top.processors,
            exporters: top.exporters,
            extensions: top.extensions,
            service,
        };
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
                    return Err(ConfigError::at(
                        format!("{section}.{id}"),
                        format!(
                            "unknown {} type {:?} (known: {})",
                            section.trim_end_matches('s'),
                            component_type(id),
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        for id in &self.service.extensions {
            if !self.extensions.contains_key(id) {
                return Err(ConfigError::at(
                    "service.extensions",
                    format!("extension {id:?} is not defined under extensions"),
                ));
            }
        }
        if self.service.pipelines.is_empty() {
            return Err(ConfigError::at(
                "service.pipelines",
                "at least one pipeline is required",
            ));
        }
        for (name, p) in &self.service.pipelines {
            let at = format!("service.pipelines.{name}");
            if !SIGNALS.contains(&component_type(name)) {
                return Err(ConfigError::at(
                    &at,
                    format!(
                        "unknown signal {:?} (known: {})",
                        component_type(name),
                        SIGNALS.join(", ")
                    ),
                ));
            }
            let refs: [(&str, &[String], &BTreeMap<String, Value>); 3] = [
                ("receivers", &p.receivers, &self.receivers),
                ("processors", &p.processors, &self.processors),
                ("exporters", &p.exporters, &self.exporters),
            ];
            for (section, ids, defined) in refs {
                if section != "processors" && ids.is_empty() {
                    return Err(ConfigError::at(
                        format!("{at}.{section}"),
                        "at least one is required",
                    ));
                }
                for id in ids {
                    if !defined.contains_key(id) {
                        return Err(ConfigError::at(
                            format!("{at}.{section}"),
                            format!(
                                "{} {id:?} is not defined under {section}",
                                section.trim_end_matches('s')
                            ),
                        ));
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
            let err = load(&text).unwrap_err().to_string();
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
            .to_string();
        assert!(
            err.starts_with("receivers.otlp.protocols.grpc.bogus: unknown field `bogus`"),
            "{err}"
        );
    }
}
