//! Trace linking in the running binary, OTLP → Sentry: OTLP traces and OTLP profiles of the
//! same resource go in (traces first: they wait for their profiles); the spans reaching the
//! Sentry stand-in's OTLP traces endpoint carry the exported chunks' `sentry.profiler_id` and
//! the `thread.id` of their linked samples, and the exporter's sparse-thread grouping never
//! touches a thread those samples are on.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_processor::otlp_to_sentry_options;
use profilink_proto::otlp::trace_service_client::TraceServiceClient;
use profilink_proto::otlp::{AnyValue, ExportProfilesServiceRequest, KeyValueAndUnit, any_value};
use profilink_proto::otlp::{ExportTraceServiceRequest, ResourceSpans, ScopeSpans, Span};
use profilink_translator::otlp_to_sentry;
use service_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

type SpanKey = (Vec<u8>, Vec<u8>);

/// The SDK's main thread (its samples link to spans) in the Python fixture.
const MAIN_THREAD: i64 = 140_357_056_605_056;

/// Adds unlinked single samples, each on a new thread, copied from the first sample of the
/// main thread (same stack and time + 1 µs per sample): `(thread id, thread name)`. Returns
/// their timestamps.
fn add_sparse_threads(req: &mut ExportProfilesServiceRequest, threads: &[(i64, &str)]) -> Vec<u64> {
    let d = req.dictionary.as_mut().unwrap();
    let key = |d: &profilink_proto::otlp::ProfilesDictionary, k: &str| {
        d.string_table.iter().position(|s| s == k).unwrap() as i32
    };
    let (tid_key, name_key) = (key(d, "thread.id"), key(d, "thread.name"));
    let is_main = |d: &profilink_proto::otlp::ProfilesDictionary, i: &i32| {
        let a = &d.attribute_table[*i as usize];
        a.key_strindex == tid_key
            && a.value.as_ref().and_then(|v| v.value.as_ref())
                == Some(&any_value::Value::IntValue(MAIN_THREAD))
    };
    let profile = &mut req.resource_profiles[0].scope_profiles[0].profiles[0];
    let model = profile
        .samples
        .iter()
        .find(|s| s.attribute_indices.iter().any(|i| is_main(d, i)))
        .unwrap()
        .clone();
    let mut times = Vec::new();
    for (n, (tid, name)) in threads.iter().enumerate() {
        d.string_table.push((*name).to_string());
        let name_idx = (d.string_table.len() - 1) as i32;
        let mut attrs: Vec<i32> = Vec::new();
        for i in &model.attribute_indices {
            let a = &d.attribute_table[*i as usize];
            if a.key_strindex != tid_key && a.key_strindex != name_key {
                attrs.push(*i);
            }
        }
        for (k, v) in [
            (tid_key, any_value::Value::IntValue(*tid)),
            (name_key, any_value::Value::StringValueStrindex(name_idx)),
        ] {
            d.attribute_table.push(KeyValueAndUnit {
                key_strindex: k,
                value: Some(AnyValue { value: Some(v) }),
                unit_strindex: 0,
            });
            attrs.push((d.attribute_table.len() - 1) as i32);
        }
        let t = model.timestamps_unix_nano[0] + 1_000 * (n as u64 + 1);
        times.push(t);
        let mut smp = model.clone();
        smp.attribute_indices = attrs;
        smp.link_index = 0;
        smp.timestamps_unix_nano = vec![t];
        profile.samples.push(smp);
    }
    times
}

