//! `translate --symbolize`: the symbolizer config of the flags, and naming the native frames
//! of the OTLP inputs, with what was named and why the rest was not on stderr.

use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_symbolizer::{FetchFailure, Symbolizer, SymbolizerConfig};
use std::path::PathBuf;

/// The symbolizer config of `--symbolize` and its flags: debug directories (default
/// `/usr/lib/debug`), debuginfod URLs (default `DEBUGINFOD_URLS`), the download cache, and a
/// wait as long as one download may take, plus [`DOWNLOAD_GRACE`] (an offline command waits
/// for its downloads).
pub fn symbolize_config(
    debug_dirs: Vec<PathBuf>,
    debuginfod: Vec<String>,
    symbol_cache: Option<PathBuf>,
) -> SymbolizerConfig {
    let mut cfg = SymbolizerConfig::default();
    if !debug_dirs.is_empty() {
        cfg.debug_dirs = debug_dirs;
    }
    if !debuginfod.is_empty() {
        cfg.debuginfod.urls = Some(debuginfod);
    }
    cfg.debuginfod.cache_dir = symbol_cache;
    cfg.wait = cfg.debuginfod.timeout + DOWNLOAD_GRACE;
    cfg
}

/// How much longer than one download's budget `translate --symbolize` waits: a download that
/// runs out of its budget is then counted `fetch_failed` with its reason, not `timeout`.
pub const DOWNLOAD_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// `--debuginfod-timeout` (the download budget, and the wait with [`DOWNLOAD_GRACE`]) and
/// `--symbol-max-file-size-mib` over `cfg`.
pub fn symbolize_bounds(
    cfg: &mut SymbolizerConfig,
    timeout: Option<std::time::Duration>,
    max_file_size_mib: Option<u64>,
) {
    if let Some(t) = timeout {
        cfg.debuginfod.timeout = t;
        cfg.wait = t + DOWNLOAD_GRACE;
    }
    if let Some(m) = max_file_size_mib {
        cfg.max_file_size_mib = m;
    }
}

/// Names the native frames of every OTLP input (`(name, request)`); says on stderr what was named and why the
/// rest was not.
pub fn run(cfg: &SymbolizerConfig, inputs: &mut [(String, ExportProfilesServiceRequest)]) {
    // The symbolizer's warnings (a failed download, once per build id) go to stderr.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .try_init();
    let symbolizer = Symbolizer::new(cfg.clone());
    for (name, req) in inputs.iter_mut() {
        let s = symbolizer.symbolize_request(req);
        let mut rest: Vec<String> = s
            .unsymbolized
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        rest.sort();
        let rest = if rest.is_empty() {
            String::new()
        } else {
            format!(", not: {}", rest.join(", "))
        };
        eprintln!("{name}: symbolized {} native frame(s){rest}", s.symbolized);
    }
    // Dropped first: its downloads stop (their partial files removed), so the counts below
    // are final and match the negative entries on disk.
    let m = symbolizer.metrics();
    drop(symbolizer);
    let failures: Vec<String> = FetchFailure::ALL
        .iter()
        .filter_map(|&r| {
            let n = m.fetch_errors(r);
            (n > 0).then(|| format!("{n} {}", r.label()))
        })
        .collect();
    if !failures.is_empty() {
        eprintln!(
            "debuginfod: {} download(s) failed: {}",
            m.fetch_errors_total(),
            failures.join(", ")
        );
    }
}
