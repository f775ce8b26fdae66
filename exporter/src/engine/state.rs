//! The engine's state and what moves through it: settings, inputs from `export`, the engine
//! task's [`Core`] (accumulator, merged chunks on their way to the ready log, ready chunks
//! and their deliveries, acknowledgements to record) and the reports of its jobs. The other
//! files add behaviour to [`Core`]; they import from here, never from each other's types.

use super::held_json::{HeldBytes, HeldJson};
use super::sink::{Delivery, Sink};
use crate::accumulate::{ChunkAccumulator, Emitted};
use crate::clock::SharedClock;
use crate::config::{AccumulateConfig, RetryConfig};
use crate::metrics::ExporterMetrics;
use crate::queue::{Queue, ReadyMeta};
use crate::retry::Backoff;
use profilink_proto::sentry::{CompactString, ProfileChunk};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Accumulation.
    pub accumulate: AccumulateConfig,
    /// Backoff.
    pub retry: RetryConfig,
    /// Concurrent deliveries.
    pub num_consumers: usize,
    /// Longest sleep between deadline checks.
    pub tick: Duration,
    /// Sees each merged chunk once it is durably queued.
    pub observer: crate::ObserverSlot,
    /// Cut open chunks at shutdown even with a durable queue (without one they always are).
    pub flush_on_shutdown: bool,
}

/// One exported chunk on its way from `export` (or the replay) to the accumulator.
pub(super) struct Input {
    pub(super) id: u64,
    /// The chunk's index within its record.
    pub(super) part: u32,
    pub(super) route: String,
    pub(super) chunk: ProfileChunk,
    /// `frame_hash` of each of the chunk's frames.
    pub(super) frame_hashes: Vec<u64>,
    /// Thread ids spans may reference (never grouped).
    pub(super) linked: Vec<CompactString>,
    pub(super) bytes: u64,
    pub(super) accepted_at: Instant,
}

/// Requests from the handle to the engine task.
pub(super) enum Control {
    Shutdown {
        deadline: tokio::time::Instant,
        done: oneshot::Sender<()>,
    },
}

/// A merged chunk in the ready log, and its delivery state.
pub(super) struct ReadyItem {
    pub(super) meta: ReadyMeta,
    pub(super) next_attempt: Option<Instant>,
    pub(super) backoff: Backoff,
    pub(super) in_flight: bool,
    /// Its JSON, still in memory from the persist job (first delivery only).
    pub(super) json: Option<HeldJson>,
}

/// What a delivery task reports.
pub(super) enum Outcome {
    Sent(Delivery),
    Gone,
    Unreadable(String),
}

/// A chunk written to the ready log, with its JSON.
pub(super) type ReadyJson = (ReadyMeta, Vec<u8>);

/// What a persist job reports.
pub(super) struct Persisted {
    /// The ready records written, or why not (with the chunks, to try again).
    pub(super) result: Result<Vec<ReadyJson>, (String, Vec<Emitted>)>,
    /// The inputs of each chunk of the group.
    pub(super) inputs: Vec<Vec<u64>>,
    /// Size estimate of the group.
    pub(super) est_bytes: u64,
    /// Consumption records written: (input, record id).
    pub(super) consumption_records: Vec<(u64, u64)>,
    /// Chunks of the group that failed the chunk validator (not written), and their samples.
    pub(super) invalid: (u64, u64),
}

/// What an acknowledgement job reports: on failure, the ids to record again.
pub(super) struct Acked {
    pub(super) error: Option<String>,
    pub(super) inputs: Vec<u64>,
    pub(super) ready: Vec<u64>,
}

/// The engine task's state: the accumulator, the merged chunks on their way to the ready log,
/// the ready chunks and their deliveries, and the acknowledgements to record.
pub(super) struct Core<S: Sink> {
    pub(super) queue: Arc<Queue>,
    pub(super) sink: Arc<S>,
    pub(super) clock: SharedClock,
    pub(super) metrics: Arc<ExporterMetrics>,
    pub(super) acc: ChunkAccumulator,
    pub(super) cfg: EngineConfig,
    pub(super) ready: BTreeMap<u64, ReadyItem>,
    pub(super) inflight: JoinSet<(u64, Outcome)>,
    pub(super) task_ids: HashMap<tokio::task::Id, u64>,
    /// Merged chunks not yet handed to a persist job, oldest first.
    pub(super) unpersisted: VecDeque<Emitted>,
    /// Size estimate of `unpersisted` plus the running persist job's group.
    pub(super) unpersisted_bytes: u64,
    pub(super) persisting: Option<JoinHandle<Persisted>>,
    /// Size estimate of the running persist job's group.
    pub(super) persisting_bytes: u64,
    pub(super) acking: Option<JoinHandle<Acked>>,
    pub(super) input_acks: Vec<u64>,
    pub(super) ready_acks: Vec<u64>,
    /// Consumption records (see [`crate::queue::consumed`]) by the input they describe; they
    /// are acknowledged with it.
    pub(super) consumption_records: HashMap<u64, Vec<u64>>,
    /// Set while draining with open windows kept for the next start: no idle cuts.
    pub(super) keep_open_windows: bool,
    /// When ready chunks were last checked for long rate limits (real time).
    pub(super) last_drop_sweep: Option<std::time::Instant>,
    /// The JSON held by the ready chunks' [`ReadyItem::json`].
    pub(super) held: HeldBytes,
}

/// Waits for an optional job; never ready when there is none.
pub(super) async fn join_opt<T>(
    job: &mut Option<JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    match job.as_mut() {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

impl<S: Sink> Core<S> {
    /// An engine with nothing queued yet.
    pub(super) fn new(
        queue: Arc<Queue>,
        sink: Arc<S>,
        cfg: EngineConfig,
        clock: SharedClock,
        metrics: Arc<ExporterMetrics>,
    ) -> Self {
        Core {
            queue,
            sink,
            clock,
            metrics,
            acc: ChunkAccumulator::new(cfg.accumulate.clone()),
            cfg,
            ready: BTreeMap::new(),
            inflight: JoinSet::new(),
            task_ids: HashMap::new(),
            unpersisted: VecDeque::new(),
            unpersisted_bytes: 0,
            persisting: None,
            persisting_bytes: 0,
            acking: None,
            input_acks: Vec::new(),
            ready_acks: Vec::new(),
            consumption_records: HashMap::new(),
            keep_open_windows: false,
            last_drop_sweep: None,
            held: HeldBytes::default(),
        }
    }
}
