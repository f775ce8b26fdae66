//! Sentry Sample Format V2 profile chunk (`profile_chunk` envelope item), as Relay parses it.
//!
//! Field set and JSON names follow relay-profiling's `sample/v2.rs`. Absent required fields read
//! as empty values so that [`crate::validate`] can name them; serialization writes exactly the
//! fields Relay keeps.

use super::de::{f64_lenient, null_default, opt_u64_lenient};
pub use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The only sample format version profilink writes for chunks.
pub const CHUNK_VERSION: &str = "2";

/// A continuous-profiling chunk: up to a minute of samples of one profiler session.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProfileChunk {
    /// 32 lowercase hex characters identifying this chunk.
    #[serde(default)]
    pub chunk_id: String,
    /// 32 lowercase hex characters identifying the profiler session (one per process run).
    #[serde(default)]
    pub profiler_id: String,
    /// Debug images for native symbolication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_meta: Option<DebugMeta>,
    /// Deployment environment, e.g. `production`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The SDK platform (`python`, `rust`, `cocoa`, …); the item header must repeat it.
    #[serde(default)]
    pub platform: String,
    /// Release of the profiled application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Payload content type; only `application/x-perfetto-trace` changes Relay's behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The producing SDK; Relay requires both name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_sdk: Option<ClientSdk>,
    /// Measurements (CPU usage, memory, frame renders…) keyed by name.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub measurements: BTreeMap<String, Measurement>,
    /// Sample format version; must be the string `"2"`.
    #[serde(default)]
    pub version: String,
    /// The samples, stacks, frames and thread metadata.
    #[serde(default)]
    pub profile: ProfileData,
}

/// SDK name and version.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ClientSdk {
    /// SDK name, e.g. `sentry.python`.
    #[serde(default)]
    pub name: String,
    /// SDK version, e.g. `2.75.0`.
    #[serde(default)]
    pub version: String,
}

/// The `profile` object of a chunk.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProfileData {
    /// One entry per observed stack on one thread at one instant.
    #[serde(default, deserialize_with = "null_default")]
    pub samples: Vec<Sample>,
    /// Stacks as frame indices, leaf (innermost) first.
    #[serde(default, deserialize_with = "null_default")]
    pub stacks: Vec<Vec<usize>>,
    /// The frames referenced by stacks. Each frame is shared (`Arc`): the chunks of one
    /// session reuse the same frames, so building a chunk costs one reference count per frame,
    /// not a copy. Use [`Arc::make_mut`] to change one.
    #[serde(default, deserialize_with = "null_default")]
    pub frames: Vec<Arc<Frame>>,
    /// Thread names and priorities keyed by thread id.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub thread_metadata: BTreeMap<String, ThreadMetadata>,
}

/// One observation: a stack seen on a thread at a time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Sample {
    /// Unix time in seconds (microsecond precision).
    pub timestamp: f64,
    /// Index into [`ProfileData::stacks`].
    pub stack_id: usize,
    /// Thread id as a decimal string (Relay rejects integers). Stored inline (up to 24 bytes),
    /// so a million samples cost no allocations for their thread ids.
    pub thread_id: CompactString,
}

/// A stack frame. Every field is optional, as in Relay. Strings are shared (`Arc<str>`): the
/// same frame appears in many chunks of a session, and cloning it costs no allocation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Frame {
    /// Absolute path of the source file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abs_path: Option<Arc<str>>,
    /// Column number.
    #[serde(default, alias = "column", skip_serializing_if = "Option::is_none")]
    pub colno: Option<u32>,
    /// Source file name (relative).
    #[serde(default, alias = "file", skip_serializing_if = "Option::is_none")]
    pub filename: Option<Arc<str>>,
    /// Function name.
    #[serde(default, alias = "name", skip_serializing_if = "Option::is_none")]
    pub function: Option<Arc<str>>,
    /// Whether the frame is application code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_app: Option<bool>,
    /// Instruction address as a `"0x…"` string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction_addr: Option<Arc<str>>,
    /// Line number.
    #[serde(default, alias = "line", skip_serializing_if = "Option::is_none")]
    pub lineno: Option<u32>,
    /// Module (Python module, Java class…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<Arc<str>>,
    /// Package (native library, Java package…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<Arc<str>>,
    /// Per-frame platform for mixed-runtime stacks; Sentry honours `in_app` only when this is
    /// unset or equal to the chunk platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Arc<str>>,
}

