//! The rate limits upstream imposes, kept per scope so that they go back to the SDKs they
//! concern: `organization` limits apply to every project sent to this upstream, `project`
//! limits to one project id, `key` limits to one public key.

use crate::http::rate_limits::{parse_rate_limits, parse_retry_after};
use profilink_consumer::UpstreamLimit;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// How long a 429 without `X-Sentry-Rate-Limits` or `Retry-After` blocks (as the SDKs do).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Entry {
    until: Instant,
    categories: Vec<String>,
    scope: String,
    reason: Option<String>,
    /// `None`: every project (organization scope).
    project: Option<u64>,
    /// `Some`: only this key (key scope).
    key: Option<String>,
}

/// Active upstream limits.
#[derive(Debug, Default)]
pub struct UpstreamLimits {
    entries: Mutex<Vec<Entry>>,
}

impl UpstreamLimits {
    /// Records the limits of a response to a request of `project` / `key`: its
    /// `X-Sentry-Rate-Limits`, or for a 429 without it, `Retry-After` (else 60 s) on every
    /// category. Returns the number of limits recorded.
    pub fn record(
        &self,
        status: u16,
        header: Option<&str>,
        retry_after: Option<&str>,
        project: u64,
        key: &str,
        now: Instant,
    ) -> usize {
        let mut new = Vec::new();
        if let Some(h) = header {
            for l in parse_rate_limits(h) {
                let (project, key) = match l.scope.as_str() {
                    "organization" | "org" => (None, None),
                    "key" => (Some(project), Some(key.to_string())),
                    _ => (Some(project), None),
                };
                new.push(Entry {
                    until: now + l.retry_after,
                    categories: l.categories,
                    scope: l.scope,
                    reason: l.reason,
                    project,
                    key,
                });
            }
        } else if status == 429 {
            let wait = retry_after
                .and_then(|v| parse_retry_after(v, SystemTime::now()))
                .unwrap_or(DEFAULT_RETRY_AFTER);
            new.push(Entry {
                until: now + wait,
                categories: Vec::new(),
                scope: "project".into(),
                reason: None,
                project: Some(project),
                key: None,
            });
        }
        let n = new.len();
        if n > 0 {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.retain(|e| e.until > now);
            entries.extend(new);
        }
        n
    }

    /// The limits active at `now` for `key` of `project`, with their time left.
    pub fn active(&self, project: u64, key: &str, now: Instant) -> Vec<UpstreamLimit> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<UpstreamLimit> = Vec::new();
        for e in entries.iter().filter(|e| e.until > now) {
            if e.project.is_some_and(|p| p != project) || e.key.as_deref().is_some_and(|k| k != key)
            {
                continue;
            }
            let left = e.until - now;
            match out.iter_mut().find(|l| {
                l.categories == e.categories && l.scope == e.scope && l.reason == e.reason
            }) {
                Some(l) => l.retry_after = l.retry_after.max(left),
                None => out.push(UpstreamLimit {
                    categories: e.categories.clone(),
                    retry_after: left,
                    scope: e.scope.clone(),
                    reason: e.reason.clone(),
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_decide_who_sees_a_limit() {
        let l = UpstreamLimits::default();
        let now = Instant::now();
        assert_eq!(
            l.record(
                429,
                Some("60:error:organization, 30:transaction:project:q, 10::key"),
                None,
                1,
                "a",
                now
            ),
            3
        );
        let one = l.active(1, "a", now);
        assert_eq!(one.len(), 3);
        let other_key = l.active(1, "b", now);
        assert_eq!(other_key.len(), 2);
        let other_project = l.active(2, "a", now);
        assert_eq!(other_project.len(), 1);
        assert_eq!(other_project[0].categories, vec!["error"]);
        assert_eq!(other_project[0].retry_after, Duration::from_secs(60));
        assert!(l.active(1, "a", now + Duration::from_secs(61)).is_empty());
    }

    #[test]
    fn a_bare_429_limits_every_category_of_the_project() {
        let l = UpstreamLimits::default();
        let now = Instant::now();
        assert_eq!(l.record(429, None, Some("7"), 3, "k", now), 1);
        let a = l.active(3, "k", now);
        assert!(a[0].categories.is_empty());
        assert_eq!(a[0].retry_after, Duration::from_secs(7));
        assert_eq!(l.record(200, None, None, 3, "k", now), 0);
        assert_eq!(l.record(500, None, Some("5"), 3, "k", now), 0);
    }
}
