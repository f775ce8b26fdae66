//! The typed configs of the processors a pipeline runs: `batch`, `profile_sampling`
//! ([`SamplingConfig`]), `profile_linking` ([`LinkingConfig`]) and `symbolize`
//! ([`SymbolizerConfig`]).

use crate::linking::LinkingConfig;
use crate::sampling::SamplingConfig;
use profilink_symbolizer::SymbolizerConfig;
use serde::Deserialize;
use std::time::Duration;

/// A processor's typed config.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessorSpec {
    /// `batch`.
    Batch(BatchConfig),
    /// `profile_sampling`.
    Sampling(SamplingConfig),
    /// `profile_linking`.
    Linking(LinkingConfig),
    /// `symbolize`.
    Symbolize(SymbolizerConfig),
}

/// `processors.batch`.
///
/// The Sentry path is already batched by the exporters' chunk accumulator (60 s chunks per
/// profiler session), and OTLP requests are forwarded as they arrive: this processor is
/// accepted for compatibility with Collector configurations and currently passes data through
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    /// Longest wait before a batch is sent (default 200 ms).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Samples after which a batch is sent (default 8192).
    pub send_batch_size: u64,
    /// Upper bound of a batch, 0 = no bound (default 0).
    pub send_batch_max_size: u64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            timeout: Duration::from_millis(200),
            send_batch_size: 8192,
            send_batch_max_size: 0,
        }
    }
}
