//! [`ServiceOptions`]: how the service runs, beyond its configuration.

use std::time::Duration;

/// How the service runs, beyond its configuration.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// When the metrics endpoint cannot be bound, log a warning and run without it (the
    /// zero-config default) instead of failing.
    pub metrics_optional: bool,
    /// How long the drain may take: receivers finishing in-flight requests, then exporters
    /// sending what they can (default 10 s; `PROFILINK_SHUTDOWN_TIMEOUT` in the binary).
    pub shutdown_timeout: Duration,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            metrics_optional: false,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// The default drain deadline.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