/// Thread name and priority.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ThreadMetadata {
    /// Thread name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Thread priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
}

/// The `debug_meta` object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DebugMeta {
    /// Debug images (Relay requires this key when `debug_meta` is present).
    #[serde(default, deserialize_with = "null_default")]
    pub images: Vec<DebugImage>,
}

/// A debug image Sentry can symbolicate with.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DebugImage {
    /// Image type: one of `macho`, `symbolic`, `sourcemap`, `proguard`, `jvm` (Relay rejects `elf`).
    #[serde(rename = "type", default)]
    pub image_type: String,
    /// Path of the image file.
    #[serde(default, alias = "name", skip_serializing_if = "Option::is_none")]
    pub code_file: Option<String>,
    /// Debug id (debugid format: UUID with optional age).
    #[serde(default, alias = "id", skip_serializing_if = "Option::is_none")]
    pub debug_id: Option<String>,
    /// Code id (for ELF: the GNU build id in hex); Relay drops it, Symbolicator uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_id: Option<String>,
    /// Load address as a `"0x…"` string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_addr: Option<String>,
    /// Preferred load address as a `"0x…"` string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_vmaddr: Option<String>,
    /// Size of the image in bytes.
    #[serde(
        default,
        deserialize_with = "opt_u64_lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_size: Option<u64>,
    /// Other fields (`arch`, `uuid`, `debug_file`…), kept as they came.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A measurement series.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Measurement {
    /// Unit: `ns`/`nanosecond`, `hz`/`hertz`, `byte`, `percent`, `nj`/`nanojoule`.
    #[serde(default)]
    pub unit: String,
    /// The values.
    #[serde(default, deserialize_with = "null_default")]
    pub values: Vec<MeasurementValue>,
}

/// One measured value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MeasurementValue {
    /// Unix time in seconds.
    #[serde(deserialize_with = "f64_lenient")]
    pub timestamp: f64,
    /// The value (Relay accepts numeric strings too).
    #[serde(deserialize_with = "f64_lenient")]
    pub value: f64,
}

impl ProfileChunk {
    /// Parses a chunk payload, naming the JSON path of the first problem on failure.
    pub fn from_json(bytes: &[u8]) -> Result<Self, super::JsonError> {
        super::from_json_slice(bytes)
    }

    /// Serializes the chunk as compact JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain data with string keys cannot fail; non-finite floats become null.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Sentry's rate-limit data category for this chunk's platform: `profile_chunk_ui` for
    /// cocoa, android and javascript, else `profile_chunk`.
    pub fn data_category(&self) -> &'static str {
        data_category_for_platform(&self.platform)
    }
}

impl ProfileData {
    /// Applies Relay's normalization rule for threads: a thread with fewer than 2 samples whose
    /// stack is non-empty is dropped with all its samples, and `thread_metadata` of threads
    /// without samples is pruned. Returns `(threads dropped, samples dropped)`.
    ///
    /// Relay does this on ingestion (and rejects a chunk left without samples), so a sender
    /// that applies it first sends only what Sentry keeps and can count the rest. To keep such
    /// threads' samples instead, group them first ([`ProfileData::group_sparse_threads`]).
    pub fn drop_sparse_threads(&mut self) -> (usize, usize) {
        let ProfileData {
            samples,
            stacks,
            thread_metadata,
            ..
        } = self;
        let (active, index) = thread_activity(samples, stacks);
        let count = |tid: &str| index.get(tid).map(|&i| active[i].1);
        // A thread keeps its metadata exactly when it keeps its samples.
        thread_metadata.retain(|tid, _| count(tid).is_some_and(|n| n >= 2));
        let sparse: hashbrown::HashSet<CompactString> = active
            .iter()
            .filter(|(_, n)| *n < 2)
            .map(|(t, _)| CompactString::from(*t))
            .collect();
        // They borrow the samples (and hashbrown's map may use its keys when dropped).
        drop((active, index));
        let before = samples.len();
        if !sparse.is_empty() {
            samples.retain(|s| !sparse.contains(&s.thread_id));
        }
        (sparse.len(), before - samples.len())
    }
}

