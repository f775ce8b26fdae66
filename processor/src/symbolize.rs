//! The `symbolize` processor of a profiles pipeline: names the native frames of received OTLP
//! before it is translated to chunks or forwarded (see `profilink_symbolizer`).
//!
//! The symbolizer blocks (file reads, DWARF parsing, a bounded wait for debuginfod downloads
//! it started), so each request is symbolized on tokio's blocking threads; the async threads
//! never wait for it. A request spends at most the processor's `wait` waiting for downloads;
//! frames still waiting then go on unsymbolized and are counted (`timeout`).

use profilink_consumer::ConsumeError;
use profilink_proto::otlp::ProfilesData;
use profilink_symbolizer::{Symbolizer, SymbolizerConfig, SymbolizerMetrics};
use std::sync::Arc;

/// A pipeline's symbolization stage.
#[derive(Debug, Clone)]
pub(crate) struct SymbolizeStage {
    symbolizer: Symbolizer,
}

impl SymbolizeStage {
    /// A stage with `cfg` (one symbolizer, its caches shared by every request).
    pub fn new(cfg: &SymbolizerConfig) -> Self {
        SymbolizeStage {
            symbolizer: Symbolizer::new(cfg.clone()),
        }
    }

    /// The symbolizer's counters.
    pub fn metrics(&self) -> Arc<SymbolizerMetrics> {
        self.symbolizer.metrics()
    }

    /// Symbolizes `data` on a blocking thread and hands it back. Should the blocking task
    /// fail (a panic), the request is lost to the caller: the error says so and the receiver
    /// refuses the request, so nothing is dropped silently.
    pub async fn apply(&self, mut data: ProfilesData) -> Result<ProfilesData, ConsumeError> {
        let s = self.symbolizer.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(d) = data.dictionary.as_mut() {
                s.symbolize(d, &data.resource_profiles);
            }
            data
        })
        .await
        .map_err(|e| ConsumeError::Task {
            stage: "symbolize",
            source: Arc::new(e),
        })
    }
}
