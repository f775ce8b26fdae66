//! Logs: a `tracing` subscriber writing to standard error, at `service.telemetry.logs.level`,
//! as text (`encoding: console`, default) or JSON lines (`encoding: json`). `RUST_LOG`, when
//! set, overrides the level.

use crate::config::{ConfigError, LogsTelemetry};
use tracing_subscriber::EnvFilter;

/// Checks the level directive and the encoding.
pub fn check(logs: &LogsTelemetry) -> Result<(), ConfigError> {
    EnvFilter::try_new(&logs.level).map_err(|e| {
        ConfigError::at(
            "service.telemetry.logs.level",
            format!("invalid level {:?}", logs.level),
        )
        .with_source(e)
    })?;
    match logs.encoding.as_str() {
        "console" | "json" => Ok(()),
        other => Err(ConfigError::at(
            "service.telemetry.logs.encoding",
            format!("unknown encoding {other:?} (known: console, json)"),
        )),
    }
}

/// Installs the global subscriber (once; later calls do nothing).
pub fn init(logs: &LogsTelemetry) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_new(&logs.level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = if logs.encoding == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
