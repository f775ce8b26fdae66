//! Aggregated flamegraphs in the shape of Sentry's flamegraph API (vroom's speedscope output).
//!
//! Candidate selection per data source (this store keeps chunks, not transactions or spans):
//!
//! * `profiles`: every chunk in the period (Sentry's direct chunk fallback), all threads;
//! * `transactions` and `spans`: chunks linked to at least one transaction (trace linking gave
//!   them `transaction_names`), all threads: the store has no transaction time windows or thread
//!   ids, so whole chunks are used;
//! * `functions`: with a `fingerprint`, chunks containing that function, restricted to the
//!   threads in which it appears (Sentry uses the function example's thread); without one, every
//!   chunk.
//!
//! Aggregation follows vroom's `GetFlamegraphFromCandidates`/`toSpeedscope`: per chunk and
//! thread call trees are merged by function name and package; `frame_infos` give per function
//! `count` (call-tree nodes, i.e. runs), `weight` = `sumDuration` (ns), `sumSelfTime` (ns; plain
//! self time, duration minus children, as in the API spec's example — vroom leaves it 0 for
//! chunks), and p75/p95/p99 of the run durations (nearest-rank, `ceil(n*q)-1`); `profiles[0]`
//! holds root-first stacks with their sample counts (also `weights`, unit `count`) and
//! durations, capped like vroom at the 1000 heaviest (by count, then duration, then depth) while
//! `endValue` counts every sample. `expand=metrics` adds vroom's function metrics (in-app
//! functions, application-aware self time, depth ≥ 1, top 100 by self time).

use crate::calltree::{ChunkAgg, NO_PARENT};
use crate::query::{DataSource, FlamegraphParams};
use crate::store::{Candidate, CandidateFilter, MAX_CHUNKS, ProfileStore, Result};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// vroom's cap on samples in the response (`toSpeedscope(…, 1000, …)`).
pub(crate) const MAX_SAMPLES: usize = 1000;
/// vroom's `MaxNumOfExamples` for metrics.
const MAX_EXAMPLES: usize = 5;

/// `shared.profiles[]` and metric examples (vroom `ExampleMetadata`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Example {
    pub project_id: u64,
    pub profiler_id: String,
    pub chunk_id: String,
    pub thread_id: String,
    pub start: f64,
    pub end: f64,
}

/// `shared.frames[]` (vroom `speedscope.Frame`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct OutFrame {
    #[serde(skip_serializing_if = "is_zero")]
    pub col: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub file: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image: String,
    pub is_application: bool,
    #[serde(skip_serializing_if = "is_zero")]
    pub line: u32,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub fingerprint: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// `shared.frame_infos[]` (vroom `speedscope.FrameInfo`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FrameInfo {
    pub count: u64,
    pub weight: u64,
    pub sum_duration: u64,
    pub sum_self_time: u64,
    pub p75_duration: u64,
    pub p95_duration: u64,
    pub p99_duration: u64,
}

/// `metrics[]` (vroom `FunctionMetrics`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FunctionMetrics {
    pub name: String,
    pub package: String,
    pub fingerprint: u32,
    pub in_app: bool,
    pub p75: u64,
    pub p95: u64,
    pub p99: u64,
    pub avg: f64,
    pub sum: u64,
    pub count: u64,
    pub worst: Example,
    pub examples: Vec<Example>,
}

/// One aggregated stack.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlameSample {
    /// Frame indices, root first.
    pub stack: Vec<u32>,
    pub count: u64,
    pub duration_ns: u64,
    /// Indices into [`Flamegraph::examples`].
    pub examples: Vec<u32>,
}

/// The aggregate of the selected chunks, before the response cap.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flamegraph {
    pub frames: Vec<OutFrame>,
    pub frame_infos: Vec<FrameInfo>,
    /// Every aggregated stack, depth-first order.
    pub samples: Vec<FlameSample>,
    pub examples: Vec<Example>,
    pub metrics: Option<Vec<FunctionMetrics>>,
    /// Chunks and threads that contributed.
    pub chunks: usize,
    pub threads: usize,
    pub platforms: Vec<String>,
    pub projects: Vec<u64>,
    pub transaction_names: Vec<String>,
    pub thread_names: Vec<String>,
    pub thread_ids: Vec<String>,
    /// Earliest chunk start and latest receive time, Unix seconds.
    pub first_start: Option<f64>,
    pub last_received: Option<f64>,
}

