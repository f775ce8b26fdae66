//! The `profilink` service and command line, as a library: the composition root over the
//! workspace's crates. [`config`] reads the configuration, [`service`] builds and runs the
//! receivers, the processing stage (`profilink-processor`) and the exporters it names,
//! [`telemetry`] serves the service's own metrics, health and logs, [`pprof`] CPU profiles of
//! profilink itself, and [`cli`] holds the commands. The `profilink` binary is a thin `main` over [`cli`].

pub mod allocator;
pub mod cli;
pub mod config;
pub mod pprof;
pub mod service;
pub mod telemetry;