/// Each sampled thread, in the order of its first sample, with its samples whose stack is
/// non-empty (what Relay's sparse-thread rule counts), and each thread's position in that list.
/// One fast (foldhash) look-up per run of a thread's samples, none within a run.
pub(crate) type ThreadActivity<'a> = (Vec<(&'a str, usize)>, hashbrown::HashMap<&'a str, usize>);

/// See [`ThreadActivity`].
pub(crate) fn thread_activity<'a>(
    samples: &'a [Sample],
    stacks: &[Vec<usize>],
) -> ThreadActivity<'a> {
    let mut active: Vec<(&str, usize)> = Vec::new();
    let mut index: hashbrown::HashMap<&str, usize> = hashbrown::HashMap::new();
    let mut last: Option<(&str, usize)> = None;
    for s in samples {
        let tid = s.thread_id.as_str();
        let i = match last {
            Some((t, i)) if t == tid => i,
            _ => {
                let i = *index.entry(tid).or_insert_with(|| {
                    active.push((tid, 0));
                    active.len() - 1
                });
                last = Some((tid, i));
                i
            }
        };
        if stacks.get(s.stack_id).is_some_and(|st| !st.is_empty()) {
            active[i].1 += 1;
        }
    }
    (active, index)
}

/// Sentry's data category for a chunk of `platform` (Relay's `ProfileType::from_platform`).
pub fn data_category_for_platform(platform: &str) -> &'static str {
    match platform {
        "cocoa" | "android" | "javascript" => "profile_chunk_ui",
        _ => "profile_chunk",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, stack_id: usize, thread: &str) -> Sample {
        Sample {
            timestamp: t,
            stack_id,
            thread_id: thread.into(),
        }
    }

    #[test]
    fn drops_threads_relay_would_drop() {
        let mut p = ProfileData {
            stacks: vec![vec![], vec![0]],
            frames: vec![Arc::new(Frame::default())],
            samples: vec![
                sample(1.0, 1, "1"),
                sample(2.0, 1, "1"),
                sample(1.0, 1, "2"),
                sample(2.0, 0, "2"),
                sample(1.0, 0, "3"),
            ],
            ..Default::default()
        };
        for t in ["1", "2", "3", "4"] {
            p.thread_metadata
                .insert(t.into(), ThreadMetadata::default());
        }
        assert_eq!(p.drop_sparse_threads(), (2, 3));
        assert!(p.samples.iter().all(|s| s.thread_id == "1"));
        assert_eq!(p.thread_metadata.keys().collect::<Vec<_>>(), ["1"]);
    }

    #[test]
    fn a_thread_is_counted_over_all_its_runs_of_samples() {
        // "1" has two samples with a stack, in two runs; "2" has two, one run; "3" has one
        // with a stack in a run of two (the other's stack is empty).
        let mut p = ProfileData {
            stacks: vec![vec![], vec![0]],
            frames: vec![Arc::new(Frame::default())],
            samples: vec![
                sample(1.0, 1, "1"),
                sample(1.0, 1, "2"),
                sample(2.0, 1, "2"),
                sample(2.0, 0, "1"),
                sample(3.0, 1, "1"),
                sample(3.0, 1, "3"),
                sample(4.0, 0, "3"),
            ],
            ..Default::default()
        };
        assert_eq!(p.drop_sparse_threads(), (1, 2));
        assert!(p.samples.iter().all(|s| s.thread_id != "3"));
        assert_eq!(p.samples.len(), 5);
    }
}
