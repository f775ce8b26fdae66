//! Per-chunk call trees, built once when a chunk is stored.
//!
//! This follows vroom's `SampleChunk.CallTrees` (and vroomrs' `call_trees`): samples are sorted
//! by timestamp and grouped by thread; on each thread every sample but the last becomes a path
//! of nodes from the root frame (the *last* element of the leaf-first stack) to the leaf, lasting
//! until the next sample on that thread ("the last sample is not represented, only used for its
//! timestamp"). A node is extended rather than repeated when the next sample continues the same
//! frame under the same parent without a gap; such a node is a *run*. Timestamps become
//! nanoseconds as `(seconds * 1e9) as u64`, as in vroom.
//!
//! For the flamegraph, runs are merged with their siblings by function name and package (vroom's
//! `addCallTreeToFlamegraph`); the merge is associative, so each thread's runs are merged here
//! once, and the query merges the per-thread trees of many chunks. Each merged node keeps the
//! number of runs (`occurrence`), samples, total and self duration, and every run's duration
//! (for percentiles). The per-thread function metrics of vroom's `CollectFunctions`
//! (application-aware self time, `min_depth` 1, in-app functions only, top 100) are computed
//! from the unmerged runs.

use crate::fingerprint;
use crate::normalize::normalize_chunk;
use profilink_proto::sentry::{Frame, ProfileChunk};
use std::collections::HashMap;
use std::sync::Arc;

/// Parent index of root nodes.
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// vroom's `minDepth` for flamegraph metrics (root frames are not aggregated).
const METRICS_MIN_DEPTH: u32 = 1;
/// vroom's `maxUniqueFunctionsPerProfile`.
pub(crate) const MAX_UNIQUE_FUNCTIONS: usize = 100;

/// Format version of [`ChunkAgg`] as encoded in the store; bump when the computation changes so
/// stored aggregates are rebuilt from their payloads.
pub(crate) const AGG_VERSION: u32 = 1;

/// A function as the flamegraph shows it: one per (name, package) within a chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AggFrame {
    /// Function name (`""` when absent).
    pub name: String,
    /// Module or trimmed package (`""` when absent).
    pub package: String,
    /// `filename` of the first frame seen.
    pub file: String,
    /// `abs_path` of the first frame seen.
    pub path: String,
    /// Line of the first frame seen (0 when absent).
    pub line: u32,
    /// Column of the first frame seen (0 when absent).
    pub col: u32,
    /// Normalized `in_app` of the first frame seen.
    pub is_application: bool,
    /// vroomrs fingerprint.
    pub fingerprint: u32,
    /// vroom (Go) fingerprint.
    pub legacy_fingerprint: u32,
}

/// A merged call-tree node of one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AggNode {
    /// Index into [`ChunkAgg::frames`].
    pub frame: u32,
    /// Index of the parent node in the same thread, or [`NO_PARENT`]; parents come first.
    pub parent: u32,
    /// Number of runs merged into this node (vroom's `Occurrence`).
    pub occurrence: u32,
    /// Samples through this node.
    pub sample_count: u64,
    /// Total duration in ns.
    pub duration_ns: u64,
    /// Duration minus the children's durations, in ns.
    pub self_time_ns: u64,
    /// Range of this node's run durations in [`ThreadAgg::durations`].
    pub durations_start: u32,
    /// Length of that range.
    pub durations_len: u32,
    /// Some samples end at this node (more samples than its children have).
    pub ends_samples: bool,
}

/// vroom's `CallTreeFunction` for one thread, after its filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionAgg {
    /// Index into [`ChunkAgg::frames`] (name, package, fingerprint).
    pub frame: u32,
    /// `in_app` of the first node aggregated.
    pub in_app: bool,
    /// Samples through the function.
    pub sample_count: u64,
    /// Sum of the run durations.
    pub sum_duration_ns: u64,
    /// Sum of the (application-aware) self times.
    pub sum_self_time_ns: u64,
    /// Every run duration.
    pub durations: Vec<u64>,
}

/// The call trees of one thread of a chunk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ThreadAgg {
    /// Thread id as the chunk's samples carry it.
    pub thread_id: String,
    /// Thread name from `thread_metadata` (`""` when unknown).
    pub name: String,
    /// Merged nodes, parents before children, siblings in first-seen order.
    pub nodes: Vec<AggNode>,
    /// Run durations referenced by the nodes.
    pub durations: Vec<u64>,
    /// Function metrics of this thread.
    pub functions: Vec<FunctionAgg>,
}

/// Everything a flamegraph query needs from one chunk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ChunkAgg {
    /// Functions referenced by the threads.
    pub frames: Vec<AggFrame>,
    /// One entry per thread with at least two samples.
    pub threads: Vec<ThreadAgg>,
}

