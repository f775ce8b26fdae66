//! The run summary logged when the service stops: where every sample of the run went.
//!
//! One line for the whole service (receivers, translation, sampling) and one per chunk
//! exporter. The receivers' line counts observations (`received_samples`, `refused_samples`),
//! sample records (the Collector's unit) and refused requests: a request refused before its
//! body was read (a full pipeline at the door, authentication, version) counts only there.
//! Each chunk exporter's line: `accepted + replayed = delivered + queued + sparse_dropped + dropped`, where
//! `replayed` is what the queue held at start and `queued` what it holds at exit (sent after
//! the next start). The exporters also log the same numbers themselves as they stop.

use super::metrics::Registry;
use std::sync::atomic::Ordering;

/// Logs the summary lines of `registry` (call once the exporters have stopped).
pub fn log_run_summary(registry: &Registry) {
    let (mut accepted, mut refused, mut refused_requests) = (0u64, 0u64, 0u64);
    let (mut accepted_records, mut refused_records) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    for r in &registry.receivers {
        // Several listeners of one receiver share its counters: count each set once.
        let c = r.counters();
        if seen.insert(std::ptr::from_ref(c)) {
            accepted += c.accepted_samples.load(Ordering::Relaxed);
            refused += c.refused_samples.load(Ordering::Relaxed);
            refused_requests += c.refused_requests.load(Ordering::Relaxed);
            let records = c.sample_records.snapshot();
            for counts in records
                .by_type
                .iter()
                .map(|(_, n)| n)
                .chain(records.overflow.as_ref())
            {
                accepted_records += counts.accepted;
                refused_records += counts.refused;
            }
        }
    }
    let c = &registry.counters;
    tracing::info!(
        received_samples = accepted,
        refused_samples = refused,
        received_sample_records = accepted_records,
        refused_sample_records = refused_records,
        refused_requests,
        translation_dropped_expansion = c.dropped_samples_expansion.load(Ordering::Relaxed),
        translation_dropped_size = c.dropped_samples_size.load(Ordering::Relaxed),
        sampling_dropped_chunks = c.sampling_dropped_chunks.load(Ordering::Relaxed),
        sampling_dropped_profiles = c.sampling_dropped_profiles.load(Ordering::Relaxed),
        "run summary: receivers"
    );
    for e in &registry.exporters {
        let m = e.metrics.snapshot();
        if m.accepted_samples == 0 && m.replayed_samples == 0 {
            continue;
        }
        let dropped: u64 = m.dropped_samples.iter().map(|(_, n)| n).sum();
        let queued = (m.accepted_samples + m.replayed_samples).saturating_sub(
            m.sent_samples + m.sparse_samples_dropped + m.invalid_samples + dropped,
        );
        let reasons: Vec<String> = m
            .dropped_samples
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{}={n}", r.as_str()))
            .collect();
        tracing::info!(
            exporter = %e.id,
            accepted = m.accepted_samples,
            replayed = m.replayed_samples,
            delivered = m.sent_samples,
            queued,
            sparse_dropped = m.sparse_samples_dropped,
            invalid = m.invalid_samples,
            dropped = %if reasons.is_empty() { "none".to_owned() } else { reasons.join(",") },
            "run summary: exporter samples"
        );
    }
}
