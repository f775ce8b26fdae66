//! Round-trip hook: profiles produced by the Sentry -> OTLP direction are rebuilt exactly as the
//! chunk they came from by [`crate::sentry_to_otlp::restore_chunk_with_links`] (the
//! chunk plus the trace link of each linked observation).
//!
//! Only profilink's own complete encoding is restored: the profile must pass the marker check
//! ([`crate::sentry_to_otlp::check_marker`]: the `profilink.format` mark, or the
//! `profilink` scope of earlier versions, and every required field present and valid), restore
//! must succeed, the chunk must span at most 66 s and pass the strict-out check
//! ([`super::strict`]). A profile carrying `sentry.chunk_id` that fails any of these is a
//! *fallback*: translated like any other profile (keeping a valid `sentry.chunk_id` /
//! `sentry.profiler_id` of its producer) and counted in [`super::Stats::restore_fallbacks`].
//!
//! This file is the only coupling point between the two directions.

use super::options::{ChunkOptions, RELAY_MAX_CHUNK_DURATION_NS};
use super::strict;
use crate::dictionary::Dictionary;
use crate::sample_link::SampleLink;
use crate::sentry_to_otlp::{check_marker, restore_chunk_with_links};
use profilink_proto::otlp::{Profile, ResourceProfiles};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::secs_to_nanos;

/// Profile attribute carrying a Sentry chunk id (profilink's mark needs more, see the module
/// docs; another producer's valid id is reused for the chunk its profile becomes).
pub const CHUNK_ID_KEY: &str = "sentry.chunk_id";

/// What the hook made of a profile carrying [`CHUNK_ID_KEY`].
pub(crate) enum Restore {
    /// Rebuilt as the chunk it came from, with its links.
    Restored(Box<ProfileChunk>, Vec<SampleLink>),
    /// Not restorable (why: [`check_marker`], restore's error or the failed check); translate
    /// it normally.
    Fallback,
}

fn chunk_span_ns(chunk: &ProfileChunk) -> u64 {
    let mut min = f64::INFINITY;
    let mut max = f64::NEG_INFINITY;
    for s in &chunk.profile.samples {
        min = min.min(s.timestamp);
        max = max.max(s.timestamp);
    }
    match (secs_to_nanos(min), secs_to_nanos(max)) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ if chunk.profile.samples.is_empty() => 0,
        _ => u64::MAX,
    }
}

/// Restores a profile carrying [`CHUNK_ID_KEY`] when it is profilink's own complete encoding
/// of a valid chunk (see the module docs).
pub(crate) fn restore(
    dictionary: &Dictionary<'_>,
    scope_name: &str,
    resource: &ResourceProfiles,
    profile: &Profile,
    options: &ChunkOptions,
) -> Restore {
    if check_marker(dictionary, scope_name, resource, profile).is_err() {
        return Restore::Fallback;
    }
    let Ok((chunk, links)) = restore_chunk_with_links(dictionary, resource, profile) else {
        return Restore::Fallback;
    };
    if chunk_span_ns(&chunk) > RELAY_MAX_CHUNK_DURATION_NS
        || strict::blocking_error(&chunk, options).is_some()
    {
        return Restore::Fallback;
    }
    Restore::Restored(Box::new(chunk), links)
}
