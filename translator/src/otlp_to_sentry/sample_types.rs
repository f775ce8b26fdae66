//! The sample-type table: which OTLP `sample_type` `(type, unit)` pairs are CPU or wall-clock
//! samples, and how their values become observations.
//!
//! Sentry shows chunks as CPU profiles, so only CPU and wall-clock profiles are translated;
//! every other type (off-CPU time, heap and allocation profiles, locks…) is skipped and counted
//! per `"type:unit"` ([`super::ChunkTranslation::skipped_sample_types`]).
//!
//! # The built-in table
//!
//! Types are matched ASCII case-insensitively; units too.
//!
//! | types | unit | observations of an aggregated value `v` |
//! | --- | --- | --- |
//! | `samples`, `sample`, `cpu`, `wall`, `events`, `itimer`, `ctimer`, `perf_events`, `cpu-clock`, `task-clock`, `j9_wall` | `count` | `v` ([`Observations::Count`]) |
//! | `cpu`, `wall`, `itimer`, `ctimer`, `perf_events`, `cpu-clock`, `task-clock`, `j9_wall` | `nanoseconds`/`ns`, `microseconds`/`us`, `milliseconds`/`ms`, `seconds`/`s` | `round(v / period)`, at least 1, when the profile has a period with a time unit (both converted to nanoseconds); else 1 per sample ([`Observations::PerPeriod`]) |
//! | no sample type at all | — | `v` |
//!
//! Where the names come from:
//! * `samples/count`, `cpu/nanoseconds`, `events/count`, `wall/nanoseconds`: the known
//!   `sample_type` pairs of the OpenTelemetry profiles specification (opentelemetry-specification
//!   PR #5296) and the eBPF profiler (`samples/count` with `cpu/nanoseconds` periods; `events/count`
//!   for kprobe/uprobe hits);
//! * `itimer`, `ctimer`, `wall`, `perf_events`, `j9_wall`: async-profiler's engine names, which
//!   its `src/otlp.cpp` writes as the sample type with unit `count` (samples) or the engine's
//!   unit `ns` (counters); `cpu-clock`, `task-clock`: perf's clock events;
//! * `sample/count`: pprof's name in Node.js and other wall-clock profilers.
//!
//! A timestamped sample is one observation per timestamp whatever its type's rule.
//!
//! # Configuring it
//!
//! [`SampleTypes::with`] adds (or overrides) a pair; [`SampleTypes::parse_pair`] reads the
//! `TYPE:UNIT[=count|period]` form of the CLI's `--cpu-sample-type`.

use std::fmt;

/// How aggregated values of a CPU/wall sample type become observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observations {
    /// The value is a count of samples: `v` observations.
    Count,
    /// The value is time: `round(v / period)` observations (at least 1) when the profile has
    /// a time period, else one per sample.
    PerPeriod,
}

/// One entry of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleTypeRule {
    /// The sample type (lowercase).
    pub type_: String,
    /// Its unit (lowercase).
    pub unit: String,
    /// How values become observations.
    pub observations: Observations,
}

/// The sample-type table (see the module docs). [`SampleTypes::default`] is the built-in one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleTypes {
    rules: Vec<SampleTypeRule>,
}

const COUNT_TYPES: &[&str] = &[
    "samples",
    "sample",
    "cpu",
    "wall",
    "events",
    "itimer",
    "ctimer",
    "perf_events",
    "cpu-clock",
    "task-clock",
    "j9_wall",
];
const TIME_TYPES: &[&str] = &[
    "cpu",
    "wall",
    "itimer",
    "ctimer",
    "perf_events",
    "cpu-clock",
    "task-clock",
    "j9_wall",
];
const TIME_UNITS: &[&str] = &[
    "nanoseconds",
    "ns",
    "microseconds",
    "us",
    "milliseconds",
    "ms",
    "seconds",
    "s",
];

impl Default for SampleTypes {
    fn default() -> Self {
        let mut rules = Vec::new();
        for t in COUNT_TYPES {
            rules.push(SampleTypeRule {
                type_: (*t).to_owned(),
                unit: "count".to_owned(),
                observations: Observations::Count,
            });
        }
        for t in TIME_TYPES {
            for u in TIME_UNITS {
                rules.push(SampleTypeRule {
                    type_: (*t).to_owned(),
                    unit: (*u).to_owned(),
                    observations: Observations::PerPeriod,
                });
            }
        }
        SampleTypes { rules }
    }
}

/// A `--cpu-sample-type` value that is not `TYPE:UNIT[=count|period]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not TYPE:UNIT, TYPE:UNIT=count or TYPE:UNIT=period")]
pub struct SampleTypeParseError(pub String);

