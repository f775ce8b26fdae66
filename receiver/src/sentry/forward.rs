//! What the Sentry receiver does with the items of an envelope beyond its pipelines: the copy
//! it forwards upstream (items as received, minus those upstream currently rate-limits and,
//! with `forward_profiles: false`, minus profiles), the rate limits that go back to the SDK,
//! and, without an upstream, the visible account of the items nothing consumes.

use crate::stats::items::{ItemCounters, LogLimiter};
use crate::upstream::{item_category, item_type_label};
use bytes::Bytes;
use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, HOST};
use http::request::Parts;
use profilink_consumer::{ForwardRequest, UpstreamLimit};
use profilink_proto::sentry::{Envelope, EnvelopeItem};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Request headers never passed on: hop-by-hop ones, and those the forwarder sets itself.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
];

/// The headers of a request to pass on (auth, `User-Agent`, `Content-Type`,
/// `Content-Encoding`, `Origin`, …), without hop-by-hop headers, `Host` and `Content-Length`.
pub fn forward_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| {
            *name != HOST && *name != CONTENT_LENGTH && !NOT_FORWARDED.contains(&name.as_str())
        })
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect()
}

/// Which items of an envelope go upstream, and why the others do not.
#[derive(Debug, Default)]
pub struct ForwardPlan {
    /// Per item: left out of the forwarded copy.
    pub left_out: Vec<bool>,
    /// The active limits that matched an item (for the SDK's 429).
    pub matched: Vec<UpstreamLimit>,
    /// Items left out because upstream rate-limits their category, by item type label.
    pub limited: BTreeMap<&'static str, u64>,
    /// Items left out because profiles are not forwarded.
    pub profiles_kept_back: u64,
}

impl ForwardPlan {
    /// Plans the forwarded copy of `envelope` under `limits`.
    pub fn new(envelope: &Envelope, limits: &[UpstreamLimit], forward_profiles: bool) -> Self {
        let mut plan = ForwardPlan::default();
        for item in &envelope.items {
            let item_type = item.item_type().unwrap_or("");
            let platform = item.headers.get("platform").and_then(Value::as_str);
            let category = item_category(item_type, platform);
            let matched: Vec<&UpstreamLimit> = category
                .map(|c| limits.iter().filter(|l| l.matches(c)).collect())
                .unwrap_or_default();
            let profile = is_profile(item);
            let out = !matched.is_empty() || (profile && !forward_profiles);
            if !matched.is_empty() {
                *plan.limited.entry(item_type_label(item_type)).or_default() += 1;
                for l in matched {
                    if !plan.matched.contains(l) {
                        plan.matched.push(l.clone());
                    }
                }
            } else if profile && !forward_profiles {
                plan.profiles_kept_back += 1;
            }
            plan.left_out.push(out);
        }
        plan
    }

    /// True when every item is left out (nothing to forward).
    pub fn nothing_left(&self) -> bool {
        self.left_out.iter().all(|o| *o)
    }

    /// True when the copy differs from what was received.
    pub fn rewrites(&self) -> bool {
        self.left_out.iter().any(|o| *o)
    }

    /// The forwarded body and headers: the bytes as received when nothing is left out;
    /// otherwise the envelope rewritten without the left-out items (payloads byte-equal,
    /// identity encoding).
    pub fn body(
        &self,
        envelope: &Envelope,
        raw: Bytes,
        mut headers: Vec<(String, String)>,
    ) -> (Bytes, Vec<(String, String)>) {
        if !self.rewrites() {
            return (raw, headers);
        }
        let copy = Envelope {
            headers: envelope.headers.clone(),
            items: envelope
                .items
                .iter()
                .zip(&self.left_out)
                .filter(|(_, out)| !**out)
                .map(|(i, _)| i.clone())
                .collect(),
        };
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case(CONTENT_ENCODING.as_str()));
        (Bytes::from(copy.to_bytes()), headers)
    }

    /// The `X-Sentry-Rate-Limits` value and the longest wait, when a limit matched.
    pub fn rate_limit_header(&self) -> Option<(String, Duration)> {
        rate_limit_header(&self.matched)
    }
}

/// The `X-Sentry-Rate-Limits` value naming `limits` and the longest wait among them; `None`
/// without limits.
pub fn rate_limit_header(limits: &[UpstreamLimit]) -> Option<(String, Duration)> {
    let longest = limits.iter().map(|l| l.retry_after).max()?;
    let value = limits
        .iter()
        .map(UpstreamLimit::header_entry)
        .collect::<Vec<_>>()
        .join(", ");
    Some((value, longest))
}

fn is_profile(item: &EnvelopeItem) -> bool {
    matches!(
        item.item_type(),
        Some("profile" | "profile_chunk" | "profile_chunk_ui")
    )
}

