//! The flamegraph endpoint's query parameters and the supported subset of Sentry's search
//! syntax.
//!
//! Parameters follow Sentry's `OrganizationProfilingFlamegraphEndpoint` and its
//! `get_date_range_from_params`: `statsPeriod` overrides `start`/`end`, `start` and `end` go
//! together, the default period is the last 90 days, `dataSource` defaults to `functions` when a
//! `fingerprint` is given and to `transactions` otherwise, and `fingerprint` with any other data
//! source is an error.
//!
//! Search syntax: whitespace-separated terms, all of which must hold (`AND` may be written);
//! a term is `key:value` or `!key:value` with `key` one of `release`, `environment`, `platform`,
//! `transaction`; a value is bare, `"quoted"` (with `\"` and `\\` escapes) or a list
//! `[a, "b c"]` (any of); `*` matches any run of characters (`\*` a literal star); an empty
//! value (`release:""`) matches chunks without one. `OR`, parentheses and free text are
//! rejected.

use crate::store::StoredChunkInfo;

/// Sentry's default and maximum period.
const DEFAULT_PERIOD_SECS: f64 = 90.0 * 86400.0;

/// The dataset candidates are drawn from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataSource {
    /// Chunks containing a function (by fingerprint), restricted to threads where it runs.
    Functions,
    /// Every chunk.
    Profiles,
    /// Chunks linked to spans (same as transactions in this store).
    Spans,
    /// Chunks linked to transactions.
    Transactions,
}

/// Searchable chunk attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Release,
    Environment,
    Platform,
    Transaction,
}

/// One search term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Term {
    pub negated: bool,
    pub key: Key,
    /// Any of these patterns.
    pub values: Vec<Pattern>,
}

/// A value pattern: literal pieces separated by `*` wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The pattern split at wildcards; one piece means no wildcard.
    pieces: Vec<String>,
}

