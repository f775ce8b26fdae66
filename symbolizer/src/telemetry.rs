//! The `symbolize` processors' metric families, read from their [`SymbolizerMetrics`]:
//! `profilink_symbolizer_*`, by pipeline. The service's registry serves them at `/metrics`.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `profilink_symbolizer_frames_total` | counter | `pipeline`, `outcome` | native locations seen by a `symbolize` processor: `symbolized`, `no_debug_info`, `build_id_mismatch`, `fetch_failed`, `timeout`, `not_native` |
//! | `profilink_symbolizer_cache_{hits,misses}_total` | counter | `pipeline` | address lookups answered from the (build id, address) cache / from the debug information |
//! | `profilink_symbolizer_debuginfod_fetches_total` | counter | `pipeline`, `result` | debuginfod lookups: `ok`, `not_found`, `error` |
//! | `profilink_symbolizer_debuginfod_fetch_errors_total` | counter | `pipeline`, `reason` | failed debuginfod downloads, one per server tried: `too_large`, `timeout`, `truncated`, `build_id_mismatch`, `http_status`, `transport`, `cache_write` |
//! | `profilink_symbolizer_debuginfod_bytes_total` | counter | `pipeline` | bytes of debug files downloaded |

use crate::{FetchFailure, Outcome, SymbolizerMetrics};
use profilink_consumer::telemetry::{Render, Text};
use std::sync::Arc;

/// The `symbolize` processors of profiles pipelines, by pipeline (none, no families).
pub struct Symbolizers<'a>(pub &'a [(String, Arc<SymbolizerMetrics>)]);

impl Render for Symbolizers<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let symbolizers = self.0;
        if symbolizers.is_empty() {
            return;
        }
        let name = "profilink_symbolizer_frames_total";
        f.header(
            name,
            "counter",
            "Native locations seen by a symbolize processor, by outcome.",
        );
        for (p, m) in symbolizers {
            for o in Outcome::ALL {
                f.sample(
                    name,
                    &[("pipeline", p), ("outcome", o.label())],
                    m.frames(o),
                );
            }
        }
        let name = "profilink_symbolizer_debuginfod_fetches_total";
        f.header(
            name,
            "counter",
            "debuginfod lookups of a symbolize processor, by result.",
        );
        for (p, m) in symbolizers {
            for (result, c) in [
                ("ok", &m.debuginfod_fetches_ok),
                ("not_found", &m.debuginfod_fetches_not_found),
                ("error", &m.debuginfod_fetches_failed),
            ] {
                f.sample(
                    name,
                    &[("pipeline", p), ("result", result)],
                    SymbolizerMetrics::get(c),
                );
            }
        }
        let name = "profilink_symbolizer_debuginfod_fetch_errors_total";
        f.header(
            name,
            "counter",
            "Failed debuginfod downloads of a symbolize processor (one per server tried), by reason.",
        );
        for (p, m) in symbolizers {
            for r in FetchFailure::ALL {
                f.sample(
                    name,
                    &[("pipeline", p), ("reason", r.label())],
                    m.fetch_errors(r),
                );
            }
        }
        f.per_entry(
            "counter",
            "pipeline",
            symbolizers,
            &[
                (
                    "profilink_symbolizer_cache_hits_total",
                    "Address lookups answered from the (build id, address) cache.",
                    |m| &m.cache_hits,
                ),
                (
                    "profilink_symbolizer_cache_misses_total",
                    "Address lookups that went to the object's debug information.",
                    |m| &m.cache_misses,
                ),
                (
                    "profilink_symbolizer_debuginfod_bytes_total",
                    "Bytes of debug files downloaded from debuginfod servers.",
                    |m| &m.debuginfod_bytes,
                ),
            ],
        );
    }
}
