//! The traces exporter against real servers on 127.0.0.1: a tonic `TraceService`, and the HTTP
//! stand-in of `common` playing an OTLP/HTTP collector and Sentry's OTLP traces endpoint.

mod common;

use common::*;
use profilink_consumer::ExportError;
use profilink_exporter::{
    ClientTlsConfig, Compression, DiscardReason, ManualClock, OtlpTracesConfig, QueueConfig,
    RetryConfig, SentryTracesConfig, SharedClock, StartError, TracesExporter, TracesExporterConfig,
    TracesMetrics, TracesMetricsSnapshot,
};
use profilink_proto::otlp::Resource;
use profilink_proto::otlp::{AnyValue, InstrumentationScope, KeyValue, any_value};
use profilink_proto::otlp::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use profilink_proto::otlp::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(10);

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// A request of one resource (`service.name = service`) with `spans` spans whose attribute
/// `pad` holds `pad` bytes.
fn request(service: &str, spans: u8, pad: usize) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", service)],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "test".into(),
                    ..Default::default()
                }),
                spans: (0..spans)
                    .map(|i| Span {
                        trace_id: vec![0xab; 16],
                        span_id: vec![i + 1; 8],
                        name: format!("{service}-{i}"),
                        start_time_unix_nano: 1_750_000_000_000_000_000 + u64::from(i),
                        end_time_unix_nano: 1_750_000_001_000_000_000,
                        attributes: vec![
                            kv("sentry.profiler_id", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
                            kv("pad", &"x".repeat(pad)),
                        ],
                        ..Default::default()
                    })
                    .collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// Span names in order.
fn names(req: &ExportTraceServiceRequest) -> Vec<String> {
    req.resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .map(|s| s.name.clone())
        .collect()
}

fn fast_retry() -> RetryConfig {
    RetryConfig {
        initial_interval: Duration::from_millis(20),
        max_interval: Duration::from_millis(50),
        max_elapsed_time: Duration::from_secs(5),
        ..Default::default()
    }
}

fn sentry_config(server: &StandIn) -> SentryTracesConfig {
    SentryTracesConfig {
        dsn: Some(server.dsn(42)),
        timeout: Duration::from_secs(2),
        retry_on_failure: fast_retry(),
        num_consumers: 1,
        ..Default::default()
    }
}

fn manual() -> (Arc<ManualClock>, SharedClock) {
    let c = Arc::new(ManualClock::new());
    let shared: SharedClock = c.clone();
    (c, shared)
}

/// Waits until `f` holds on the exporter's counters, at most `limit`; returns the last snapshot.
async fn wait_metrics(
    m: &TracesMetrics,
    limit: Duration,
    f: impl Fn(&TracesMetricsSnapshot) -> bool,
) -> TracesMetricsSnapshot {
    let end = tokio::time::Instant::now() + limit;
    loop {
        let s = m.snapshot();
        if f(&s) || tokio::time::Instant::now() >= end {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn decoded(r: &Recorded) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest::decode(&r.decoded_body()[..]).expect("protobuf trace request")
}

// ---------------------------------------------------------------------------------------------
// gRPC

/// (request, grpc-encoding, x-tenant) of one accepted call.
type Received = (ExportTraceServiceRequest, Option<String>, Option<String>);

#[derive(Default)]
struct GrpcState {
    calls: AtomicUsize,
    received: Mutex<Vec<Received>>,
}

struct Collector(Arc<GrpcState>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        req: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let call = self.0.calls.fetch_add(1, Ordering::SeqCst);
        if call == 0 {
            return Err(Status::unavailable("warming up"));
        }
        let meta = |k: &str| {
            req.metadata()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let enc = meta("grpc-encoding");
        let tenant = meta("x-tenant");
        let body = req.into_inner();
        let rejected = if body.resource_spans.len() == 1 && names(&body)[0].starts_with('b') {
            1
        } else {
            0
        };
        self.0.received.lock().unwrap().push((body, enc, tenant));
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: (rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: rejected,
                error_message: "one span too old".into(),
            }),
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_gzip_retries_unavailable_and_requests_arrive_equal() {
    let incoming =
        tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = incoming.local_addr().unwrap();
    let state = Arc::new(GrpcState::default());
    let svc = TraceServiceServer::new(Collector(state.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(incoming),
    );
    let cfg = OtlpTracesConfig {
        endpoint: Some(addr.to_string()),
        // A cleartext stand-in: without a scheme, gRPC dials TLS unless `insecure`.
        tls: ClientTlsConfig {
            insecure: true,
            ..Default::default()
        },
        headers: [("X-Tenant".to_string(), "acme".to_string())].into(),
        retry_on_failure: fast_retry(),
        num_consumers: 1,
        ..Default::default()
    };
    let exp = TracesExporter::start(TracesExporterConfig::Otlp(cfg))
        .await
        .unwrap();
    assert_eq!(exp.kind(), "otlp");
    let m = exp.metrics();
    let a = request("a", 3, 10);
    let b = request("b", 2, 10);
    exp.export(a.clone()).await.unwrap(); // UNAVAILABLE first, then delivered
    exp.export(b.clone()).await.unwrap(); // delivered with a partial success
    exp.export(ExportTraceServiceRequest::default())
        .await
        .unwrap(); // nothing to send
    exp.shutdown(WAIT).await;

    let got = state.received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, a);
    assert_eq!(got[1].0, b);
    for (_, enc, tenant) in &got {
        assert_eq!(enc.as_deref(), Some("gzip"));
        assert_eq!(tenant.as_deref(), Some("acme"));
    }
    let s = m.snapshot();
    assert_eq!(state.calls.load(Ordering::SeqCst), 3);
    assert_eq!(s.retries, 1);
    assert_eq!(s.failed_attempts, 1);
    assert_eq!(s.sent_requests, 2);
    assert_eq!(s.sent_spans, 5);
    assert_eq!(s.accepted_spans, 5);
    assert_eq!(s.partial_successes, 1);
    assert_eq!(s.rejected_spans, 1);
    assert_eq!(s.send_failed_spans, 0);
}

// ---------------------------------------------------------------------------------------------
// OTLP/HTTP

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_http_retries_503_then_delivers_and_400_is_permanent() {
    let server = StandIn::start().await;
    let partial = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 2,
            error_message: "two rejected".into(),
        }),
    }
    .encode_to_vec();
    server.script(vec![
        Behaviour::with_header(503, "Retry-After", "0"),
        Behaviour::Respond(
            200,
            vec![("content-type".into(), "application/x-protobuf".into())],
            partial,
        ),
        Behaviour::status(400),
    ]);
    let cfg = OtlpTracesConfig {
        endpoint: Some(format!("http://{}", server.addr)),
        compression: Compression::Zstd,
        headers: [("x-tenant".to_string(), "acme".to_string())].into(),
        retry_on_failure: fast_retry(),
        num_consumers: 1,
        ..Default::default()
    };
    let exp = TracesExporter::start(TracesExporterConfig::OtlpHttp(cfg))
        .await
        .unwrap();
    assert_eq!(
        exp.destination(),
        format!("http://{}/v1/traces", server.addr)
    );
    let m = exp.metrics();
    let a = request("a", 4, 100);
    let b = request("b", 3, 100);
    exp.export(a.clone()).await.unwrap();
    exp.export(b.clone()).await.unwrap();
    exp.shutdown(WAIT).await;

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "503 retried once; 400 not retried");
    for r in &reqs {
        assert_eq!(r.method, "POST");
        // The OTLP/HTTP traces path of the specification.
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(r.header("content-encoding"), Some("zstd"));
        assert_eq!(r.header("x-tenant"), Some("acme"));
    }
    assert_eq!(decoded(&reqs[0]), a);
    assert_eq!(decoded(&reqs[1]), a);
    assert_eq!(decoded(&reqs[2]), b);
    let s = m.snapshot();
    assert_eq!(s.retries, 1);
    assert_eq!(s.sent_spans, 4);
    assert_eq!(s.rejected_spans, 2);
    assert_eq!(s.dropped(DiscardReason::SendError), 3);
    assert_eq!(s.send_failed_spans, 3);
}

