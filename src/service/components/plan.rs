//! [`Plan`]: a configuration with its typed [`Components`], and the checks that need the typed
//! values.

use super::auth::{check_auth, read_exporter_auth};
use super::exporters::{ExporterSpec, read_exporter, traces_exporter_config};
use super::extensions::{ExtensionSpec, read_extension};
use super::processors::{ProcessorSpec, read_processor};
use super::receivers::{ReceiverSpec, read_receiver};
use super::storage::{resolve_processor_storage, resolve_queue_storage};
use crate::config::{Config, ConfigError, component_type};
use profilink_flamegraph::StoreConfig;
use profilink_receiver::auth::AuthSettings;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

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
    /// `auth` of the OTLP exporters that have one, by exporter id.
    pub exporter_auth: BTreeMap<String, AuthSettings>,
}

/// A checked configuration, ready to run: the configuration and its typed components.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The configuration (pipelines, telemetry).
    pub config: Config,
    /// The typed components.
    pub components: Components,
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
    /// The `auth` settings of every configured component, with the key they are at.
    fn auth_references(&self) -> Vec<(String, &AuthSettings)> {
        let mut out = Vec::new();
        for (id, spec) in &self.receivers {
            if let ReceiverSpec::Otlp { grpc, http } = spec {
                if let Some(a) = grpc.as_ref().and_then(|g| g.auth.as_ref()) {
                    out.push((format!("receivers.{id}.protocols.grpc.auth"), a));
                }
                if let Some(a) = http.as_ref().and_then(|h| h.auth.as_ref()) {
                    out.push((format!("receivers.{id}.protocols.http.auth"), a));
                }
            }
        }
        for (id, a) in &self.exporter_auth {
            out.push((format!("exporters.{id}.auth"), a));
        }
        out
    }

    /// Reads every section of `config` (used or not) into its typed config. Extensions come
    /// first: an exporter's `sending_queue.storage` and `profile_linking.storage` may name a
    /// `file_storage` extension.
    pub fn read(config: &Config) -> Result<Components, ConfigError> {
        let mut c = Components::default();
        for (id, v) in &config.extensions {
            c.extensions.insert(id.clone(), read_extension(id, v)?);
        }
        let storages: BTreeMap<String, _> = c
            .extensions
            .iter()
            .filter_map(|(id, e)| match e {
                ExtensionSpec::FileStorage(s) => Some((id.clone(), s.clone())),
                _ => None,
            })
            .collect();
        for (id, v) in &config.receivers {
            c.receivers.insert(id.clone(), read_receiver(id, v)?);
        }
        for (id, v) in &config.processors {
            let v = resolve_processor_storage(id, v, &storages, &config.service.extensions)?;
            c.processors.insert(id.clone(), read_processor(id, &v)?);
        }
        for (id, v) in &config.exporters {
            let v = resolve_queue_storage(id, v, &storages, &config.service.extensions)?;
            let (v, auth) = read_exporter_auth(id, &v)?;
            c.exporters.insert(id.clone(), read_exporter(id, &v)?);
            if let Some(auth) = auth {
                c.exporter_auth.insert(id.clone(), auth);
            }
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
            Some(ReceiverSpec::Otlp { .. } | ReceiverSpec::Kafka(_))
        ) {
            return Err(ConfigError::at(
                format!("{at}.receivers"),
                format!("{id} cannot receive traces (use an otlp or kafka receiver)"),
            ));
        }
    }
    for id in &p.processors {
        if matches!(
            components.processors.get(id),
            Some(ProcessorSpec::Sampling(_) | ProcessorSpec::Symbolize(_))
        ) {
            return Err(ConfigError::at(
                format!("{at}.processors"),
                format!("{id} applies to profiles pipelines only"),
            ));
        }
    }
    for id in &p.exporters {
        if let Some(spec) = components.exporters.get(id)
            && !matches!(spec, ExporterSpec::Kafka(_))
        {
            traces_exporter_config(spec)
                .map_err(|e| ConfigError::at(format!("{at}.exporters"), format!("{id}: {e}")))?;
        }
    }
    Ok(())
}

/// Checks the extensions listed in `service.extensions`: each is configured, at most one
/// `profile_store` and one `pprof` run (the process has one CPU profiler), and a
/// `flamegraph_api` has a `profile_store` to serve.
fn check_extensions(config: &Config, components: &Components) -> Result<(), ConfigError> {
    let mut stores = Vec::new();
    let mut apis = Vec::new();
    let mut pprofs = Vec::new();
    for id in &config.service.extensions {
        match components.extensions.get(id) {
            // Undefined ids are reported by `Config` already.
            None
            | Some(
                ExtensionSpec::HealthCheck(_)
                | ExtensionSpec::FileStorage(_)
                | ExtensionSpec::BearerTokenAuth(_),
            ) => {}
            Some(ExtensionSpec::ProfileStore(_)) => stores.push(id.as_str()),
            Some(ExtensionSpec::FlamegraphApi(_)) => apis.push(id.as_str()),
            Some(ExtensionSpec::Pprof(_)) => pprofs.push(id.as_str()),
        }
    }
    for (kind, ids) in [("profile_store", &stores), ("pprof", &pprofs)] {
        if ids.len() > 1 {
            return Err(ConfigError::at(
                "service.extensions",
                format!("only one {kind} may run, found {}", ids.join(", ")),
            ));
        }
    }
    if let Some(api) = apis.first()
        && stores.is_empty()
    {
        return Err(ConfigError::at(
            "service.extensions",
            format!("{api} needs a profile_store extension in service.extensions"),
        ));
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
                    return Err(ConfigError::at(
                        format!("service.pipelines.{name}"),
                        format!("{other:?} pipelines are not available; use profiles or traces"),
                    ));
                }
            }
        }
        crate::telemetry::logs::check(&config.service.telemetry.logs)?;
        check_extensions(&config, &components)?;
        check_auth(
            &config,
            components.auth_references(),
            &components.extensions,
        )?;
        let metrics = &config.service.telemetry.metrics.address;
        if metrics != "none" && metrics.trim().is_empty() {
            return Err(ConfigError::at(
                "service.telemetry.metrics.address",
                "is empty (use `none` to disable)",
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
                return Err(ConfigError::at(
                    format!("exporters.{id}.sending_queue.storage"),
                    format!(
                        "{} is already the queue of exporter {other:?}; each exporter needs its \
                         own directory",
                        dir.display()
                    ),
                ));
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

/// True for the pipelines of the `traces` signal (`traces`, `traces/<name>`).
pub fn is_traces_pipeline(name: &str) -> bool {
    component_type(name) == "traces"
}
