//! `processors.profile_linking`: trace linking in the running service, both directions.
//!
//! * In a `profiles` pipeline fed by the `sentry` receiver, it configures the join buffer
//!   ([`crate::join::buffer`]) that holds chunks until the transactions (or span items) of
//!   their profiler session have arrived. Such pipelines join with the defaults when they have
//!   no `profile_linking` processor; `join_window: 0s` turns the wait off (chunks are linked
//!   only to spans already received). Where the join buffer is kept on disk is `storage`
//!   (see [`LinkingConfig::storage`]).
//! * In a `traces` pipeline, it stamps spans with `sentry.profiler_id` and `thread.id` (see
//!   [`crate::traces`]), holding spans up to `wait` so that the profile samples
//!   linked to them can arrive first.

use crate::join::buffer::JoinConfig;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `processors.profile_linking`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkingConfig {
    /// Sentry → OTLP: longest a chunk waits for its transactions (default 30 s).
    #[serde(with = "humantime_serde")]
    pub join_window: Duration,
    /// Sentry → OTLP: how long transactions are kept for chunks that arrive after them
    /// (default 2 min).
    #[serde(with = "humantime_serde")]
    pub span_retention: Duration,
    /// Sentry → OTLP: upper bound of held chunks in MiB (default 64).
    pub max_buffer_mib: u64,
    /// Sentry → OTLP: upper bound of profiler sessions holding chunks (default 10,000).
    pub max_sessions: usize,
    /// Sentry → OTLP: upper bound of kept spans (default 1,000,000).
    pub max_spans: usize,
    /// Sentry → OTLP: the directory under which each pipeline keeps its join log (the held
    /// chunks and the spans, on disk before the `sentry` receiver answers; each chunk
    /// acknowledged once the OTLP exporters took it, and held again after a restart with the
    /// rest of its window, see [`Pipeline::with_join_log`](crate::Pipeline::with_join_log)).
    /// The service accepts a `file_storage`
    /// extension id here too, replaced by the extension's directory before this is read.
    /// Unset: under the durable sending queue of the pipeline's first OTLP exporter that has
    /// one, else in memory only.
    pub storage: Option<PathBuf>,
    /// OTLP traces: how long spans wait for the profile samples linked to them (default 10 s;
    /// 0 stamps only the profiler id derived from the span's resource, plus what is known).
    #[serde(with = "humantime_serde")]
    pub wait: Duration,
    /// OTLP traces: upper bound of waiting trace data in MiB (default 64); beyond it spans are
    /// stamped and sent at once.
    pub max_wait_mib: u64,
    /// OTLP → Sentry: how many sample links (span → profiler, thread) are remembered for
    /// stamping (default 1,000,000).
    pub max_links: usize,
    /// OTLP → Sentry: how long a sample link is remembered (default 5 min).
    #[serde(with = "humantime_serde")]
    pub link_retention: Duration,
}

impl Default for LinkingConfig {
    fn default() -> Self {
        let j = JoinConfig::default();
        LinkingConfig {
            join_window: j.window,
            span_retention: j.span_retention,
            max_buffer_mib: j.max_bytes >> 20,
            max_sessions: j.max_sessions,
            max_spans: j.max_spans,
            storage: None,
            wait: Duration::from_secs(10),
            max_wait_mib: 64,
            max_links: 1_000_000,
            link_retention: Duration::from_secs(300),
        }
    }
}

impl LinkingConfig {
    /// The join buffer's settings.
    pub fn join(&self) -> JoinConfig {
        JoinConfig {
            window: self.join_window,
            span_retention: self.span_retention,
            max_bytes: self.max_buffer_mib.saturating_mul(1 << 20),
            max_sessions: self.max_sessions.max(1),
            max_spans: self.max_spans,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_join_buffer() {
        let c = LinkingConfig::default();
        assert_eq!(c.join(), JoinConfig::default());
        let c: LinkingConfig =
            serde_json::from_str(r#"{"join_window":"5s","max_buffer_mib":1,"wait":"0s"}"#).unwrap();
        assert_eq!(c.join().window, Duration::from_secs(5));
        assert_eq!(c.join().max_bytes, 1 << 20);
        assert_eq!(c.wait, Duration::ZERO);
        assert!(serde_json::from_str::<LinkingConfig>(r#"{"window":"5s"}"#).is_err());
    }
}
