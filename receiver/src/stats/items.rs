//! Per-item counters of the Sentry receiver: items no pipeline consumes and nothing forwards
//! (`dropped`, by item type) and items refused with a reason (`refused`, by item type and
//! reason), plus a rate limiter for the log lines that report them.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Item counters; labels are bounded (`crate::upstream::item_type_label`, static reasons).
#[derive(Debug, Default)]
pub struct ItemCounters {
    dropped: Mutex<BTreeMap<&'static str, u64>>,
    refused: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    forwarded: AtomicU64,
}

impl ItemCounters {
    /// Counts `n` items of `item_type` dropped: no pipeline consumes them and there is no
    /// upstream to forward them to.
    pub fn drop_items(&self, item_type: &'static str, n: u64) {
        if n > 0 {
            *lock(&self.dropped).entry(item_type).or_default() += n;
        }
    }

    /// Counts `n` items of `item_type` refused for `reason`.
    pub fn refuse_items(&self, item_type: &'static str, reason: &'static str, n: u64) {
        if n > 0 {
            *lock(&self.refused).entry((item_type, reason)).or_default() += n;
        }
    }

    /// Counts one request handed to the upstream.
    pub fn forwarded_request(&self) {
        self.forwarded.fetch_add(1, Ordering::Relaxed);
    }

    /// `(type, count)` of dropped items, sorted.
    pub fn dropped(&self) -> Vec<(&'static str, u64)> {
        lock(&self.dropped).iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// `(type, reason, count)` of refused items, sorted.
    pub fn refused(&self) -> Vec<(&'static str, &'static str, u64)> {
        lock(&self.refused)
            .iter()
            .map(|((t, r), v)| (*t, *r, *v))
            .collect()
    }

    /// Requests handed to the upstream.
    pub fn forwarded_requests(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets one log line through per interval and counts the ones it held back.
#[derive(Debug)]
pub struct LogLimiter {
    every: Duration,
    start: Instant,
    /// Milliseconds since `start` of the last line let through, plus one (0: never).
    last: AtomicU64,
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// At most one line per `every`.
    pub fn new(every: Duration) -> Self {
        LogLimiter {
            every,
            start: Instant::now(),
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(lines held back since the last one)` when a line may be logged now.
    pub fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64 + 1;
        let last = self.last.load(Ordering::Relaxed);
        let every = self.every.as_millis() as u64;
        if last != 0 && now.saturating_sub(last) < every {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if self
            .last
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

impl Default for LogLimiter {
    fn default() -> Self {
        LogLimiter::new(Duration::from_secs(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_label() {
        let c = ItemCounters::default();
        c.drop_items("event", 2);
        c.drop_items("event", 1);
        c.drop_items("session", 0);
        c.refuse_items("profile_chunk", "no-samples", 1);
        assert_eq!(c.dropped(), vec![("event", 3)]);
        assert_eq!(c.refused(), vec![("profile_chunk", "no-samples", 1)]);
    }

    #[test]
    fn limiter_lets_one_through_per_interval() {
        let l = LogLimiter::new(Duration::from_secs(3600));
        assert_eq!(l.allow(), Some(0));
        assert_eq!(l.allow(), None);
        assert_eq!(l.allow(), None);
        let quick = LogLimiter::new(Duration::ZERO);
        assert_eq!(quick.allow(), Some(0));
        assert_eq!(quick.allow(), Some(0));
    }
}
