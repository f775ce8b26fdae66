//! The `profilink` command line: argument definitions and exit codes.

pub mod check;
pub mod components;
pub mod input;
pub mod output;
pub mod run;
pub mod translate;
pub mod translate_pprof;
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
    /// What to do; without a subcommand, runs the service (like `profilink run`): on the
    /// `--config` sources when given (as `otelcol --config`), else on the embedded default.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// A configuration source, as the Collector's `--config`: `PATH`, `file:PATH`,
    /// `env:NAME` (YAML in an environment variable) or `yaml:TEXT`. Repeatable: sources are
    /// merged in order (mappings key by key, later wins). Used by `run`, `validate --config`
    /// and `check`.
    #[arg(long, short, global = true, value_name = "URI")]
    pub config: Vec<String>,
    /// Set one configuration key after merging the `--config` sources: `KEY=VALUE`, KEY a
    /// `::` path (`exporters::sentry::timeout=10s`), VALUE YAML. Repeatable.
    #[arg(long, global = true, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Accepted for parity with the Collector's command line; profilink has no feature
    /// gates, so each gate named is ignored with a warning.
    #[arg(long, global = true, value_delimiter = ',', value_name = "GATES")]
    pub feature_gates: Vec<String>,
}

impl Cli {
    /// The `--config` and `--set` values (None when no `--config` was given).
    pub fn sources(&self) -> Option<crate::config::sources::Sources> {
        (!self.config.is_empty()).then(|| crate::config::sources::Sources {
            configs: self.config.clone(),
            sets: self.set.clone(),
        })
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check inputs against the OTLP profiles rules and what Sentry's Relay accepts; with
    /// `--config` (and no inputs), check a configuration instead, as `otelcol validate`.
    ///
    /// Formats are detected: binary OTLP protobuf, OTLP/JSON, Sentry chunk JSON, NDJSON of
    /// chunks, V1 profile JSON, transactions and envelopes (gzip/zstd-compressed files too).
    /// Prints one line per finding. Exit 0 without errors (with --strict: without warnings
    /// either), 1 otherwise, 2 on usage errors (and on configuration errors).
    Validate {
        /// Treat warnings as failures.
        #[arg(long)]
        strict: bool,
        /// Input files (`-` for standard input); none with `--config`.
        inputs: Vec<PathBuf>,
    },
    /// Translate between OTLP profiles, Sentry profile chunks, pprof and folded stacks.
    ///
    /// Inputs: OTLP, Sentry, pprof (gzipped or not) and folded stacks (`root;...;leaf N` per
    /// line), detected or named by `--from`. `--to sentry` writes NDJSON, one chunk per line;
    /// `--to envelope` writes one `<chunk_id>.envelope` per chunk into the `--output`
    /// directory; `--to otlp` writes one binary `ExportProfilesServiceRequest`; `--to
    /// otlp-json` the same as OTLP/JSON; `--to pprof` one gzipped pprof profile.
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
        /// Also translate profiles of this sample type, OTLP -> Sentry (repeatable):
        /// `TYPE:UNIT` (values are sample counts when UNIT is `count`, else time over the
        /// period), or `TYPE:UNIT=count` / `TYPE:UNIT=period`. Added to the built-in table
        /// (`samples`, `cpu`, `wall`, `events`, async-profiler's `itimer`/`ctimer`/...).
        #[arg(long = "cpu-sample-type", value_parser = parse_sample_type)]
        cpu_sample_types: Vec<(
            String,
            String,
            profilink_translator::otlp_to_sentry::Observations,
        )>,
        /// Name native frames of OTLP inputs first (function, file, line, inline chains) from
        /// debug directories, the live processes' files under /proc and debuginfod servers.
        #[arg(long)]
        symbolize: bool,
        /// Debug directory in the build-id layout (repeatable; default /usr/lib/debug).
        #[arg(long = "debug-dir", requires = "symbolize")]
        debug_dirs: Vec<PathBuf>,
        /// debuginfod server URL (repeatable; default: DEBUGINFOD_URLS).
        #[arg(long = "debuginfod", requires = "symbolize")]
        debuginfod: Vec<String>,
        /// Directory of the debuginfod download cache (default
        /// $XDG_CACHE_HOME/profilink/debuginfod, else ~/.cache/profilink/debuginfod).
        #[arg(long = "symbol-cache", requires = "symbolize")]
        symbol_cache: Option<PathBuf>,
        /// Input files (`-` for standard input).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
    /// Run the service: receivers, pipelines and exporters, until SIGTERM or SIGINT.
    ///
    /// With `--config` (repeatable, merged; `--set` overrides), runs that configuration
    /// (YAML in the OpenTelemetry Collector's shape). Without, runs the embedded default: OTLP
    /// gRPC on 127.0.0.1:4317 and HTTP on 127.0.0.1:4318, exporting to Sentry when SENTRY_DSN
    /// is set, else writing envelope files into ./profilink-data/. Exit 0 after a clean
    /// drain, 2 on configuration errors, 1 when a component cannot start (port in use,
    /// unwritable queue).
    Run,
    /// Check a configuration without running it (same as `validate --config`): loads and
    /// merges the `--config` sources, applies `--set`, expands references, and reads every
    /// component section into its typed config. Prints "config OK" and exits 0, or prints one
    /// error line naming the key and exits 2.
    Check,
    /// List the receivers, processors, exporters and extensions this build has, with their
    /// stability per signal (YAML, as `otelcol components`).
    Components,
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
    /// Gzipped pprof (`samples/count`, plus `cpu|wall/nanoseconds` when the period is known).
    Pprof,
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

/// A `--cpu-sample-type` value.
fn parse_sample_type(
    text: &str,
) -> Result<
    (
        String,
        String,
        profilink_translator::otlp_to_sentry::Observations,
    ),
    String,
> {
    profilink_translator::otlp_to_sentry::SampleTypes::parse_pair(text).map_err(|e| e.to_string())
}
