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

mod exporters;
mod extensions;
mod plan;
mod processors;
mod receivers;
#[cfg(test)]
mod tests;

pub use exporters::{ExporterSpec, NotForTraces, read_exporter, traces_exporter_config};
pub use extensions::{ExtensionSpec, read_extension};
pub use plan::{Components, Plan, is_traces_pipeline};
pub use processors::{BatchConfig, ProcessorSpec, read_processor};
pub use receivers::{ReceiverSpec, read_receiver};
