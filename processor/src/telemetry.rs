//! The processing stage's metric families, read from its counters: `profilink_translation_*`,
//! `profilink_translated_*`, `profilink_sampling_*` (every profiles pipeline,
//! [`ServiceCounters`]), `profilink_store_*` (the store writer, [`StoreCounters`]),
//! `profilink_join_*` (join buffers, [`JoinMetrics`]) and `profilink_linking_*` (span
//! stamping, [`StampCounters`]). The service's registry serves them at `/metrics`.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `profilink_translation_errors_total` | counter | `reason` | profiles / chunks that could not be translated (`index_out_of_range`, `sentry_index_out_of_range`, `invalid_timestamp`, `limit_exceeded`, `invalid`), and chunks removed because they failed the chunk validator (`invalid_chunk`: translated chunks, and received Sentry chunks bound for a chunk exporter; never sent) |
//! | `profilink_translation_dropped_samples_total` | counter | `reason` | observations lost in OTLP → Sentry translation (`expansion`, `size`) |
//! | `profilink_translation_refused_requests_total` | counter | `reason` | OTLP requests the amplification budget refused before translating them: `amplification` (for good), `budget_full` (retry later) |
//! | `profilink_translation_skipped_profiles_total` | counter | `sample_type` | OTLP profiles not translated to chunks because their `"type:unit"` is not a CPU/wall type of the sample-type table (heap, allocations, locks, off-CPU…); at most 64 types, the rest as `other` |
//! | `profilink_translation_sibling_profiles_total` | counter | | OTLP CPU/wall profiles not translated because a sibling profile (the same recording under another sample type, as pprof → OTLP makes them) was |
//! | `profilink_translated_chunks_total` | counter | | Sentry chunks produced from OTLP |
//! | `profilink_translated_profiles_total` | counter | | Sentry chunks and V1 profiles translated to OTLP |
//! | `profilink_sampling_dropped_chunks_total` | counter | | chunks dropped by `profile_sampling` |
//! | `profilink_sampling_dropped_profiles_total` | counter | | OTLP profiles and V1 profiles dropped by `profile_sampling` |
//! | `profilink_store_chunks_total` | counter | `outcome` | chunks offered to the `profile_store`: `stored`, `dropped` (its pending queue was full), `failed` (refused or not written) |
//! | `profilink_store_link_failures_total` | counter | | batches of transactions the `profile_store` could not link to chunks |
//! | `profilink_store_pending_bytes` | gauge | | estimated bytes of chunks waiting to be stored |
//! | `profilink_join_released_chunks_total` | counter | `pipeline`, `reason` | chunks released by a Sentry → OTLP pipeline's join buffer: `covered` (spans ended past their end by more than the session's longest span plus 1 s), `window`, `overflow` (bounds), `shutdown` |
//! | `profilink_join_unlinked_chunks_total` | counter | `pipeline` | chunks released with no span of their profiler overlapping them |
//! | `profilink_join_evicted_spans_total` | counter | `pipeline` | spans forgotten early to stay within `max_spans` |
//! | `profilink_join_dropped_requests_total` | counter | `pipeline` | linked requests dropped from memory while OTLP exporters refused (with a join log their chunks come back at the next start) |
//! | `profilink_join_restored_chunks_total`, `profilink_join_restored_spans_total` | counter | `pipeline` | held chunks and spans read back from the join log at start |
//! | `profilink_join_log_corrupt_records_total` | counter | `pipeline` | join log records skipped at start because they did not read |
//! | `profilink_join_log_failures_total` | counter | `pipeline`, `operation` | join log writes that failed: `append` (the request was refused, 503) or `ack` (the records come back at the next start) |
//! | `profilink_join_held_bytes`, `profilink_join_held_chunks`, `profilink_join_kept_spans`, `profilink_join_log_bytes` | gauge | `pipeline` | the join buffer's size, in memory and (join log) on disk |
//! | `profilink_linking_stamped_spans_total` | counter | `pipeline`, `source` | spans given `sentry.profiler_id`: from their linked `samples` or derived from their `resource` |
//! | `profilink_linking_thread_ids_total` | counter | `pipeline` | spans given `thread.id` from their linked samples |
//! | `profilink_linking_waiting_bytes` | gauge | `pipeline` | traces waiting for their profiles |

