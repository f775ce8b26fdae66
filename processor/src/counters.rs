//! The counters every profiles pipeline shares: translation outcomes and what the
//! `profile_sampling` processors dropped (`profilink_translation_*`, `profilink_translated_*`,
//! `profilink_sampling_*` metrics).

use profilink_translator::TranslateError;
use std::sync::atomic::{AtomicU64, Ordering};

/// Translation error reasons, in counter order: the translator's ([`TranslateError::REASONS`])
/// and [`INVALID_CHUNK_REASON`].
pub(crate) const TRANSLATION_ERROR_REASONS: [&str; 6] = [
    TranslateError::REASONS[0],
    TranslateError::REASONS[1],
    TranslateError::REASONS[2],
    TranslateError::REASONS[3],
    TranslateError::REASONS[4],
    INVALID_CHUNK_REASON,
];

/// The `reason` of a translated chunk removed because it failed the chunk validator.
pub(crate) const INVALID_CHUNK_REASON: &str = "invalid_chunk";

/// Counters of the pipelines (translation and processors), shared by every pipeline.
#[derive(Debug, Default)]
pub struct ServiceCounters {
    translation_errors: [AtomicU64; TRANSLATION_ERROR_REASONS.len()],
    /// Sentry chunks produced from OTLP.
    pub translated_chunks: AtomicU64,
    /// Sentry chunks and V1 profiles translated to OTLP.
    pub translated_profiles: AtomicU64,
    /// Observations lost to `max_expanded_samples` in OTLP → Sentry translation.
    pub dropped_samples_expansion: AtomicU64,
    /// Observations that did not fit in `max_chunk_bytes` in OTLP → Sentry translation.
    pub dropped_samples_size: AtomicU64,
    /// Chunks dropped by `profile_sampling`.
    pub sampling_dropped_chunks: AtomicU64,
    /// OTLP and V1 profiles dropped by `profile_sampling`.
    pub sampling_dropped_profiles: AtomicU64,
    /// Requests refused for good by the amplification budget (`reason="amplification"`).
    pub budget_rejected_requests: AtomicU64,
    /// Requests refused because the shared amplification budget was exhausted
    /// (`reason="budget_full"`; the client retries).
    pub budget_full_requests: AtomicU64,
    /// CPU/wall profiles skipped as siblings of a translated one (one recording under several
    /// sample types).
    pub skipped_sibling_profiles: AtomicU64,
    /// Non-CPU profiles skipped, by `"type:unit"` (at most [`MAX_SKIPPED_TYPES`] labels; the
    /// rest under [`SKIPPED_TYPES_OVERFLOW`]).
    skipped_types: std::sync::Mutex<Vec<(String, u64)>>,
}

/// Distinct `sample_type` labels of skipped profiles kept; further types are counted under
/// [`SKIPPED_TYPES_OVERFLOW`].
pub const MAX_SKIPPED_TYPES: usize = 64;

/// The `sample_type` label of skipped profiles past [`MAX_SKIPPED_TYPES`] types (or with a
/// label longer than 256 bytes).
pub const SKIPPED_TYPES_OVERFLOW: &str = "other";

impl ServiceCounters {
    /// Counts one translation error.
    pub fn translation_error(&self, e: &TranslateError) {
        let reason = e.reason();
        if let Some(i) = TRANSLATION_ERROR_REASONS.iter().position(|r| *r == reason) {
            self.translation_errors[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts `n` chunks removed by the chunk validator (`invalid_chunk`).
    pub fn invalid_chunks(&self, n: u64) {
        if let Some(i) = TRANSLATION_ERROR_REASONS
            .iter()
            .position(|r| *r == INVALID_CHUNK_REASON)
        {
            Self::add(&self.translation_errors[i], n);
        }
    }

    /// Counts a request the amplification budget refused with `e`.
    pub fn budget_refusal(&self, e: &profilink_consumer::ConsumeError) {
        let counter = match e {
            profilink_consumer::ConsumeError::Full { .. } => &self.budget_full_requests,
            _ => &self.budget_rejected_requests,
        };
        Self::add(counter, 1);
    }

    /// Counts non-CPU profiles skipped per `"type:unit"` (a translation's
    /// `skipped_sample_types`).
    pub fn skipped_sample_types(&self, skipped: &[(String, u64)]) {
        if skipped.is_empty() {
            return;
        }
        let mut v = self.skipped_types.lock().unwrap_or_else(|p| p.into_inner());
        for (label, n) in skipped {
            let label = if label.len() > 256 {
                SKIPPED_TYPES_OVERFLOW
            } else {
                label.as_str()
            };
            let known = v.iter().position(|(l, _)| l == label);
            let at = match known {
                Some(i) => i,
                None if v.len() < MAX_SKIPPED_TYPES => {
                    v.push((label.to_owned(), 0));
                    v.len() - 1
                }
                None => match v.iter().position(|(l, _)| l == SKIPPED_TYPES_OVERFLOW) {
                    Some(i) => i,
                    None => {
                        v.push((SKIPPED_TYPES_OVERFLOW.to_owned(), 0));
                        v.len() - 1
                    }
                },
            };
            v[at].1 = v[at].1.saturating_add(*n);
        }
    }

    /// Non-CPU profiles skipped so far, by `"type:unit"`.
    pub fn skipped_types(&self) -> Vec<(String, u64)> {
        self.skipped_types
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Translation errors counted for `reason`.
    pub fn translation_errors(&self, reason: &str) -> u64 {
        TRANSLATION_ERROR_REASONS
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.translation_errors[i].load(Ordering::Relaxed))
    }

    /// Adds `n` to one of the public counters.
    pub fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            // Saturating: some counts are producers' claims (aggregated sample values), and a
            // counter that wraps would go backwards.
            let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_add(n))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_types_are_bounded() {
        let c = ServiceCounters::default();
        c.skipped_sample_types(&[("alloc:bytes".into(), 2), ("lock:ns".into(), 1)]);
        c.skipped_sample_types(&[("alloc:bytes".into(), 1)]);
        assert_eq!(
            c.skipped_types(),
            vec![("alloc:bytes".to_owned(), 3), ("lock:ns".to_owned(), 1)]
        );
        for i in 0..100 {
            c.skipped_sample_types(&[(format!("t{i}:u"), 1)]);
        }
        let types = c.skipped_types();
        assert_eq!(types.len(), MAX_SKIPPED_TYPES + 1);
        assert_eq!(
            types.last().unwrap(),
            &(SKIPPED_TYPES_OVERFLOW.to_owned(), 38)
        );
    }

    #[test]
    fn counters_saturate_instead_of_wrapping() {
        // Some counts are producers' claims (aggregated values up to i64::MAX): a counter that
        // wrapped would go backwards.
        let c = AtomicU64::new(u64::MAX - 1);
        ServiceCounters::add(&c, 5);
        assert_eq!(c.load(Ordering::Relaxed), u64::MAX);
        ServiceCounters::add(&c, u64::MAX);
        assert_eq!(c.load(Ordering::Relaxed), u64::MAX);
        let c = AtomicU64::new(7);
        ServiceCounters::add(&c, 0);
        ServiceCounters::add(&c, 3);
        assert_eq!(c.load(Ordering::Relaxed), 10);
    }
}