/// Selects the chunks and threads for `params` and aggregates them.
pub(crate) fn query(store: &ProfileStore, params: &FlamegraphParams) -> Result<Flamegraph> {
    let filter = CandidateFilter {
        projects: params.projects.clone(),
        environments: params.environments.clone(),
        start: params.start,
        end: params.end,
        linked_only: matches!(
            params.data_source,
            DataSource::Transactions | DataSource::Spans
        ),
        fingerprint: match params.data_source {
            DataSource::Functions => params.fingerprint,
            _ => None,
        },
    };
    let mut candidates = store.candidates(&filter)?;
    candidates.retain(|c| params.terms.iter().all(|t| t.matches(&c.info)));
    candidates.truncate(MAX_CHUNKS);
    let ids: Vec<i64> = candidates.iter().map(|c| c.id).collect();
    let aggs: HashMap<i64, Arc<ChunkAgg>> = store.load_aggs(&ids)?.into_iter().collect();
    // Oldest first, so frames and stacks appear in time order.
    let mut selected = Vec::with_capacity(candidates.len());
    for c in candidates.into_iter().rev() {
        if let Some(agg) = aggs.get(&c.id) {
            selected.push((c, Arc::clone(agg)));
        }
    }
    let fingerprint = params
        .fingerprint
        .filter(|_| params.data_source == DataSource::Functions);
    Ok(aggregate(&selected, fingerprint, params.metrics))
}

mod partial;

use partial::Partial;

/// Merges the call trees of `selected` chunks (threads containing `fingerprint` only, when set),
/// on two threads when there are many.
pub(crate) fn aggregate(
    selected: &[(Candidate, Arc<ChunkAgg>)],
    fingerprint: Option<u32>,
    with_metrics: bool,
) -> Flamegraph {
    let build = |from: usize, to: usize| {
        let mut p = Partial::new(with_metrics);
        for (sel, (cand, agg)) in selected.iter().enumerate().take(to).skip(from) {
            p.add_chunk(sel, cand, agg, fingerprint);
        }
        p
    };
    if selected.len() < 64 {
        return build(0, selected.len()).finish(selected);
    }
    let mid = selected.len() / 2;
    let (mut a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| build(mid, selected.len()));
        let a = build(0, mid);
        (a, h.join())
    });
    match b {
        Ok(b) => a.merge(b),
        Err(_) => {
            tracing::warn!("flamegraph aggregation thread panicked; aggregating serially");
            a = build(0, selected.len());
        }
    }
    a.finish(selected)
}

/// vroom's `metrics.Quantile` (nearest rank, the `ceil(n*q)-1`-th smallest value, 0 when
/// empty) for q = 0.75, 0.95 and 0.99, in linear time (reorders `values`).
pub(crate) fn quantiles(values: &mut [u64]) -> [u64; 3] {
    if values.is_empty() {
        return [0; 3];
    }
    let n = values.len();
    let rank = |q: f64| {
        ((n as f64 * q).ceil() as usize)
            .saturating_sub(1)
            .min(n - 1)
    };
    let (i75, i95, i99) = (rank(0.75), rank(0.95), rank(0.99));
    let (_, &mut v99, _) = values.select_nth_unstable(i99);
    let (_, &mut v95, _) = values[..=i99].select_nth_unstable(i95);
    let (_, &mut v75, _) = values[..=i95].select_nth_unstable(i75);
    [v75, v95, v99]
}

#[cfg(test)]
mod tests {
    use super::quantiles;

    #[test]
    fn quantiles_are_nearest_rank() {
        assert_eq!(quantiles(&mut []), [0, 0, 0]);
        assert_eq!(quantiles(&mut [5]), [5, 5, 5]);
        let mut v: Vec<u64> = (1..=100).rev().collect();
        assert_eq!(quantiles(&mut v), [75, 95, 99]);
        let mut v: Vec<u64> = vec![10, 40, 20, 30];
        assert_eq!(quantiles(&mut v), [30, 40, 40]);
    }
}
