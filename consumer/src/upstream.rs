//! The Sentry receiver's upstream: the Sentry or Relay an SDK's data belongs to.
//!
//! With an [`Upstream`], the envelope endpoint is a transparent proxy that also taps profiles
//! (as a Relay in front of SDKs): every request is handed over as received
//! ([`ForwardRequest`]: path, query, headers, body bytes still compressed), and the upstream's
//! current rate limits ([`UpstreamLimit`]) come back on the SDK's next response, category by
//! category. The implementation (durable queue, retries, rate-limit bookkeeping) is the
//! exporter crate's `Forwarder`; the Sentry receiver only sees this trait.

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

#[cfg(test)]
mod tests {
    use super::*;

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
