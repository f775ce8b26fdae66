//! Counters of the pprof receiver's pulls (`remote` scrapes and `file` reads): each one ends
//! as a success or a failure with a [`ScrapeFailure`] reason, counted and logged. What a
//! successful pull delivers is counted like a request's profiles (the listener's
//! [`Counters`](crate::Counters)).

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a pull failed: the `reason` label of `profilink_receiver_scrape_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScrapeFailure {
    /// The endpoint could not be reached (connection refused, DNS, TLS).
    Connect,
    /// The endpoint answered with a status other than 200.
    Status,
    /// The pull did not finish within its `timeout`.
    Timeout,
    /// The body (or a file) is larger than the limit.
    TooLarge,
    /// The body could not be read to its end.
    Read,
    /// The body is not a pprof profile the translator reads.
    Invalid,
    /// The pipeline was full.
    Full,
    /// The pipeline refused the profile for good (e.g. the amplification budget).
    Rejected,
    /// The pipeline failed.
    Unavailable,
    /// A file could not be opened or read, or the glob failed.
    File,
}

impl ScrapeFailure {
    /// Every reason, in label order.
    pub const ALL: [ScrapeFailure; 10] = [
        ScrapeFailure::Connect,
        ScrapeFailure::Status,
        ScrapeFailure::Timeout,
        ScrapeFailure::TooLarge,
        ScrapeFailure::Read,
        ScrapeFailure::Invalid,
        ScrapeFailure::Full,
        ScrapeFailure::Rejected,
        ScrapeFailure::Unavailable,
        ScrapeFailure::File,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ScrapeFailure::Connect => "connect",
            ScrapeFailure::Status => "status",
            ScrapeFailure::Timeout => "timeout",
            ScrapeFailure::TooLarge => "too_large",
            ScrapeFailure::Read => "read",
            ScrapeFailure::Invalid => "invalid",
            ScrapeFailure::Full => "full",
            ScrapeFailure::Rejected => "rejected",
            ScrapeFailure::Unavailable => "unavailable",
            ScrapeFailure::File => "file",
        }
    }
}

/// Pulls of one listener (all counters only grow).
#[derive(Debug, Default)]
pub struct ScrapeCounters {
    succeeded: AtomicU64,
    failed: [AtomicU64; ScrapeFailure::ALL.len()],
}

impl ScrapeCounters {
    /// Counts a pull whose profile reached the pipeline (or held nothing).
    pub fn success(&self) {
        self.succeeded.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed pull.
    pub fn failure(&self, reason: ScrapeFailure) {
        self.failed[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Successful pulls so far.
    pub fn successes(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// `(reason, pulls)` of every reason that failed a pull so far.
    pub fn failures(&self) -> Vec<(ScrapeFailure, u64)> {
        ScrapeFailure::ALL
            .iter()
            .map(|r| (*r, self.failed[*r as usize].load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_by_reason() {
        for (i, r) in ScrapeFailure::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let c = ScrapeCounters::default();
        c.success();
        c.failure(ScrapeFailure::Status);
        c.failure(ScrapeFailure::Status);
        assert_eq!(c.successes(), 1);
        assert_eq!(c.failures(), [(ScrapeFailure::Status, 2)]);
    }
}
