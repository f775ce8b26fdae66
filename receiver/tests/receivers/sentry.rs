//! The envelope endpoint with the real sentry-python envelopes and SDK-style requests.

use crate::common::*;
use base64::Engine;
use profilink_consumer::{ReceiverKind, SentryBatch, Transport};
use profilink_proto::sentry::{Envelope, ProfileChunk, SampleProfileV1, Transaction};
use profilink_receiver::SentryReceiverConfig;
use reqwest::StatusCode;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const PROJECT: u64 = 42;

fn url(server: &Running) -> String {
    format!("http://{}/api/{PROJECT}/envelope/", server.addr)
}

/// A request as sentry-python sends it.
fn sdk_post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("x-sentry-auth", sdk_auth(KEY))
        .header("content-type", "application/x-sentry-envelope")
        .header("user-agent", "sentry.python/2.75.0")
        .body(body)
}

async fn json(r: reqwest::Response) -> serde_json::Value {
    serde_json::from_slice(&r.bytes().await.expect("body")).expect("JSON body")
}

/// What the consumer should receive for an envelope fixture.
fn expected_batch(bytes: &[u8]) -> SentryBatch {
    let envelope = Envelope::parse(bytes).expect("fixture parses");
    let mut batch = SentryBatch {
        project_id: PROJECT,
        public_key: KEY.to_string(),
        ..SentryBatch::default()
    };
    let mut v1 = Vec::new();
    let mut transactions = Vec::new();
    for item in &envelope.items {
        match item.item_type() {
            Some("profile_chunk") => batch
                .chunks
                .push(ProfileChunk::from_json(&item.payload).expect("chunk")),
            Some("profile") => v1.push(SampleProfileV1::from_json(&item.payload).expect("v1")),
            Some("transaction") => {
                transactions.push(Transaction::from_json(&item.payload).expect("transaction"))
            }
            _ => batch.other_items += 1,
        }
    }
    if v1.is_empty() {
        batch.transactions = transactions;
    } else {
        // The fixture's V1 profile and its transaction travel together.
        assert_eq!((v1.len(), transactions.len()), (1, 1));
        batch.v1_profiles = vec![(v1.remove(0), transactions.pop())];
    }
    batch
}