impl Pattern {
    fn new(raw: &str) -> Pattern {
        let mut pieces = vec![String::new()];
        let mut chars = raw.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'*') => {
                    chars.next();
                    if let Some(p) = pieces.last_mut() {
                        p.push('*');
                    }
                }
                '*' => pieces.push(String::new()),
                _ => {
                    if let Some(p) = pieces.last_mut() {
                        p.push(c);
                    }
                }
            }
        }
        Pattern { pieces }
    }

    /// Whether the value (absent = empty) matches.
    pub(crate) fn matches(&self, value: Option<&str>) -> bool {
        let v = value.unwrap_or("");
        if self.pieces.len() == 1 {
            return v == self.pieces[0];
        }
        let (first, rest) = self.pieces.split_first().expect("non-empty");
        let (last, middle) = rest.split_last().expect("two or more pieces");
        if !v.starts_with(first.as_str())
            || !v.ends_with(last.as_str())
            || v.len() < first.len() + last.len()
        {
            return false;
        }
        let mut s = &v[first.len()..v.len() - last.len()];
        for piece in middle {
            match s.find(piece.as_str()) {
                Some(at) => s = &s[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

impl Term {
    /// Whether the chunk satisfies this term.
    pub(crate) fn matches(&self, info: &StoredChunkInfo) -> bool {
        let hit = match self.key {
            Key::Release => self.any(info.release.as_deref()),
            Key::Environment => self.any(info.environment.as_deref()),
            Key::Platform => self.any(Some(info.platform.as_str())),
            Key::Transaction => {
                if info.transaction_names.is_empty() {
                    self.any(None)
                } else {
                    info.transaction_names.iter().any(|n| self.any(Some(n)))
                }
            }
        };
        hit != self.negated
    }

    fn any(&self, value: Option<&str>) -> bool {
        self.values.iter().any(|p| p.matches(value))
    }
}

/// Parsed parameters of a flamegraph request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlamegraphParams {
    /// Project ids; `None` for all (`-1` or no `project`).
    pub projects: Option<Vec<u64>>,
    /// Environments (any of); empty for all.
    pub environments: Vec<String>,
    /// Period start, Unix seconds.
    pub start: f64,
    /// Period end, Unix seconds.
    pub end: f64,
    /// The data source.
    pub data_source: DataSource,
    /// Function fingerprint (functions only).
    pub fingerprint: Option<u32>,
    /// Search terms (all must hold).
    pub terms: Vec<Term>,
    /// `expand=metrics`.
    pub metrics: bool,
}

/// Parses the query-string pairs of a flamegraph request; `now` is the current Unix time.
pub(crate) fn parse_params(
    pairs: &[(String, String)],
    now: f64,
) -> Result<FlamegraphParams, String> {
    fn all<'a>(pairs: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    let last = |name: &'static str| all(pairs, name).last();

    let mut projects = Some(Vec::new());
    for raw in all(pairs, "project") {
        let id: i64 = raw
            .trim()
            .parse()
            .map_err(|_| format!("Invalid project parameter. Values must be numbers: {raw:?}"))?;
        match id {
            -1 => projects = None,
            id if id >= 0 => {
                if let Some(p) = projects.as_mut() {
                    p.push(id as u64);
                }
            }
            _ => return Err(format!("Invalid project id: {id}")),
        }
    }
    if projects.as_ref().is_some_and(Vec::is_empty) {
        projects = None;
    }
    let environments: Vec<String> = all(pairs, "environment")
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect();

    let (start, end) = if let Some(period) = last("statsPeriod").filter(|p| !p.is_empty()) {
        let secs =
            parse_stats_period(period).ok_or_else(|| format!("Invalid statsPeriod: {period:?}"))?;
        (now - secs, now)
    } else {
        match (
            last("start").filter(|s| !s.is_empty()),
            last("end").filter(|s| !s.is_empty()),
        ) {
            (None, None) => (now - DEFAULT_PERIOD_SECS, now),
            (Some(s), Some(e)) => (
                parse_datetime(s).ok_or_else(|| format!("{s:?} is not a valid ISO-8601 date"))?,
                parse_datetime(e).ok_or_else(|| format!("{e:?} is not a valid ISO-8601 date"))?,
            ),
            _ => return Err("start and end are both required".into()),
        }
    };
    if start >= end {
        return Err("start must be before end".into());
    }

    let fingerprint = match last("fingerprint") {
        None => None,
        Some(raw) => {
            let v: i64 = raw
                .trim()
                .parse()
                .map_err(|_| "fingerprint: A valid integer is required.".to_string())?;
            Some(u32::try_from(v).map_err(|_| {
                "fingerprint: Ensure this value is between 0 and 4294967295.".to_string()
            })?)
        }
    };
    let data_source = match last("dataSource") {
        None | Some("") => {
            if fingerprint.is_some() {
                DataSource::Functions
            } else {
                DataSource::Transactions
            }
        }
        Some("functions") => DataSource::Functions,
        Some(other) if fingerprint.is_some() => {
            let _ = other;
            return Err(
                "\"fingerprint\" is only permitted when using dataSource: \"functions\"".into(),
            );
        }
        Some("profiles") => DataSource::Profiles,
        Some("spans") => DataSource::Spans,
        Some("transactions") => DataSource::Transactions,
        Some(other) => return Err(format!("dataSource: \"{other}\" is not a valid choice.")),
    };

    let mut metrics = false;
    for e in all(pairs, "expand") {
        for item in e.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "metrics" {
                metrics = true;
            } else {
                return Err(format!("expand: \"{item}\" is not a valid choice."));
            }
        }
    }
    let terms = match last("query") {
        Some(q) => parse_search(q)?,
        None => Vec::new(),
    };
    Ok(FlamegraphParams {
        projects,
        environments,
        start,
        end,
        data_source,
        fingerprint,
        terms,
        metrics,
    })
}

/// `<number>[smhdw]` (no unit means seconds), as Sentry's `parse_stats_period`.
pub(crate) fn parse_stats_period(s: &str) -> Option<f64> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: f64 = digits.parse::<u64>().ok()? as f64;
    let mult = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86400.0,
        'w' => 7.0 * 86400.0,
        _ => return None,
    };
    Some(n * mult)
}

