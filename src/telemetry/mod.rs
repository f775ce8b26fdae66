//! The service's own telemetry: Prometheus metrics ([`metrics`]), the `health_check`
//! extension ([`health`]) and logs ([`logs`]).

pub mod health;
pub mod http;
pub mod logs;
pub mod metrics;
pub mod summary;