fn attr(span: &Span, key: &str) -> Option<String> {
    let v = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?;
    match v {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_carry_the_profiler_and_thread_of_their_samples() {
    let standin = SentryStandIn::start(None).await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, metrics) = (free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
processors:
  profile_linking: {{ wait: 3s }}
exporters:
  sentry:
    dsn: "${{env:TEST_SENTRY_DSN}}"
    chunk_idle_timeout: 300ms
    tick: 20ms
    sending_queue: {{ storage: ./data/queue }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry] }}
    traces: {{ receivers: [otlp], processors: [profile_linking], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    );
    let dsn = standin.dsn();
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("TEST_SENTRY_DSN", Some(&dsn))],
    );
    p.wait_port(&grpc, Duration::from_secs(20));

    // The profiles: a real request whose samples link to spans, plus three unlinked threads
    // seen once: two "worker" threads and one named like the SDK's main thread, whose samples
    // link to spans. That one may not join the main thread (it would put a sample that is not
    // the spans' on the spans' thread); alone, it dissolves the "worker" group into one
    // "other threads" group with it.
    let mut profiles = otlp_fixture("python-sdk-trace-chunk-00.pb");
    let added = add_sparse_threads(
        &mut profiles,
        &[
            (999_997, "worker"),
            (999_998, "worker"),
            (999_999, "MainThread"),
        ],
    );
    let expected = otlp_to_sentry::to_chunks(
        profiles.dictionary.as_ref(),
        &profiles.resource_profiles,
        &otlp_to_sentry_options(),
    );
    assert!(expected.links.len() > 100);
    let mut threads: BTreeMap<SpanKey, BTreeSet<(String, String)>> = BTreeMap::new();
    for l in &expected.links {
        threads
            .entry((l.trace_id.to_vec(), l.span_id.to_vec()))
            .or_default()
            .insert((l.profiler_id.clone(), l.thread_id.clone()));
    }
    let profiler_ids: BTreeSet<&str> = expected
        .chunks
        .iter()
        .map(|c| c.profiler_id.as_str())
        .collect();
    assert_eq!(profiler_ids.len(), 1, "one process");
    let profiler_id = profiler_ids.into_iter().next().unwrap().to_string();

    // The traces: one span per linked span id, plus one no sample links to, from the same
    // resource as the profiles.
    let resource = profiles.resource_profiles[0].resource.clone();
    let mut spans: Vec<Span> = threads
        .keys()
        .map(|(t, s)| Span {
            trace_id: t.clone(),
            span_id: s.clone(),
            name: "work".into(),
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            ..Default::default()
        })
        .collect();
    let lonely = Span {
        trace_id: vec![7; 16],
        span_id: vec![7; 8],
        name: "no samples".into(),
        attributes: vec![profilink_proto::otlp::KeyValue {
            key: "thread.name".into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue("main".into())),
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    spans.push(lonely);
    let n_spans = spans.len();
    let traces = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource,
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let mut client = TraceServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    client.export(traces).await.expect("traces accepted");
    // The profiles arrive within the wait.
    grpc_export(&grpc, profiles).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let got: Vec<Span> = loop {
        let spans: Vec<Span> = standin
            .traces()
            .into_iter()
            .flat_map(|r| r.request.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect();
        if spans.len() >= n_spans {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n_spans} spans; stderr:\n{}",
            spans.len(),
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(got.len(), n_spans, "each span once");
    for r in standin.traces() {
        assert_eq!(r.project, "42");
        assert!(r.auth.contains(&format!("sentry_key={KEY}")), "{}", r.auth);
        assert_eq!(r.content_type, "application/x-protobuf");
    }

    // The chunks reached the stand-in too.
    assert!(
        standin
            .wait_for(Duration::from_secs(20), |c| !c.is_empty())
            .await
    );
    let chunks = standin.chunks();
    let chunk_threads: BTreeSet<(String, String)> = chunks
        .iter()
        .flat_map(|c| {
            c.profile
                .samples
                .iter()
                .map(|s| (c.profiler_id.clone(), s.thread_id.to_string()))
        })
        .collect();
    assert!(chunks.iter().all(|c| c.profiler_id == profiler_id));
    // The main thread holds exactly its own 176 samples; the three added threads are one
    // group thread.
    let on = |tid: &str| -> Vec<f64> {
        chunks
            .iter()
            .flat_map(|c| &c.profile.samples)
            .filter(|s| s.thread_id == tid)
            .map(|s| s.timestamp)
            .collect()
    };
    assert_eq!(on(&MAIN_THREAD.to_string()).len(), 176);
    let group = profilink_proto::sentry::group_id(b"other").to_string();
    let mut grouped = on(&group);
    grouped.sort_by(f64::total_cmp);
    assert_eq!(grouped.len(), 3);
    for (g, t) in grouped.iter().zip(&added) {
        assert!((g - *t as f64 / 1e9).abs() < 5e-7, "{g} vs {t}");
    }
    assert!(chunks.iter().any(|c| {
        c.profile
            .thread_metadata
            .get(&group)
            .is_some_and(|m| m.name.as_deref() == Some("other threads"))
    }));

    for span in &got {
        let key = (span.trace_id.clone(), span.span_id.clone());
        let pid = attr(span, "sentry.profiler_id").expect("every span has a profiler id");
        assert_eq!(pid, profiler_id, "the exported chunks' profiler id");
        match threads.get(&key) {
            Some(linked) => {
                let tid = attr(span, "thread.id").expect("linked spans get a thread id");
                assert!(
                    linked.contains(&(pid.clone(), tid.clone())),
                    "thread {tid} is one of the span's samples' threads {linked:?}"
                );
                assert!(
                    chunk_threads.contains(&(pid, tid.clone())),
                    "thread {tid} is a chunk thread_id"
                );
            }
            None => assert_eq!(attr(span, "thread.id"), None, "no samples, no thread"),
        }
    }

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    assert_eq!(
        scrape(
            &text,
            "profilink_receiver_accepted_spans_total",
            &[("receiver", "otlp"), ("transport", "grpc")]
        ),
        Some(n_spans as u64)
    );
    let e = [("exporter", "sentry")];
    assert_eq!(
        scrape(&text, "profilink_exporter_sparse_samples_grouped_total", &e),
        Some(3)
    );
    assert_eq!(
        scrape(&text, "profilink_exporter_sparse_samples_dropped_total", &e),
        Some(0)
    );
    let l = [("pipeline", "traces"), ("source", "samples")];
    assert_eq!(
        scrape(&text, "profilink_linking_stamped_spans_total", &l),
        Some((n_spans - 1) as u64),
        "{text}"
    );
    let l = [("pipeline", "traces"), ("source", "resource")];
    assert_eq!(
        scrape(&text, "profilink_linking_stamped_spans_total", &l),
        Some(1)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_traces_exporter_sent_spans_total",
            &[("exporter", "sentry")]
        ),
        Some(n_spans as u64)
    );

    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_json_traces_over_http_reach_an_otlp_backend_stamped_at_once() {
    use profilink_consumer::Payload;
    // The OTLP backend takes traces over gRPC.
    let (backend, mut batches) = otlp_backend(true).await;
    let dir = tempfile::tempdir().unwrap();
    let http = free_addr();
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp: {{ protocols: {{ http: {{ endpoint: "{http}" }} }} }}
processors:
  profile_linking: {{ wait: 0s }}
exporters:
  otlp: {{ endpoint: "{}", tls: {{ insecure: true }} }}
service:
  pipelines:
    traces: {{ receivers: [otlp], processors: [profile_linking], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: none }}
"#,
            backend.local_addr()
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&http, Duration::from_secs(20));
    let body = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"process.pid","value":{"intValue":"4242"}},
        {"key":"host.name","value":{"stringValue":"web-1"}}]},
      "scopeSpans":[{"spans":[{"traceId":"0123456789abcdef0123456789abcdef",
        "spanId":"0123456789abcdef","name":"GET /","startTimeUnixNano":"1",
        "endTimeUnixNano":"2"}]}]}]}"#;
    let resp = post_json_traces(&http, body).await;
    assert_eq!(resp.status(), 200);
    // Profiles are refused on a receiver only a traces pipeline uses.
    {
        use prost::Message;
        let resp = reqwest::Client::new()
            .post(format!("http://{http}/v1development/profiles"))
            .header("content-type", "application/x-protobuf")
            .body(otlp_fixture("ebpf-profile.pb").encode_to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let text = resp.text().await.unwrap();
        assert!(text.contains("no profiles pipeline"), "{text}");
    }
    let b = tokio::time::timeout(Duration::from_secs(20), batches.recv())
        .await
        .expect("traces forwarded")
        .unwrap();
    let Payload::Traces(req) = b.payload else {
        panic!("traces expected");
    };
    let span = &req.resource_spans[0].scope_spans[0].spans[0];
    let want = profilink_translator::resource_profiler_id(
        &req.resource_spans[0].resource.as_ref().unwrap().attributes,
    );
    assert_eq!(attr(span, "sentry.profiler_id"), Some(want));
    assert_eq!(attr(span, "thread.id"), None);
    p.signal("TERM");
    let status = p.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit {status:?}; stderr:\n{}", p.stderr());
    backend.abort();
}