// ---------------------------------------------------------------------------------------------
// Sentry

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_posts_protobuf_with_key_auth_and_retries_503() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(503, "Retry-After", "0")]);
    let exp = TracesExporter::start(TracesExporterConfig::Sentry(sentry_config(&server)))
        .await
        .unwrap();
    assert_eq!(exp.kind(), "sentry");
    let m = exp.metrics();
    let a = request("checkout", 5, 50);
    exp.export(a.clone()).await.unwrap();
    exp.shutdown(WAIT).await;

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/api/42/integration/otlp/v1/traces");
        assert_eq!(
            r.header("x-sentry-auth"),
            Some(format!("sentry sentry_key={KEY}").as_str())
        );
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(decoded(r), a);
    }
    assert_eq!(reqs[1].answered, 200);
    let s = m.snapshot();
    assert_eq!((s.retries, s.sent_spans, s.send_failed_spans), (1, 5, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_refusals_are_permanent_and_not_retried() {
    let server = StandIn::start().await;
    server.script(vec![
        Behaviour::status(400),
        Behaviour::status(401),
        Behaviour::status(403),
        Behaviour::status(413),
    ]);
    let exp = TracesExporter::start(TracesExporterConfig::Sentry(sentry_config(&server)))
        .await
        .unwrap();
    let m = exp.metrics();
    for (i, service) in ["a", "b", "c", "d"].into_iter().enumerate() {
        exp.export(request(service, i as u8 + 1, 10)).await.unwrap();
    }
    exp.shutdown(WAIT).await;

    let reqs = server.requests();
    assert_eq!(
        reqs.iter().map(|r| r.answered).collect::<Vec<_>>(),
        vec![400, 401, 403, 413]
    );
    let s = m.snapshot();
    assert_eq!(s.retries, 0);
    assert_eq!(s.failed_attempts, 4);
    assert_eq!(s.sent_spans, 0);
    assert_eq!(s.dropped(DiscardReason::SendError), 1 + 2 + 3 + 4);
    assert_eq!(s.send_failed_spans, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_rate_limit_blocks_sending_until_it_expires() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        429,
        "X-Sentry-Rate-Limits",
        "60:span;transaction:key",
    )]);
    let (clock, shared) = manual();
    let exp = TracesExporter::start_with_clock(
        TracesExporterConfig::Sentry(sentry_config(&server)),
        shared,
    )
    .await
    .unwrap();
    let m = exp.metrics();
    let a = request("a", 3, 10);
    let b = request("b", 2, 10);
    exp.export(a.clone()).await.unwrap();
    let s = wait_metrics(&m, WAIT, |s| s.rate_limit_waiting == 1).await;
    assert_eq!((s.rate_limit_waiting, s.rate_limited), (1, 1), "{s:?}");
    exp.export(b.clone()).await.unwrap();
    assert_eq!(m.snapshot().queue_requests, 1, "b waits in the queue");

    // Half-way through the limit nothing is sent. The sender re-checks the clock every 50 ms,
    // so a few of those pass before looking.
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.requests().len(), 1, "still rate limited");
    assert_eq!(m.snapshot().rate_limit_waiting, 1);

    clock.advance(Duration::from_secs(31));
    assert!(server.wait_for(WAIT, |s| s.requests().len() == 3).await);
    let reqs = server.requests();
    assert_eq!(reqs[0].answered, 429);
    assert_eq!(
        decoded(&reqs[1]),
        a,
        "the limited request is sent again, first"
    );
    assert_eq!(decoded(&reqs[2]), b);
    let s = wait_metrics(&m, WAIT, |s| s.sent_spans == 5).await;
    assert_eq!(s.sent_spans, 5);
    assert_eq!(s.rate_limit_waiting, 0);
    assert_eq!(s.retries, 0, "waiting out a rate limit is not a retry");
    assert_eq!(s.send_failed_spans, 0);
    exp.shutdown(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_bare_429_honours_retry_after() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(429, "Retry-After", "5")]);
    let (clock, shared) = manual();
    let exp = TracesExporter::start_with_clock(
        TracesExporterConfig::Sentry(sentry_config(&server)),
        shared,
    )
    .await
    .unwrap();
    let m = exp.metrics();
    let a = request("a", 1, 10);
    exp.export(a.clone()).await.unwrap();
    let s = wait_metrics(&m, WAIT, |s| s.rate_limit_waiting == 1).await;
    assert_eq!((s.rate_limit_waiting, s.rate_limited), (1, 1), "{s:?}");
    assert_eq!(server.requests().len(), 1, "blocked until the clock moves");
    clock.advance(Duration::from_secs(6));
    assert!(server.wait_for(WAIT, |s| s.requests().len() == 2).await);
    assert_eq!(decoded(&server.requests()[1]), a);
    exp.shutdown(WAIT).await;
    assert_eq!(m.snapshot().sent_spans, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_refuses_with_export_error_full() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        429,
        "X-Sentry-Rate-Limits",
        "60::organization",
    )]);
    let (clock, shared) = manual();
    let cfg = SentryTracesConfig {
        sending_queue: QueueConfig {
            queue_size: Some(2),
            ..Default::default()
        },
        ..sentry_config(&server)
    };
    let exp = TracesExporter::start_with_clock(TracesExporterConfig::Sentry(cfg), shared)
        .await
        .unwrap();
    let m = exp.metrics();
    exp.export(request("a", 1, 10)).await.unwrap();
    let s = wait_metrics(&m, WAIT, |s| s.rate_limit_waiting == 1).await;
    assert_eq!(s.rate_limit_waiting, 1, "{s:?}");
    exp.export(request("b", 1, 10)).await.unwrap();
    exp.export(request("c", 1, 10)).await.unwrap();
    let err = exp.export(request("d", 1, 10)).await.unwrap_err();
    assert!(
        matches!(err, ExportError::Full { retry_after } if retry_after == Duration::from_secs(60)),
        "retry after the rest of the rate limit: {err:?}"
    );
    let s = m.snapshot();
    assert_eq!((s.refused_full, s.refused_full_spans), (1, 1));
    assert_eq!((s.queue_requests, s.queue_capacity_requests), (2, 2));
    assert_eq!(server.requests().len(), 1, "blocked until the clock moves");

    clock.advance(Duration::from_secs(61));
    assert!(server.wait_for(WAIT, |s| s.requests().len() == 4).await);
    exp.shutdown(WAIT).await;
    let sent: Vec<String> = server
        .requests()
        .iter()
        .skip(1)
        .map(|r| names(&decoded(r))[0].clone())
        .collect();
    assert_eq!(sent, vec!["a-0", "b-0", "c-0"]);
    assert_eq!(m.snapshot().sent_spans, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_bound_refuses_and_shutdown_counts_rate_limited_leftovers() {
    let server = StandIn::start().await;
    server.script(vec![Behaviour::with_header(
        429,
        "X-Sentry-Rate-Limits",
        "3600:span:key",
    )]);
    let (_clock, shared) = manual();
    let cfg = SentryTracesConfig {
        sending_queue: QueueConfig {
            queue_size: Some(100),
            max_size_mib: Some(1),
            ..Default::default()
        },
        ..sentry_config(&server)
    };
    let exp = TracesExporter::start_with_clock(TracesExporterConfig::Sentry(cfg), shared)
        .await
        .unwrap();
    let m = exp.metrics();
    exp.export(request("a", 2, 10)).await.unwrap();
    let s = wait_metrics(&m, WAIT, |s| s.rate_limit_waiting == 1).await;
    assert_eq!(s.rate_limit_waiting, 1, "{s:?}");
    exp.export(request("b", 1, 600 << 10)).await.unwrap();
    assert!(matches!(
        exp.export(request("c", 1, 600 << 10)).await,
        Err(ExportError::Full { .. })
    ));
    exp.export(request("d", 3, 1 << 10)).await.unwrap();
    let s = m.snapshot();
    assert!(
        s.queue_bytes > 600 << 10 && s.queue_bytes < 1 << 20,
        "{s:?}"
    );
    exp.shutdown(Duration::from_millis(200)).await;
    let s = m.snapshot();
    assert_eq!(s.dropped(DiscardReason::RatelimitBackoff), 2 + 1 + 3);
    assert_eq!(s.send_failed_spans, 6);
    assert_eq!((s.queue_requests, s.queue_bytes), (0, 0));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_requests_are_split_below_max_request_bytes() {
    let server = StandIn::start().await;
    let limit = 4096u64;
    let cfg = SentryTracesConfig {
        max_request_bytes: limit,
        compression: Compression::None,
        ..sentry_config(&server)
    };
    let exp = TracesExporter::start(TracesExporterConfig::Sentry(cfg))
        .await
        .unwrap();
    let m = exp.metrics();
    let mut big = request("a", 10, 300);
    big.resource_spans
        .extend(request("b", 12, 300).resource_spans);
    big.resource_spans
        .extend(request("c", 1, 20).resource_spans);
    assert!(big.encoded_len() as u64 > 2 * limit);
    exp.export(big.clone()).await.unwrap();
    exp.shutdown(WAIT).await;

    let reqs = server.requests();
    let s = m.snapshot();
    assert!(reqs.len() >= 3, "{} requests", reqs.len());
    assert_eq!(s.split_requests, reqs.len() as u64 - 1);
    let mut all = Vec::new();
    for r in &reqs {
        assert!(r.body.len() as u64 <= limit, "{} bytes", r.body.len());
        let d = decoded(r);
        for rs in &d.resource_spans {
            assert!(rs.resource.is_some(), "every piece keeps its resource");
        }
        all.extend(names(&d));
    }
    assert_eq!(all, names(&big), "every span once, in order");
    assert_eq!(s.sent_spans, 23);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configs_are_refused() {
    let none = TracesExporter::start(TracesExporterConfig::Sentry(SentryTracesConfig::default()));
    assert!(matches!(none.await, Err(StartError::Missing(_))));
    let bad = TracesExporter::start(TracesExporterConfig::Sentry(SentryTracesConfig {
        dsn: Some("https://host/1".into()),
        ..Default::default()
    }));
    assert!(matches!(bad.await, Err(StartError::Invalid { .. })));
    let header = TracesExporter::start(TracesExporterConfig::OtlpHttp(OtlpTracesConfig {
        headers: [("bad header".to_string(), "v".to_string())].into(),
        ..Default::default()
    }));
    assert!(matches!(header.await, Err(StartError::Invalid { .. })));
    let ok = TracesExporter::start(TracesExporterConfig::OtlpHttp(OtlpTracesConfig::default()))
        .await
        .unwrap();
    assert_eq!(ok.destination(), "http://127.0.0.1:4318/v1/traces");
    ok.shutdown(Duration::from_secs(1)).await;
}
