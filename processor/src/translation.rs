//! What the profiles pipelines translate with: the OTLP → Sentry options of the service, and
//! the facts they read from OTLP resources and Sentry chunks (routing attributes, profiler
//! ids, thread ids, profile counts).

use profilink_proto::otlp::{ProfilesDictionary, ResourceProfiles};
use profilink_proto::sentry::{CompactString, ProfileChunk};
use profilink_translator::Dictionary;
use profilink_translator::otlp_to_sentry::{self, SparseThreadGrouping, SparseThreadPolicy};
use std::collections::BTreeMap;

/// The options the service translates OTLP with: the translator's defaults, but sparse
/// threads are kept as they are (a thread seen once in a 5 s request is not sparse in the 60 s
/// chunk the exporter's accumulator builds, which groups or drops what is sparse then).
pub fn otlp_to_sentry_options() -> otlp_to_sentry::ChunkOptions {
    otlp_to_sentry::ChunkOptions {
        sparse_thread_grouping: SparseThreadGrouping::None,
        sparse_thread_policy: SparseThreadPolicy::Keep,
        ..Default::default()
    }
}

/// Every thread id of `chunk`'s samples: for chunks whose threads spans may reference (an
/// SDK's chunks), so the exporters never group them.
pub(crate) fn all_threads(chunk: &ProfileChunk) -> Vec<CompactString> {
    let mut out: Vec<CompactString> = Vec::new();
    for s in &chunk.profile.samples {
        if out.last() != Some(&s.thread_id) && !out.contains(&s.thread_id) {
            out.push(s.thread_id.clone());
        }
    }
    out
}

/// Resource attributes as text (`key` → value), for exporter routing.
pub(crate) fn resource_attributes(
    dictionary: Option<&ProfilesDictionary>,
    rp: &ResourceProfiles,
) -> BTreeMap<String, String> {
    let Some(resource) = &rp.resource else {
        return BTreeMap::new();
    };
    let dict = Dictionary::new(dictionary);
    match dict.key_values(&resource.attributes) {
        Ok(attrs) => attrs
            .iter()
            .filter_map(|a| a.value.to_text().map(|v| (a.key.to_owned(), v)))
            .collect(),
        Err(_) => BTreeMap::new(),
    }
}

/// The number of profiles of a resource.
pub fn profile_count(rp: &ResourceProfiles) -> u64 {
    rp.scope_profiles
        .iter()
        .map(|sp| sp.profiles.len() as u64)
        .sum()
}
