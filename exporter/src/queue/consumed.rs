//! The consumption ledger: which samples of a still unacknowledged input are already in a
//! persisted merged chunk, so that replaying the input after a restart neither duplicates
//! them nor changes where later chunks are cut.
//!
//! An input (one `export` batch) is acknowledged only once every merged chunk holding its
//! samples is persisted. An input whose samples straddle a window boundary (a 5 s request
//! starting 2 s before a minute ends) is therefore still unacknowledged after the first
//! window's chunk is persisted, and a restart replays it whole. Without a record of what was
//! already persisted, the replay would merge those samples a second time, anchor the open
//! window elsewhere and cut every later chunk differently.
//!
//! Each merged chunk records, per input part it took samples from, the closed timestamp range
//! `[lo, hi]` of those samples ([`Consumed`]). Within one part (one chunk of an input record,
//! identified by the record id and its index), the samples sent to different destinations
//! (late data, the open window, later windows) occupy disjoint timestamp ranges: the
//! accumulator cuts a part's time-sorted samples only between distinct timestamps. The ranges
//! are kept durably twice:
//! * in the merged chunk's ready-log metadata ([`super::ReadyMeta::consumed`]), written with the
//!   chunk in one synced append, and
//! * for inputs that stay unacknowledged after that, as *consumption records* in the input log
//!   (marker, [`VERSION`], the JSON of one input's entries), appended right after the chunk,
//!   so they outlive the chunk's own record once it is delivered. A consumption record is
//!   acknowledged together with its input.
//!
//! On replay, samples of a part that fall into one of its consumed ranges are left out
//! ([`ConsumedIndex::filter`]).

use super::input::MARKER;
#[cfg(test)]
use profilink_proto::sentry::ProfileChunk;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Version byte (after [`MARKER`]) of a consumption record in the input log.
pub const VERSION: u8 = 0x43;

/// Samples of one input part that went into a persisted merged chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Consumed {
    /// The input record's queue id.
    pub input: u64,
    /// The chunk's index within the record.
    pub part: u32,
    /// Bits of the smallest timestamp taken (`f64::to_bits`, exact).
    pub lo: u64,
    /// Bits of the largest timestamp taken.
    pub hi: u64,
}

impl Consumed {
    /// The entry for samples `lo..=hi` (timestamps in seconds) of `part` of `input`.
    pub fn new(input: u64, part: u32, lo: f64, hi: f64) -> Self {
        Consumed {
            input,
            part,
            lo: lo.to_bits(),
            hi: hi.to_bits(),
        }
    }

    fn covers(&self, ts: f64) -> bool {
        f64::from_bits(self.lo) <= ts && ts <= f64::from_bits(self.hi)
    }
}

/// Encodes a consumption record (entries of one input).
pub fn encode(entries: &[Consumed]) -> Vec<u8> {
    let mut body = Vec::with_capacity(5 + 64 * entries.len());
    body.extend_from_slice(&MARKER);
    body.push(VERSION);
    // A Vec of plain numbers always serializes.
    let _ = serde_json::to_writer(&mut body, entries);
    body
}

/// Decodes a consumption record: `None` when `body` is not one, `Some(Err)` when it is one but
/// corrupt.
pub fn decode(body: &[u8]) -> Option<Result<Vec<Consumed>, serde_json::Error>> {
    if body.get(..4) != Some(&MARKER[..]) || body.get(4) != Some(&VERSION) {
        return None;
    }
    Some(serde_json::from_slice(&body[5..]))
}

/// Consumed ranges by (input, part), for filtering replayed inputs.
#[derive(Debug, Default)]
pub struct ConsumedIndex {
    ranges: HashMap<(u64, u32), Vec<Consumed>>,
}

impl ConsumedIndex {
    /// Adds entries.
    pub fn extend<'a>(&mut self, entries: impl IntoIterator<Item = &'a Consumed>) {
        for c in entries {
            let v = self.ranges.entry((c.input, c.part)).or_default();
            if !v.contains(c) {
                v.push(*c);
            }
        }
    }

    /// True when timestamp `ts` of `part` of `input` is in a persisted chunk.
    pub fn covers(&self, input: u64, part: u32, ts: f64) -> bool {
        self.ranges
            .get(&(input, part))
            .is_some_and(|ranges| ranges.iter().any(|r| r.covers(ts)))
    }

    /// Removes the samples of `part` of `input` that are already in a persisted chunk; returns
    /// how many were removed. (The replay uses [`ConsumedIndex::covers`] through the
    /// accumulator, which also removes the measurement values that went with them.)
    #[cfg(test)]
    pub fn filter(&self, input: u64, part: u32, chunk: &mut ProfileChunk) -> usize {
        let Some(ranges) = self.ranges.get(&(input, part)) else {
            return 0;
        };
        let before = chunk.profile.samples.len();
        chunk
            .profile
            .samples
            .retain(|s| !ranges.iter().any(|r| r.covers(s.timestamp)));
        before - chunk.profile.samples.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::sentry::Sample;

    #[test]
    fn records_round_trip_and_other_records_are_not_taken_for_them() {
        let entries = vec![
            Consumed::new(7, 0, 1.5, 2.25),
            Consumed::new(7, 3, 0.1, 0.1),
        ];
        let body = encode(&entries);
        assert_eq!(decode(&body).unwrap().unwrap(), entries);
        assert!(decode(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 0]).is_none());
        assert!(decode(b"{}").is_none());
        let mut bad = body.clone();
        bad.truncate(8);
        assert!(decode(&bad).unwrap().is_err());
    }

    #[test]
    fn filter_removes_exactly_the_consumed_samples_of_that_part() {
        let mut idx = ConsumedIndex::default();
        idx.extend(&[
            Consumed::new(1, 0, 10.0, 12.0),
            Consumed::new(1, 1, 0.0, 99.0),
        ]);
        let mut c = ProfileChunk::default();
        for ts in [9.5, 10.0, 11.0, 12.0, 12.5] {
            c.profile.samples.push(Sample {
                timestamp: ts,
                stack_id: 0,
                thread_id: "1".into(),
            });
        }
        let mut other_input = c.clone();
        assert_eq!(idx.filter(2, 0, &mut other_input), 0);
        assert_eq!(idx.filter(1, 0, &mut c), 3);
        let left: Vec<f64> = c.profile.samples.iter().map(|s| s.timestamp).collect();
        assert_eq!(left, vec![9.5, 12.5]);
    }
}
