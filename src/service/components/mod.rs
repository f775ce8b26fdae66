//! Reading every component section of a [`Config`](crate::config::Config) into its typed config, and the checks that
//! need the typed values ([`Plan::new`]).
//!
//! | section | type | typed config | notes |
//! |---|---|---|---|
//! | receivers | `otlp` | `protocols.grpc` → [`OtlpGrpcConfig`](profilink_receiver::OtlpGrpcConfig), `protocols.http` → [`OtlpHttpConfig`](profilink_receiver::OtlpHttpConfig) | at least one protocol; `grpc:` with no value means "enabled, defaults" |
//! | receivers | `sentry` | [`SentryReceiverConfig`](profilink_receiver::SentryReceiverConfig) | Relay-compatible envelope endpoint |
//! | receivers | `pprof` | [`PprofReceiverConfig`](profilink_receiver::PprofReceiverConfig) | `server`, `remote`, `file` (at least one); `self` refused |
//! | receivers | `pyroscope` | [`PyroscopeReceiverConfig`](profilink_receiver::PyroscopeReceiverConfig) | `/ingest` and the push API |
//! | processors | `batch` | [`BatchConfig`] | |
//! | processors | `profile_sampling` | [`SamplingConfig`](profilink_processor::SamplingConfig) | `session_sample_rate` in `[0, 1]` |
//! | processors | `profile_linking` | [`LinkingConfig`](profilink_processor::LinkingConfig) | join buffer (Sentry → OTLP) and span stamping (traces) |
//! | exporters | `sentry` | [`SentryExporterConfig`](profilink_exporter::SentryExporterConfig) | `dsn` required and parsed here |
//! | exporters | `otlp` (alias `otlp_grpc`), `otlp_http` (alias `otlphttp`) | [`OtlpExporterConfig`](profilink_exporter::OtlpExporterConfig) | `otlp_http` defaults to `protocol: http`, `127.0.0.1:4318` |
//! | exporters | `file` | [`FileExporterConfig`](profilink_exporter::FileExporterConfig) | |
//! | extensions | `health_check` | [`HealthCheckConfig`](crate::telemetry::health::HealthCheckConfig) | |
//! | extensions | `profile_store` | [`StoreConfig`](profilink_flamegraph::StoreConfig) | keeps every chunk of every pipeline |
//! | extensions | `flamegraph_api` | [`ApiConfig`](profilink_flamegraph::ApiConfig) | needs a `profile_store` in `service.extensions` |
//! | extensions | `file_storage` | [`FileStorageConfig`] | directory of the queues whose `sending_queue.storage` names it (see `storage.rs`) |
//! | extensions | `bearertokenauth` | [`BearerTokenAuthConfig`](profilink_receiver::auth::BearerTokenAuthConfig) | named by `auth.authenticator` of receivers and exporters (`auth.rs`) |
//! | extensions | `pprof` | [`PprofConfig`](crate::pprof::PprofConfig) | at most one runs |
//!
//! Errors are one line naming the key, like the rest of the configuration's. `tls` files
//! (certificates, keys, CAs) are read here, so a bad one fails `profilink check` and the start
//! with the key that names it.

mod auth;
#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod collector_tests;
mod exporters;
mod extensions;
mod plan;
mod processors;
mod receivers;
mod storage;
#[cfg(test)]
mod tests;

pub use exporters::{ExporterSpec, NotForTraces, read_exporter, traces_exporter_config};
pub use extensions::{ExtensionSpec, read_extension};
pub use plan::{Components, Plan, is_traces_pipeline};
pub use processors::{BatchConfig, ProcessorSpec, read_processor};
pub use receivers::{ReceiverSpec, read_receiver, read_upstream};
pub use storage::{CompactionConfig, FileStorageConfig, component_file_name, join_log_dir};
