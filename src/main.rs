//! The `profilink` binary.

use clap::Parser;
use profilink::cli::{self, Cli, Command, EXIT_REJECTED, EXIT_USAGE};
use std::process::ExitCode;

// jemalloc, with the settings in `profilink::allocator` (see the README's numbers).
profilink::global_allocator!();

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with exit 0; real usage errors exit 2.
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    for gate in &cli.feature_gates {
        eprintln!("warning: --feature-gates {gate}: profilink has no feature gates; ignored");
    }
    let sources = cli.sources();
    if sources.is_none() && !cli.set.is_empty() {
        eprintln!("error: --set needs --config (it overrides keys of the configuration)");
        return ExitCode::from(EXIT_USAGE);
    }
    let code = match cli.command {
        None | Some(Command::Run) => cli::run::run(sources.as_ref()),
        Some(Command::Check) => match &sources {
            Some(s) => cli::check::run(s),
            None => usage("check needs --config"),
        },
        Some(Command::Components) => cli::components::run(),
        Some(Command::Validate { strict, inputs }) => match (&sources, inputs.is_empty()) {
            (Some(s), true) => cli::check::run(s),
            (None, false) => cli::validate::run(&inputs, strict),
            (Some(_), false) => usage("validate takes either --config or data inputs, not both"),
            (None, true) => usage("validate needs inputs (or --config to check a configuration)"),
        },
        Some(Command::Translate { .. }) if sources.is_some() => {
            usage("translate does not use --config")
        }
        Some(Command::Translate {
            to,
            from,
            output,
            transactions,
            sparse_threads,
            cpu_sample_types,
            symbolize,
            debug_dirs,
            debuginfod,
            symbol_cache,
            debuginfod_timeout,
            symbol_max_file_size_mib,
            inputs,
        }) => {
            let args = cli::translate::Args {
                to,
                from,
                output: output.as_deref(),
                transactions: &transactions,
                sparse_threads,
                sample_types: cpu_sample_types.iter().fold(
                    profilink_translator::otlp_to_sentry::SampleTypes::default(),
                    |t, (ty, unit, o)| t.with(ty, unit, *o),
                ),
                symbolize: symbolize.then(|| {
                    let mut cfg =
                        cli::symbolize::symbolize_config(debug_dirs, debuginfod, symbol_cache);
                    cli::symbolize::symbolize_bounds(
                        &mut cfg,
                        debuginfod_timeout,
                        symbol_max_file_size_mib,
                    );
                    cfg
                }),
                inputs: &inputs,
            };
            match cli::translate::run(&args) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    EXIT_REJECTED
                }
            }
        }
    };
    ExitCode::from(code)
}

/// Prints a usage error; exit 2.
fn usage(msg: &str) -> u8 {
    eprintln!("error: {msg}");
    EXIT_USAGE
}
