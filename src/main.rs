//! The `profilink` binary.

use clap::Parser;
use profilink::cli::{self, Cli, Command, EXIT_REJECTED, EXIT_USAGE};
use std::process::ExitCode;

/// mimalloc: per-thread free lists suit the service's many short-lived allocations on
/// several threads far better than glibc malloc (see `benches/` and the README's numbers).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let code = match cli.command {
        None => cli::run::run(None),
        Some(Command::Run { config }) => cli::run::run(config.as_deref()),
        Some(Command::Check { config }) => cli::check::run(&config),
        Some(Command::Validate { strict, inputs }) => cli::validate::run(&inputs, strict),
        Some(Command::Translate {
            to,
            from,
            output,
            transactions,
            sparse_threads,
            inputs,
        }) => {
            let args = cli::translate::Args {
                to,
                from,
                output: output.as_deref(),
                transactions: &transactions,
                sparse_threads,
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