use crate::counters::TRANSLATION_ERROR_REASONS;
use crate::{JoinMetrics, ServiceCounters, StampCounters, StoreCounters};
use profilink_consumer::telemetry::{Render, Text};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

impl Render for ServiceCounters {
    fn render(&self, f: &mut Text<'_>) {
        let c = self;
        let name = "profilink_translation_errors_total";
        f.header(
            name,
            "counter",
            "Profiles or chunks that could not be translated, by reason.",
        );
        for reason in TRANSLATION_ERROR_REASONS {
            f.sample(name, &[("reason", reason)], c.translation_errors(reason));
        }
        let name = "profilink_translation_skipped_profiles_total";
        f.header(
            name,
            "counter",
            "OTLP profiles not translated to chunks because their sample type is not CPU/wall, by sample_type.",
        );
        for (label, n) in c.skipped_types() {
            f.sample(name, &[("sample_type", &label)], n);
        }
        let name = "profilink_translation_sibling_profiles_total";
        f.header(
            name,
            "counter",
            "OTLP profiles not translated because a sibling (the same recording under another sample type) was.",
        );
        f.sample(name, &[], load(&c.skipped_sibling_profiles));
        let name = "profilink_translation_dropped_samples_total";
        f.header(
            name,
            "counter",
            "Observations lost in OTLP to Sentry translation, by reason.",
        );
        f.sample(
            name,
            &[("reason", "expansion")],
            load(&c.dropped_samples_expansion),
        );
        f.sample(name, &[("reason", "size")], load(&c.dropped_samples_size));
        let name = "profilink_translation_refused_requests_total";
        f.header(
            name,
            "counter",
            "OTLP requests the amplification budget refused before translating them, by reason.",
        );
        f.sample(
            name,
            &[("reason", "amplification")],
            load(&c.budget_rejected_requests),
        );
        f.sample(
            name,
            &[("reason", "budget_full")],
            load(&c.budget_full_requests),
        );
        let plain: [(&str, &str, &AtomicU64); 4] = [
            (
                "profilink_translated_chunks_total",
                "Sentry chunks produced from OTLP profiles.",
                &c.translated_chunks,
            ),
            (
                "profilink_translated_profiles_total",
                "Sentry chunks and V1 profiles translated to OTLP.",
                &c.translated_profiles,
            ),
            (
                "profilink_sampling_dropped_chunks_total",
                "Chunks dropped by profile_sampling.",
                &c.sampling_dropped_chunks,
            ),
            (
                "profilink_sampling_dropped_profiles_total",
                "OTLP and V1 profiles dropped by profile_sampling.",
                &c.sampling_dropped_profiles,
            ),
        ];
        for (name, help, v) in plain {
            f.header(name, "counter", help);
            f.sample(name, &[], load(v));
        }
    }
}

impl Render for StoreCounters {
    fn render(&self, f: &mut Text<'_>) {
        let st = self;
        let name = "profilink_store_chunks_total";
        f.header(
            name,
            "counter",
            "Chunks offered to the profile store, by outcome.",
        );
        f.sample(name, &[("outcome", "stored")], load(&st.stored));
        f.sample(name, &[("outcome", "dropped")], load(&st.dropped));
        f.sample(name, &[("outcome", "failed")], load(&st.failed));
        let name = "profilink_store_link_failures_total";
        f.header(
            name,
            "counter",
            "Batches of transactions the profile store could not link.",
        );
        f.sample(name, &[], load(&st.failed_links));
        let name = "profilink_store_pending_bytes";
        f.header(
            name,
            "gauge",
            "Estimated bytes of chunks waiting to be stored.",
        );
        f.sample(name, &[], load(&st.pending_bytes));
    }
}

/// The `profilink_join_*` families of the join buffers of Sentry → OTLP pipelines, by
/// pipeline (none, no families).
pub struct Joins<'a>(pub &'a [(String, Arc<JoinMetrics>)]);

