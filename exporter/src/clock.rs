//! Time sources. Everything in the exporters that waits on time (idle timeouts, rate limits,
//! backoff deadlines) reads an injectable [`Clock`], so tests advance time instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A source of monotonic and wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Monotonic time, for deadlines.
    fn now(&self) -> Instant;
    /// Wall-clock time, for `sent_at` and client-report timestamps.
    fn wall(&self) -> SystemTime;
}

/// A shared clock.
pub type SharedClock = Arc<dyn Clock>;

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to (for tests): real time at creation plus the advances.
#[derive(Debug)]
pub struct ManualClock {
    base: Instant,
    wall_base: SystemTime,
    offset_nanos: AtomicU64,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A manual clock starting at the current real time.
    pub fn new() -> Self {
        ManualClock {
            base: Instant::now(),
            wall_base: SystemTime::now(),
            offset_nanos: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.fetch_add(nanos, Ordering::SeqCst);
    }

    fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset_nanos.load(Ordering::SeqCst))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + self.offset()
    }
    fn wall(&self) -> SystemTime {
        self.wall_base + self.offset()
    }
}

/// The system clock as a [`SharedClock`].
pub fn system_clock() -> SharedClock {
    Arc::new(SystemClock)
}
