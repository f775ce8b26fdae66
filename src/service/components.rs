//! Reading every component section of a [`Config`] into its typed config, and the checks that
//! need the typed values ([`Plan::new`]).
//!
//! | section | type | typed config | notes |
//! |---|---|---|---|
//! | receivers | `otlp` | `protocols.grpc` → [`OtlpGrpcConfig`], `protocols.http` → [`OtlpHttpConfig`] | at least one protocol; `grpc:` with no value means "enabled, defaults" |
//! | receivers | `sentry` | [`SentryReceiverConfig`] | Relay-compatible envelope endpoint |
//! | processors | `batch` | [`BatchConfig`] | |
//! | processors | `profile_sampling` | [`SamplingConfig`] | `session_sample_rate` in `[0, 1]` |
//! | processors | `profile_linking` | [`LinkingConfig`] | join buffer (Sentry → OTLP) and span stamping (traces) |
//! | exporters | `sentry` | [`SentryExporterConfig`] | `dsn` required and parsed here |
//! | exporters | `otlp`, `otlp_http` | [`OtlpExporterConfig`] | `otlp_http` defaults to `protocol: http`, `127.0.0.1:4318` |
//! | exporters | `file` | [`FileExporterConfig`] | |
//! | extensions | `health_check` | [`HealthCheckConfig`] | |
//! | extensions | `profile_store` | [`StoreConfig`] | keeps every chunk of every pipeline |
//! | extensions | `flamegraph_api` | [`ApiConfig`] | needs a `profile_store` in `service.extensions` |
//!
//! Errors are one line naming the key, like the rest of the configuration's.

use crate::config::{Config, ConfigError, component_type, typed};
use crate::telemetry::health::HealthCheckConfig;
use profilink_exporter::sentry::routing::Router;
use profilink_exporter::{
    FileExporterConfig, OtlpExporterConfig, OtlpProtocol, SentryExporterConfig,
};
use profilink_flamegraph::{ApiConfig, StoreConfig};
use profilink_processor::sampling::SamplingConfig;
pub use profilink_processor::spec::{BatchConfig, ExporterSpec, ProcessorSpec};
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// A receiver's typed config.
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiverSpec {
    /// `otlp`: gRPC and/or HTTP (at least one).
    Otlp {
        /// `protocols.grpc`, when enabled.
        grpc: Option<OtlpGrpcConfig>,
        /// `protocols.http`, when enabled.
        http: Option<OtlpHttpConfig>,
    },
    /// `sentry`: the envelope endpoint.
    Sentry(SentryReceiverConfig),
}

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

/// Every component section of a configuration, typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Components {
    /// Receivers by id.
    pub receivers: BTreeMap<String, ReceiverSpec>,
    /// Processors by id.
    pub processors: BTreeMap<String, ProcessorSpec>,
    /// Exporters by id.
    pub exporters: BTreeMap<String, ExporterSpec>,
    /// Extensions by id.
    pub extensions: BTreeMap<String, ExtensionSpec>,
}

/// A checked configuration, ready to run: the configuration and its typed components.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The configuration (pipelines, telemetry).
    pub config: Config,
    /// The typed components.
    pub components: Components,
}

fn err(msg: String) -> ConfigError {
    ConfigError(msg)
}

/// Reads `receivers.<id>`.
pub fn read_receiver(id: &str, value: &Value) -> Result<ReceiverSpec, ConfigError> {
    let at = format!("receivers.{id}");
    match component_type(id) {
        "otlp" => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Otlp {
                #[serde(default)]
                protocols: BTreeMap<String, Value>,
            }
            let o: Otlp = typed(value, &at)?;
            let mut grpc = None;
            let mut http = None;
            for (name, v) in &o.protocols {
                let path = format!("{at}.protocols.{name}");
                match name.as_str() {
                    "grpc" => grpc = Some(typed::<OtlpGrpcConfig>(v, &path)?),
                    "http" => http = Some(typed::<OtlpHttpConfig>(v, &path)?),
                    other => {
                        return Err(err(format!(
                            "{path}: unknown protocol {other:?} (known: grpc, http)"
                        )));
                    }
                }
            }
            if grpc.is_none() && http.is_none() {
                return Err(err(format!(
                    "{at}.protocols: at least one of grpc, http is required"
                )));
            }
            Ok(ReceiverSpec::Otlp { grpc, http })
        }
        "sentry" => Ok(ReceiverSpec::Sentry(typed(value, &at)?)),
        other => Err(err(format!(
            "{at}: receiver type {other:?} is not available in this version of profilink"
        ))),
    }
}

