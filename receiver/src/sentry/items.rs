//! The envelope checks and item parsing of the Sentry receiver: Relay's header and item rules,
//! then the items pipelines consume, parsed, with every chunk checked at the door
//! ([`crate::sentry::chunk_door`]).

use crate::sentry::auth::{self, AuthError};
use crate::sentry::chunk_door;
use crate::sentry::common::{MAX_PROFILE_ITEM_SIZE, PERFETTO, Refusal};
use http::StatusCode;
use profilink_consumer::SentryBatch;
use profilink_proto::sentry::MAX_ENVELOPE_ITEMS;
use profilink_proto::sentry::{
    Envelope, EnvelopeItem, ProfileChunk, SampleProfileV1, Transaction, parse_span_item,
};
use serde_json::Value;

/// Checks `dsn`, `event_id` and `sent_at`; returns the event id to answer with.
pub(crate) fn check_envelope_headers(
    envelope: &Envelope,
    project_id: u64,
    public_key: &str,
) -> Result<Option<String>, Refusal> {
    let headers = &envelope.headers;
    match headers.get("dsn") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => {
            let dsn = auth::parse_dsn(s)
                .map_err(|e| Refusal::bad_request(format!("invalid envelope header `dsn`: {e}")))?;
            if dsn.project_id != project_id {
                return Err(AuthError::HeaderMismatch("project id").into());
            }
            if auth::project_key(&dsn.public_key).ok() != Some(public_key) {
                return Err(AuthError::HeaderMismatch("public key").into());
            }
        }
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `dsn`: not a string",
            ));
        }
    }
    let event_id = match headers.get("event_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(normalize_event_id(s).ok_or_else(|| {
            Refusal::bad_request("invalid envelope header `event_id`: not a UUID")
        })?),
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `event_id`: not a string",
            ));
        }
    };
    match headers.get("sent_at") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => {}
        Some(_) => {
            return Err(Refusal::bad_request(
                "invalid envelope header `sent_at`: not an RFC 3339 timestamp",
            ));
        }
    }
    Ok(event_id)
}

/// A UUID (32 hex digits, optionally hyphenated 8-4-4-4-12) as 32 lowercase hex digits.
fn normalize_event_id(s: &str) -> Option<String> {
    let s = s.trim();
    let hex: String = match s.len() {
        32 => s.to_string(),
        36 => {
            let b = s.as_bytes();
            if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                return None;
            }
            s.chars().filter(|&c| c != '-').collect()
        }
        _ => return None,
    };
    if hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some(hex.to_ascii_lowercase())
    } else {
        None
    }
}

fn is_profile_item(item: &EnvelopeItem) -> bool {
    matches!(
        item.item_type(),
        Some("profile" | "profile_chunk" | "profile_chunk_ui")
    )
}

/// Relay's envelope limits: item count, one profile item, profile item size, item types.
pub(crate) fn check_items(envelope: &Envelope) -> Result<(), Refusal> {
    if envelope.items.len() > MAX_ENVELOPE_ITEMS {
        return Err(Refusal::bad_request(format!(
            "too many envelope items: {} (at most {MAX_ENVELOPE_ITEMS})",
            envelope.items.len()
        )));
    }
    if let Some(index) = envelope.items.iter().position(|i| i.item_type().is_none()) {
        return Err(Refusal::bad_request(format!(
            "invalid envelope: item {index} has no `type`"
        )));
    }
    let profile_items = envelope.items.iter().filter(|i| is_profile_item(i)).count();
    if profile_items > 1 {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("envelope has {profile_items} profile items; at most one `profile` or `profile_chunk` is allowed"),
        )
        .counted(profile_items as u64, 0));
    }
    if let Some((index, item)) = envelope
        .items
        .iter()
        .enumerate()
        .find(|(_, i)| is_profile_item(i) && i.payload.len() > MAX_PROFILE_ITEM_SIZE)
    {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "item {index}: profile payload of {} bytes is over the limit of {MAX_PROFILE_ITEM_SIZE}",
                item.payload.len()
            ),
        )
        .counted(1, 0));
    }
    Ok(())
}

/// An item refused at the door (its reason is a counter label).
#[derive(Debug)]
pub(crate) struct ItemRefusal {
    pub(crate) index: usize,
    pub(crate) item_type: &'static str,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    /// A chunk or V1 profile (counted in the refused profiles too).
    pub(crate) profile: bool,
}

