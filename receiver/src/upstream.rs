//! The Sentry receiver's upstream: the Sentry or Relay an SDK's data belongs to.
//!
//! With an [`Upstream`], the envelope endpoint is a transparent proxy that also taps profiles
//! (as a Relay in front of SDKs): every request is handed over as received
//! ([`ForwardRequest`]: path, query, headers, body bytes still compressed), and the upstream's
//! current rate limits ([`UpstreamLimit`]) come back on the SDK's next response, category by
//! category. The implementation (durable queue, retries, rate-limit bookkeeping) lives outside
//! this crate (`profilink_exporter::forward`).

use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use thiserror::Error;

/// One request to pass on upstream.
#[derive(Debug, Clone)]
pub struct ForwardRequest {
    /// Project id of the path (`/api/{project_id}/…`); requests of one project keep their order.
    pub project_id: u64,
    /// The public key the request authenticated with (scopes `key` rate limits).
    pub public_key: String,
    /// The path as received, e.g. `/api/42/envelope/`.
    pub path: String,
    /// The query string as received (it may carry `sentry_key`), without `?`.
    pub query: Option<String>,
    /// The request headers to pass on (auth, `User-Agent`, `Content-Type`,
    /// `Content-Encoding`, …; hop-by-hop headers, `Host` and `Content-Length` removed).
    pub headers: Vec<(String, String)>,
    /// The body to send: the bytes as received, or a rewritten identity-encoded envelope when
    /// items were left out (then `headers` carries no `Content-Encoding`).
    pub body: Bytes,
}

/// Why an upstream did not take a request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ForwardError {
    /// Its queue is full (bounded in bytes): the receiver answers 503 with `Retry-After`.
    #[error("the upstream queue is full; retry after {retry_after:?}")]
    Full {
        /// How long the SDK should wait.
        retry_after: Duration,
    },
    /// It cannot take requests (shut down, disk error): 503.
    #[error("the upstream queue failed: {0}")]
    Failed(String),
}

/// One active upstream rate limit, as `X-Sentry-Rate-Limits` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamLimit {
    /// Limited data categories (`error`, `transaction`, …); empty means every category.
    pub categories: Vec<String>,
    /// Time left.
    pub retry_after: Duration,
    /// The scope as upstream named it (`organization`, `project`, `key`).
    pub scope: String,
    /// Reason code, if upstream gave one.
    pub reason: Option<String>,
}

impl UpstreamLimit {
    /// True when the limit covers `category`.
    pub fn matches(&self, category: &str) -> bool {
        self.categories.is_empty() || self.categories.iter().any(|c| c == category)
    }

    /// The limit as one `X-Sentry-Rate-Limits` entry
    /// (`<secs>:<cat;cat>:<scope>[:<reason>]`), seconds rounded up.
    pub fn header_entry(&self) -> String {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        let mut s = format!(
            "{}:{}:{}",
            secs.max(1),
            self.categories.join(";"),
            self.scope
        );
        if let Some(r) = &self.reason {
            s.push(':');
            s.push_str(r);
        }
        s
    }
}

/// A boxed future of [`Upstream::forward`].
pub type ForwardFuture = Pin<Box<dyn Future<Output = Result<(), ForwardError>> + Send>>;

/// Where the Sentry receiver passes requests on.
pub trait Upstream: Send + Sync + 'static {
    /// Takes one request, durably (it resolves once the request is queued, not sent).
    fn forward(&self, request: ForwardRequest) -> ForwardFuture;

    /// A cheap check before a body is read: [`ForwardError::Full`] refuses the request (503)
    /// without reading it. The default accepts.
    fn check_ready(&self) -> Result<(), ForwardError> {
        Ok(())
    }

    /// The limits upstream currently imposes on `public_key` of `project_id`.
    fn rate_limits(&self, project_id: u64, public_key: &str) -> Vec<UpstreamLimit>;

    /// Whether profile items (`profile`, `profile_chunk`) go upstream too (`forward_profiles`,
    /// default true). When false they are left out of the forwarded copy and reach only the
    /// receiver's pipelines.
    fn forward_profiles(&self) -> bool {
        true
    }
}

/// The Sentry data category that rate-limits an envelope item, as Relay assigns them; `None`
/// for items no quota applies to (client reports, unknown types).
pub fn item_category(item_type: &str, platform: Option<&str>) -> Option<&'static str> {
    Some(match item_type {
        "event" | "security" | "raw_security" | "unreal_report" | "nel" => "error",
        "transaction" => "transaction",
        "session" | "sessions" => "session",
        "attachment" => "attachment",
        "user_report" | "feedback" => "user_report_v2",
        "profile" => "profile",
        "profile_chunk" | "profile_chunk_ui" => match platform {
            Some("cocoa" | "android" | "javascript") => "profile_chunk_ui",
            _ if item_type == "profile_chunk_ui" => "profile_chunk_ui",
            _ => "profile_chunk",
        },
        "replay_event" | "replay_recording" | "replay_video" => "replay",
        "check_in" => "monitor",
        "span" | "otel_span" => "span",
        "log" | "otel_log" => "log_item",
        "trace_metric" => "trace_metric",
        _ => return None,
    })
}

/// The `type` label of an item for the receiver's item counters: known Sentry item types as
/// they are, anything else `other` (labels stay bounded whatever SDKs send).
pub fn item_type_label(item_type: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "event",
        "transaction",
        "security",
        "raw_security",
        "attachment",
        "session",
        "sessions",
        "user_report",
        "feedback",
        "client_report",
        "profile",
        "profile_chunk",
        "profile_chunk_ui",
        "replay_event",
        "replay_recording",
        "replay_video",
        "check_in",
        "span",
        "otel_span",
        "log",
        "otel_log",
        "statsd",
        "metric_buckets",
        "trace_metric",
        "nel",
        "unreal_report",
    ];
    KNOWN
        .iter()
        .find(|k| **k == item_type)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_and_labels() {
        assert_eq!(item_category("event", None), Some("error"));
        assert_eq!(
            item_category("profile_chunk", Some("python")),
            Some("profile_chunk")
        );
        assert_eq!(
            item_category("profile_chunk", Some("cocoa")),
            Some("profile_chunk_ui")
        );
        assert_eq!(item_category("client_report", None), None);
        assert_eq!(item_type_label("event"), "event");
        assert_eq!(item_type_label("x-custom"), "other");
    }

    #[test]
    fn limit_header_entries() {
        let l = UpstreamLimit {
            categories: vec!["error".into(), "transaction".into()],
            retry_after: Duration::from_millis(59_200),
            scope: "organization".into(),
            reason: Some("quota".into()),
        };
        assert_eq!(l.header_entry(), "60:error;transaction:organization:quota");
        assert!(l.matches("error"));
        assert!(!l.matches("session"));
        let all = UpstreamLimit {
            categories: vec![],
            retry_after: Duration::from_secs(5),
            scope: "key".into(),
            reason: None,
        };
        assert!(all.matches("session"));
        assert_eq!(all.header_entry(), "5::key");
    }
}