impl SampleTypes {
    /// An empty table (nothing is CPU/wall but profiles without a sample type).
    pub fn empty() -> Self {
        SampleTypes { rules: Vec::new() }
    }

    /// The table with `(type_, unit)` added, or its rule replaced.
    pub fn with(mut self, type_: &str, unit: &str, observations: Observations) -> Self {
        let (t, u) = (type_.to_ascii_lowercase(), unit.to_ascii_lowercase());
        self.rules.retain(|r| !(r.type_ == t && r.unit == u));
        self.rules.push(SampleTypeRule {
            type_: t,
            unit: u,
            observations,
        });
        self
    }

    /// Reads `TYPE:UNIT[=count|period]` (default: `count` when the unit is `count`, else
    /// `period`). The unit is after the last `:`.
    pub fn parse_pair(text: &str) -> Result<(String, String, Observations), SampleTypeParseError> {
        let bad = || SampleTypeParseError(text.to_owned());
        let (pair, rule) = match text.split_once('=') {
            Some((p, r)) => (p, Some(r)),
            None => (text, None),
        };
        let (t, u) = pair.rsplit_once(':').ok_or_else(bad)?;
        if t.is_empty() || u.is_empty() {
            return Err(bad());
        }
        let observations = match rule {
            Some("count") => Observations::Count,
            Some("period") => Observations::PerPeriod,
            Some(_) => return Err(bad()),
            None if u.eq_ignore_ascii_case("count") => Observations::Count,
            None => Observations::PerPeriod,
        };
        Ok((t.to_owned(), u.to_owned(), observations))
    }

    /// The rule of `(type_, unit)`, when it is a CPU/wall pair.
    pub fn rule(&self, type_: &str, unit: &str) -> Option<Observations> {
        self.rules
            .iter()
            .find(|r| r.type_.eq_ignore_ascii_case(type_) && r.unit.eq_ignore_ascii_case(unit))
            .map(|r| r.observations)
    }

    /// Every entry, in table order.
    pub fn rules(&self) -> &[SampleTypeRule] {
        &self.rules
    }
}

/// Nanoseconds per unit for the time units of the table.
pub(crate) fn nanos_per_unit(unit: &str) -> Option<u64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "nanoseconds" | "ns" => 1,
        "microseconds" | "us" => 1_000,
        "milliseconds" | "ms" => 1_000_000,
        "seconds" | "s" => 1_000_000_000,
        _ => return None,
    })
}

/// The `sample_type="type:unit"` label of a pair.
pub struct TypeLabel<'a>(pub &'a str, pub &'a str);

impl fmt::Display for TypeLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.0, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_pairs() {
        let t = SampleTypes::default();
        assert_eq!(t.rule("itimer", "count"), Some(Observations::Count));
        assert_eq!(t.rule("CTIMER", "Count"), Some(Observations::Count));
        assert_eq!(t.rule("cpu", "nanoseconds"), Some(Observations::PerPeriod));
        assert_eq!(t.rule("itimer", "ns"), Some(Observations::PerPeriod));
        assert_eq!(t.rule("events", "count"), Some(Observations::Count));
        assert_eq!(t.rule("alloc_tracer", "bytes"), None);
        assert_eq!(t.rule("off_cpu", "nanoseconds"), None);
        assert_eq!(t.rule("inuse_space", "bytes"), None);
        assert_eq!(t.rule("samples", "bytes"), None);
    }

    #[test]
    fn configured_pairs() {
        let (ty, unit, o) = SampleTypes::parse_pair("lock_tracer:ns").unwrap();
        assert_eq!(
            (ty.as_str(), unit.as_str(), o),
            ("lock_tracer", "ns", Observations::PerPeriod)
        );
        let (_, _, o) = SampleTypes::parse_pair("x:count").unwrap();
        assert_eq!(o, Observations::Count);
        let (_, _, o) = SampleTypes::parse_pair("x:ms=count").unwrap();
        assert_eq!(o, Observations::Count);
        assert!(SampleTypes::parse_pair("nounit").is_err());
        assert!(SampleTypes::parse_pair("x:count=bogus").is_err());
        let t = SampleTypes::empty().with("Lock_Tracer", "NS", Observations::PerPeriod);
        assert_eq!(t.rule("lock_tracer", "ns"), Some(Observations::PerPeriod));
        assert_eq!(t.rule("samples", "count"), None);
        assert_eq!(nanos_per_unit("ms"), Some(1_000_000));
        assert_eq!(TypeLabel("alloc", "bytes").to_string(), "alloc:bytes");
    }
}
