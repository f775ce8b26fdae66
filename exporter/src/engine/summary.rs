//! The account of one run of an exporter, logged when it stops.

use crate::metrics::DiscardReason;

/// Where the samples of one run of an exporter went, logged when it stops. Every sample taken
/// in (`accepted` by `export`, plus `replayed` from the queue at start) is either
/// `delivered`, still `queued` (open windows, merged chunks not yet persisted or not yet
/// delivered: sent after the next start), dropped as sparse (`sparse_dropped`, threads Relay
/// would drop), or dropped for a reason (`dropped`); `replay_skipped` counts replayed samples
/// left out because a persisted chunk already held them (they are counted in `queued` or
/// `delivered` through that chunk).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Samples accepted by `export` in this run.
    pub accepted: u64,
    /// Samples replayed from the queue at start.
    pub replayed: u64,
    /// Replayed samples a persisted chunk already held.
    pub replay_skipped: u64,
    /// Samples in delivered chunks.
    pub delivered: u64,
    /// Samples still queued at exit.
    pub queued: u64,
    /// Samples of threads Relay would drop, dropped before sending.
    pub sparse_dropped: u64,
    /// Samples of dropped chunks, by reason.
    pub dropped: Vec<(DiscardReason, u64)>,
}

impl RunSummary {
    /// `reason=n` pairs of the non-zero drop reasons, or `none`.
    pub fn dropped_text(&self) -> String {
        let parts: Vec<String> = self
            .dropped
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{}={n}", r.as_str()))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(",")
        }
    }
}
