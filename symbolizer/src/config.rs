//! [`SymbolizerConfig`]: the `symbolize` processor's keys, also what the CLI flags set.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// One place debug information is looked for (the order of `sources` is the order tried).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// `debug_dirs` in the build-id layout (`DIR/.build-id/ab/cdef….debug`).
    DebugDirs,
    /// The live process's own files, through `<proc_root>/<pid>/maps` and `/root`.
    Process,
    /// debuginfod servers (`debuginfod.urls`), through the on-disk cache.
    Debuginfod,
}

/// The `symbolize` processor's config. Every key has a default (the `symbolize` keys in
/// `docs/configuration.md`); see the README's *Symbolization* section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SymbolizerConfig {
    /// Sources in the order they are tried (default: debug dirs, process, debuginfod).
    pub sources: Vec<SourceKind>,
    /// Directories in the build-id layout (default `/usr/lib/debug`).
    pub debug_dirs: Vec<PathBuf>,
    /// Where the host's `/proc` is mounted (default `/proc`).
    pub proc_root: PathBuf,
    /// How long a request waits for debuginfod downloads it started (default 500 ms); frames
    /// still waiting then go on unsymbolized, counted as `timeout`.
    #[serde(with = "humantime_serde")]
    pub wait: Duration,
    /// Largest object or debug file read or downloaded, in MiB (default 1024).
    pub max_file_size_mib: u64,
    /// Memory for loaded debug information and looked-up addresses, in MiB (default 256).
    pub max_memory_mib: u64,
    /// How long a build id that no source had is not looked for again (default 5 m).
    #[serde(with = "humantime_serde")]
    pub retry_after: Duration,
    /// debuginfod client settings.
    pub debuginfod: DebuginfodConfig,
}

/// `symbolize.debuginfod`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebuginfodConfig {
    /// Server URLs (default: `DEBUGINFOD_URLS`, space-separated, as elfutils reads it).
    pub urls: Option<Vec<String>>,
    /// The on-disk cache of downloaded debug files and negative answers (default
    /// `$XDG_CACHE_HOME/profilink/debuginfod`, else `$HOME/.cache/profilink/debuginfod`).
    pub cache_dir: Option<PathBuf>,
    /// Bound of the on-disk cache in MiB (default 2048); the least recently used files go first.
    pub cache_max_size_mib: u64,
    /// How long a "not found" answer is remembered on disk (default 1 h).
    #[serde(with = "humantime_serde")]
    pub negative_ttl: Duration,
    /// Timeout of one download (default 60 s).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Downloads running at once (default 4); more wait in a queue of 256.
    pub max_concurrent_fetches: usize,
}

impl Default for SymbolizerConfig {
    fn default() -> Self {
        SymbolizerConfig {
            sources: vec![
                SourceKind::DebugDirs,
                SourceKind::Process,
                SourceKind::Debuginfod,
            ],
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            proc_root: PathBuf::from("/proc"),
            wait: Duration::from_millis(500),
            max_file_size_mib: 1024,
            max_memory_mib: 256,
            retry_after: Duration::from_secs(300),
            debuginfod: DebuginfodConfig::default(),
        }
    }
}

impl Default for DebuginfodConfig {
    fn default() -> Self {
        DebuginfodConfig {
            urls: None,
            cache_dir: None,
            cache_max_size_mib: 2048,
            negative_ttl: Duration::from_secs(3600),
            timeout: Duration::from_secs(60),
            max_concurrent_fetches: 4,
        }
    }
}

impl DebuginfodConfig {
    /// The server URLs: `urls`, else `DEBUGINFOD_URLS` split on whitespace.
    pub fn effective_urls(&self) -> Vec<String> {
        match &self.urls {
            Some(u) => u.clone(),
            None => std::env::var("DEBUGINFOD_URLS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        }
    }

    /// The cache directory: `cache_dir`, else the user's cache directory.
    pub fn effective_cache_dir(&self) -> PathBuf {
        if let Some(d) = &self.cache_dir {
            return d.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })
            .unwrap_or_else(|| PathBuf::from("./profilink-data"));
        base.join("profilink").join("debuginfod")
    }
}

impl SymbolizerConfig {
    /// Checks values a config file could get wrong; the message names the key.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.sources.is_empty() {
            return Err(("sources".into(), "must name at least one source".into()));
        }
        if self.max_file_size_mib == 0 {
            return Err(("max_file_size_mib".into(), "must be at least 1".into()));
        }
        if self.max_memory_mib == 0 {
            return Err(("max_memory_mib".into(), "must be at least 1".into()));
        }
        if self.debuginfod.max_concurrent_fetches == 0 {
            return Err((
                "debuginfod.max_concurrent_fetches".into(),
                "must be at least 1".into(),
            ));
        }
        for u in self.debuginfod.urls.iter().flatten() {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err((
                    "debuginfod.urls".into(),
                    format!("{u:?} is not an http:// or https:// URL"),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn max_file_size(&self) -> u64 {
        self.max_file_size_mib.saturating_mul(1 << 20)
    }
}
