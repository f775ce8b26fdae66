//! Findings, their severities, and the bounded collector every validator reports into.

use std::fmt;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// A spec rule that real producers break; the data is still usable.
    Warning,
    /// The data cannot be used as it is (a consumer or Relay would reject or misread it).
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One problem found in a payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Short kebab-case rule id, e.g. `index-out-of-range`.
    pub rule: &'static str,
    /// Where: the table or field and its index, e.g. `dictionary.location_table[5].mapping_index`
    /// or `profile.samples[3].stack_id`.
    pub path: String,
    /// What is wrong, for humans.
    pub message: String,
}

impl Finding {
    /// An error finding.
    pub fn error(rule: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            rule,
            path: path.into(),
            message: message.into(),
        }
    }

    /// A warning finding.
    pub fn warning(
        rule: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Finding {
            severity: Severity::Warning,
            rule,
            path: path.into(),
            message: message.into(),
        }
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}] {}: {}",
            self.severity, self.rule, self.path, self.message
        )
    }
}

/// True when any finding is an error.
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// True when any finding is a warning.
pub fn has_warnings(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Warning)
}

/// How many findings of one rule one object (a profile, the dictionary, a chunk, an envelope)
/// reports in full; the rest are counted into one summary finding.
pub const MAX_FINDINGS_PER_RULE: usize = 20;

/// Collects findings for one object, keeping at most [`MAX_FINDINGS_PER_RULE`] per rule.
///
/// Paths and messages are taken as `Display` values (usually `format_args!`) and only formatted
/// when the finding is kept, so a million bad samples cost a counter increment each.
pub(crate) struct Sink {
    scope: String,
    /// Findings below this severity are not recorded (nor formatted).
    min: Severity,
    out: Vec<Finding>,
    /// (rule, number seen, worst severity of the suppressed ones).
    counts: Vec<(&'static str, usize, Severity)>,
}

impl Sink {
    /// A collector whose summary findings name `scope` as their path.
    pub(crate) fn new(scope: impl Into<String>) -> Self {
        Sink {
            scope: scope.into(),
            min: Severity::Warning,
            out: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// A collector that records errors only: warnings cost nothing (they are not formatted).
    pub(crate) fn errors_only(scope: impl Into<String>) -> Self {
        Sink {
            min: Severity::Error,
            ..Sink::new(scope)
        }
    }

    /// True when warnings are recorded: a check that can only warn may be skipped otherwise.
    pub(crate) fn records_warnings(&self) -> bool {
        self.min <= Severity::Warning
    }

    /// Records a finding unless its rule already reported the maximum.
    pub(crate) fn push(
        &mut self,
        severity: Severity,
        rule: &'static str,
        path: impl fmt::Display,
        message: impl fmt::Display,
    ) {
        if severity < self.min {
            return;
        }
        let slot = match self.counts.iter().position(|c| c.0 == rule) {
            Some(i) => i,
            None => {
                self.counts.push((rule, 0, Severity::Warning));
                self.counts.len() - 1
            }
        };
        let entry = &mut self.counts[slot];
        entry.1 += 1;
        if entry.1 > MAX_FINDINGS_PER_RULE {
            entry.2 = entry.2.max(severity);
            return;
        }
        self.out.push(Finding {
            severity,
            rule,
            path: path.to_string(),
            message: message.to_string(),
        });
    }

    /// Records an error.
    pub(crate) fn error(
        &mut self,
        rule: &'static str,
        path: impl fmt::Display,
        message: impl fmt::Display,
    ) {
        self.push(Severity::Error, rule, path, message);
    }

    /// Records a warning.
    pub(crate) fn warning(
        &mut self,
        rule: &'static str,
        path: impl fmt::Display,
        message: impl fmt::Display,
    ) {
        self.push(Severity::Warning, rule, path, message);
    }

    /// The findings, plus one summary per rule that went over the limit.
    pub(crate) fn finish(mut self) -> Vec<Finding> {
        for (rule, seen, severity) in self.counts {
            if seen > MAX_FINDINGS_PER_RULE {
                self.out.push(Finding {
                    severity,
                    rule,
                    path: self.scope.clone(),
                    message: format!(
                        "... and {} more `{rule}` findings not shown",
                        seen - MAX_FINDINGS_PER_RULE
                    ),
                });
            }
        }
        self.out
    }
}

/// A path to a list element, `parent.field[index]` (or `field[index]` when `parent` is empty),
/// formatted only when a finding is kept.
#[derive(Clone, Copy)]
pub(crate) struct Elem<'a>(pub &'a str, pub &'a str, pub usize);

impl fmt::Display for Elem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            write!(f, "{}[{}]", self.1, self.2)
        } else {
            write!(f, "{}.{}[{}]", self.0, self.1, self.2)
        }
    }
}

/// Joins a path prefix such as `items[2].` and a JSON path such as `profile.samples[0]` (`.`
/// meaning the root) into one path.
pub(crate) fn join_path(prefix: &str, path: &str) -> String {
    match (prefix.strip_suffix('.'), path) {
        (Some(p), "." | "") => p.to_string(),
        (None, "") if prefix.is_empty() => ".".to_string(),
        _ => format!("{prefix}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_rule_and_summarizes() {
        let mut sink = Sink::new("p");
        for i in 0..25 {
            sink.error("a", format_args!("p.x[{i}]"), "bad");
        }
        sink.warning("b", "p.y", "meh");
        let out = sink.finish();
        assert_eq!(out.len(), MAX_FINDINGS_PER_RULE + 2);
        let last = out.last().unwrap();
        assert_eq!(last.rule, "a");
        assert_eq!(last.path, "p");
        assert!(last.message.contains("5 more"));
        assert_eq!(out[0].to_string(), "error[a] p.x[0]: bad");
        assert_eq!(out[20].to_string(), "warning[b] p.y: meh");
    }

    #[test]
    fn joins_paths() {
        assert_eq!(join_path("", "profile.samples[0]"), "profile.samples[0]");
        assert_eq!(join_path("", "."), ".");
        assert_eq!(join_path("items[1].", "."), "items[1]");
        assert_eq!(join_path("items[1].", "version"), "items[1].version");
    }
}
