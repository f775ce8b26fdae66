//! The check every received `profile_chunk` passes before anything downstream sees it: the
//! chunk validator's error rules ([`validate_chunk_errors`]: indices in range, finite
//! timestamps, at least one thread Relay would keep, ids, SDK, platform, duration …), plus
//! timestamps that are plausible Unix seconds.
//!
//! A chunk that fails is refused with the rule id as its reason
//! (`profilink_receiver_refused_items_total{reason}`) and never reaches a pipeline.

use profilink_proto::sentry::ProfileChunk;
use profilink_proto::validate::validate_chunk_errors;

/// Latest plausible sample timestamp in Unix seconds (the year 2286): later ones are unit
/// mistakes (milli- or nanoseconds) or garbage, which the translation would have to drop.
pub const MAX_TIMESTAMP_SECS: f64 = 1e10;

/// Why a chunk was refused at the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorRefusal {
    /// The rule (a validator rule id, or `timestamp-out-of-range`).
    pub reason: &'static str,
    /// Where and what, for the log line and a 400 body.
    pub message: String,
}

/// Checks `chunk`; `Err` with the first broken rule.
pub fn check_chunk(chunk: &ProfileChunk) -> Result<(), DoorRefusal> {
    if let Some(f) = validate_chunk_errors(chunk).into_iter().next() {
        return Err(DoorRefusal {
            reason: f.rule,
            message: format!("{}: {}", f.path, f.message),
        });
    }
    if let Some((i, s)) = chunk
        .profile
        .samples
        .iter()
        .enumerate()
        .find(|(_, s)| !(0.0..=MAX_TIMESTAMP_SECS).contains(&s.timestamp))
    {
        return Err(DoorRefusal {
            reason: "timestamp-out-of-range",
            message: format!(
                "profile.samples[{i}].timestamp: {} is not Unix seconds between 0 and {MAX_TIMESTAMP_SECS}",
                s.timestamp
            ),
        });
    }
    Ok(())
}
