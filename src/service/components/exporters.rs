//! `exporters.<id>`: [`ExporterSpec`], and the traces instance's config of an exporter listed in
//! a `traces` pipeline ([`traces_exporter_config`]).

use crate::config::{ConfigError, component_type, typed};
use profilink_exporter::Router;
use profilink_exporter::{
    ClientTlsConfig, FileExporterConfig, OtlpExporterConfig, OtlpProtocol, SentryExporterConfig,
    SettingError,
};
use profilink_exporter::{OtlpTracesConfig, SentryTracesConfig, TracesExporterConfig};
use serde_yaml_ng::Value;
use std::path::PathBuf;
use std::time::Duration;

/// An exporter's typed config.
// One value per configured exporter, read once at start: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum ExporterSpec {
    /// `sentry`.
    Sentry(SentryExporterConfig),
    /// `otlp` (alias `otlp_grpc`) / `otlp_http` (alias `otlphttp`).
    Otlp(OtlpExporterConfig),
    /// `file`.
    File(FileExporterConfig),
    /// `kafka`: OTLP profiles (and traces) produced to Kafka.
    Kafka(profilink_kafka::KafkaExporterConfig),
}

impl ExporterSpec {
    /// True for exporters that take Sentry chunks (`sentry`, `file`).
    pub fn takes_chunks(&self) -> bool {
        matches!(self, ExporterSpec::Sentry(_) | ExporterSpec::File(_))
    }

    /// The durable queue directory, for exporters that have one.
    pub fn queue_dir(&self) -> Option<PathBuf> {
        match self {
            ExporterSpec::Sentry(c) if c.sending_queue.enabled => Some(c.queue_dir()),
            ExporterSpec::File(c) if c.sending_queue.enabled => Some(c.queue_dir()),
            ExporterSpec::Otlp(c) if c.sending_queue.enabled => c.sending_queue.storage.clone(),
            ExporterSpec::Kafka(c) if c.sending_queue.enabled => c.sending_queue.storage.clone(),
            _ => None,
        }
    }
}

/// An exporter type that cannot export traces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {exporter} exporter cannot export traces")]
pub struct NotForTraces {
    /// The exporter type.
    pub exporter: &'static str,
}

/// The traces exporter config of an exporter listed in a traces pipeline, or why it cannot
/// export traces.
pub fn traces_exporter_config(spec: &ExporterSpec) -> Result<TracesExporterConfig, NotForTraces> {
    match spec {
        ExporterSpec::Sentry(c) => Ok(TracesExporterConfig::Sentry(SentryTracesConfig {
            dsn: c.dsn.clone(),
            compression: c.compression,
            timeout: c.timeout,
            tls: c.tls.clone(),
            retry_on_failure: c.retry_on_failure.clone(),
            default_rate_limit: c.default_rate_limit,
            ..Default::default()
        })),
        ExporterSpec::Otlp(c) => {
            let t = OtlpTracesConfig {
                endpoint: Some(c.endpoint.clone()),
                compression: c.compression,
                timeout: c.timeout,
                tls: c.tls.clone(),
                headers: c.headers.clone(),
                auth: c.auth.clone(),
                retry_on_failure: c.retry_on_failure.clone(),
                num_consumers: c.num_consumers,
                sending_queue: c.effective_sending_queue(),
                ..Default::default()
            };
            Ok(match c.protocol {
                OtlpProtocol::Grpc => TracesExporterConfig::Otlp(t),
                OtlpProtocol::Http => TracesExporterConfig::OtlpHttp(t),
            })
        }
        ExporterSpec::File(_) => Err(NotForTraces { exporter: "file" }),
        // Its traces instance is a Kafka exporter of its own (`exporters.rs`).
        ExporterSpec::Kafka(_) => Err(NotForTraces { exporter: "kafka" }),
    }
}

/// Reads the files of an exporter's `tls` at `at` (`exporters.otlp`).
fn check_client_tls(at: &str, tls: &ClientTlsConfig) -> Result<(), ConfigError> {
    tls.check().map_err(|e| ConfigError::tls(at, e))
}

/// A setting error of the exporter at `at`, keyed under it.
fn setting(at: &str, e: SettingError) -> ConfigError {
    ConfigError::at(format!("{at}.{}", e.key), e.message)
}

/// Reads `exporters.<id>` (and parses the Sentry DSNs).
pub fn read_exporter(id: &str, value: &Value) -> Result<ExporterSpec, ConfigError> {
    let at = format!("exporters.{id}");
    match component_type(id) {
        "sentry" => {
            let c: SentryExporterConfig = typed(value, &at)?;
            let Some(dsn) = c.dsn.as_deref() else {
                return Err(ConfigError::at(format!("{at}.dsn"), "required"));
            };
            if dsn.trim().is_empty() {
                return Err(ConfigError::at(format!("{at}.dsn"), "is empty"));
            }
            c.check().map_err(|e| setting(&at, e))?;
            c.compression_params
                .level_for(c.compression)
                .map_err(|e| setting(&at, e))?;
            if let Err(e) = Router::new(dsn, c.routing.as_ref()) {
                let msg = e.to_string();
                let msg = msg
                    .strip_prefix("invalid exporter configuration: ")
                    .unwrap_or(&msg);
                return Err(ConfigError::at(format!("{at}.dsn"), msg));
            }
            check_client_tls(&at, &c.tls)?;
            Ok(ExporterSpec::Sentry(c))
        }
        // `otlp_grpc` is the Collector's current name of its OTLP/gRPC exporter, `otlphttp` its
        // former name of `otlp_http`.
        "otlp" | "otlp_grpc" | "otlp_http" | "otlphttp" => {
            let mut c: OtlpExporterConfig = typed(value, &at)?;
            if matches!(component_type(id), "otlp_http" | "otlphttp") {
                let map = value.as_mapping();
                let has = |k: &str| map.is_some_and(|m| m.contains_key(k));
                if !has("protocol") {
                    c.protocol = OtlpProtocol::Http;
                }
                if !has("endpoint") {
                    c.endpoint = "127.0.0.1:4318".into();
                }
            }
            // The Collector's otlphttp exporter waits 30 s, its gRPC one 5 s.
            let map = value.as_mapping();
            if c.protocol == OtlpProtocol::Http && !map.is_some_and(|m| m.contains_key("timeout")) {
                c.timeout = Duration::from_secs(30);
            }
            if c.endpoint.trim().is_empty() {
                return Err(ConfigError::at(format!("{at}.endpoint"), "is empty"));
            }
            c.sending_queue
                .check_request_keys()
                .map_err(|e| setting(&at, e))?;
            check_client_tls(&at, &c.tls)?;
            Ok(ExporterSpec::Otlp(c))
        }
        "kafka" => {
            let c: profilink_kafka::KafkaExporterConfig = typed(value, &at)?;
            c.check().map_err(|e| match e.split_once(": ") {
                Some((key, problem)) => ConfigError::at(format!("{at}.{key}"), problem),
                None => ConfigError::at(at.clone(), e),
            })?;
            Ok(ExporterSpec::Kafka(c))
        }
        "file" => {
            let c: FileExporterConfig = typed(value, &at)?;
            if c.path.as_os_str().is_empty() {
                return Err(ConfigError::at(format!("{at}.path"), "is empty"));
            }
            c.check().map_err(|e| setting(&at, e))?;
            Ok(ExporterSpec::File(c))
        }
        other => Err(ConfigError::at(
            at,
            format!("exporter type {other:?} is not available in this version of profilink"),
        )),
    }
}