/// ISO-8601 date-times as Sentry accepts them: RFC 3339 with an offset or `Z`, or naive
/// (taken as UTC) with optional fractional seconds, or a bare date.
pub(crate) fn parse_datetime(s: &str) -> Option<f64> {
    let s = s.trim();
    let to_secs = |dt: chrono::DateTime<chrono::Utc>| {
        dt.timestamp() as f64 + f64::from(dt.timestamp_subsec_nanos()) / 1e9
    };
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(to_secs(dt.with_timezone(&chrono::Utc)));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(dt) = chrono::NaiveDateTime::parse_from_str(s, fmt) {
            return Some(to_secs(dt.and_utc()));
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Some(to_secs(d.and_hms_opt(0, 0, 0)?.and_utc()));
    }
    None
}

/// Parses the search-syntax subset described in the module docs.
pub(crate) fn parse_search(q: &str) -> Result<Vec<Term>, String> {
    let mut terms = Vec::new();
    for token in tokenize(q)? {
        if token == "AND" {
            continue;
        }
        if token == "OR" {
            return Err("query: OR is not supported; terms are combined with AND".into());
        }
        let (negated, body) = match token.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, token.as_str()),
        };
        let Some((key, raw)) = body.split_once(':') else {
            return Err(format!(
                "query: free-text search is not supported ({token:?}); use key:value"
            ));
        };
        let key = match key {
            "release" => Key::Release,
            "environment" => Key::Environment,
            "platform" => Key::Platform,
            "transaction" => Key::Transaction,
            other => {
                return Err(format!(
                    "query: unsupported key {other:?} (supported: release, environment, \
                     platform, transaction)"
                ));
            }
        };
        let values = parse_value(raw)?;
        terms.push(Term {
            negated,
            key,
            values,
        });
    }
    Ok(terms)
}

/// Splits at whitespace outside quotes and brackets; rejects parentheses outside quotes.
fn tokenize(q: &str) -> Result<Vec<String>, String> {
    let mut tokens = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut depth = 0usize;
    let mut chars = q.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_quotes => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                cur.push(c);
            }
            '[' if !in_quotes => {
                depth += 1;
                cur.push(c);
            }
            ']' if !in_quotes => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            '(' | ')' if !in_quotes => {
                return Err("query: parentheses are not supported".into());
            }
            c if c.is_whitespace() && !in_quotes && depth == 0 => {
                if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if in_quotes {
        return Err("query: unterminated quoted value".into());
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    Ok(tokens)
}

/// A bare value, a quoted value, or a bracketed list of either.
fn parse_value(raw: &str) -> Result<Vec<Pattern>, String> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("query: unterminated list {raw:?}"))?;
        let mut items = Vec::new();
        let mut cur = String::new();
        let mut in_quotes = false;
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_quotes => {
                    cur.push(c);
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                '"' => {
                    in_quotes = !in_quotes;
                    cur.push(c);
                }
                ',' if !in_quotes => items.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        items.push(cur);
        return items.iter().map(|i| single_value(i.trim())).collect();
    }
    Ok(vec![single_value(raw)?])
}

