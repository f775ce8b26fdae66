//! Client reports: what profilink gave up, sent to Sentry like the SDKs do so that the
//! project's stats show the loss.
//!
//! A `client_report` item in its own envelope:
//! `{"timestamp": "<RFC 3339>", "discarded_events": [{"reason": "queue_overflow",
//! "category": "profile_chunk", "quantity": 3}]}`.

use crate::metrics::DiscardReason;
use crate::{SDK_NAME, VERSION};
use chrono::{DateTime, SecondsFormat, Utc};
use profilink_proto::sentry::{Envelope, EnvelopeItem};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// Discard counts per (route, reason, category), waiting to be reported.
#[derive(Debug, Default)]
pub struct Discards {
    counts: Mutex<BTreeMap<(String, DiscardReason, String), u64>>,
}

/// One `discarded_events` entry.
pub type DiscardEntry = (DiscardReason, String, u64);

impl Discards {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, DiscardReason, String), u64>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `n` discarded items of `category` for `route`.
    pub fn add(&self, route: &str, reason: DiscardReason, category: &str, n: u64) {
        if n == 0 {
            return;
        }
        *self
            .lock()
            .entry((route.to_string(), reason, category.to_string()))
            .or_insert(0) += n;
    }

    /// Takes (and clears) the counts of `route`.
    pub fn take(&self, route: &str) -> Vec<DiscardEntry> {
        let mut counts = self.lock();
        let keys: Vec<_> = counts.keys().filter(|k| k.0 == route).cloned().collect();
        keys.into_iter()
            .filter_map(|k| counts.remove(&k).map(|n| (k.1, k.2, n)))
            .collect()
    }

    /// Puts counts back (a report could not be sent).
    pub fn restore(&self, route: &str, entries: &[DiscardEntry]) {
        for (reason, category, n) in entries {
            self.add(route, *reason, category, *n);
        }
    }

    /// Routes with pending counts.
    pub fn routes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock().keys().map(|k| k.0.clone()).collect();
        v.dedup();
        v
    }
}

/// RFC 3339 UTC with millisecond precision, as `sent_at` wants it.
pub fn rfc3339(t: SystemTime) -> String {
    DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The client-report payload.
pub fn client_report_json(entries: &[DiscardEntry], now: SystemTime) -> Vec<u8> {
    let discarded: Vec<serde_json::Value> = entries
        .iter()
        .map(|(reason, category, n)| {
            serde_json::json!({ "reason": reason.as_str(), "category": category, "quantity": n })
        })
        .collect();
    let report = serde_json::json!({
        "timestamp": rfc3339(now),
        "discarded_events": discarded,
    });
    serde_json::to_vec(&report).unwrap_or_default()
}

/// A whole client-report envelope for `dsn`.
pub fn client_report_envelope(dsn: &str, entries: &[DiscardEntry], now: SystemTime) -> Envelope {
    let mut headers = serde_json::Map::new();
    headers.insert("sent_at".into(), rfc3339(now).into());
    headers.insert("dsn".into(), dsn.into());
    headers.insert(
        "sdk".into(),
        serde_json::json!({ "name": SDK_NAME, "version": VERSION }),
    );
    Envelope {
        headers,
        items: vec![EnvelopeItem::new(
            "client_report",
            client_report_json(entries, now),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_and_restore() {
        let d = Discards::default();
        d.add("", DiscardReason::QueueOverflow, "profile_chunk", 2);
        d.add("", DiscardReason::QueueOverflow, "profile_chunk", 1);
        d.add("x", DiscardReason::SendError, "profile_chunk_ui", 1);
        assert_eq!(d.routes(), vec!["".to_string(), "x".to_string()]);
        let e = d.take("");
        assert_eq!(
            e,
            vec![(DiscardReason::QueueOverflow, "profile_chunk".to_string(), 3)]
        );
        assert!(d.take("").is_empty());
        d.restore("", &e);
        assert_eq!(d.take("").len(), 1);
    }

    #[test]
    fn envelope_shape() {
        let now = SystemTime::UNIX_EPOCH;
        let env = client_report_envelope(
            "https://k@h/1",
            &[(DiscardReason::NetworkError, "profile_chunk".into(), 4)],
            now,
        );
        let parsed = Envelope::parse(&env.to_bytes()).unwrap();
        assert_eq!(parsed.headers["sent_at"], "1970-01-01T00:00:00.000Z");
        let item = &parsed.items[0];
        assert_eq!(item.item_type(), Some("client_report"));
        let v: serde_json::Value = serde_json::from_slice(&item.payload).unwrap();
        assert_eq!(v["discarded_events"][0]["reason"], "network_error");
        assert_eq!(v["discarded_events"][0]["quantity"], 4);
    }
}
