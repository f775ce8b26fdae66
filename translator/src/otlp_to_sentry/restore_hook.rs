//! Round-trip hook: profiles produced by the Sentry -> OTLP direction carry the Profile
//! attribute `sentry.chunk_id`, and are rebuilt exactly as the chunk they came from by
//! [`crate::sentry_to_otlp::restore::restore_chunk_with_links`] (the chunk plus the trace link
//! of each linked observation).
//!
//! This file is the only coupling point between the two directions: [`restore`] returns `None`
//! when restoring is not available, and such profiles are then translated like any other.

use crate::dictionary::Dictionary;
use crate::error::TranslateError;
use crate::sample_link::SampleLink;
use profilink_proto::otlp::{Profile, ResourceProfiles};
use profilink_proto::sentry::ProfileChunk;

/// Profile attribute marking a profile that was translated from a Sentry chunk.
pub const CHUNK_ID_KEY: &str = "sentry.chunk_id";

/// Rebuilds the Sentry chunk (and its links) a marked profile came from; `None` when restoring
/// is not available.
pub(crate) fn restore(
    dictionary: &Dictionary<'_>,
    resource: &ResourceProfiles,
    profile: &Profile,
) -> Option<Result<(ProfileChunk, Vec<SampleLink>), TranslateError>> {
    Some(crate::sentry_to_otlp::restore::restore_chunk_with_links(
        dictionary, resource, profile,
    ))
}
