//! Writing the Prometheus text format (version 0.0.4), reading it back ([`scrape`]), and
//! [`Render`]: the one interface `/metrics` reads every component's counters through.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reads one counter of a component's metrics.
pub type Field<T> = fn(&T) -> &AtomicU64;

/// Counters that show at `/metrics`: writes its metric families.
pub trait Render {
    /// Writes this component's families (`# HELP`, `# TYPE` and samples) into `out`.
    fn render(&self, out: &mut Text<'_>);
}

/// A Prometheus text being written.
pub struct Text<'a> {
    /// The text so far.
    pub out: &'a mut String,
}

impl Text<'_> {
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

    /// `# HELP` and `# TYPE` lines of a family.
    pub fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample line.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// Escapes a label value (backslash, double quote, newline).
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Reads one sample from Prometheus text: the value of the line `name{labels}` whose labels
/// include every `want` pair (all lines of `name` summed). For tests and tools.
pub fn scrape(text: &str, name: &str, want: &[(&str, &str)]) -> Option<u64> {
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
            let v: u64 = value.parse().ok()?;
            found = Some(found.unwrap_or(0) + v);
        }
    }
    found
}
