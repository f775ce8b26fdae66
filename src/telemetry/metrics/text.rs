//! The metric families `/metrics` serves: [`Render`], the one interface every component's
//! counters are read through, writes them into a [`Text`]; [`encode`] hands them to the
//! `prometheus-client` crate, which writes the OpenMetrics text format (what Prometheus asks
//! for first, and what the Collector's Prometheus exporter answers it with); [`scrape`] reads
//! one value back, for tests and tools.
//!
//! Names are given as they appear on sample lines: counters end in `_total` (the family is
//! named without it, as OpenMetrics wants); a name ending in `_bytes` or `_seconds` (before
//! `_total`) carries that unit (`# UNIT`).

use profilink_exporter::HistogramSnapshot;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reads one counter of a component's metrics.
pub type Field<T> = fn(&T) -> &AtomicU64;

/// Counters that show at `/metrics`: writes its metric families.
pub trait Render {
    /// Writes this component's families (help, type and samples) into `out`.
    fn render(&self, out: &mut Text<'_>);
}

/// One sample's value.
#[derive(Debug, Clone)]
enum Value {
    Int(u64),
    Float(f64),
    Histogram(HistogramSnapshot),
}

/// One metric family: its name as samples show it, type, help and samples.
#[derive(Debug, Clone)]
pub struct Family {
    name: String,
    kind: MetricType,
    help: String,
    samples: Vec<(Vec<(String, String)>, Value)>,
}

/// The families being written, in the order they were first named; a family named again
/// (by another section) gets the new samples.
pub struct Text<'a> {
    /// The families so far.
    pub families: &'a mut Vec<Family>,
}

fn kind_of(kind: &str) -> MetricType {
    match kind {
        "counter" => MetricType::Counter,
        "gauge" => MetricType::Gauge,
        "histogram" => MetricType::Histogram,
        _ => MetricType::Unknown,
    }
}

impl Text<'_> {
    fn family(&mut self, name: &str, kind: MetricType, help: &str) -> &mut Family {
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
        self.family(name, MetricType::Unknown, "")
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
        self.family(name, kind_of(kind), help);
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
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        self.push(name, labels, Value::Histogram(h.clone()));
    }
}

/// Splits a sample name into the family name `prometheus-client` appends suffixes to and
/// its unit: `x_seconds_total` (counter) is `x` in seconds.
fn descriptor(name: &str, kind: MetricType) -> (&str, Option<Unit>) {
    let base = match kind {
        MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    };
    for (suffix, unit) in [("_bytes", Unit::Bytes), ("_seconds", Unit::Seconds)] {
        if let Some(stem) = base.strip_suffix(suffix) {
            return (stem, Some(unit));
        }
    }
    (base, None)
}

fn encode_value(m: &mut MetricEncoder<'_>, kind: MetricType, v: &Value) -> std::fmt::Result {
    match (kind, v) {
        (MetricType::Counter, Value::Int(n)) => m.encode_counter::<NoLabelSet, _, u64>(n, None),
        (MetricType::Counter, Value::Float(x)) => m.encode_counter::<NoLabelSet, _, f64>(x, None),
        (_, Value::Int(n)) => m.encode_gauge(n),
        (_, Value::Float(x)) => m.encode_gauge(x),
        (_, Value::Histogram(h)) => {
            let buckets: Vec<(f64, u64)> = h
                .buckets
                .iter()
                .map(|(b, n)| (if b.is_finite() { *b } else { f64::MAX }, *n))
                .collect();
            m.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)
        }
    }
}

/// Writes `families` through `prometheus-client`'s encoder.
pub fn encode(families: &[Family], encoder: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    for f in families {
        let (name, unit) = descriptor(&f.name, f.kind);
        let mut m = encoder.encode_descriptor(name, &f.help, unit.as_ref(), f.kind)?;
        for (labels, value) in &f.samples {
            if labels.is_empty() {
                encode_value(&mut m, f.kind, value)?;
            } else {
                encode_value(&mut m.encode_family(labels)?, f.kind, value)?;
            }
        }
    }
    Ok(())
}

/// Escapes a label value (backslash, double quote, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Reads one sample from Prometheus or OpenMetrics text as a float: the sum of the values of
/// the lines `name{labels}` whose labels include every `want` pair. For tests and tools.
pub fn scrape_f64(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, labels) = match series.split_once('{') {
            Some((m, l)) => (m, l.trim_end_matches('}')),
            None => (series, ""),
        };
        if metric != name {
            continue;
        }
        let ok = want
            .iter()
            .all(|(k, v)| labels.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
        if ok {
            let v: f64 = value.parse().ok()?;
            found = Some(found.unwrap_or(0.0) + v);
        }
    }
    found
}

/// Reads one sample as an integer (see [`scrape_f64`]); `None` when absent or not a whole
/// number.
pub fn scrape(text: &str, name: &str, want: &[(&str, &str)]) -> Option<u64> {
    let v = scrape_f64(text, name, want)?;
    (v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64).then_some(v as u64)
}