/// Why a chunk's call trees could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallTreeError {
    /// A sample names a stack that does not exist.
    #[error("sample {sample} references stack {stack_id}, but the chunk has {stacks} stacks")]
    InvalidStackId {
        /// Sample index.
        sample: usize,
        /// The stack id.
        stack_id: usize,
        /// Number of stacks.
        stacks: usize,
    },
    /// A stack names a frame that does not exist.
    #[error("stack {stack} references frame {frame}, but the chunk has {frames} frames")]
    InvalidFrameId {
        /// Stack index.
        stack: usize,
        /// The frame index.
        frame: usize,
        /// Number of frames.
        frames: usize,
    },
    /// The chunk has no samples.
    #[error("the chunk has no samples")]
    NoSamples,
    /// The chunk's JSON could not be read back.
    #[error("unreadable chunk: {0}")]
    Unreadable(String),
}

/// A run: a node of vroom's unmerged call tree.
struct Run {
    /// Chunk frame index of the first frame of the run.
    chunk_frame: usize,
    /// Identity of the frame for run continuation (vroom `Frame.WriteToHash`).
    key: u32,
    start: u64,
    end: u64,
    sample_count: u64,
    children: Vec<u32>,
}

impl Run {
    fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// vroom keeps a duration entry for a node unless it is a single sample of zero length.
    fn has_duration_entry(&self) -> bool {
        self.sample_count > 1 || self.end > self.start
    }
}

