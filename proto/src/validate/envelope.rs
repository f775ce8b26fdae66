//! Envelope rules (item count, one profile item per envelope, item headers) and validation of
//! each item's payload.

use super::chunk::chunk_json;
use super::finding::{Finding, Sink};
use super::sentry_common::parse;
use super::v1::v1_json;
use crate::sentry::MAX_ENVELOPE_ITEMS;
use crate::sentry::{Envelope, EnvelopeItem, Timestamp, Transaction};
use serde_json::Value;

/// Validates an envelope and its items. Paths of item payload findings start with `items[i].`
/// (e.g. `items[0].profile.samples[3].stack_id`); item header findings use
/// `items[i].headers.<name>`.
///
/// * `profile_chunk` items: every chunk rule ([`super::validate_chunk_json`]) plus the item
///   header `platform`, which must equal the payload's (`item-platform-mismatch`, error) and
///   should be present (`item-platform-missing`, warning: Relay fills it in but cannot
///   rate-limit the item by category before parsing);
/// * `profile` items: the V1 rules ([`super::validate_v1_profile_json`]);
/// * `transaction` items: the payload must parse as a transaction;
/// * at most one `profile`/`profile_chunk` item per envelope (`envelope-profile-items`: Relay
///   answers 413 for the whole envelope), at most 500 items, a `type` on every item, a valid
///   `sent_at` header.
pub fn validate_envelope(envelope: &Envelope) -> Vec<Finding> {
    let mut sink = Sink::new(".");
    if let Some(v) = envelope.headers.get("sent_at") {
        let ok = match v {
            Value::Null => true,
            Value::String(s) => Timestamp::parse_rfc3339(s).is_some(),
            _ => false,
        };
        if !ok {
            sink.error(
                "envelope-sent-at",
                "headers.sent_at",
                format_args!("sent_at {v} is not an RFC 3339 timestamp; Relay answers 400"),
            );
        }
    }
    if envelope.items.len() > MAX_ENVELOPE_ITEMS {
        sink.error(
            "envelope-item-count",
            "items",
            format_args!(
                "{} items; Relay accepts at most {MAX_ENVELOPE_ITEMS} per envelope",
                envelope.items.len()
            ),
        );
    }
    let mut out = sink.finish();
    let mut first_profile = None;
    for (i, item) in envelope.items.iter().enumerate() {
        let prefix = format!("items[{i}].");
        let mut sink = Sink::new(format!("items[{i}]"));
        match item.item_type() {
            None => sink.error(
                "item-type",
                format_args!("{prefix}headers.type"),
                "item header has no string `type`; Relay rejects the envelope",
            ),
            Some(t @ ("profile" | "profile_chunk" | "profile_chunk_ui")) => {
                match first_profile {
                    Some(first) => sink.error(
                        "envelope-profile-items",
                        format_args!("items[{i}]"),
                        format_args!(
                            "a second profile item (the first is items[{first}]); Relay accepts \
                             one profile or profile_chunk item per envelope and answers 413 for \
                             the whole envelope"
                        ),
                    ),
                    None => first_profile = Some(i),
                }
                if t == "profile" {
                    v1_json(&item.payload, &prefix, &mut sink);
                } else {
                    chunk_item(item, &prefix, &mut sink);
                }
            }
            Some("transaction") => {
                parse::<Transaction>(&item.payload, &prefix, &mut sink);
            }
            Some(_) => {}
        }
        out.extend(sink.finish());
    }
    out
}

fn chunk_item(item: &EnvelopeItem, prefix: &str, sink: &mut Sink) {
    if item.headers.contains_key("meta_length") {
        sink.error(
            "item-meta-length",
            format_args!("{prefix}headers.meta_length"),
            "a `meta_length` header marks a sampled (Android/Perfetto) chunk; Relay rejects a \
             JSON chunk with it (invalid sampled profile)",
        );
    }
    let content_type = item.headers.get("content_type").and_then(Value::as_str);
    if content_type == Some("application/x-perfetto-trace") {
        sink.warning(
            "perfetto-not-checked",
            format_args!("{prefix}headers.content_type"),
            "Perfetto chunk payloads are binary and are not validated",
        );
        return;
    }
    let chunk = chunk_json(&item.payload, prefix, sink);
    match (item.platform(), chunk) {
        (None, _) => sink.warning(
            "item-platform-missing",
            format_args!("{prefix}headers.platform"),
            "the item header has no `platform`; Relay takes it from the payload but cannot \
             rate-limit the item by its data category beforehand",
        ),
        (Some(header), Some(chunk)) if header != chunk.platform => sink.error(
            "item-platform-mismatch",
            format_args!("{prefix}headers.platform"),
            format_args!(
                "item header platform {header:?} differs from the payload platform {:?}; Relay \
                 rejects the chunk (invalid profile type)",
                chunk.platform
            ),
        ),
        _ => {}
    }
}
