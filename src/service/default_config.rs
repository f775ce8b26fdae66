//! The embedded default configuration: what `profilink` runs with no arguments.
//!
//! * receivers: OTLP gRPC on `127.0.0.1:4317` and OTLP/HTTP on `127.0.0.1:4318`;
//! * one `profiles` pipeline to
//!   * the `sentry` exporter when `SENTRY_DSN` is set (queue in `./profilink-data/queue`),
//!   * else the `file` exporter, writing `<chunk_id>.envelope` files into `./profilink-data/`
//!     (queue in `./profilink-data/queue`);
//! * metrics at `127.0.0.1:8888/metrics` (if that port is taken, the service runs without).
//!
//! Environment overrides (for running several instances side by side, and for tests):
//!
//! | variable | default |
//! |---|---|
//! | `PROFILINK_OTLP_GRPC_ENDPOINT` | `127.0.0.1:4317` |
//! | `PROFILINK_OTLP_HTTP_ENDPOINT` | `127.0.0.1:4318` |
//! | `PROFILINK_METRICS_ADDRESS` | `127.0.0.1:8888` (`none` disables it) |
//! | `PROFILINK_DATA_DIR` | `./profilink-data` |
//! | `SENTRY_DSN` | unset: write files instead of sending |

use crate::config::{Config, ConfigError};
use crate::service::components::Plan;

/// Overrides the default OTLP gRPC endpoint.
pub const ENV_OTLP_GRPC_ENDPOINT: &str = "PROFILINK_OTLP_GRPC_ENDPOINT";
/// Overrides the default OTLP/HTTP endpoint.
pub const ENV_OTLP_HTTP_ENDPOINT: &str = "PROFILINK_OTLP_HTTP_ENDPOINT";
/// Overrides the default metrics address.
pub const ENV_METRICS_ADDRESS: &str = "PROFILINK_METRICS_ADDRESS";
/// Overrides the default data directory.
pub const ENV_DATA_DIR: &str = "PROFILINK_DATA_DIR";
/// The Sentry DSN; when set, the default configuration exports to Sentry.
pub const ENV_SENTRY_DSN: &str = "SENTRY_DSN";

/// The default of each overridable variable.
pub const DEFAULTS: [(&str, &str); 4] = [
    (ENV_OTLP_GRPC_ENDPOINT, "127.0.0.1:4317"),
    (ENV_OTLP_HTTP_ENDPOINT, "127.0.0.1:4318"),
    (ENV_METRICS_ADDRESS, "127.0.0.1:8888"),
    (ENV_DATA_DIR, "./profilink-data"),
];

const RECEIVERS: &str = r#"receivers:
  otlp:
    protocols:
      grpc: { endpoint: "${env:PROFILINK_OTLP_GRPC_ENDPOINT}" }
      http: { endpoint: "${env:PROFILINK_OTLP_HTTP_ENDPOINT}" }
"#;

const SERVICE: &str = r#"  telemetry:
    metrics: { address: "${env:PROFILINK_METRICS_ADDRESS}" }
    logs: { level: info }
"#;

/// The default configuration text for the file exporter (no `SENTRY_DSN`).
pub fn file_yaml() -> String {
    format!(
        r#"{RECEIVERS}exporters:
  file:
    path: "${{env:PROFILINK_DATA_DIR}}"
    sending_queue: {{ storage: "${{env:PROFILINK_DATA_DIR}}/queue" }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [file] }}
{SERVICE}"#
    )
}

/// The default configuration text for the Sentry exporter (`SENTRY_DSN` set).
pub fn sentry_yaml() -> String {
    format!(
        r#"{RECEIVERS}exporters:
  sentry:
    dsn: "${{env:SENTRY_DSN}}"
    sending_queue: {{ storage: "${{env:PROFILINK_DATA_DIR}}/queue" }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
{SERVICE}"#
    )
}

/// The default plan, reading the environment through `lookup` (unset or empty overrides take
/// their defaults; an empty `SENTRY_DSN` counts as unset).
pub fn plan(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Plan, ConfigError> {
    let get = |name: &str| -> Option<String> {
        lookup(name).filter(|v| !v.trim().is_empty()).or_else(|| {
            DEFAULTS
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_string())
        })
    };
    let text = if get(ENV_SENTRY_DSN).is_some() {
        sentry_yaml()
    } else {
        file_yaml()
    };
    Plan::new(Config::from_yaml(&text, &get)?)
}

/// The default plan from the process environment.
pub fn plan_from_env() -> Result<Plan, ConfigError> {
    plan(&|name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::components::{ExporterSpec, ReceiverSpec};
    use std::path::PathBuf;

    #[test]
    fn file_by_default_sentry_with_a_dsn() {
        let p = plan(&|_| None).unwrap();
        match &p.components.exporters["file"] {
            ExporterSpec::File(f) => {
                assert_eq!(f.path, PathBuf::from("./profilink-data"));
                assert_eq!(f.queue_dir(), PathBuf::from("./profilink-data/queue"));
            }
            other => panic!("{other:?}"),
        }
        match &p.components.receivers["otlp"] {
            ReceiverSpec::Otlp { grpc, http } => {
                assert_eq!(grpc.as_ref().unwrap().endpoint, "127.0.0.1:4317");
                assert_eq!(http.as_ref().unwrap().endpoint, "127.0.0.1:4318");
            }
            other => panic!("{other:?}"),
        }
        let env = |n: &str| match n {
            "SENTRY_DSN" => Some("https://0123456789abcdef0123456789abcdef@o.example/7".into()),
            "PROFILINK_OTLP_GRPC_ENDPOINT" => Some("127.0.0.1:0".into()),
            "PROFILINK_DATA_DIR" => Some("/tmp/x".into()),
            _ => None,
        };
        let p = plan(&env).unwrap();
        assert!(matches!(
            p.components.exporters["sentry"],
            ExporterSpec::Sentry(_)
        ));
        assert_eq!(
            p.components.exporters["sentry"].queue_dir(),
            Some(PathBuf::from("/tmp/x/queue"))
        );
        assert_eq!(p.config.service.telemetry.metrics.address, "127.0.0.1:8888");
    }
}
