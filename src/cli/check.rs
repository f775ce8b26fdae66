//! `profilink validate --config URI...` (and `profilink check`): validates a configuration
//! without running it.

use super::{EXIT_OK, EXIT_USAGE};
use crate::config::Config;
use crate::config::sources::Sources;
use crate::service::components::Plan;

/// A message on one line (newlines of nested errors folded into spaces).
pub fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Loads and merges the sources, expands their references and reads every component into its
/// typed config. Prints `config OK` (exit 0) or one `error: <key>: <problem>` line (exit 2).
pub fn run(sources: &Sources) -> u8 {
    match Config::from_sources(sources).and_then(Plan::new) {
        Ok(_) => {
            println!("config OK");
            EXIT_OK
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&e.to_string()));
            EXIT_USAGE
        }
    }
}
