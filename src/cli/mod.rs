//! The `profilink` command line: argument definitions and exit codes.

pub mod check;
pub mod input;
pub mod run;
pub mod translate;
pub mod validate;

use clap::{Parser, Subcommand, ValueEnum};
use profilink_proto::input::InputFormat;
use std::path::PathBuf;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: an input was rejected (invalid data, findings with errors).
pub const EXIT_REJECTED: u8 = 1;
/// Exit code: usage error (bad flags, missing arguments).
pub const EXIT_USAGE: u8 = 2;

/// profilink carries CPU profiles between OpenTelemetry (OTLP profiles) and Sentry.
#[derive(Debug, Parser)]
#[command(name = "profilink", version, about, long_about = None)]
pub struct Cli {
    /// What to do; without a subcommand, runs the service on the embedded default
    /// configuration (like `profilink run`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check inputs against the OTLP profiles rules and what Sentry's Relay accepts.
    ///
    /// Formats are detected: binary OTLP protobuf, OTLP/JSON, Sentry chunk JSON, NDJSON of
    /// chunks, V1 profile JSON, transactions and envelopes (gzip/zstd-compressed files too).
    /// Prints one line per finding. Exit 0 without errors (with --strict: without warnings
    /// either), 1 otherwise, 2 on usage errors.
    Validate {
        /// Treat warnings as failures.
        #[arg(long)]
        strict: bool,
        /// Input files (`-` for standard input).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Translate between OTLP profiles and Sentry profile chunks.
    ///
    /// `--to sentry` writes NDJSON, one chunk per line; `--to envelope` writes one
    /// `<chunk_id>.envelope` per chunk into the `--output` directory; `--to otlp` writes one
    /// binary `ExportProfilesServiceRequest`; `--to otlp-json` the same as OTLP/JSON.
    /// Exit 0 on success, 1 when an input (or part of it) was rejected, 2 on usage errors.
    Translate {
        /// Output format.
        #[arg(long, value_enum)]
        to: OutputFormat,
        /// Input format, instead of detecting it.
        #[arg(long, value_parser = parse_format)]
        from: Option<InputFormat>,
        /// Output file (directory for `--to envelope`); standard output when absent.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// Sentry transactions (JSONL or envelopes) whose spans link samples (Sentry -> OTLP).
        #[arg(long)]
        transactions: Vec<PathBuf>,
        /// Threads Relay would drop (fewer than 2 samples in a chunk), OTLP -> Sentry: `group`
        /// them into threads Relay keeps (per process: same-name threads together, the rest in
        /// one "other threads" thread; threads with trace links never), then drop what is
        /// still alone; or `drop` them all.
        #[arg(long, value_enum, default_value_t = SparseThreads::Group)]
        sparse_threads: SparseThreads,
        /// Input files (`-` for standard input).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Run the service: receivers, pipelines and exporters, until SIGTERM or SIGINT.
    ///
    /// Without --config, runs the embedded default: OTLP gRPC on 127.0.0.1:4317 and HTTP on
    /// 127.0.0.1:4318, exporting to Sentry when SENTRY_DSN is set, else writing envelope files
    /// into ./profilink-data/. Exit 0 after a clean drain, 2 on configuration errors, 1 when a
    /// component cannot start (port in use, unwritable queue).
    Run {
        /// The configuration file (YAML, in the OpenTelemetry Collector's shape).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Check a configuration file without running it: loads it, expands `${env:VAR}`, and reads
    /// every component section into its typed config. Prints "config OK" and exits 0, or prints
    /// one error line naming the key and exits 2.
    Check {
        /// The configuration file.
        #[arg(long, short)]
        config: PathBuf,
    },
}

/// Output formats of `translate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// NDJSON of Sentry profile chunks.
    Sentry,
    /// One Sentry envelope file per chunk, in a directory.
    Envelope,
    /// Binary OTLP protobuf.
    Otlp,
    /// OTLP/JSON.
    OtlpJson,
}

/// What `translate` does with threads Relay would drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SparseThreads {
    /// Group them into threads Relay keeps, then drop what is still alone.
    Group,
    /// Drop them.
    Drop,
}

fn parse_format(s: &str) -> Result<InputFormat, String> {
    s.parse()
}