/// Reads `processors.<id>`.
pub fn read_processor(id: &str, value: &Value) -> Result<ProcessorSpec, ConfigError> {
    let at = format!("processors.{id}");
    match component_type(id) {
        "batch" => Ok(ProcessorSpec::Batch(typed(value, &at)?)),
        "profile_sampling" => {
            let c: SamplingConfig = typed(value, &at)?;
            let r = c.session_sample_rate;
            if !(0.0..=1.0).contains(&r) {
                return Err(err(format!(
                    "{at}.session_sample_rate: must be between 0 and 1, got {r}"
                )));
            }
            Ok(ProcessorSpec::Sampling(c))
        }
        "profile_linking" => Ok(ProcessorSpec::Linking(typed(value, &at)?)),
        other => Err(err(format!(
            "{at}: processor type {other:?} is not available in this version of profilink"
        ))),
    }
}

/// Reads `exporters.<id>` (and parses the Sentry DSNs).
pub fn read_exporter(id: &str, value: &Value) -> Result<ExporterSpec, ConfigError> {
    let at = format!("exporters.{id}");
    match component_type(id) {
        "sentry" => {
            let c: SentryExporterConfig = typed(value, &at)?;
            let Some(dsn) = c.dsn.as_deref() else {
                return Err(err(format!("{at}.dsn: required")));
            };
            if dsn.trim().is_empty() {
                return Err(err(format!("{at}.dsn: is empty")));
            }
            if c.num_consumers == 0 {
                return Err(err(format!("{at}.num_consumers: must be at least 1")));
            }
            if let Err(e) = c.compression_params.level_for(c.compression) {
                let detail = e.strip_prefix("compression_params.level ").unwrap_or(&e);
                return Err(err(format!("{at}.compression_params.level: {detail}")));
            }
            if let Err(e) = Router::new(dsn, c.routing.as_ref()) {
                let msg = e.to_string();
                let msg = msg
                    .strip_prefix("invalid exporter configuration: ")
                    .unwrap_or(&msg);
                return Err(err(format!("{at}.dsn: {msg}")));
            }
            Ok(ExporterSpec::Sentry(c))
        }
        "otlp" | "otlp_http" => {
            let mut c: OtlpExporterConfig = typed(value, &at)?;
            if component_type(id) == "otlp_http" {
                let map = value.as_mapping();
                let has = |k: &str| map.is_some_and(|m| m.contains_key(k));
                if !has("protocol") {
                    c.protocol = OtlpProtocol::Http;
                }
                if !has("endpoint") {
                    c.endpoint = "127.0.0.1:4318".into();
                }
            }
            if c.endpoint.trim().is_empty() {
                return Err(err(format!("{at}.endpoint: is empty")));
            }
            Ok(ExporterSpec::Otlp(c))
        }
        "file" => {
            let c: FileExporterConfig = typed(value, &at)?;
            if c.path.as_os_str().is_empty() {
                return Err(err(format!("{at}.path: is empty")));
            }
            Ok(ExporterSpec::File(c))
        }
        other => Err(err(format!(
            "{at}: exporter type {other:?} is not available in this version of profilink"
        ))),
    }
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

/// A path made comparable without touching the disk: absolute (joined to the current
/// directory), with `.` and `..` resolved lexically.
fn normalized(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

impl Components {
    /// Reads every section of `config` (used or not) into its typed config.
    pub fn read(config: &Config) -> Result<Components, ConfigError> {
        let mut c = Components::default();
        for (id, v) in &config.receivers {
            c.receivers.insert(id.clone(), read_receiver(id, v)?);
        }
        for (id, v) in &config.processors {
            c.processors.insert(id.clone(), read_processor(id, v)?);
        }
        for (id, v) in &config.exporters {
            c.exporters.insert(id.clone(), read_exporter(id, v)?);
        }
        for (id, v) in &config.extensions {
            c.extensions.insert(id.clone(), read_extension(id, v)?);
        }
        Ok(c)
    }
}

/// Checks a `traces` pipeline: OTLP receivers, `batch`/`profile_linking` processors, and
/// exporters that can send traces.
fn check_traces_pipeline(
    name: &str,
    p: &crate::config::Pipeline,
    components: &Components,
) -> Result<(), ConfigError> {
    let at = format!("service.pipelines.{name}");
    for id in &p.receivers {
        if !matches!(
            components.receivers.get(id),
            Some(ReceiverSpec::Otlp { .. })
        ) {
            return Err(err(format!(
                "{at}.receivers: {id} cannot receive traces (use an otlp receiver)"
            )));
        }
    }
    for id in &p.processors {
        if matches!(
            components.processors.get(id),
            Some(ProcessorSpec::Sampling(_))
        ) {
            return Err(err(format!(
                "{at}.processors: {id} applies to profiles pipelines only"
            )));
        }
    }
    for id in &p.exporters {
        if let Some(spec) = components.exporters.get(id) {
            profilink_processor::traces::traces_exporter_config(spec)
                .map_err(|e| err(format!("{at}.exporters: {id}: {e}")))?;
        }
    }
    Ok(())
}

/// Checks the extensions listed in `service.extensions`: each is configured, at most one
/// `profile_store` runs, and a `flamegraph_api` has a `profile_store` to serve.
fn check_extensions(config: &Config, components: &Components) -> Result<(), ConfigError> {
    let mut stores = Vec::new();
    let mut apis = Vec::new();
    for id in &config.service.extensions {
        match components.extensions.get(id) {
            // Undefined ids are reported by `Config` already.
            None | Some(ExtensionSpec::HealthCheck(_)) => {}
            Some(ExtensionSpec::ProfileStore(_)) => stores.push(id.as_str()),
            Some(ExtensionSpec::FlamegraphApi(_)) => apis.push(id.as_str()),
        }
    }
    if stores.len() > 1 {
        return Err(err(format!(
            "service.extensions: only one profile_store may run, found {}",
            stores.join(", ")
        )));
    }
    if let Some(api) = apis.first()
        && stores.is_empty()
    {
        return Err(err(format!(
            "service.extensions: {api} needs a profile_store extension in service.extensions"
        )));
    }
    Ok(())
}

impl Plan {
    /// Reads the components of a loaded configuration and runs the checks that need them:
    /// supported signals, the log settings, and exporters not sharing a queue directory.
    pub fn new(config: Config) -> Result<Plan, ConfigError> {
        let components = Components::read(&config)?;
        for (name, p) in &config.service.pipelines {
            match component_type(name) {
                "profiles" => {}
                "traces" => check_traces_pipeline(name, p, &components)?,
                other => {
                    return Err(err(format!(
                        "service.pipelines.{name}: {other:?} pipelines are not available; use \
                         profiles or traces"
                    )));
                }
            }
        }
        crate::telemetry::logs::check(&config.service.telemetry.logs)?;
        check_extensions(&config, &components)?;
        let metrics = &config.service.telemetry.metrics.address;
        if metrics != "none" && metrics.trim().is_empty() {
            return Err(err(
                "service.telemetry.metrics.address: is empty (use `none` to disable)".into(),
            ));
        }
        // Only exporters that run can collide.
        let used: std::collections::BTreeSet<&String> = config
            .service
            .pipelines
            .values()
            .flat_map(|p| p.exporters.iter())
            .collect();
        let mut queues: BTreeMap<PathBuf, &str> = BTreeMap::new();
        for (id, spec) in &components.exporters {
            if !used.contains(id) {
                continue;
            }
            if let Some(dir) = spec.queue_dir()
                && let Some(other) = queues.insert(normalized(&dir), id)
            {
                return Err(err(format!(
                    "exporters.{id}.sending_queue.storage: {} is already the queue of \
                         exporter {other:?}; each exporter needs its own directory",
                    dir.display()
                )));
            }
        }
        Ok(Plan { config, components })
    }

    /// The `profile_store` extension the service runs, if any (the one listed in
    /// `service.extensions`).
    pub fn profile_store(&self) -> Option<(&str, &StoreConfig)> {
        self.config.service.extensions.iter().find_map(|id| {
            match self.components.extensions.get(id) {
                Some(ExtensionSpec::ProfileStore(c)) => Some((id.as_str(), c)),
                _ => None,
            }
        })
    }

    /// Loads a configuration file and reads it into a plan (`profilink check` and `run`).
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        Plan::new(Config::load(path)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn plan(text: &str) -> Result<Plan, ConfigError> {
        let config = Config::from_yaml(text, &|_| None)?;
        Plan::new(config)
    }

    const BASE: &str = r#"
receivers:
  otlp:
    protocols:
      grpc:
      http: { endpoint: 127.0.0.1:0 }
processors:
  batch: { timeout: 1s, send_batch_size: 100 }
  profile_sampling: { session_sample_rate: 0.5 }
exporters:
  sentry: { dsn: "https://0123456789abcdef0123456789abcdef@o1.example/42", timeout: 5s }
  otlp_http: {}
  file: { path: /tmp/profilink-test-data }
extensions:
  health_check: {}
service:
  extensions: [health_check]
  pipelines:
    profiles: { receivers: [otlp], processors: [batch, profile_sampling], exporters: [sentry, file, otlp_http] }
"#;

    #[test]
    fn reads_every_section() {
        let p = plan(BASE).unwrap();
        let c = &p.components;
        match &c.receivers["otlp"] {
            ReceiverSpec::Otlp { grpc, http } => {
                assert_eq!(grpc.as_ref().unwrap().endpoint, "127.0.0.1:4317");
                assert_eq!(http.as_ref().unwrap().endpoint, "127.0.0.1:0");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            c.processors["batch"],
            ProcessorSpec::Batch(BatchConfig {
                timeout: Duration::from_secs(1),
                send_batch_size: 100,
                send_batch_max_size: 0
            })
        );
        match &c.exporters["otlp_http"] {
            ExporterSpec::Otlp(o) => {
                assert_eq!(o.protocol, OtlpProtocol::Http);
                assert_eq!(o.endpoint, "127.0.0.1:4318");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            c.extensions["health_check"],
            ExtensionSpec::HealthCheck(_)
        ));
    }

    #[test]
    fn traces_pipelines_are_checked() {
        let with = |extra: &str| {
            BASE.replace(
                "    profiles: { receivers: [otlp]",
                &format!("{extra}\n    profiles: {{ receivers: [otlp]"),
            )
        };
        let ok = with(
            "    traces: { receivers: [otlp], processors: [batch], exporters: [sentry, otlp_http] }",
        )
        .replace("processors:\n", "processors:\n  profile_linking: { wait: 2s }\n");
        let p = plan(&ok).unwrap();
        assert!(matches!(
            p.components.processors["profile_linking"],
            ProcessorSpec::Linking(ref c) if c.wait == Duration::from_secs(2)
        ));
        let cases = [
            (
                with("    traces: { receivers: [otlp], exporters: [file] }"),
                "service.pipelines.traces.exporters: file: a file exporter cannot export traces",
            ),
            (
                with(
                    "    traces: { receivers: [otlp], processors: [profile_sampling], exporters: [sentry] }",
                ),
                "service.pipelines.traces.processors: profile_sampling applies to profiles pipelines only",
            ),
            (
                with("    logs: { receivers: [otlp], exporters: [sentry] }"),
                "service.pipelines.logs: unknown signal \"logs\"",
            ),
        ];
        for (text, expected) in cases {
            let e = plan(&text).unwrap_err().0;
            assert!(e.contains(expected), "{e:?} should contain {expected:?}");
        }
    }

    #[test]
    fn store_and_flamegraph_extensions() {
        let with = |ext: &str, list: &str| {
            BASE.replace(
                "  health_check: {}\n",
                &format!("  health_check: {{}}\n{ext}"),
            )
            .replace(
                "extensions: [health_check]",
                &format!("extensions: [{list}]"),
            )
        };
        let text = with(
            "  profile_store: { path: /tmp/s.db, retention: 1h }\n  flamegraph_api: { endpoint: 127.0.0.1:0 }\n",
            "health_check, flamegraph_api, profile_store",
        );
        let p = plan(&text).unwrap();
        let (id, cfg) = p.profile_store().expect("store runs");
        assert_eq!(id, "profile_store");
        assert_eq!(cfg.retention, Duration::from_secs(3600));
        assert_eq!(cfg.max_size_mib, 1024, "default");

        let text = with(
            "  profile_store: {}\n  flamegraph_api: {}\n",
            "health_check, flamegraph_api",
        );
        let e = plan(&text).unwrap_err().0;
        assert!(e.contains("flamegraph_api needs a profile_store"), "{e}");
        let text = with(
            "  profile_store: {}\n  profile_store/2: {}\n",
            "profile_store, profile_store/2",
        );
        let e = plan(&text).unwrap_err().0;
        assert!(e.contains("only one profile_store"), "{e}");
        let text = with("  profile_store: { retention: soon }\n", "profile_store");
        let e = plan(&text).unwrap_err().0;
        assert!(e.starts_with("extensions.profile_store.retention"), "{e}");
        // Configured but not listed: not run.
        let text = with("  profile_store: {}\n", "health_check");
        assert!(plan(&text).unwrap().profile_store().is_none());
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                BASE.replace("timeout: 5s", "timeout: 5x"),
                "exporters.sentry.timeout: ",
            ),
            (
                BASE.replace("send_batch_size: 100", "send_batch_sise: 100"),
                "unknown field `send_batch_sise`",
            ),
            (
                BASE.replace("http: { endpoint", "htp: { endpoint"),
                "receivers.otlp.protocols.htp: unknown protocol",
            ),
            (
                BASE.replace("session_sample_rate: 0.5", "session_sample_rate: 2"),
                "processors.profile_sampling.session_sample_rate: must be between 0 and 1",
            ),
            (
                BASE.replace(
                    "\"https://0123456789abcdef0123456789abcdef@o1.example/42\"",
                    "\"nonsense\"",
                ),
                "exporters.sentry.dsn: ",
            ),
            (
                BASE.replace("sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\", timeout: 5s }", "sentry: {}"),
                "exporters.sentry.dsn: required",
            ),
            (
                BASE.replace("health_check: {}", "health_check: { endpont: x }"),
                "extensions.health_check.endpont: unknown field `endpont`",
            ),
            (
                BASE.replace("file: { path: /tmp/profilink-test-data }", "file: { path: /tmp/q, sending_queue: { storage: ./profilink-data/queue } }")
                    .replace("sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\", timeout: 5s }",
                             "sentry: { dsn: \"https://0123456789abcdef0123456789abcdef@o1.example/42\" }"),
                "is already the queue of exporter",
            ),
        ];
        for (text, expected) in cases {
            let e = plan(&text).unwrap_err().0;
            assert!(e.contains(expected), "{e:?} should contain {expected:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
