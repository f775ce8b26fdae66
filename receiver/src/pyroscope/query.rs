//! The query of `POST /ingest`, as Pyroscope reads it: `name` (required: `app{k=v,...}`),
//! `from` and `until` (Unix time in seconds, milliseconds, microseconds or nanoseconds, told
//! apart by size; `now` or absent: the time of the request), `format`, `sampleRate` (samples
//! per second of CPU/wall profiles; default 100, as Pyroscope's when absent or unreadable),
//! `spyName`, `units` and `aggregationType` (`sum` or `average`).

use crate::pyroscope::labels::AppName;
use std::time::{SystemTime, UNIX_EPOCH};

/// Pyroscope's default `sampleRate`.
pub(crate) const DEFAULT_SAMPLE_RATE: u32 = 100;

/// A parsed `/ingest` query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IngestQuery {
    /// `name`.
    pub name: AppName,
    /// `from`, Unix nanoseconds.
    pub from_ns: u64,
    /// `until`, Unix nanoseconds (at least `from_ns`).
    pub until_ns: u64,
    /// `format`, lower case (`""` when absent).
    pub format: String,
    /// `sampleRate` (never 0).
    pub sample_rate: u32,
    /// `spyName`, when given.
    pub spy_name: Option<String>,
    /// `units` (default `samples`).
    pub units: String,
}

impl IngestQuery {
    /// Parses the query string `query` (without the `?`); the error names the key.
    pub(crate) fn parse(query: &str) -> Result<IngestQuery, String> {
        let mut name = None;
        let (mut from, mut until, mut format, mut rate, mut spy, mut units, mut aggregation) =
            (None, None, String::new(), None, None, None, None);
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "name" => name = Some(v.into_owned()),
                "from" => from = Some(v.into_owned()),
                "until" => until = Some(v.into_owned()),
                "format" => format = v.to_ascii_lowercase(),
                "sampleRate" => rate = Some(v.into_owned()),
                "spyName" => spy = Some(v.into_owned()),
                "units" => units = Some(v.into_owned()),
                "aggregationType" => aggregation = Some(v.into_owned()),
                _ => {}
            }
        }
        let name = name.ok_or("name: required (app{label=value,...})")?;
        let name = AppName::parse(&name).map_err(|e| format!("name: {e}"))?;
        let now = now_ns();
        let from_ns = unix_ns(from.as_deref(), now).map_err(|e| format!("from: {e}"))?;
        let until_ns = unix_ns(until.as_deref(), now).map_err(|e| format!("until: {e}"))?;
        if until_ns < from_ns {
            return Err("until: before from".into());
        }
        let sample_rate = rate
            .and_then(|r| r.trim().parse::<u32>().ok())
            .filter(|r| *r > 0)
            .unwrap_or(DEFAULT_SAMPLE_RATE);
        if let Some(a) = &aggregation
            && !matches!(a.as_str(), "sum" | "average" | "")
        {
            return Err(format!("aggregationType: {a:?} is neither sum nor average"));
        }
        Ok(IngestQuery {
            name,
            from_ns,
            until_ns,
            format,
            sample_rate,
            spy_name: spy.filter(|s| !s.is_empty()),
            units: units
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| "samples".into()),
        })
    }

    /// The sample type and unit of a folded body: the name's profile type, else `units`.
    pub(crate) fn sample_type(&self) -> Result<(&'static str, &'static str), String> {
        if let Some(t) = self.name.sample_type() {
            return Ok(t);
        }
        match self.units.as_str() {
            "samples" => Ok(("samples", "count")),
            "objects" => Ok(("objects", "count")),
            "bytes" => Ok(("space", "bytes")),
            "goroutines" => Ok(("goroutines", "count")),
            "lock_samples" => Ok(("contentions", "count")),
            "lock_nanoseconds" => Ok(("delay", "nanoseconds")),
            other => Err(format!(
                "units: {other:?} is not one of samples, objects, bytes, goroutines, \
                 lock_samples, lock_nanoseconds"
            )),
        }
    }

    /// The period type of a folded CPU or wall profile (`cpu` or `wall`), none for others.
    pub(crate) fn period_type(&self) -> Option<&'static str> {
        match (self.name.profile_type, self.units.as_str()) {
            (Some("wall"), _) => Some("wall"),
            (Some("cpu" | "itimer"), _) | (None, "samples") => Some("cpu"),
            _ => None,
        }
    }

    /// The period in nanoseconds: one second over `sampleRate`.
    pub(crate) fn period_ns(&self) -> i64 {
        1_000_000_000 / i64::from(self.sample_rate)
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A Unix time in seconds, ms, µs or ns (by size) as nanoseconds; `now` or absent: `now`.
fn unix_ns(value: Option<&str>, now: u64) -> Result<u64, String> {
    let Some(v) = value
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "now")
    else {
        return Ok(now);
    };
    let n: u64 = v
        .parse()
        .map_err(|_| format!("{v:?} is not a Unix time (seconds, or ms, µs, ns)"))?;
    Ok(match n {
        0..10_000_000_000 => n.saturating_mul(1_000_000_000),
        10_000_000_000..10_000_000_000_000 => n.saturating_mul(1_000_000),
        10_000_000_000_000..10_000_000_000_000_000 => n.saturating_mul(1_000),
        _ => n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_keys_of_pyroscope() {
        let q = IngestQuery::parse(
            "name=app.cpu%7Benv%3Dprod%7D&from=1700000000&until=1700000010&format=Folded\
             &sampleRate=97&spyName=pyspy&units=samples&aggregationType=sum",
        )
        .unwrap();
        assert_eq!(q.name.app, "app");
        assert_eq!(q.from_ns, 1_700_000_000_000_000_000);
        assert_eq!(q.until_ns - q.from_ns, 10_000_000_000);
        assert_eq!(q.format, "folded");
        assert_eq!(q.period_ns(), 1_000_000_000 / 97);
        assert_eq!(q.sample_type(), Ok(("samples", "count")));
        assert_eq!(q.period_type(), Some("cpu"));
        assert_eq!(q.spy_name.as_deref(), Some("pyspy"));
        let q = IngestQuery::parse("name=a&from=1700000000123&sampleRate=x").unwrap();
        assert_eq!(q.from_ns, 1_700_000_000_123_000_000);
        assert_eq!(q.sample_rate, DEFAULT_SAMPLE_RATE);
        let q = IngestQuery::parse("name=a.alloc_space").unwrap();
        assert_eq!(q.sample_type(), Ok(("alloc_space", "bytes")));
        assert_eq!(q.period_type(), None);
    }

    #[test]
    fn bad_queries_name_the_key() {
        for (q, key) in [
            ("", "name:"),
            ("name=a{b", "name:"),
            ("name=a&from=yesterday", "from:"),
            ("name=a&from=20&until=10", "until:"),
            ("name=a&aggregationType=max", "aggregationType:"),
        ] {
            let e = IngestQuery::parse(q).unwrap_err();
            assert!(e.starts_with(key), "{q}: {e}");
        }
        let q = IngestQuery::parse("name=a&units=furlongs").unwrap();
        assert!(q.sample_type().unwrap_err().starts_with("units:"));
    }
}
