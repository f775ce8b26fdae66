//! Sentry rate limits: `X-Sentry-Rate-Limits` and `Retry-After`.
//!
//! `X-Sentry-Rate-Limits` is a comma-separated list of
//! `<retry_after_secs>:<cat1;cat2;…>:<scope>[:<reason_code>[:<namespaces>]]`; an empty category
//! list means every category. profilink honours `profile_chunk`, `profile_chunk_ui` and the
//! all-category limits (other categories are remembered too, harmlessly). A 429 with neither
//! header blocks every category for a default time (60 s).
//!
//! A limit is *long* ([`RateLimits::dropping`]) when its reason is a quota (`usage_exceeded`, or
//! a reason containing `quota`) or when it ends more than a given wait from now: the Sentry
//! exporter drops such chunks (`ratelimit_backoff`) instead of holding them, as the SDKs drop
//! what is rate limited.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

/// One parsed limit.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// How long it lasts.
    pub retry_after: Duration,
    /// Limited categories; empty means all.
    pub categories: Vec<String>,
    /// `key`, `project`, `organization` (informational).
    pub scope: String,
    /// Reason code, if given.
    pub reason: Option<String>,
}

/// Parses `X-Sentry-Rate-Limits`. Unparsable seconds count as 60 s, as in the SDKs.
pub fn parse_rate_limits(header: &str) -> Vec<RateLimit> {
    header
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|limit| {
            let mut parts = limit.split(':');
            let secs = parts.next().unwrap_or("").trim();
            let retry_after = secs
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(Duration::from_secs(60), |s| {
                    Duration::from_secs_f64(s.min(86_400.0 * 365.0))
                });
            let categories = parts
                .next()
                .unwrap_or("")
                .split(';')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let scope = parts.next().unwrap_or("").trim().to_string();
            let reason = parts
                .next()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_string);
            RateLimit {
                retry_after,
                categories,
                scope,
                reason,
            }
        })
        .collect()
}

/// Parses `Retry-After`: delay seconds or an HTTP date (relative to `now_wall`).
pub fn parse_retry_after(value: &str, now_wall: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_secs_f64(secs.min(86_400.0 * 365.0)));
        }
        return None;
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now_wall).unwrap_or(Duration::ZERO))
}

impl RateLimit {
    /// True for quota reasons (`usage_exceeded`, `*quota*`): the limit lasts until the quota
    /// renews, whatever its `retry_after`.
    pub fn is_quota(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r == "usage_exceeded" || r.contains("quota"))
    }
}

/// Active limits of one DSN.
#[derive(Debug, Default, Clone)]
pub struct RateLimits {
    all: Option<Instant>,
    categories: HashMap<String, Instant>,
    /// The part of the limits with a quota reason.
    quota_all: Option<Instant>,
    quota: HashMap<String, Instant>,
}

fn extend(slot: &mut Option<Instant>, until: Instant) {
    *slot = Some(slot.map_or(until, |t| t.max(until)));
}

impl RateLimits {
    /// Records a limit for `categories` (empty: all) until `now + after`; never shortens one.
    pub fn apply(&mut self, categories: &[String], after: Duration, now: Instant) {
        let until = now + after;
        if categories.is_empty() {
            self.all = Some(self.all.map_or(until, |t| t.max(until)));
        } else {
            for c in categories {
                let e = self.categories.entry(c.clone()).or_insert(until);
                *e = (*e).max(until);
            }
        }
    }

    /// Applies a parsed `X-Sentry-Rate-Limits` header; returns its limits.
    pub fn apply_header(&mut self, header: &str, now: Instant) -> Vec<RateLimit> {
        let limits = parse_rate_limits(header);
        for l in &limits {
            self.apply(&l.categories, l.retry_after, now);
            if l.is_quota() {
                let until = now + l.retry_after;
                if l.categories.is_empty() {
                    extend(&mut self.quota_all, until);
                } else {
                    for c in &l.categories {
                        let e = self.quota.entry(c.clone()).or_insert(until);
                        *e = (*e).max(until);
                    }
                }
            }
        }
        limits
    }

