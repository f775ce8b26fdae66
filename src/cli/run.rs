//! `profilink run [--config FILE]` (and `profilink` with no arguments): runs the service until
//! SIGTERM or SIGINT, then drains it. A second signal during the drain exits at once (130);
//! whatever was accepted stays in the durable queues.
//!
//! `PROFILINK_SHUTDOWN_TIMEOUT` (a duration such as `10s`, default 10 s) bounds the drain.
//! Without `--config`, the embedded default configuration runs (see
//! [`crate::service::default_config`] for its environment overrides).

use super::check::one_line;
use super::{EXIT_OK, EXIT_REJECTED, EXIT_USAGE};
use crate::config::Config;
use crate::config::sources::Sources;
use crate::service::components::Plan;
use crate::service::{self, DEFAULT_SHUTDOWN_TIMEOUT, ServiceOptions, default_config};
use crate::telemetry::logs;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

/// Bounds the drain after SIGTERM/SIGINT (humantime duration).
pub const ENV_SHUTDOWN_TIMEOUT: &str = "PROFILINK_SHUTDOWN_TIMEOUT";

/// Exit code after a second signal cut the drain short.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The drain deadline from `PROFILINK_SHUTDOWN_TIMEOUT`, or the default.
pub fn shutdown_timeout() -> Result<Duration, String> {
    match std::env::var(ENV_SHUTDOWN_TIMEOUT) {
        Ok(v) if !v.trim().is_empty() => humantime_serde::re::humantime::parse_duration(v.trim())
            .map_err(|e| format!("{ENV_SHUTDOWN_TIMEOUT}: invalid duration {v:?}: {e}")),
        _ => Ok(DEFAULT_SHUTDOWN_TIMEOUT),
    }
}

/// Runs the service; returns the process exit code.
pub fn run(config: Option<&Sources>) -> u8 {
    let plan = match config {
        Some(sources) => Config::from_sources(sources).and_then(Plan::new),
        None => default_config::plan_from_env(),
    };
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            return EXIT_USAGE;
        }
    };
    let shutdown_timeout = match shutdown_timeout() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    logs::init(&plan.config.service.telemetry.logs);
    match config {
        Some(sources) => {
            tracing::info!(config = %sources.configs.join(" "), "starting profilink {}", env!("CARGO_PKG_VERSION"))
        }
        None => tracing::info!(
            "starting profilink {} with the default configuration",
            env!("CARGO_PKG_VERSION")
        ),
    }
    let options = ServiceOptions {
        metrics_optional: config.is_none(),
        shutdown_timeout,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("profilink")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_REJECTED;
        }
    };
    let code = runtime.block_on(async move {
        // Registered before anything starts, so an early SIGTERM still drains.
        let (mut term, mut int) = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(t), Ok(i)) => (t, i),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("error: cannot install signal handlers: {e}");
                return EXIT_REJECTED;
            }
        };
        let shutdown = async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!("{name} received");
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
                eprintln!("second signal: exiting without finishing the drain (accepted data stays queued)");
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            });
        };
        match service::run(plan, options, shutdown).await {
            Ok(()) => EXIT_OK,
            Err(e) => {
                eprintln!("error: {}", one_line(&e.to_string()));
                EXIT_REJECTED
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}
