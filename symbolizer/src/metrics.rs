//! The symbolizer's counters, read by the service's `/metrics` and by the CLI's summary.

use std::sync::atomic::{AtomicU64, Ordering};

/// What happened to one native location (see the metrics table in `docs/configuration.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Named from debug information or symbols.
    Symbolized,
    /// An object was found (or none anywhere) but nothing names the address.
    NoDebugInfo,
    /// A file with the mapping's name was found, with another build id or file id.
    BuildIdMismatch,
    /// The debuginfod servers did not have it, or a download failed.
    FetchFailed,
    /// A download was still running when the request's wait ran out.
    Timeout,
    /// Not a native frame (already named, or no address / mapping).
    NotNative,
}

impl Outcome {
    /// Every outcome, in metric order.
    pub const ALL: [Outcome; 6] = [
        Outcome::Symbolized,
        Outcome::NoDebugInfo,
        Outcome::BuildIdMismatch,
        Outcome::FetchFailed,
        Outcome::Timeout,
        Outcome::NotNative,
    ];

    /// The `outcome` label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Symbolized => "symbolized",
            Outcome::NoDebugInfo => "no_debug_info",
            Outcome::BuildIdMismatch => "build_id_mismatch",
            Outcome::FetchFailed => "fetch_failed",
            Outcome::Timeout => "timeout",
            Outcome::NotNative => "not_native",
        }
    }

    fn index(self) -> usize {
        Outcome::ALL.iter().position(|o| *o == self).unwrap_or(0)
    }
}

/// Why one debuginfod download failed (the `reason` label of
/// `profilink_symbolizer_debuginfod_fetch_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchFailure {
    /// The body (declared or as it streamed) went past `max_file_size_mib`.
    TooLarge,
    /// The download was still running at the end of its time budget (`debuginfod.timeout`).
    Timeout,
    /// The body broke off before its end.
    Truncated,
    /// A whole body whose GNU build id is not the one asked for (or not an ELF file).
    BuildIdMismatch,
    /// The server answered with a status other than 200 or 404.
    HttpStatus,
    /// No answer: connection refused or reset, DNS, TLS.
    Transport,
    /// The download could not be written into the cache directory.
    CacheWrite,
}

impl FetchFailure {
    /// Every reason, in metric order.
    pub const ALL: [FetchFailure; 7] = [
        FetchFailure::TooLarge,
        FetchFailure::Timeout,
        FetchFailure::Truncated,
        FetchFailure::BuildIdMismatch,
        FetchFailure::HttpStatus,
        FetchFailure::Transport,
        FetchFailure::CacheWrite,
    ];

    /// The `reason` label value (also what a `.failed` cache entry holds).
    pub fn label(self) -> &'static str {
        match self {
            FetchFailure::TooLarge => "too_large",
            FetchFailure::Timeout => "timeout",
            FetchFailure::Truncated => "truncated",
            FetchFailure::BuildIdMismatch => "build_id_mismatch",
            FetchFailure::HttpStatus => "http_status",
            FetchFailure::Transport => "transport",
            FetchFailure::CacheWrite => "cache_write",
        }
    }

    fn index(self) -> usize {
        FetchFailure::ALL
            .iter()
            .position(|r| *r == self)
            .unwrap_or(0)
    }
}

/// The counters (monotonic).
#[derive(Debug, Default)]
pub struct SymbolizerMetrics {
    frames: [AtomicU64; 6],
    /// Address lookups answered from the in-memory (build id, address) cache.
    pub cache_hits: AtomicU64,
    /// Address lookups that went to the object's debug information.
    pub cache_misses: AtomicU64,
    /// Completed debuginfod downloads of a debug file (checked against its build id).
    pub debuginfod_fetches_ok: AtomicU64,
    /// debuginfod lookups every server answered "not found".
    pub debuginfod_fetches_not_found: AtomicU64,
    /// debuginfod lookups that failed (transport error, size bound, wrong build id).
    pub debuginfod_fetches_failed: AtomicU64,
    /// Bytes of debug files downloaded from debuginfod.
    pub debuginfod_bytes: AtomicU64,
    fetch_errors: [AtomicU64; 7],
}

impl SymbolizerMetrics {
    /// Adds `n` locations with `outcome`.
    pub fn add_frames(&self, outcome: Outcome, n: u64) {
        self.frames[outcome.index()].fetch_add(n, Ordering::Relaxed);
    }

    /// Locations counted with `outcome` so far.
    pub fn frames(&self, outcome: Outcome) -> u64 {
        self.frames[outcome.index()].load(Ordering::Relaxed)
    }

    /// Counts one failed download from one server.
    pub(crate) fn add_fetch_error(&self, reason: FetchFailure) {
        self.fetch_errors[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Failed downloads (one per server tried) with `reason` so far.
    pub fn fetch_errors(&self, reason: FetchFailure) -> u64 {
        self.fetch_errors[reason.index()].load(Ordering::Relaxed)
    }

    /// Failed downloads (one per server tried), every reason.
    pub fn fetch_errors_total(&self) -> u64 {
        FetchFailure::ALL
            .iter()
            .map(|&r| self.fetch_errors(r))
            .sum()
    }

    pub(crate) fn inc(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
