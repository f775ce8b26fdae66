//! `profilink_symbolizer_*`: the `symbolize` processors of profiles pipelines.

use super::text::{Render, Text};
use profilink_symbolizer::{Outcome, SymbolizerMetrics};
use std::sync::Arc;

impl Render for Vec<(String, Arc<SymbolizerMetrics>)> {
    fn render(&self, f: &mut Text<'_>) {
        if self.is_empty() {
            return;
        }
        let name = "profilink_symbolizer_frames_total";
        f.header(
            name,
            "counter",
            "Native locations seen by a symbolize processor, by outcome.",
        );
        for (p, m) in self {
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
        for (p, m) in self {
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
        f.per_entry(
            "counter",
            "pipeline",
            self,
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