/// Builds the request to forward: to the path and query of the request received (`parts`),
/// with `body` and `headers`.
pub fn request(
    project_id: u64,
    public_key: &str,
    parts: &Parts,
    body: Bytes,
    headers: Vec<(String, String)>,
) -> ForwardRequest {
    ForwardRequest {
        project_id,
        public_key: public_key.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers,
        body,
    }
}

/// Item types a Sentry receiver's pipelines consume.
pub fn consumed(item: &EnvelopeItem) -> bool {
    let perfetto = item.headers.contains_key("meta_length")
        || item.headers.get("content_type").and_then(Value::as_str)
            == Some("application/x-perfetto-trace");
    match item.item_type() {
        Some("profile_chunk" | "profile_chunk_ui") => !perfetto,
        Some("profile" | "transaction" | "span") => true,
        _ => false,
    }
}

/// Without an upstream: counts every item no pipeline consumes as dropped (by type) and logs
/// them, at most once per interval, as a client report would list them (`discarded_events`
/// with reason `no_upstream`, per data category).
pub fn account_unconsumed(
    envelope: &Envelope,
    project_id: u64,
    items: &ItemCounters,
    log: &LogLimiter,
) {
    let mut by_type: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut by_category: BTreeMap<&'static str, u64> = BTreeMap::new();
    for item in envelope.items.iter().filter(|i| !consumed(i)) {
        let t = item.item_type().unwrap_or("");
        *by_type.entry(item_type_label(t)).or_default() += 1;
        let platform = item.headers.get("platform").and_then(Value::as_str);
        *by_category
            .entry(item_category(t, platform).unwrap_or("internal"))
            .or_default() += 1;
    }
    if by_type.is_empty() {
        return;
    }
    for (t, n) in &by_type {
        items.drop_items(t, *n);
    }
    if let Some(suppressed) = log.allow() {
        let report = serde_json::json!({
            "discarded_events": by_category
                .iter()
                .map(|(c, n)| serde_json::json!({"reason": "no_upstream", "category": c, "quantity": n}))
                .collect::<Vec<_>>()
        });
        tracing::warn!(
            project_id,
            client_report = %report,
            suppressed_lines = suppressed,
            "sentry receiver has no upstream: dropped envelope items no pipeline consumes \
             (set receivers.sentry.upstream to forward them to Sentry)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn envelope() -> Envelope {
        let mut e = Envelope::default();
        e.items.push(EnvelopeItem::new("event", b"{}".to_vec()));
        e.items.push(EnvelopeItem::new("session", b"{}".to_vec()));
        let mut chunk = EnvelopeItem::new("profile_chunk", b"{\"x\":1}".to_vec());
        chunk.headers.insert("platform".into(), "python".into());
        e.items.push(chunk);
        e
    }

    fn limit(cats: &[&str]) -> UpstreamLimit {
        UpstreamLimit {
            categories: cats.iter().map(|c| c.to_string()).collect(),
            retry_after: Duration::from_secs(60),
            scope: "organization".into(),
            reason: None,
        }
    }

    #[test]
    fn nothing_limited_forwards_the_bytes_as_received() {
        let e = envelope();
        let plan = ForwardPlan::new(&e, &[limit(&["transaction"])], true);
        assert!(!plan.rewrites());
        assert!(plan.rate_limit_header().is_none());
        let raw = Bytes::from_static(b"compressed bytes");
        let headers = vec![("content-encoding".to_string(), "gzip".to_string())];
        let (body, h) = plan.body(&e, raw.clone(), headers.clone());
        assert_eq!(body, raw);
        assert_eq!(h, headers);
    }

    #[test]
    fn limited_categories_and_kept_back_profiles_are_left_out() {
        let e = envelope();
        let plan = ForwardPlan::new(&e, &[limit(&["error"])], false);
        assert_eq!(plan.left_out, vec![true, false, true]);
        assert_eq!(plan.limited.get("event"), Some(&1));
        assert_eq!(plan.profiles_kept_back, 1);
        let (value, wait) = plan.rate_limit_header().unwrap();
        assert_eq!(value, "60:error:organization");
        assert_eq!(wait, Duration::from_secs(60));
        let headers = vec![("content-encoding".to_string(), "gzip".to_string())];
        let (body, h) = plan.body(&e, Bytes::new(), headers);
        assert!(h.is_empty());
        let copy = Envelope::parse(&body).unwrap();
        assert_eq!(copy.items.len(), 1);
        assert_eq!(copy.items[0].item_type(), Some("session"));
        assert!(!plan.nothing_left());
        let all = ForwardPlan::new(&e, &[limit(&[])], true);
        assert!(all.nothing_left());
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("x-sentry-auth", "Sentry sentry_key=k".parse().unwrap());
        h.insert("user-agent", "sentry.python/2".parse().unwrap());
        h.insert("connection", "keep-alive".parse().unwrap());
        h.insert("host", "example".parse().unwrap());
        h.insert("content-length", "3".parse().unwrap());
        let names: Vec<String> = forward_headers(&h).into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, vec!["x-sentry-auth", "user-agent"]);
    }
}
