//! Sample records by sample type, as the OpenTelemetry Collector counts profile samples in
//! `otelcol_receiver_{accepted,refused,failed}_profile_samples` (v0.165): one per `Sample`
//! message, labelled `sample_type="<type>:<unit>"` (the profile's `sample_type` resolved
//! through the dictionary's string table). profilink's own observation counts (one per
//! timestamp or value, [`profile_samples`](profilink_proto::signal::profile_samples)) are
//! kept beside them in [`crate::Counters`].
//!
//! * OTLP: a `Sample` message is one record, whatever its number of timestamps. A
//!   `sample_type` index the string table does not hold resolves to an empty part (`:count`).
//! * Sentry (chunks and V1 profiles): one record per entry of `samples`, labelled
//!   [`SENTRY_SAMPLE_TYPE`] (`samples:count`, the sample type they get in OTLP); every such
//!   entry is one observation, so both counts agree there.
//!
//! Sample types are chosen by clients, so the labels are bounded per listener
//! ([`MAX_SAMPLE_TYPES`] distinct values of at most [`MAX_SAMPLE_TYPE_LEN`] bytes); records of
//! further types are counted in one overflow series, as OpenTelemetry SDKs do past their
//! cardinality limit (`otel_metric_overflow="true"`).

use profilink_proto::otlp::{Profile, ProfilesDictionary};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The label of Sentry samples.
pub const SENTRY_SAMPLE_TYPE: &str = "samples:count";

/// Distinct `sample_type` labels one listener keeps; records of further types go to the
/// overflow series.
pub const MAX_SAMPLE_TYPES: usize = 256;

/// Longest `sample_type` label kept; longer ones go to the overflow series.
pub const MAX_SAMPLE_TYPE_LEN: usize = 256;

/// The `sample_type` label of `profile`: `"<type>:<unit>"`.
pub fn sample_type_label(dictionary: Option<&ProfilesDictionary>, profile: &Profile) -> String {
    let value_type = profile.sample_type.unwrap_or_default();
    let string = |i: i32| -> &str {
        dictionary
            .and_then(|d| usize::try_from(i).ok().and_then(|i| d.string_table.get(i)))
            .map_or("", String::as_str)
    };
    format!(
        "{}:{}",
        string(value_type.type_strindex),
        string(value_type.unit_strindex)
    )
}

/// Sample records of one request (or part of one), by `sample_type` label.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleRecords {
    by_type: Vec<(String, u64)>,
}

impl SampleRecords {
    /// `n` records of one `sample_type`.
    pub fn single(sample_type: &str, n: u64) -> Self {
        let mut r = SampleRecords::default();
        r.add(sample_type, n);
        r
    }

    /// The records of `profile` (its `samples`), under its label.
    pub fn add_profile(&mut self, dictionary: Option<&ProfilesDictionary>, profile: &Profile) {
        let n = profile.samples.len() as u64;
        if n > 0 {
            self.add(&sample_type_label(dictionary, profile), n);
        }
    }

    /// Adds `n` records of `sample_type` (nothing when `n` is 0).
    pub fn add(&mut self, sample_type: &str, n: u64) {
        if n == 0 {
            return;
        }
        match self.by_type.iter_mut().find(|(t, _)| t == sample_type) {
            Some((_, count)) => *count += n,
            None => self.by_type.push((sample_type.to_string(), n)),
        }
    }

    /// Adds every record of `other`.
    pub fn merge(&mut self, other: &SampleRecords) {
        for (t, n) in &other.by_type {
            self.add(t, *n);
        }
    }

    /// All records, whatever their type.
    pub fn total(&self) -> u64 {
        self.by_type.iter().map(|(_, n)| n).sum()
    }

    /// `(sample_type, records)`, in the order first seen.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.by_type.iter().map(|(t, n)| (t.as_str(), *n))
    }
}

/// Accepted and refused records of one `sample_type` (failed: always 0, see `docs/configuration.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordCounts {
    /// Records pushed into the pipeline.
    pub accepted: u64,
    /// Records refused: invalid, or refused by the pipeline.
    pub refused: u64,
}

/// What a [`SampleRecordCounters`] holds at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleRecordsSnapshot {
    /// Per `sample_type` label, sorted.
    pub by_type: Vec<(String, RecordCounts)>,
    /// Records of types past the label bounds, when there were any.
    pub overflow: Option<RecordCounts>,
}

