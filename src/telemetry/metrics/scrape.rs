//! Reading `/metrics` back: one value of the Prometheus or OpenMetrics text, for tests and
//! tools.

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
