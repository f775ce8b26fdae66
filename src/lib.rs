//! The `profilink` service and command line, as a library: configuration, pipelines,
//! self-telemetry and the CLI commands. The `profilink` binary is a thin `main` over [`cli`].

pub mod cli;
pub mod config;
pub mod service;
pub mod telemetry;
