//! The `pyroscope` receiver on the real binary. The `pyroscope-io` SDK from PyPI (skipped
//! without it unless `PROFILINK_REQUIRE_PPROF_TOOLS=1`) profiles a small Python program
//! (`tests/testdata/pyroscope/app.py`) and pushes to `/push.v1.PusherService/Push` with
//! `server_address` pointed at profilink, through a loopback tee that records what the SDK
//! sent: every push is answered 200, the chunks hold exactly the stacks and counts of the
//! recorded pprof profiles, and `service.name` is the app name. `/ingest` with pprof (raw and as
//! the Go SDK's multipart form) and folded bodies gives exact stack counts; bad bodies get 400
//! with their reasons, `format=jfr` a 415, counted. Chunks go through the real pipeline to a
//! file exporter and pass `profilink validate`; the same pipeline's OTLP exporter shows the
//! resource attributes.

mod pprof_support;
mod service_support;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use pprof_support::*;
use profilink_consumer::{Batch, Payload};
use profilink_proto::otlp::any_value;
use profilink_receiver::pyroscope::push::PushRequest;
use profilink_translator::pprof::{
    PprofFunction, PprofLine, PprofLocation, PprofProfile, PprofSample, PprofValueType,
};
use prost::Message;
use service_support::*;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A profilink with a `pyroscope` receiver at `listen` feeding a file exporter (`dir/out`) and
/// an OTLP exporter to `backend`.
fn start(dir: &Path, listen: &str, metrics: &str, backend: &str) -> Profilink {
    let yaml = format!(
        r#"
receivers:
  pyroscope: {{ endpoint: "{listen}", max_request_body_size_mib: 1 }}
exporters:
  file: {{ path: ./out, chunk_idle_timeout: 300ms, tick: 20ms }}
  otlp:
    endpoint: "{backend}"
    tls: {{ insecure: true }}
    timeout: 1s
service:
  pipelines:
    profiles: {{ receivers: [pyroscope], exporters: [file, otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
    );
    start_with_config(dir, &yaml, &[listen, metrics])
}

/// The string value of resource attribute `key` of every resource in `batches`.
fn resource_values(batches: &[Batch], key: &str) -> Vec<String> {
    batches
        .iter()
        .filter_map(|b| match &b.payload {
            Payload::Otlp(d) => Some(d),
            _ => None,
        })
        .flat_map(|d| &d.resource_profiles)
        .filter_map(|rp| rp.resource.as_ref())
        .flat_map(|r| &r.attributes)
        .filter(|kv| kv.key == key)
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

async fn drain(rx: &mut tokio::sync::mpsc::Receiver<Batch>, want: usize) -> Vec<Batch> {
    let mut got = Vec::new();
    while got.len() < want {
        match tokio::time::timeout(Duration::from_secs(15), rx.recv()).await {
            Ok(Some(b)) => got.push(b),
            _ => break,
        }
    }
    got
}

/// What the tee saw: the path, the SDK's request body, and profilink's status.
type Seen = Arc<Mutex<Vec<(String, Vec<u8>, u16)>>>;

/// A loopback tee: records each request and passes it on to `target` unchanged, answering
/// what `target` answered.
async fn tee(target: String) -> (String, Seen) {
    let seen: Seen = Arc::default();
    async fn pass(
        State((target, seen)): State<(String, Seen)>,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> (StatusCode, Bytes) {
        let mut r = reqwest::Client::new().post(format!("http://{target}{uri}"));
        for (k, v) in &headers {
            if k != "host" && k != "content-length" {
                r = r.header(k.as_str(), v.as_bytes());
            }
        }
        let answer = r.body(body.to_vec()).send().await.unwrap();
        let status = answer.status().as_u16();
        seen.lock()
            .unwrap()
            .push((uri.path().to_string(), body.to_vec(), status));
        let body = answer.bytes().await.unwrap();
        (StatusCode::from_u16(status).unwrap(), body)
    }
    let app = axum::Router::new()
        .fallback(pass)
        .with_state((target, seen.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pyroscope_io_sdk_pushes_arrive_with_exact_stack_counts_and_its_app_name() {
    let Some(python) = python_with_pyroscope() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (free_addr(), free_addr());
    let (_backend, mut batches) = otlp_backend(false).await;
    let backend = _backend.local_addr().to_string();
    let p = start(dir.path(), &listen, &metrics, &backend);
    let (tee_addr, seen) = tee(listen.clone()).await;
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/pyroscope/app.py");
    let status = tokio::process::Command::new(python)
        .arg(&app)
        .arg(format!("http://{tee_addr}"))
        .arg("3")
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the Python program failed");
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty(), "the SDK pushed nothing");
    let mut expected = StackCounts::new();
    let mut profiles = 0;
    for (path, body, status) in &seen {
        assert_eq!(path, "/push.v1.PusherService/Push");
        assert_eq!(*status, 200, "profilink answered the SDK {status}");
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice())
            .read_to_end(&mut raw)
            .unwrap();
        let request = PushRequest::decode(raw.as_slice()).unwrap();
        for sample in request.series.iter().flat_map(|s| &s.samples) {
            profiles += 1;
            for (stack, n) in pprof_stack_counts(&decode(&sample.raw_profile)) {
                *expected.entry(stack).or_default() += n;
            }
        }
    }
    let total: u64 = expected.values().sum();
    eprintln!(
        "{} pushes, {profiles} profiles, {total} observations",
        seen.len()
    );
    assert!(total > 50, "{total} observations in 3 s at 100 Hz");
    assert!(
        expected
            .keys()
            .any(|s| s.first().is_some_and(|f| f == "busy_leaf"))
    );
    let out = dir.path().join("out");
    let chunks = wait_for_observations(&p, &out, total as usize, Duration::from_secs(15));
    assert_eq!(
        chunk_stack_counts(&chunks),
        expected,
        "every stack's count is the SDK's"
    );
    assert!(validate_envelopes(&out) > 0);
    let got = drain(&mut batches, profiles).await;
    let names = resource_values(&got, "service.name");
    assert!(
        !names.is_empty() && names.iter().all(|n| n == "pyapp"),
        "{names:?}"
    );
    assert!(resource_values(&got, "region").iter().all(|r| r == "eu"));
}

/// A pprof profile with one `samples`/`count` type and these stacks (function names, leaf
/// first) and counts.
fn pprof_of(stacks: &[(&[&str], i64)]) -> Vec<u8> {
    let mut strings = vec![String::new(), "samples".into(), "count".into()];
    let mut intern = |s: &str| {
        let i = strings.iter().position(|x| x == s).unwrap_or_else(|| {
            strings.push(s.to_string());
            strings.len() - 1
        });
        i as i64
    };
    let mut functions: Vec<PprofFunction> = Vec::new();
    let mut samples = Vec::new();
    for (stack, n) in stacks {
        let mut ids = Vec::new();
        for name in *stack {
            let name = intern(name);
            let id = match functions.iter().find(|f| f.name == name) {
                Some(f) => f.id,
                None => {
                    let id = functions.len() as u64 + 1;
                    functions.push(PprofFunction {
                        id,
                        name,
                        ..Default::default()
                    });
                    id
                }
            };
            ids.push(id);
        }
        samples.push(PprofSample {
            location_id: ids,
            value: vec![*n],
            ..Default::default()
        });
    }
    let locations = functions
        .iter()
        .map(|f| PprofLocation {
            id: f.id,
            line: vec![PprofLine {
                function_id: f.id,
                line: 1,
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    PprofProfile {
        sample_type: vec![PprofValueType { r#type: 1, unit: 2 }],
        sample: samples,
        location: locations,
        function: functions,
        string_table: strings,
        time_nanos: now.as_nanos() as i64 - 10_000_000_000,
        duration_nanos: 10_000_000_000,
        ..Default::default()
    }
    .encode_to_vec()
}

fn counts_of(stacks: &[(&[&str], i64)]) -> StackCounts {
    stacks
        .iter()
        .map(|(s, n)| (s.iter().map(|f| f.to_string()).collect(), *n as u64))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_of_pprof_and_folded_gives_exact_stack_counts() {
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (free_addr(), free_addr());
    let (_backend, mut batches) = otlp_backend(false).await;
    let p = start(
        dir.path(),
        &listen,
        &metrics,
        &_backend.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ingest = |query: String, content_type: String, body: Vec<u8>| {
        client
            .post(format!("http://{listen}/ingest?{query}"))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let raw: &[(&[&str], i64)] = &[(&["leaf", "work", "main"], 7), (&["idle", "main"], 3)];
    let form: &[(&[&str], i64)] = &[(&["encode", "serve", "main"], 5)];
    let folded: &[(&[&str], i64)] = &[(&["c", "b", "a"], 4), (&["b", "a"], 2)];
    // format=pprof, a raw body.
    let r = ingest(
        format!(
            "name=rawapp.cpu%7Benv%3Dtest%7D&format=pprof&from={}&until={now}",
            now - 10
        ),
        "application/octet-stream".into(),
        pprof_of(raw),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // As the Go SDK sends it: a multipart form with `profile` and `sample_type_config`.
    let boundary = "profilinkboundary";
    let mut body = Vec::new();
    for (name, file, data) in [
        ("profile", "profile.pprof", pprof_of(form)),
        (
            "sample_type_config",
            "sample_type_config.json",
            br#"{"samples":{"units":"samples","display-name":"cpu"}}"#.to_vec(),
        ),
    ] {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; \
                 filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(&data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let r = ingest(
        format!(
            "name=formapp%7Bservice_name%3Dformsvc%7D&from={}&until={now}",
            now - 10
        ),
        format!("multipart/form-data; boundary={boundary}"),
        body,
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // Folded stacks (no format: Pyroscope's default), 100 Hz.
    let r = ingest(
        format!(
            "name=foldapp.cpu&from={}&until={now}&sampleRate=100&spyName=rbspy",
            now - 10
        ),
        "text/plain".into(),
        b"a;b;c 4\na;b 2\n".to_vec(),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let mut expected = counts_of(raw);
    expected.extend(counts_of(form));
    expected.extend(counts_of(folded));
    let out = dir.path().join("out");
    let chunks = wait_for_observations(&p, &out, 21, Duration::from_secs(15));
    assert_eq!(chunk_stack_counts(&chunks), expected);
    assert!(validate_envelopes(&out) > 0);
    let got = drain(&mut batches, 3).await;
    let mut names = resource_values(&got, "service.name");
    names.sort();
    assert_eq!(names, ["foldapp", "formsvc", "rawapp"]);
    assert_eq!(resource_values(&got, "app_name"), ["formapp"]);
    assert_eq!(resource_values(&got, "env"), ["test"]);
    assert_eq!(resource_values(&got, "pyroscope_spy"), ["rbspy"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_400_with_reasons_and_jfr_a_counted_415() {
    let dir = tempfile::tempdir().unwrap();
    let (listen, metrics) = (free_addr(), free_addr());
    let (_backend, _batches) = otlp_backend(false).await;
    let _p = start(
        dir.path(),
        &listen,
        &metrics,
        &_backend.local_addr().to_string(),
    );
    let client = reqwest::Client::new();
    let post = |path: &str, content_type: &str, body: &[u8]| {
        client
            .post(format!("http://{listen}{path}"))
            .header("content-type", content_type)
            .body(body.to_vec())
            .send()
    };
    let answer = async |r: reqwest::Response| (r.status().as_u16(), r.text().await.unwrap());
    let (s, t) = answer(
        post("/ingest?format=folded", "text/plain", b"a;b 1")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, t.as_str()),
        (400, "name: required (app{label=value,...})\n")
    );
    let (s, t) = answer(
        post("/ingest?name=a", "text/plain", b"a;b one\n")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    assert!(t.starts_with("not folded stacks: line 1:"), "{t}");
    let (s, t) = answer(
        post(
            "/ingest?name=a&format=pprof",
            "application/octet-stream",
            b"\x0a\xff\xff",
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    assert!(t.starts_with("not a pprof profile:"), "{t}");
    let (s, t) = answer(
        post(
            "/ingest?name=a&format=jfr",
            "application/octet-stream",
            b"FLR\0",
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(s, 415);
    assert!(t.contains("format=jfr is not read by profilink"), "{t}");
    // As a Java agent sends it: a multipart form.
    let form = "multipart/form-data; boundary=b";
    let (s, _) = answer(
        post("/ingest?name=a&format=jfr", form, b"--b--\r\n")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 415);
    let push = "/push.v1.PusherService/Push";
    let (s, t) = answer(
        post(push, "application/proto", b"\xff\xff\xff")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 400);
    let error: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert_eq!(error["code"], "invalid_argument");
    let not_pprof = br#"{"series":[{"labels":[{"name":"service_name","value":"x"}],"samples":[{"rawProfile":"AQID"}]}]}"#;
    let (s, t) = answer(post(push, "application/json", not_pprof).await.unwrap()).await;
    assert_eq!(s, 400);
    let error: serde_json::Value = serde_json::from_str(&t).unwrap();
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("series[0].samples[0]: not a pprof profile"),
        "{t}"
    );
    let (s, _) = answer(post(push, "text/plain", b"x").await.unwrap()).await;
    assert_eq!(s, 415);
    let r = client
        .get(format!("http://{listen}/ingest"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let refusals = async |reason: &str| {
        metric(
            &metrics,
            "profilink_receiver_refusals_total",
            &[("receiver", "pyroscope"), ("reason", reason)],
        )
        .await
    };
    assert_eq!(refusals("unsupported_format").await, 2);
    assert_eq!(refusals("invalid").await, 5);
    assert_eq!(refusals("unsupported_media_type").await, 1);
}
