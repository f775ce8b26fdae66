//! The families of every component, written through `prometheus-client`'s encoder: the
//! OpenMetrics text format (what Prometheus asks for first, and what the Collector's
//! Prometheus exporter answers it with).
//!
//! Families are named as their samples show them: counters end in `_total` (the family is
//! named without it, as OpenMetrics wants); a name ending in `_bytes` or `_seconds` (before
//! `_total`) carries that unit (`# UNIT`).

use profilink_consumer::telemetry::{Family, Kind, Value};
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

fn metric_type(kind: Kind) -> MetricType {
    match kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
        Kind::Histogram => MetricType::Histogram,
        Kind::Unknown => MetricType::Unknown,
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
            m.encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)
        }
    }
}

/// Writes `families` through `prometheus-client`'s encoder.
pub fn encode(families: &[Family], encoder: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    for f in families {
        let kind = metric_type(f.kind());
        let (name, unit) = descriptor(f.name(), kind);
        let mut m = encoder.encode_descriptor(name, f.help(), unit.as_ref(), kind)?;
        for (labels, value) in f.samples() {
            if labels.is_empty() {
                encode_value(&mut m, kind, value)?;
            } else {
                encode_value(&mut m.encode_family(labels)?, kind, value)?;
            }
        }
    }
    Ok(())
}
