//! Exponential backoff with jitter, as the OpenTelemetry Collector's `retry_on_failure`
//! (initial 5 s, max 30 s, multiplier 1.5, randomization 0.5, max elapsed 300 s by default).

use crate::config::RetryConfig;
use std::time::{Duration, Instant};

/// Backoff state of one item being retried.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    interval: Duration,
    started: Option<Instant>,
}

/// `interval` scaled by a random factor in `[1 - r, 1 + r]` (`u` uniform in `[0, 1)`).
pub fn jittered(interval: Duration, randomization: f64, u: f64) -> Duration {
    let r = randomization.clamp(0.0, 1.0);
    let factor = 1.0 - r + 2.0 * r * u.clamp(0.0, 1.0);
    Duration::from_secs_f64((interval.as_secs_f64() * factor).max(0.0))
}

impl Backoff {
    /// Fresh state.
    pub fn new(cfg: &RetryConfig) -> Self {
        Backoff {
            interval: cfg.initial_interval,
            started: None,
        }
    }

    /// The wait before the next attempt after a failure at `now`, or `None` when retrying is
    /// disabled or the next attempt would start after `max_elapsed_time` since the first
    /// failure. A server-given delay (`Retry-After`, `RetryInfo`) lengthens the computed one:
    /// the wait is the larger of the two, as the Collector's retry sender waits.
    pub fn next(
        &mut self,
        cfg: &RetryConfig,
        now: Instant,
        server_hint: Option<Duration>,
    ) -> Option<Duration> {
        if !cfg.enabled {
            return None;
        }
        let started = *self.started.get_or_insert(now);
        let backoff = jittered(
            self.interval,
            cfg.randomization_factor,
            rand::random::<f64>(),
        );
        let wait = server_hint.map_or(backoff, |hint| hint.max(backoff));
        let grown = self.interval.as_secs_f64() * cfg.multiplier.max(1.0);
        self.interval = Duration::from_secs_f64(grown.min(cfg.max_interval.as_secs_f64()).max(0.0));
        if !cfg.max_elapsed_time.is_zero() {
            let elapsed = now.saturating_duration_since(started) + wait;
            if elapsed > cfg.max_elapsed_time {
                return None;
            }
        }
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_caps_and_gives_up() {
        let cfg = RetryConfig {
            randomization_factor: 0.0,
            ..Default::default()
        };
        let mut b = Backoff::new(&cfg);
        let t0 = Instant::now();
        let mut waits = Vec::new();
        let mut t = t0;
        while let Some(w) = b.next(&cfg, t, None) {
            waits.push(w.as_secs_f64());
            t += w;
        }
        assert_eq!(&waits[..4], &[5.0, 7.5, 11.25, 16.875]);
        assert!(waits.iter().all(|w| *w <= 30.0));
        assert!(t.duration_since(t0) <= Duration::from_secs(300));
        assert!(t.duration_since(t0) > Duration::from_secs(250));
    }

    #[test]
    fn jitter_range_and_hint() {
        assert_eq!(
            jittered(Duration::from_secs(10), 0.5, 0.0),
            Duration::from_secs(5)
        );
        assert_eq!(
            jittered(Duration::from_secs(10), 0.5, 1.0),
            Duration::from_secs(15)
        );
        let cfg = RetryConfig {
            randomization_factor: 0.0,
            ..Default::default()
        };
        // The larger of the backoff (5 s first) and the server's delay.
        let mut b = Backoff::new(&cfg);
        assert_eq!(
            b.next(&cfg, Instant::now(), Some(Duration::from_secs(2))),
            Some(Duration::from_secs(5))
        );
        let mut b = Backoff::new(&cfg);
        assert_eq!(
            b.next(&cfg, Instant::now(), Some(Duration::from_secs(20))),
            Some(Duration::from_secs(20))
        );
        let off = RetryConfig {
            enabled: false,
            ..Default::default()
        };
        assert_eq!(Backoff::new(&off).next(&off, Instant::now(), None), None);
    }
}