/// Counters of accepted and refused sample records by `sample_type`, bounded (see the module
/// docs).
#[derive(Debug, Default)]
pub struct SampleRecordCounters {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_type: BTreeMap<String, RecordCounts>,
    overflow: Option<RecordCounts>,
}

impl SampleRecordCounters {
    /// Counts `records` accepted.
    pub fn accept(&self, records: &SampleRecords) {
        self.count(records, |c, n| c.accepted += n);
    }

    /// Counts `records` refused.
    pub fn refuse(&self, records: &SampleRecords) {
        self.count(records, |c, n| c.refused += n);
    }

    fn count(&self, records: &SampleRecords, add: impl Fn(&mut RecordCounts, u64)) {
        if records.by_type.is_empty() {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for (t, n) in records.iter() {
            let known = inner.by_type.contains_key(t);
            let fits = t.len() <= MAX_SAMPLE_TYPE_LEN && inner.by_type.len() < MAX_SAMPLE_TYPES;
            let counts = if known || fits {
                inner.by_type.entry(t.to_string()).or_default()
            } else {
                inner.overflow.get_or_insert_with(RecordCounts::default)
            };
            add(counts, n);
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> SampleRecordsSnapshot {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        SampleRecordsSnapshot {
            by_type: inner.by_type.iter().map(|(t, c)| (t.clone(), *c)).collect(),
            overflow: inner.overflow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{Sample, ValueType};

    fn profile(type_index: i32, unit_index: i32, samples: usize) -> Profile {
        Profile {
            sample_type: Some(ValueType {
                type_strindex: type_index,
                unit_strindex: unit_index,
            }),
            samples: vec![
                Sample {
                    timestamps_unix_nano: vec![1, 2, 3],
                    ..Sample::default()
                };
                samples
            ],
            ..Profile::default()
        }
    }

    #[test]
    fn labels_resolve_type_and_unit_through_the_string_table() {
        let d = ProfilesDictionary {
            string_table: vec!["".into(), "samples".into(), "count".into()],
            ..ProfilesDictionary::default()
        };
        assert_eq!(
            sample_type_label(Some(&d), &profile(1, 2, 0)),
            "samples:count"
        );
        assert_eq!(sample_type_label(Some(&d), &profile(9, 2, 0)), ":count");
        assert_eq!(sample_type_label(Some(&d), &profile(-1, 1, 0)), ":samples");
        assert_eq!(sample_type_label(None, &profile(1, 2, 0)), ":");
        assert_eq!(sample_type_label(Some(&d), &Profile::default()), ":");
    }

    #[test]
    fn records_count_sample_messages_not_timestamps() {
        let d = ProfilesDictionary {
            string_table: vec!["".into(), "cpu".into(), "nanoseconds".into()],
            ..ProfilesDictionary::default()
        };
        let mut r = SampleRecords::default();
        r.add_profile(Some(&d), &profile(1, 2, 4));
        r.add_profile(Some(&d), &profile(1, 2, 1));
        r.add_profile(Some(&d), &profile(0, 0, 2));
        r.add_profile(Some(&d), &profile(1, 1, 0));
        let all: Vec<_> = r.iter().collect();
        assert_eq!(all, [("cpu:nanoseconds", 5), (":", 2)]);
        assert_eq!(r.total(), 7);
        let mut both = SampleRecords::single("cpu:nanoseconds", 1);
        both.merge(&r);
        assert_eq!(both.total(), 8);
    }

    #[test]
    fn counters_are_bounded_with_an_overflow_series() {
        let c = SampleRecordCounters::default();
        c.accept(&SampleRecords::single("samples:count", 3));
        c.refuse(&SampleRecords::single("samples:count", 2));
        for i in 0..MAX_SAMPLE_TYPES + 10 {
            c.accept(&SampleRecords::single(&format!("t{i}:count"), 1));
        }
        c.refuse(&SampleRecords::single(
            &"x".repeat(MAX_SAMPLE_TYPE_LEN + 1),
            4,
        ));
        // A known label keeps counting after the bound is reached.
        c.accept(&SampleRecords::single("samples:count", 1));
        let s = c.snapshot();
        assert_eq!(s.by_type.len(), MAX_SAMPLE_TYPES);
        let samples = s
            .by_type
            .iter()
            .find(|(t, _)| t == "samples:count")
            .unwrap();
        assert_eq!(
            samples.1,
            RecordCounts {
                accepted: 4,
                refused: 2
            }
        );
        assert_eq!(
            s.overflow,
            Some(RecordCounts {
                accepted: 11,
                refused: 4
            })
        );
    }
}