fn event_id(bytes: &[u8]) -> Option<String> {
    let envelope = Envelope::parse(bytes).expect("fixture parses");
    envelope
        .headers
        .get("event_id")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The fixture rewritten without `length` item headers (payloads run to the newline).
fn without_lengths(bytes: &[u8]) -> Vec<u8> {
    let envelope = Envelope::parse(bytes).expect("fixture parses");
    let mut out = serde_json::to_vec(&envelope.headers).unwrap();
    out.push(b'\n');
    for item in &envelope.items {
        assert!(!item.payload.contains(&b'\n'));
        let mut headers = item.headers.clone();
        headers.remove("length");
        out.extend(serde_json::to_vec(&headers).unwrap());
        out.push(b'\n');
        out.extend(&item.payload);
        out.push(b'\n');
    }
    out
}

#[tokio::test]
async fn fixture_envelopes_raw_gzipped_and_without_lengths() {
    let mut server = start_sentry(SentryReceiverConfig::default(), 64).await;
    let client = reqwest::Client::new();
    let url = url(&server);
    let mut sent = 0;
    for (name, bytes) in envelope_fixtures() {
        let expected = expected_batch(&bytes);
        let bodies = [
            ("raw", bytes.clone(), None),
            ("gzip", gzip(&bytes), Some("gzip")),
            ("no-length", without_lengths(&bytes), None),
        ];
        for (variant, body, encoding) in bodies {
            let mut request = sdk_post(&client, &url, body);
            if let Some(e) = encoding {
                request = request.header("content-encoding", e);
            }
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{name} {variant}");
            assert_eq!(r.headers()["access-control-allow-origin"], "*");
            let answer = json(r).await;
            match event_id(&bytes) {
                Some(id) => assert_eq!(answer, serde_json::json!({ "id": id }), "{name}"),
                None => assert_eq!(answer, serde_json::json!({}), "{name}"),
            }
            let batch = server.next_batch().await;
            assert_eq!(
                (batch.receiver, batch.transport),
                (ReceiverKind::Sentry, Transport::Http)
            );
            let expected_samples: u64 = expected
                .chunks
                .iter()
                .map(|c| c.profile.samples.len() as u64)
                .chain(
                    expected
                        .v1_profiles
                        .iter()
                        .map(|(p, _)| p.profile.samples.len() as u64),
                )
                .sum();
            assert_eq!(batch.samples, expected_samples, "{name}");
            assert_eq!(
                batch.profiles,
                (expected.chunks.len() + expected.v1_profiles.len()) as u64
            );
            assert_eq!(sentry_payload(batch), expected, "{name} {variant}");
            sent += 1;
        }
    }
    let stats = server.stats.sentry_http.snapshot();
    assert_eq!(stats.accepted_requests, sent);
    assert!(stats.accepted_profiles >= 3 * 3);
    server.stop().await;
}

#[tokio::test]
async fn every_encoding_relay_accepts() {
    let mut server = start_sentry(SentryReceiverConfig::default(), 16).await;
    let client = reqwest::Client::new();
    let (_, bytes) = envelope_fixtures().remove(0);
    let expected = expected_batch(&bytes);
    let brotli = std::process::Command::new("brotli")
        .arg("--version")
        .output()
        .is_ok();
    let mut cases = vec![
        ("identity", bytes.clone()),
        ("", bytes.clone()),
        ("deflate", zlib(&bytes)),
        ("zstd", zstd(&bytes)),
        ("GZIP", gzip(&bytes)),
    ];
    if brotli {
        let tmp = std::env::temp_dir().join(format!("profilink-br-{}", std::process::id()));
        std::fs::write(&tmp, &bytes).unwrap();
        let out = std::process::Command::new("brotli")
            .args(["-c", "-q", "5"])
            .arg(&tmp)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&tmp);
        cases.push(("br", out.stdout));
    }
    for (encoding, body) in cases {
        let r = sdk_post(&client, &url(&server), body)
            .header("content-encoding", encoding)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{encoding}");
        assert_eq!(
            sentry_payload(server.next_batch().await),
            expected,
            "{encoding}"
        );
    }
    let r = sdk_post(&client, &url(&server), bytes.clone())
        .header("content-encoding", "compress")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn every_auth_source_relay_accepts() {
    let mut server = start_sentry(SentryReceiverConfig::default(), 16).await;
    let client = reqwest::Client::new();
    let (_, bytes) = envelope_fixtures().remove(0);
    let base = url(&server);

    let r = client
        .post(&base)
        .header(
            "authorization",
            format!("Sentry sentry_key={KEY}, sentry_version=7"),
        )
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{KEY}:"));
    let r = client
        .post(&base)
        .header("authorization", format!("Basic {basic}"))
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let r = client
        .post(format!(
            "{base}?sentry_key={KEY}&sentry_version=7&sentry_client=js"
        ))
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // No request auth: the envelope header `dsn` authenticates.
    let body = String::from_utf8(bytes.clone()).unwrap().replacen(
        "{}",
        &format!(r#"{{"dsn":"https://{KEY}@o1.ingest.example/{PROJECT}"}}"#),
        1,
    );
    let r = client.post(&base).body(body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    for _ in 0..4 {
        let batch = sentry_payload(server.next_batch().await);
        assert_eq!(
            (batch.project_id, batch.public_key.as_str()),
            (PROJECT, KEY)
        );
        assert_eq!(batch.chunks.len(), 1);
    }
    server.stop().await;
}

#[tokio::test]
async fn auth_failures_get_relays_status_codes() {
    let config = SentryReceiverConfig {
        allowed_keys: BTreeMap::from([(PROJECT, vec![KEY.to_string()])]),
        ..SentryReceiverConfig::default()
    };
    let mut server = start_sentry(config, 16).await;
    let client = reqwest::Client::new();
    let (_, bytes) = envelope_fixtures().remove(0);
    let base = url(&server);
    let other_key = "fedcba9876543210fedcba9876543210";
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode)> = vec![
        ("missing", client.post(&base), StatusCode::UNAUTHORIZED),
        (
            "header and query",
            client
                .post(format!("{base}?sentry_key={KEY}"))
                .header("x-sentry-auth", sdk_auth(KEY)),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "two headers",
            client
                .post(&base)
                .header("x-sentry-auth", sdk_auth(KEY))
                .header("authorization", sdk_auth(KEY)),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "no sentry_key",
            client
                .post(&base)
                .header("x-sentry-auth", "Sentry sentry_version=7"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "bad version",
            client.post(&base).header(
                "x-sentry-auth",
                format!("Sentry sentry_key={KEY}, sentry_version=x"),
            ),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "short key",
            client.post(&base).header("x-sentry-auth", sdk_auth("abc")),
            StatusCode::BAD_REQUEST,
        ),
        (
            "version 8",
            client.post(&base).header(
                "x-sentry-auth",
                format!("Sentry sentry_key={KEY}, sentry_version=8"),
            ),
            StatusCode::BAD_REQUEST,
        ),
        (
            "key not allowed",
            client
                .post(&base)
                .header("x-sentry-auth", sdk_auth(other_key)),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "bad project id",
            client
                .post(format!("http://{}/api/abc/envelope/", server.addr))
                .header("x-sentry-auth", sdk_auth(KEY)),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (name, request, status) in cases {
        let r = request.body(bytes.clone()).send().await.unwrap();
        assert_eq!(r.status(), status, "{name}");
        let body = json(r).await;
        assert!(body["detail"].is_string(), "{name}: {body}");
    }

    // Envelope `dsn` header against the request's auth.
    let text = String::from_utf8(bytes.clone()).unwrap();
    for (name, dsn, status) in [
        (
            "other project",
            format!("https://{KEY}@host/7"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "other key",
            format!("https://{other_key}@host/{PROJECT}"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "same",
            format!("https://{KEY}@host/{PROJECT}"),
            StatusCode::OK,
        ),
    ] {
        let body = text.replacen("{}", &format!(r#"{{"dsn":"{dsn}"}}"#), 1);
        let r = sdk_post(&client, &base, body.into_bytes())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "dsn {name}");
    }
    // Only the dsn, and it is malformed.
    let body = text.replacen("{}", r#"{"dsn":"https://nokey.example/42"}"#, 1);
    let r = client.post(&base).body(body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    server.next_batch().await;
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn malformed_envelopes_are_refused() {
    let mut server = start_sentry(SentryReceiverConfig::default(), 16).await;
    let client = reqwest::Client::new();
    let base = url(&server);
    let (_, bytes) = envelope_fixtures().remove(0);
    let envelope = Envelope::parse(&bytes).unwrap();
    let payload = String::from_utf8(envelope.items[0].payload.clone()).unwrap();
    let len = payload.len();
    let item = |length: usize, payload: &str| {
        format!(
            "{{}}\n{{\"type\":\"profile_chunk\",\"platform\":\"python\",\"length\":{length}}}\n{payload}\n"
        )
    };

    // Wrong item lengths: past the end, and not ending at a newline.
    for (name, body) in [
        ("length past the end", item(len + 100, &payload)),
        ("length too short", item(len - 10, &payload)),
    ] {
        let r = sdk_post(&client, &base, body.into_bytes())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{name}");
        let detail = json(r).await["detail"].as_str().unwrap().to_string();
        assert!(detail.contains("item 0"), "{name}: {detail}");
    }

    // A chunk with invalid JSON for its type: 400 naming the item and the JSON path.
    let bad = payload.replacen("\"samples\":[", "\"samples\":\"oops\",\"x\":[", 1);
    assert_ne!(bad, payload);
    let r = sdk_post(&client, &base, item(bad.len(), &bad).into_bytes())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let detail = json(r).await["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("item 0 (profile_chunk)"), "{detail}");
    assert!(detail.contains("profile.samples"), "{detail}");
    // Not JSON at all.
    let r = sdk_post(&client, &base, item(5, "{nope").into_bytes())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Two profile items: 413 (Relay allows one per envelope).
    let two = format!(
        "{{}}\n{{\"type\":\"profile_chunk\",\"length\":{len}}}\n{payload}\n{{\"type\":\"profile_chunk_ui\",\"length\":{len}}}\n{payload}\n"
    );
    let r = sdk_post(&client, &base, two.into_bytes())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);

    // More than 500 items.
    let mut many = String::from("{}\n");
    for _ in 0..501 {
        many.push_str("{\"type\":\"attachment\",\"length\":1}\nx\n");
    }
    let r = sdk_post(&client, &base, many.into_bytes())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Empty body, header that is not JSON, bad event_id, bad sent_at, item without type.
    for body in [
        "",
        "not json\n",
        "{\"event_id\":\"xyz\"}\n",
        "{\"sent_at\":\"yesterday\"}\n",
        "{}\n{\"length\":1}\nx\n",
    ] {
        let r = sdk_post(&client, &base, body.as_bytes().to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body:?}");
    }

    // No trailing slash: 404, as in Relay. GET: 405.
    let r = sdk_post(&client, base.trim_end_matches('/'), bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = client.get(&base).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    let r = client
        .request(reqwest::Method::OPTIONS, &base)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");

    server.assert_no_batch();
    // Other item types are accepted and counted; an envelope without profiles or
    // transactions is answered but not handed on.
    let r = sdk_post(
        &client,
        &base,
        b"{\"event_id\":\"fc7a68b8-7d6a-4c06-990e-6bfb3408bfa5\"}\n{\"type\":\"session\",\"length\":2}\n{}\n".to_vec(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        json(r).await,
        serde_json::json!({"id": "fc7a68b87d6a4c06990e6bfb3408bfa5"})
    );
    server.assert_no_batch();
    server.stop().await;
}

#[tokio::test]
async fn size_limits_apply_after_decompression() {
    let config = SentryReceiverConfig {
        max_envelope_size_mib: 8,
        ..SentryReceiverConfig::default()
    };
    let mut server = start_sentry(config, 4).await;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let r = sdk_post(&client, &url(&server), gzip_bomb(1 << 30))
        .header("content-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(started.elapsed() < Duration::from_secs(20));
    let r = sdk_post(&client, &url(&server), vec![b' '; (8 << 20) + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    server.assert_no_batch();
    server.stop().await;
}

/// An envelope of `(item header, payload)` pairs, with `length` headers.
fn envelope(items: &[(serde_json::Value, Vec<u8>)]) -> Vec<u8> {
    let mut out = br#"{"sent_at":"2026-11-22T03:11:04Z"}"#.to_vec();
    out.push(b'\n');
    for (header, payload) in items {
        let mut header = header.clone();
        header["length"] = payload.len().into();
        out.extend(serde_json::to_vec(&header).unwrap());
        out.push(b'\n');
        out.extend(payload);
        out.push(b'\n');
    }
    out
}

#[tokio::test]
async fn span_items_of_both_content_types_yield_spans() {
    use profilink_proto::sentry::SpanFormat;
    use serde_json::json;
    let mut server = start_sentry(SentryReceiverConfig::default(), 4).await;
    let client = reqwest::Client::new();
    let profiler_id = "7ffb3319b3ff432ebf7a635f28b29a80";
    let container = json!({"items": [
        {
            "trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "438f40bd3b4a41ee",
            "name": "GET /users", "status": "ok", "is_segment": true,
            "start_timestamp": 1795317063.5, "end_timestamp": 1795317063.75,
            "attributes": {
                "sentry.profiler_id": {"type": "string", "value": profiler_id},
                "thread.id": {"type": "string", "value": "140234"},
                "thread.name": {"type": "string", "value": "MainThread"}
            }
        },
        {
            "trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "f1196292f76e45c0",
            "parent_span_id": "438f40bd3b4a41ee", "name": "SELECT",
            "start_timestamp": "2026-11-22T03:11:03.6Z", "end_timestamp": "2026-11-22T03:11:03.7Z",
            "attributes": {"sentry.profiler_id": {"type": "string", "value": profiler_id},
                           "thread.id": {"type": "integer", "value": 140235}}
        },
        {"trace_id": "6cf173d587eb48568a9b2e12dcfbea52", "span_id": "nope",
         "start_timestamp": 1.0, "end_timestamp": 2.0}
    ]});
    let legacy = json!({
        "trace_id": "4c79f60c11214eb38604f4ae0781bfb2", "span_id": "fa90fdead5f74052",
        "op": "ui.interaction.click", "start_timestamp": 1795317064.0, "timestamp": 1795317064.5,
        "data": {"profiler_id": profiler_id, "thread.id": 1, "thread.name": "main"}
    });
    let body = envelope(&[
        (
            json!({"type": "span", "item_count": 3,
                   "content_type": "application/vnd.sentry.items.span.v2+json"}),
            container.to_string().into_bytes(),
        ),
        (json!({"type": "span"}), legacy.to_string().into_bytes()),
        (
            json!({"type": "span", "content_type": "application/json"}),
            legacy.to_string().into_bytes(),
        ),
        (
            json!({"type": "span", "item_count": 4,
                   "content_type": "application/vnd.sentry.items.span.v2+json"}),
            b"{not json".to_vec(),
        ),
        (json!({"type": "span"}), b"[1, 2]".to_vec()),
    ]);
    let r = sdk_post(&client, &url(&server), body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await, json!({}));
    let batch = sentry_payload(server.next_batch().await);
    assert!(batch.chunks.is_empty() && batch.transactions.is_empty());
    assert_eq!(batch.other_items, 0);
    // 3 - 1 invalid in the container, 2 legacy; 1 + 4 + 1 unreadable.
    assert_eq!(batch.invalid_spans, 6);
    /// Format, span id, profiler id, thread id, start.
    type Summary<'a> = (
        SpanFormat,
        &'a str,
        Option<&'a str>,
        Option<String>,
        Option<u64>,
    );
    let summary: Vec<Summary<'_>> = batch
        .spans
        .iter()
        .map(|s| {
            (
                s.format,
                s.span_id.as_str(),
                s.profiler_id(),
                s.thread_id(),
                s.start_unix_nanos(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                SpanFormat::V2,
                "438f40bd3b4a41ee",
                Some(profiler_id),
                Some("140234".to_string()),
                Some(1_795_317_063_500_000_000)
            ),
            (
                SpanFormat::V2,
                "f1196292f76e45c0",
                Some(profiler_id),
                Some("140235".to_string()),
                Some(1_795_317_063_600_000_000)
            ),
            (
                SpanFormat::Legacy,
                "fa90fdead5f74052",
                Some(profiler_id),
                Some("1".to_string()),
                Some(1_795_317_064_000_000_000)
            ),
            (
                SpanFormat::Legacy,
                "fa90fdead5f74052",
                Some(profiler_id),
                Some("1".to_string()),
                Some(1_795_317_064_000_000_000)
            ),
        ]
    );
    assert_eq!(batch.spans[0].thread_name(), Some("MainThread"));
    assert_eq!(
        batch.spans[1].parent_span_id.as_deref(),
        Some("438f40bd3b4a41ee")
    );

    // Only unreadable spans: still 200, nothing for the consumer, counted.
    let body = envelope(&[(json!({"type": "span"}), b"oops".to_vec())]);
    let r = sdk_post(&client, &url(&server), body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    server.assert_no_batch();

    let c = server.stats.sentry_http.snapshot();
    assert_eq!((c.accepted_spans, c.refused_spans), (4, 7));
    assert_eq!((c.accepted_requests, c.refused_requests), (2, 0));
    assert_eq!(c.accepted_profiles, 0);
    server.stop().await;
}