impl Render for Joins<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let joins = self.0;
        if joins.is_empty() {
            return;
        }
        let name = "profilink_join_released_chunks_total";
        f.header(
            name,
            "counter",
            "Chunks released by the trace-linking join buffer, by reason.",
        );
        for (p, m) in joins {
            for (reason, v) in [
                ("covered", &m.released_covered),
                ("window", &m.released_window),
                ("overflow", &m.released_overflow),
                ("shutdown", &m.released_shutdown),
            ] {
                f.sample(name, &[("pipeline", p), ("reason", reason)], load(v));
            }
        }
        f.per_entry(
            "counter",
            "pipeline",
            joins,
            &[
                (
                    "profilink_join_unlinked_chunks_total",
                    "Chunks released with no span of their profiler overlapping them.",
                    |m| &m.unlinked,
                ),
                (
                    "profilink_join_evicted_spans_total",
                    "Spans forgotten early to stay within max_spans.",
                    |m| &m.spans_evicted,
                ),
                (
                    "profilink_join_dropped_requests_total",
                    "Linked OTLP requests dropped from memory because too many waited for a refusing exporter (with a join log their chunks come back at the next start).",
                    |m| &m.dropped_requests,
                ),
                (
                    "profilink_join_restored_chunks_total",
                    "Held chunks read back from the join log at start.",
                    |m| &m.restored_chunks,
                ),
                (
                    "profilink_join_restored_spans_total",
                    "Spans read back from the join log at start.",
                    |m| &m.restored_spans,
                ),
                (
                    "profilink_join_log_corrupt_records_total",
                    "Join log records skipped at start because they did not read.",
                    |m| &m.log_corrupt,
                ),
            ],
        );
        let name = "profilink_join_log_failures_total";
        f.header(
            name,
            "counter",
            "Join log writes that failed: append (the request was refused) or ack (the records come back at the next start).",
        );
        for (p, m) in joins {
            for (operation, v) in [
                ("append", &m.log_append_failures),
                ("ack", &m.log_ack_failures),
            ] {
                f.sample(name, &[("pipeline", p), ("operation", operation)], load(v));
            }
        }
        f.per_entry(
            "gauge",
            "pipeline",
            joins,
            &[
                (
                    "profilink_join_held_bytes",
                    "Estimated bytes of chunks held by the join buffer.",
                    |m| &m.held_bytes,
                ),
                (
                    "profilink_join_held_chunks",
                    "Chunks held by the join buffer.",
                    |m| &m.held_chunks,
                ),
                (
                    "profilink_join_kept_spans",
                    "Spans kept by the join buffer for linking.",
                    |m| &m.kept_spans,
                ),
                (
                    "profilink_join_log_bytes",
                    "Bytes of live join log records on disk (0 for a join in memory).",
                    |m| &m.log_bytes,
                ),
            ],
        );
    }
}

/// The `profilink_linking_*` families of the span stamping of traces pipelines, by pipeline
/// (none, no families).
pub struct Stamping<'a>(pub &'a [(String, Arc<StampCounters>)]);

impl Render for Stamping<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let stamping = self.0;
        if stamping.is_empty() {
            return;
        }
        let name = "profilink_linking_stamped_spans_total";
        f.header(
            name,
            "counter",
            "Spans given sentry.profiler_id, by where it came from.",
        );
        for (p, c) in stamping {
            f.sample(
                name,
                &[("pipeline", p), ("source", "samples")],
                load(&c.profiler_from_samples),
            );
            f.sample(
                name,
                &[("pipeline", p), ("source", "resource")],
                load(&c.profiler_from_resource),
            );
        }
        f.per_entry(
            "counter",
            "pipeline",
            stamping,
            &[(
                "profilink_linking_thread_ids_total",
                "Spans given thread.id from their linked samples.",
                |c| &c.thread_ids,
            )],
        );
        f.per_entry(
            "gauge",
            "pipeline",
            stamping,
            &[(
                "profilink_linking_waiting_bytes",
                "Bytes of traces waiting for their profiles.",
                |c| &c.waiting_bytes,
            )],
        );
    }
}