/// Parses the items pipelines consume and checks each chunk at the door
/// ([`crate::sentry::chunk_door`]). A payload that is not JSON of its type fails the envelope (400),
/// unless `lenient` (an upstream decides about it): then it is refused with reason
/// `invalid_json` like a chunk that fails the door check.
pub(crate) fn parse_items(
    envelope: &Envelope,
    project_id: u64,
    public_key: String,
    lenient: bool,
) -> Result<(SentryBatch, Vec<ItemRefusal>), Refusal> {
    let mut batch = SentryBatch {
        project_id,
        public_key,
        ..SentryBatch::default()
    };
    let mut refused = Vec::new();
    let mut v1 = Vec::new();
    let mut transactions = Vec::new();
    for (index, item) in envelope.items.iter().enumerate() {
        let item_type = item.item_type().unwrap_or("");
        let label = crate::upstream::item_type_label(item_type);
        let profile = is_profile_item(item);
        let mut invalid = |e: profilink_proto::sentry::JsonError| {
            let message = format!("invalid JSON at {}: {}", e.path, e.message);
            if !lenient {
                return Err(Refusal::bad_request(format!(
                    "invalid envelope item {index} ({item_type}): {message}"
                ))
                .counted(u64::from(profile), 0));
            }
            refused.push(ItemRefusal {
                index,
                item_type: label,
                reason: "invalid_json",
                message,
                profile,
            });
            Ok(())
        };
        match item_type {
            "profile_chunk" | "profile_chunk_ui" => {
                let perfetto = item.headers.contains_key("meta_length")
                    || item.headers.get("content_type").and_then(Value::as_str) == Some(PERFETTO);
                if perfetto {
                    batch.other_items += 1;
                    continue;
                }
                match ProfileChunk::from_json(&item.payload) {
                    Err(e) => invalid(e)?,
                    Ok(chunk) => match chunk_door::check_chunk(&chunk) {
                        Ok(()) => batch.chunks.push(chunk),
                        Err(r) => refused.push(ItemRefusal {
                            index,
                            item_type: label,
                            reason: r.reason,
                            message: r.message,
                            profile: true,
                        }),
                    },
                }
            }
            "profile" => match SampleProfileV1::from_json(&item.payload) {
                Ok(p) => v1.push(p),
                Err(e) => invalid(e)?,
            },
            "transaction" => match Transaction::from_json(&item.payload) {
                Ok(t) => transactions.push(t),
                Err(e) => invalid(e)?,
            },
            "span" => read_spans(index, item, &mut batch),
            _ => batch.other_items += 1,
        }
    }
    let mut transactions: Vec<Option<Transaction>> = transactions.into_iter().map(Some).collect();
    for profile in v1 {
        let ids: Vec<String> = profile
            .all_transactions()
            .iter()
            .filter_map(|t| normalize_event_id(&t.id))
            .collect();
        let by_id = transactions.iter().position(|t| {
            t.as_ref()
                .and_then(|t| t.event_id.as_deref())
                .and_then(normalize_event_id)
                .is_some_and(|id| ids.contains(&id))
        });
        let index = by_id.or_else(|| (transactions.len() == 1).then_some(0));
        let transaction = index
            .and_then(|i| transactions.get_mut(i))
            .and_then(Option::take);
        batch.v1_profiles.push((profile, transaction));
    }
    batch.transactions = transactions.into_iter().flatten().collect();
    Ok((batch, refused))
}

/// Reads a `span` item into `batch.spans`; what cannot be read is counted in
/// `batch.invalid_spans` and skipped (never an error: see the module docs).
fn read_spans(index: usize, item: &EnvelopeItem, batch: &mut SentryBatch) {
    let content_type = item.headers.get("content_type").and_then(Value::as_str);
    match parse_span_item(&item.payload, content_type) {
        Ok(spans) => {
            for span in spans {
                match span {
                    Ok(span) => batch.spans.push(span),
                    Err(e) => {
                        batch.invalid_spans += 1;
                        tracing::debug!(item = index, path = %e.path, message = %e.message, "invalid span skipped");
                    }
                }
            }
        }
        Err(e) => {
            let count = item
                .headers
                .get("item_count")
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .unwrap_or(1);
            batch.invalid_spans = batch.invalid_spans.saturating_add(count);
            tracing::debug!(item = index, spans = count, path = %e.path, message = %e.message, "unreadable span item skipped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids() {
        assert_eq!(
            normalize_event_id("FC7A68B87D6A4C06990E6BFB3408BFA5").as_deref(),
            Some("fc7a68b87d6a4c06990e6bfb3408bfa5")
        );
        assert_eq!(
            normalize_event_id("fc7a68b8-7d6a-4c06-990e-6bfb3408bfa5").as_deref(),
            Some("fc7a68b87d6a4c06990e6bfb3408bfa5")
        );
        assert_eq!(
            normalize_event_id("fc7a68b8-7d6a-4c06-990e6bfb3408bfa5x"),
            None
        );
        assert_eq!(normalize_event_id("nope"), None);
        assert_eq!(normalize_event_id("zc7a68b87d6a4c06990e6bfb3408bfa5"), None);
    }
}
