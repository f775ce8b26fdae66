//! Envelope parse -> items -> chunk / V1 profile / transaction / span parse -> links ->
//! `sentry_to_otlp::to_otlp`, as the envelope endpoint and `profilink translate` do it.
//! Also: the envelope validator, and `Envelope::to_bytes` reads back as the same items.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profilink_proto::sentry::{
    Envelope, ProfileChunk, SampleProfileV1, Transaction, parse_span_item,
};
use profilink_proto::validate::{validate_chunk, validate_envelope};
use profilink_translator::sentry_to_otlp::{OtlpOptions, SentryInput, V1WithTransaction, to_otlp};
use profilink_translator::{TransactionLinks, span_intervals, span_item_interval};

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = Envelope::parse(data) else {
        return;
    };
    let _ = validate_envelope(&envelope);
    // Written back (every item gets its exact `length`), it reads as the same items.
    let again = Envelope::parse(&envelope.to_bytes()).expect("own envelope bytes parse");
    assert_eq!(again.items.len(), envelope.items.len());
    for (a, b) in again.items.iter().zip(&envelope.items) {
        assert_eq!(a.payload, b.payload, "payload changed by to_bytes/parse");
    }
    let third = Envelope::parse(&again.to_bytes()).expect("own envelope bytes parse");
    assert_eq!(third, again, "to_bytes/parse is not stable");

    let mut chunks = Vec::new();
    let mut v1 = Vec::new();
    let mut transactions = Vec::new();
    let mut spans = Vec::new();
    for item in &envelope.items {
        match item.item_type().unwrap_or("") {
            "profile_chunk" | "profile_chunk_ui" => {
                if let Ok(c) = ProfileChunk::from_json(&item.payload) {
                    let _ = validate_chunk(&c);
                    chunks.push(c);
                }
            }
            "profile" => {
                if let Ok(p) = SampleProfileV1::from_json(&item.payload) {
                    v1.push(p);
                }
            }
            "transaction" => {
                if let Ok(t) = Transaction::from_json(&item.payload) {
                    transactions.push(t);
                }
            }
            "span" => {
                let content_type = item.headers.get("content_type").and_then(|v| v.as_str());
                if let Ok(items) = parse_span_item(&item.payload, content_type) {
                    spans.extend(items.into_iter().flatten());
                }
            }
            _ => {}
        }
    }
    let links = TransactionLinks::from_intervals(
        transactions
            .iter()
            .flat_map(span_intervals)
            .chain(spans.iter().filter_map(span_item_interval)),
    );
    let v1_profiles: Vec<V1WithTransaction> = v1
        .into_iter()
        .map(|profile| V1WithTransaction {
            profile,
            transaction: transactions.first().cloned(),
        })
        .collect();
    let input = SentryInput {
        chunks: &chunks,
        v1_profiles: &v1_profiles,
    };
    let _ = to_otlp(&input, &links, &OtlpOptions::default());
});
