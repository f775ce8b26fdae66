//! A session's open windows: the time grid they are aligned to ([`Grid`]), one open window's
//! merged samples and bookkeeping ([`Window`]), and a session's windows with its newest sample
//! time ([`Session`]).

use crate::config::AccumulateConfig;
use crate::merge::ChunkBuilder;
use crate::queue::consumed::Consumed;
use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The windows `[k * d, (k + 1) * d)` on the samples' Unix-epoch timestamps (seconds), with
/// the lateness bound: window `k` of a session is *expired* once the session's newest sample
/// is `lateness` or more past its end.
#[derive(Debug, Clone, Copy)]
pub(super) struct Grid {
    duration: f64,
    lateness: f64,
}

impl Grid {
    pub(super) fn new(cfg: &AccumulateConfig) -> Self {
        Grid {
            duration: cfg.chunk_duration.as_secs_f64().max(1e-6),
            lateness: cfg.chunk_lateness.as_secs_f64(),
        }
    }

    /// The windows' length (seconds).
    pub(super) fn duration(&self) -> f64 {
        self.duration
    }

    /// The window of a (finite) timestamp. Saturates far outside the epoch's range, so wire
    /// input cannot overflow it.
    pub(super) fn index(&self, ts: f64) -> i64 {
        (ts / self.duration).floor() as i64
    }

    /// Where window `k` starts.
    pub(super) fn start(&self, k: i64) -> f64 {
        k as f64 * self.duration
    }

    /// Where window `k` ends (exclusive).
    pub(super) fn end(&self, k: i64) -> f64 {
        (k as f64 + 1.0) * self.duration
    }

    /// True when a session whose newest sample is at `newest` has passed window `k`.
    pub(super) fn passed(&self, k: i64, newest: f64) -> bool {
        self.end(k) <= newest
    }

    /// True when window `k` is past the lateness bound of a session whose newest sample is at
    /// `newest`: it closes, and samples for it are late.
    pub(super) fn expired(&self, k: i64, newest: f64) -> bool {
        self.end(k) + self.lateness <= newest
    }
}

/// One open window of a session: the chunk being merged and what it holds.
#[derive(Debug)]
pub(super) struct Window {
    pub(super) builder: ChunkBuilder,
    /// Inputs with samples in it (each counted once in the accumulator's `pending`).
    pub(super) inputs: BTreeSet<u64>,
    /// The timestamp range taken from each input part.
    pub(super) consumed: Vec<Consumed>,
    /// Thread ids spans may reference, over every input merged into the chunk.
    pub(super) linked: BTreeSet<CompactString>,
    /// When samples last joined it.
    pub(super) last_added: Instant,
    /// Its earliest and latest sample timestamps.
    pub(super) first: f64,
    pub(super) last: f64,
    /// Set when it was due (for this reason) but may still become one chunk with the next
    /// window: see `pair`.
    pub(super) held: Option<super::EmitReason>,
}

impl Window {
    /// An empty window taking its chunk metadata from `first`.
    pub(super) fn new(first: &ProfileChunk, now: Instant) -> Self {
        Window {
            builder: ChunkBuilder::new(first),
            inputs: BTreeSet::new(),
            consumed: Vec::new(),
            linked: BTreeSet::new(),
            last_added: now,
            first: f64::INFINITY,
            last: f64::NEG_INFINITY,
            held: None,
        }
    }

    /// Its size estimate.
    pub(super) fn est_bytes(&self) -> u64 {
        self.builder.est_bytes()
    }
}

/// A profiler session: its open windows by index, and the newest sample time it has seen (its
/// watermark; it only grows while the session lives).
#[derive(Debug)]
pub(super) struct Session {
    pub(super) windows: BTreeMap<i64, Window>,
    pub(super) newest: f64,
    /// When samples of the session last arrived.
    pub(super) last_activity: Instant,
}

impl Session {
    pub(super) fn new(now: Instant) -> Self {
        Session {
            windows: BTreeMap::new(),
            newest: f64::NEG_INFINITY,
            last_activity: now,
        }
    }

    /// True when no sample arrived for `idle` at `now`.
    pub(super) fn idle(&self, now: Instant, idle: Duration) -> bool {
        now.saturating_duration_since(self.last_activity) >= idle
    }

    /// The windows the newest sample has passed and that no sample joined for `settle` at
    /// `now`, oldest first.
    pub(super) fn settled(&self, grid: &Grid, now: Instant, settle: Duration) -> Vec<i64> {
        self.windows
            .iter()
            .take_while(|(k, _)| grid.passed(**k, self.newest))
            .filter(|(_, w)| w.held.is_none())
            .filter(|(_, w)| now.saturating_duration_since(w.last_added) >= settle)
            .map(|(k, _)| *k)
            .collect()
    }

    /// The earliest instant at which [`Session::idle`] or [`Session::settled`] changes.
    pub(super) fn deadline(&self, grid: &Grid, idle: Duration, settle: Duration) -> Instant {
        let settles = self
            .windows
            .iter()
            .take_while(|(k, _)| grid.passed(**k, self.newest))
            .filter(|(_, w)| w.held.is_none())
            .map(|(_, w)| w.last_added + settle);
        settles
            .chain([self.last_activity + idle])
            .min()
            .unwrap_or(self.last_activity + idle)
    }
}
