//! The `profile_sampling` processor: keeps or drops whole profiler sessions, deterministically.
//!
//! A session is kept when `fraction(profiler_id) < session_sample_rate`, where `fraction` maps
//! the profiler id to `[0, 1)` with a fixed hash (64-bit FNV-1a, top 53 bits). Every chunk of a
//! session, on every replica and after every restart, gets the same decision, so a kept
//! session is complete and a dropped one costs nothing downstream.
//!
//! What the profiler id is depends on the data:
//! * Sentry chunks: their `profiler_id`;
//! * OTLP data translated to chunks: the chunk's derived `profiler_id` (see the translator);
//! * OTLP data forwarded as OTLP: the profiler id the translator would derive from the
//!   resource attributes (`sentry.profiler_id`, or the process identity attributes), so both
//!   directions agree whenever the identity is on the resource.

use serde::Deserialize;

/// `processors.profile_sampling`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingConfig {
    /// Fraction of profiler sessions kept, in `[0, 1]` (default 1: keep everything).
    pub session_sample_rate: f64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            session_sample_rate: 1.0,
        }
    }
}

/// The decision function of a `profile_sampling` processor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    rate: f64,
}

impl Sampler {
    /// A sampler keeping `rate` of the sessions.
    pub fn new(config: &SamplingConfig) -> Self {
        Sampler {
            rate: config.session_sample_rate,
        }
    }

    /// True when the session `profiler_id` is kept.
    pub fn keep(&self, profiler_id: &str) -> bool {
        if self.rate >= 1.0 {
            return true;
        }
        if self.rate <= 0.0 {
            return false;
        }
        fraction(profiler_id) < self.rate
    }
}

/// Maps an id to `[0, 1)`: FNV-1a 64 of its bytes (ASCII-lowercased, so hex ids in either case
/// agree), top 53 bits.
pub fn fraction(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b.to_ascii_lowercase());
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV's low bits mix poorly on short inputs; fold the high half in before taking the top.
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_proportional() {
        let half = Sampler::new(&SamplingConfig {
            session_sample_rate: 0.5,
        });
        let ids: Vec<String> = (0..10_000u32).map(|i| format!("{i:032x}")).collect();
        let kept = ids.iter().filter(|id| half.keep(id)).count();
        assert!((4_500..5_500).contains(&kept), "{kept}");
        for id in &ids[..100] {
            assert_eq!(half.keep(id), half.keep(id));
            assert_eq!(half.keep(id), half.keep(&id.to_uppercase()));
        }
        let all = Sampler::new(&SamplingConfig::default());
        let none = Sampler::new(&SamplingConfig {
            session_sample_rate: 0.0,
        });
        assert!(ids.iter().all(|id| all.keep(id)));
        assert!(ids.iter().all(|id| !none.keep(id)));
        assert!(ids.iter().all(|id| (0.0..1.0).contains(&fraction(id))));
    }
}
