//! `profilink check --config FILE`: validates a configuration without running it.

use super::{EXIT_OK, EXIT_USAGE};
use crate::service::components::Plan;
use std::path::Path;

/// A message on one line (newlines of nested errors folded into spaces).
pub fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Loads `config`, expands its variables and reads every component into its typed config.
/// Prints `config OK` (exit 0) or one `error: <key>: <problem>` line (exit 2).
pub fn run(config: &Path) -> u8 {
    match Plan::load(config) {
        Ok(_) => {
            println!("config OK");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&e.0));
            EXIT_USAGE
        }
    }
}
