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

    pub(crate) fn inc(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