fn single_value(raw: &str) -> Result<Pattern, String> {
    if let Some(inner) = raw.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or_else(|| format!("query: malformed quoted value {raw:?}"))?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some(n) => {
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        return Ok(Pattern::new(&out));
    }
    Ok(Pattern::new(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn info() -> StoredChunkInfo {
        StoredChunkInfo {
            project_id: 1,
            chunk_id: "c".into(),
            profiler_id: "p".into(),
            environment: Some("production".into()),
            release: Some("app@1.2.3".into()),
            platform: "python".into(),
            start: 0.0,
            end: 1.0,
            received: 1.0,
            thread_ids: vec![],
            transaction_names: vec!["GET /users".into(), "POST /login".into()],
            payload_size: 0,
        }
    }

    fn matches(q: &str) -> bool {
        let terms = parse_search(q).unwrap();
        let i = info();
        terms.iter().all(|t| t.matches(&i))
    }

    #[test]
    fn search_terms() {
        assert!(matches("release:app@1.2.3"));
        assert!(matches("release:app@1.*"));
        assert!(matches("release:*.3 environment:production"));
        assert!(!matches("release:app@1.*.4"));
        assert!(matches("!release:app@2.*"));
        assert!(!matches("!environment:production"));
        assert!(matches("transaction:\"GET /users\""));
        assert!(matches("transaction:[\"GET /nope\", \"POST /login\"]"));
        assert!(!matches("!transaction:\"GET /users\""));
        assert!(matches(
            "platform:python AND environment:[staging,production]"
        ));
        assert!(!matches("release:\"\""));
        assert!(matches("!release:\"\""));
        assert!(parse_search("foo").is_err());
        assert!(parse_search("a:b OR c:d").is_err());
        assert!(parse_search("(release:a)").is_err());
        assert!(parse_search("user.email:x").is_err());
        assert!(parse_search("release:\"open").is_err());
        assert!(parse_search("").unwrap().is_empty());
    }

    #[test]
    fn patterns() {
        let p = Pattern::new("a*b*c");
        assert!(p.matches(Some("abc")) && p.matches(Some("a-b-c")) && !p.matches(Some("ab")));
        assert!(Pattern::new("*").matches(None));
        assert!(Pattern::new("a\\*").matches(Some("a*")));
        assert!(!Pattern::new("a\\*").matches(Some("ab")));
    }

    #[test]
    fn params() {
        let now = 1_000_000.0;
        let p = parse_params(&pairs(&[]), now).unwrap();
        assert_eq!(p.data_source, DataSource::Transactions);
        assert_eq!(p.projects, None);
        assert_eq!(p.end - p.start, DEFAULT_PERIOD_SECS);
        let p = parse_params(
            &pairs(&[
                ("project", "1"),
                ("project", "2"),
                ("statsPeriod", "24h"),
                ("fingerprint", "7"),
            ]),
            now,
        )
        .unwrap();
        assert_eq!(p.projects, Some(vec![1, 2]));
        assert_eq!(p.start, now - 86400.0);
        assert_eq!(p.data_source, DataSource::Functions);
        assert_eq!(p.fingerprint, Some(7));
        let p = parse_params(&pairs(&[("project", "1"), ("project", "-1")]), now).unwrap();
        assert_eq!(p.projects, None);
        let p = parse_params(
            &pairs(&[
                ("start", "2001-12-14T12:34:56.7890"),
                ("end", "2001-12-15T00:00:00Z"),
            ]),
            now,
        )
        .unwrap();
        assert!((p.start - 1_008_333_296.789).abs() < 1e-3);
        assert_eq!(p.end, 1_008_374_400.0);
        let p = parse_params(
            &pairs(&[("expand", "metrics"), ("dataSource", "profiles")]),
            now,
        )
        .unwrap();
        assert!(p.metrics);
        for bad in [
            vec![("dataSource", "profiles"), ("fingerprint", "1")],
            vec![("dataSource", "events")],
            vec![("fingerprint", "4294967296")],
            vec![("fingerprint", "abc")],
            vec![("statsPeriod", "24x")],
            vec![("statsPeriod", "h")],
            vec![("start", "2001-01-01")],
            vec![("start", "2001-01-02"), ("end", "2001-01-01")],
            vec![("start", "yesterday"), ("end", "2001-01-01")],
            vec![("project", "abc")],
            vec![("expand", "everything")],
            vec![("query", "release:a OR release:b")],
        ] {
            assert!(parse_params(&pairs(&bad), now).is_err(), "{bad:?}");
        }
        assert_eq!(parse_stats_period("90"), Some(90.0));
        assert_eq!(parse_stats_period("2w"), Some(14.0 * 86400.0));
    }
}