/// Converts a timestamp in seconds to vroom's integer nanoseconds.
pub(crate) fn to_ns(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

/// Builds the aggregate of `chunk` (which is normalized on a copy first).
pub(crate) fn build(chunk: &ProfileChunk) -> Result<ChunkAgg, CallTreeError> {
    let mut chunk = chunk.clone();
    validate(&chunk)?;
    normalize_chunk(&mut chunk);
    let data = &chunk.profile;

    // Identity keys for run continuation and (name, package) ids for the flamegraph.
    let mut run_keys: HashMap<(String, String, String), u32> = HashMap::new();
    let mut frame_run_key = Vec::with_capacity(data.frames.len());
    let mut agg_ids: HashMap<(String, String), u32> = HashMap::new();
    let mut frame_agg: Vec<u32> = Vec::with_capacity(data.frames.len());
    let mut frames: Vec<AggFrame> = Vec::new();
    for f in &data.frames {
        let ident = (
            identity_prefix(f),
            f.function.as_deref().unwrap_or("-").to_string(),
            f.instruction_addr
                .as_deref()
                .unwrap_or_default()
                .to_string(),
        );
        let n = run_keys.len() as u32;
        frame_run_key.push(*run_keys.entry(ident).or_insert(n));
        let name = f.function.as_deref().unwrap_or_default().to_string();
        let package = fingerprint::module_or_package(f);
        let id = match agg_ids.get(&(name.clone(), package.clone())) {
            Some(&id) => id,
            None => {
                let id = frames.len() as u32;
                frames.push(AggFrame {
                    fingerprint: fingerprint::fingerprint_of(&package, &name),
                    legacy_fingerprint: fingerprint::legacy_fingerprint_of(&package, &name),
                    file: f.filename.as_deref().unwrap_or_default().to_string(),
                    path: f.abs_path.as_deref().unwrap_or_default().to_string(),
                    line: f.lineno.unwrap_or(0),
                    col: f.colno.unwrap_or(0),
                    is_application: f.in_app.unwrap_or(true),
                    name: name.clone(),
                    package: package.clone(),
                });
                agg_ids.insert((name, package), id);
                id
            }
        };
        frame_agg.push(id);
    }

    // Samples sorted by time (stable), grouped by thread in order of first appearance.
    let mut order: Vec<usize> = (0..data.samples.len()).collect();
    order.sort_by(|&a, &b| {
        data.samples[a]
            .timestamp
            .partial_cmp(&data.samples[b].timestamp)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut thread_index: HashMap<&str, usize> = HashMap::new();
    let mut by_thread: Vec<(&str, Vec<usize>)> = Vec::new();
    for i in order {
        let tid = data.samples[i].thread_id.as_str();
        let idx = *thread_index.entry(tid).or_insert_with(|| {
            by_thread.push((tid, Vec::new()));
            by_thread.len() - 1
        });
        by_thread[idx].1.push(i);
    }

    let mut threads = Vec::new();
    for (tid, samples) in by_thread {
        if samples.len() < 2 {
            continue;
        }
        let mut runs: Vec<Run> = Vec::new();
        let mut roots: Vec<u32> = Vec::new();
        for w in samples.windows(2) {
            let s = &data.samples[w[0]];
            let ts = to_ns(s.timestamp);
            let next = to_ns(data.samples[w[1]].timestamp);
            let mut current: Option<u32> = None;
            for &fi in data.stacks[s.stack_id].iter().rev() {
                let key = frame_run_key[fi];
                let siblings = match current {
                    None => &roots,
                    Some(c) => &runs[c as usize].children,
                };
                let continued = siblings.last().copied().filter(|&last| {
                    let r = &runs[last as usize];
                    r.key == key && r.end == ts
                });
                let id = match continued {
                    Some(id) => {
                        let r = &mut runs[id as usize];
                        r.sample_count += 1;
                        r.end = next;
                        id
                    }
                    None => {
                        let id = runs.len() as u32;
                        runs.push(Run {
                            chunk_frame: fi,
                            key,
                            start: ts,
                            end: next,
                            sample_count: 1,
                            children: Vec::new(),
                        });
                        match current {
                            None => roots.push(id),
                            Some(c) => runs[c as usize].children.push(id),
                        }
                        id
                    }
                };
                current = Some(id);
            }
        }
        if roots.is_empty() {
            continue;
        }
        let name = data
            .thread_metadata
            .get(tid)
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        let (nodes, durations) = merge_runs(&runs, &roots, &frame_agg);
        let functions = collect_functions(&runs, &roots, &data.frames, &frame_agg);
        threads.push(ThreadAgg {
            thread_id: tid.to_string(),
            name,
            nodes,
            durations,
            functions,
        });
    }
    Ok(ChunkAgg { frames, threads })
}

/// Checks every index a call tree follows, like vroom's `ErrInvalidStackID`/`ErrInvalidFrameID`.
fn validate(chunk: &ProfileChunk) -> Result<(), CallTreeError> {
    let data = &chunk.profile;
    if data.samples.is_empty() {
        return Err(CallTreeError::NoSamples);
    }
    for (i, s) in data.samples.iter().enumerate() {
        if s.stack_id >= data.stacks.len() {
            return Err(CallTreeError::InvalidStackId {
                sample: i,
                stack_id: s.stack_id,
                stacks: data.stacks.len(),
            });
        }
    }
    for (i, stack) in data.stacks.iter().enumerate() {
        if let Some(&bad) = stack.iter().find(|&&f| f >= data.frames.len()) {
            return Err(CallTreeError::InvalidFrameId {
                stack: i,
                frame: bad,
                frames: data.frames.len(),
            });
        }
    }
    Ok(())
}

/// The first component of vroom's `Frame.WriteToHash`: module, trimmed package, file, or `-`.
fn identity_prefix(f: &Frame) -> String {
    if let Some(m) = f.module.as_deref() {
        m.to_string()
    } else if let Some(p) = f.package.as_deref() {
        fingerprint::trim_package(p)
    } else if let Some(file) = f.filename.as_deref() {
        file.to_string()
    } else {
        "-".into()
    }
}

/// Merges sibling runs by (name, package) into nodes listed parents-first.
fn merge_runs(runs: &[Run], roots: &[u32], frame_agg: &[u32]) -> (Vec<AggNode>, Vec<u64>) {
    let mut nodes: Vec<AggNode> = Vec::new();
    let mut node_durations: Vec<Vec<u64>> = Vec::new();
    let mut child_of: HashMap<(u32, u32), u32> = HashMap::new();
    // Depth-first over runs, carrying the merged parent.
    let mut stack: Vec<(u32, u32)> = roots.iter().rev().map(|&r| (r, NO_PARENT)).collect();
    while let Some((rid, parent)) = stack.pop() {
        let run = &runs[rid as usize];
        let frame = frame_agg[run.chunk_frame];
        let children_duration: u64 = run
            .children
            .iter()
            .map(|&c| runs[c as usize].duration())
            .sum();
        let node = *child_of.entry((parent, frame)).or_insert_with(|| {
            nodes.push(AggNode {
                frame,
                parent,
                occurrence: 0,
                sample_count: 0,
                duration_ns: 0,
                self_time_ns: 0,
                durations_start: 0,
                durations_len: 0,
                ends_samples: false,
            });
            node_durations.push(Vec::new());
            (nodes.len() - 1) as u32
        });
        let n = &mut nodes[node as usize];
        n.occurrence += 1;
        n.sample_count += run.sample_count;
        n.duration_ns += run.duration();
        n.self_time_ns += run.duration().saturating_sub(children_duration);
        if run.has_duration_entry() {
            node_durations[node as usize].push(run.duration());
        }
        for &c in run.children.iter().rev() {
            stack.push((c, node));
        }
    }
    // Samples ending at a node: more samples than its children carry.
    let mut child_samples = vec![0u64; nodes.len()];
    for n in &nodes {
        if n.parent != NO_PARENT {
            child_samples[n.parent as usize] += n.sample_count;
        }
    }
    let mut durations = Vec::new();
    for (i, n) in nodes.iter_mut().enumerate() {
        n.ends_samples = n.sample_count > child_samples[i];
        n.durations_start = durations.len() as u32;
        n.durations_len = node_durations[i].len() as u32;
        durations.extend_from_slice(&node_durations[i]);
    }
    (nodes, durations)
}

/// Accumulator of vroom's `CollectFunctions`.
struct FnAcc {
    frame: u32,
    in_app: bool,
    sample_count: u64,
    sum_duration_ns: u64,
    sum_self_time_ns: u64,
    durations: Vec<u64>,
}

/// vroom's `ExtractFunctionsFromCallTreesForThread` + `CapAndFilterFunctions(…, 100, true)`.
fn collect_functions(
    runs: &[Run],
    roots: &[u32],
    chunk_frames: &[Arc<Frame>],
    frame_agg: &[u32],
) -> Vec<FunctionAgg> {
    let mut acc: Vec<FnAcc> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    for &r in roots {
        collect_node(runs, r, 0, chunk_frames, frame_agg, &mut acc, &mut index);
    }
    let mut list: Vec<FnAcc> = acc
        .into_iter()
        .filter(|f| f.sum_self_time_ns > 0 && f.sample_count > 1)
        .collect();
    list.sort_by(|a, b| {
        b.sum_self_time_ns
            .cmp(&a.sum_self_time_ns)
            .then(b.sum_duration_ns.cmp(&a.sum_duration_ns))
    });
    list.into_iter()
        .filter(|f| f.in_app)
        .take(MAX_UNIQUE_FUNCTIONS)
        .map(|f| FunctionAgg {
            frame: f.frame,
            in_app: f.in_app,
            sample_count: f.sample_count,
            sum_duration_ns: f.sum_duration_ns,
            sum_self_time_ns: f.sum_self_time_ns,
            durations: f.durations,
        })
        .collect()
}

/// Returns (application duration, system duration) of the subtree, as vroom does.
fn collect_node(
    runs: &[Run],
    id: u32,
    depth: u32,
    chunk_frames: &[Arc<Frame>],
    frame_agg: &[u32],
    acc: &mut Vec<FnAcc>,
    index: &mut HashMap<u32, usize>,
) -> (u64, u64) {
    let run = &runs[id as usize];
    let mut children_app = 0u64;
    let mut children_sys = 0u64;
    for &c in &run.children {
        let (a, s) = collect_node(runs, c, depth + 1, chunk_frames, frame_agg, acc, index);
        children_app += a;
        children_sys += s;
    }
    let duration = run.duration();
    let frame = &chunk_frames[run.chunk_frame];
    let is_app = frame.in_app.unwrap_or(true);
    let mut app_duration = children_app.min(duration);
    if depth >= METRICS_MIN_DEPTH && should_aggregate(frame) {
        let mut self_time = 0;
        if is_app {
            if duration > children_app {
                self_time = duration - children_app;
                app_duration += self_time;
            }
        } else if duration > children_app + children_sys {
            self_time = duration - children_app - children_sys;
        }
        let agg = frame_agg[run.chunk_frame];
        let slot = *index.entry(agg).or_insert_with(|| {
            acc.push(FnAcc {
                frame: agg,
                in_app: is_app,
                sample_count: 0,
                sum_duration_ns: 0,
                sum_self_time_ns: 0,
                durations: Vec::new(),
            });
            acc.len() - 1
        });
        let f = &mut acc[slot];
        f.durations.push(duration);
        f.sum_duration_ns += duration;
        f.sample_count += run.sample_count;
        f.sum_self_time_ns += self_time;
    }
    (app_duration, duration - app_duration.min(duration))
}

/// vroom's `shouldAggregateFrame`, without symbolication status (not carried by V2 chunks
/// before Sentry symbolicates them; cocoa frames are aggregated when named).
fn should_aggregate(frame: &Frame) -> bool {
    let Some(function) = frame.function.as_deref().filter(|f| !f.is_empty()) else {
        return false;
    };
    let platform = frame.platform.as_deref().unwrap_or_default();
    if platform == "cocoa" && function == "main" {
        return false;
    }
    if matches!(platform, "android" | "java")
        && !fingerprint::module_or_package(frame).contains('.')
    {
        return false;
    }
    true
}

mod encoding;
#[cfg(test)]
mod tests;
