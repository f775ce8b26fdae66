//! How a component's counters show at `/metrics`, without naming an exposition format: a
//! component implements [`Render`] and writes its metric families (name, type, help, samples)
//! into a [`Text`]; the service's registry collects every component's families and encodes
//! them (the OpenMetrics text format, through the `prometheus-client` crate). Each crate keeps
//! its families in its own `telemetry` module, beside the counters they read.
//!
//! Names are given as they appear on sample lines: counters end in `_total` (the encoder names
//! the family without it, as OpenMetrics wants); a name ending in `_bytes` or `_seconds`
//! (before `_total`) carries that unit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reads one counter of a component's metrics.
pub type Field<T> = fn(&T) -> &AtomicU64;

/// Counters that show at `/metrics`: writes its metric families.
pub trait Render {
    /// Writes this component's families (help, type and samples) into `out`.
    fn render(&self, out: &mut Text<'_>);
}

/// What a family's samples are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (samples named `…_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets of observations, their count and sum.
    Histogram,
    /// Named by a sample before its header (no type known).
    Unknown,
}

impl Kind {
    /// The kind a header names: `counter`, `gauge`, `histogram`; anything else is
    /// [`Kind::Unknown`].
    pub fn parse(kind: &str) -> Kind {
        match kind {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "histogram" => Kind::Histogram,
            _ => Kind::Unknown,
        }
    }
}

/// A histogram's value: its buckets, the number of observations and their sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// `(upper bound, observations in this bucket)`, not cumulative; the last bound is
    /// `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
    /// Observations.
    pub count: u64,
    /// Sum of the observations.
    pub sum: f64,
}

/// One sample's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A whole number (counters, most gauges).
    Int(u64),
    /// A floating-point number (seconds, offsets that may be -1).
    Float(f64),
    /// A histogram.
    Histogram(Histogram),
}

/// Label pairs of one sample, values escaped (see [`escape`]).
pub type Labels = Vec<(String, String)>;

/// One metric family: its name as samples show it, type, help and samples.
#[derive(Debug, Clone)]
pub struct Family {
    name: String,
    kind: Kind,
    help: String,
    samples: Vec<(Labels, Value)>,
}

impl Family {
    /// The name as sample lines show it (counters with `_total`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The family's type.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The help text.
    pub fn help(&self) -> &str {
        &self.help
    }

    /// The samples, in the order they were written.
    pub fn samples(&self) -> &[(Labels, Value)] {
        &self.samples
    }
}

/// The families being written, in the order they were first named; a family named again
/// (by another section) gets the new samples.
pub struct Text<'a> {
    /// The families so far.
    pub families: &'a mut Vec<Family>,
}

impl Text<'_> {
    fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Family {
        match self.families.iter().position(|f| f.name == name) {
            Some(i) => &mut self.families[i],
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind,
                    help: help.to_string(),
                    samples: Vec::new(),
                });
                self.families.last_mut().expect("just pushed")
            }
        }
    }

    fn push(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), escape(v)))
            .collect();
        self.family(name, Kind::Unknown, "")
            .samples
            .push((labels, value));
    }

    /// One family per `(name, help, field)` row, with one sample per entry labelled
    /// `label="<entry id>"`.
    pub fn per_entry<T>(
        &mut self,
        kind: &str,
        label: &str,
        entries: &[(String, Arc<T>)],
        rows: &[(&str, &str, Field<T>)],
    ) {
        if entries.is_empty() {
            return;
        }
        for (name, help, get) in rows {
            self.header(name, kind, help);
            for (id, m) in entries {
                self.sample(name, &[(label, id)], get(m).load(Ordering::Relaxed));
            }
        }
    }

    /// Names a family (`kind` is `counter`, `gauge` or `histogram`) before its samples.
    pub fn header(&mut self, name: &str, kind: &str, help: &str) {
        self.family(name, Kind::parse(kind), help);
    }

    /// One sample with an integer value.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.push(name, labels, Value::Int(value));
    }

    /// One sample with a floating-point value (seconds of CPU time, uptime).
    pub fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.push(name, labels, Value::Float(value));
    }

    /// One histogram (its buckets, count and sum).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: Histogram) {
        self.push(name, labels, Value::Histogram(h));
    }
}

/// Escapes a label value (backslash, double quote, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_keep_their_first_place_and_gather_later_samples() {
        let mut families = Vec::new();
        let mut t = Text {
            families: &mut families,
        };
        t.header("a_total", "counter", "A.");
        t.sample("a_total", &[("x", "1")], 1);
        t.header("b", "gauge", "B.");
        t.header("a_total", "gauge", "ignored");
        t.sample_f64("a_total", &[("x", "q\"")], 2.5);
        t.sample("c", &[], 3);
        let names: Vec<_> = families.iter().map(|f| (f.name(), f.kind())).collect();
        assert_eq!(
            names,
            [
                ("a_total", Kind::Counter),
                ("b", Kind::Gauge),
                ("c", Kind::Unknown)
            ]
        );
        assert_eq!(families[0].help(), "A.");
        assert_eq!(
            families[0].samples()[1],
            (vec![("x".into(), "q\\\"".into())], Value::Float(2.5))
        );
        assert!(families[1].samples().is_empty());
    }

    #[test]
    fn per_entry_writes_nothing_without_entries() {
        let mut families = Vec::new();
        let none: Vec<(String, Arc<AtomicU64>)> = Vec::new();
        Text {
            families: &mut families,
        }
        .per_entry("counter", "id", &none, &[("n_total", "N.", |a| a)]);
        assert!(families.is_empty());
    }
}