    /// True when `category` is limited for long at `now`: by a quota limit, or by a limit that
    /// ends more than `max_wait` from now.
    pub fn dropping(&self, category: &str, now: Instant, max_wait: Duration) -> bool {
        let quota = self.quota_all.is_some_and(|t| t > now)
            || self.quota.get(category).is_some_and(|t| *t > now);
        quota
            || self
                .blocked_until(category, now)
                .is_some_and(|t| t.saturating_duration_since(now) > max_wait)
    }

    /// Until when `category` is limited, if it is at `now`.
    pub fn blocked_until(&self, category: &str, now: Instant) -> Option<Instant> {
        let all = self.all.filter(|t| *t > now);
        let cat = self.categories.get(category).copied().filter(|t| *t > now);
        match (all, cat) {
            (Some(a), Some(c)) => Some(a.max(c)),
            (a, c) => a.or(c),
        }
    }

    /// True when an all-category limit is active.
    pub fn all_blocked(&self, now: Instant) -> bool {
        self.all.is_some_and(|t| t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_header_forms() {
        let l = parse_rate_limits(
            "60:profile_chunk;transaction:key, 2::organization:quota_exceeded, x:profile_chunk_ui:project:r:ns1;ns2",
        );
        assert_eq!(l.len(), 3);
        assert_eq!(l[0].retry_after, Duration::from_secs(60));
        assert_eq!(l[0].categories, vec!["profile_chunk", "transaction"]);
        assert_eq!(l[0].scope, "key");
        assert!(l[1].categories.is_empty());
        assert_eq!(l[1].reason.as_deref(), Some("quota_exceeded"));
        assert_eq!(l[2].retry_after, Duration::from_secs(60));
        assert!(parse_rate_limits("").is_empty());
    }

    #[test]
    fn limits_apply_per_category_and_all() {
        let now = Instant::now();
        let mut r = RateLimits::default();
        r.apply_header("10:profile_chunk:key", now);
        assert!(r.blocked_until("profile_chunk", now).is_some());
        assert!(r.blocked_until("profile_chunk_ui", now).is_none());
        assert!(
            r.blocked_until("profile_chunk", now + Duration::from_secs(10))
                .is_none()
        );
        r.apply_header("5::organization", now);
        assert!(r.blocked_until("profile_chunk_ui", now).is_some());
        assert!(r.all_blocked(now));
        assert_eq!(
            r.blocked_until("profile_chunk", now),
            Some(now + Duration::from_secs(10))
        );
    }

    #[test]
    fn quota_and_long_limits_drop() {
        let now = Instant::now();
        let wait = Duration::from_secs(300);
        let mut r = RateLimits::default();
        r.apply_header("2:profile_chunk:key", now);
        assert!(
            !r.dropping("profile_chunk", now, wait),
            "a short limit waits"
        );
        r.apply_header("2:profile_chunk_ui:organization:usage_exceeded", now);
        assert!(r.dropping("profile_chunk_ui", now, wait), "a quota drops");
        assert!(!r.dropping("profile_chunk_ui", now + Duration::from_secs(2), wait));
        r.apply_header("600:transaction:project", now);
        assert!(r.dropping("transaction", now, wait), "longer than the wait");
        // Once less than the wait is left, it waits.
        assert!(!r.dropping("transaction", now + Duration::from_secs(301), wait));
        r.apply_header("60::organization:org_quota", now);
        assert!(r.dropping("anything", now, wait));
        assert!(parse_rate_limits("1::key:project_quota")[0].is_quota());
        assert!(!parse_rate_limits("1::key:smart_rate_limit")[0].is_quota());
    }

    #[test]
    fn retry_after_seconds_and_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }
}
