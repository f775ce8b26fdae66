//! The processor without the binary: every route of a profiles pipeline, checked against
//! recording exporters (what each exporter was handed, observation by observation), plus
//! backpressure and sampling. Input: the repository's real fixtures (an eBPF profiler capture,
//! sentry-python chunks with their transactions, a sentry-python V1 profile).

use profilink_consumer::{
    BoxFuture, ConsumeError, Export, ExportChunk, ExportError, Payload, SentryBatch,
};
use profilink_processor::{
    Exporter, JoinConfig, Pipeline, ProcessorSpec, SamplingConfig, ServiceCounters,
};
use profilink_proto::input::detect;
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, ProfilesData, data_from_request, request_from_data,
};
use profilink_proto::signal::profile_counts;
use profilink_translator::{SentryParts, decode_otlp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An exporter that keeps what it is handed; it can be made full (refusing up front) or
/// refusing (`export` answers `Full`).
struct Recorder<T> {
    got: Arc<Mutex<Vec<T>>>,
    full: Arc<AtomicBool>,
    refuse: Arc<AtomicBool>,
}

/// What a test reads and steers a [`Recorder`] by.
#[derive(Clone)]
struct Handle<T> {
    got: Arc<Mutex<Vec<T>>>,
    full: Arc<AtomicBool>,
    refuse: Arc<AtomicBool>,
}

impl<T> Handle<T> {
    fn take(&self) -> Vec<T> {
        std::mem::take(&mut *self.got.lock().unwrap())
    }
}

fn recorder<T: Send + 'static>(id: &str) -> (Arc<Exporter<T>>, Handle<T>) {
    let h = Handle {
        got: Arc::new(Mutex::new(Vec::new())),
        full: Arc::new(AtomicBool::new(false)),
        refuse: Arc::new(AtomicBool::new(false)),
    };
    let r = Recorder {
        got: h.got.clone(),
        full: h.full.clone(),
        refuse: h.refuse.clone(),
    };
    (Arc::new(Exporter::new(id, r)), h)
}

impl<T: Send + 'static> Export<T> for Recorder<T> {
    fn export(&self, data: T) -> BoxFuture<'_, Result<(), ExportError>> {
        Box::pin(async move {
            if self.refuse.load(Ordering::Relaxed) {
                return Err(ExportError::Full {
                    retry_after: Duration::from_secs(3),
                });
            }
            self.got.lock().unwrap().push(data);
            Ok(())
        })
    }

    fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    fn shutdown(self: Box<Self>, _deadline: Duration) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}

fn fixture(path: &str) -> Vec<u8> {
    let p = format!("{}/../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// The eBPF profiler capture (a JVM host).
fn ebpf() -> ProfilesData {
    data_from_request(decode_otlp(&fixture("otlp/ebpf-profile.pb"), None).unwrap())
}

/// Envelopes of sentry-python as one batch.
fn sentry(paths: &[&str]) -> SentryBatch {
    let mut parts = SentryParts::default();
    for p in paths {
        let bytes = fixture(p);
        parts.read(&bytes, detect(&bytes)).unwrap();
    }
    SentryBatch {
        project_id: 42,
        public_key: "k".into(),
        chunks: parts.chunks,
        v1_profiles: parts
            .v1_profiles
            .into_iter()
            .map(|v| (v.profile, v.transaction))
            .collect(),
        transactions: parts.transactions,
        ..Default::default()
    }
}

const CHUNKS: [&str; 2] = [
    "sentry/python/trace-chunk-00.envelope",
    "sentry/python/trace-chunk-01.envelope",
];
const TRANSACTIONS: [&str; 2] = [
    "sentry/python/trace-transaction-0001.envelope",
    "sentry/python/trace-transaction-0002.envelope",
];

/// The two chunks with their transactions, and the chunks' samples.
fn chunks_with_transactions() -> (SentryBatch, u64) {
    let mut paths = CHUNKS.to_vec();
    paths.extend(TRANSACTIONS);
    let batch = sentry(&paths);
    let samples = batch
        .chunks
        .iter()
        .map(|c| c.profile.samples.len() as u64)
        .sum();
    (batch, samples)
}

fn chunk_samples(chunks: &[ExportChunk]) -> u64 {
    chunks
        .iter()
        .map(|c| c.chunk.profile.samples.len() as u64)
        .sum()
}

fn otlp_samples(reqs: &[ExportProfilesServiceRequest]) -> u64 {
    reqs.iter()
        .map(|r| profile_counts(&r.resource_profiles).samples)
        .sum()
}

struct Setup {
    pipeline: Pipeline,
    chunks: Handle<Vec<ExportChunk>>,
    otlp: Handle<ExportProfilesServiceRequest>,
    counters: Arc<ServiceCounters>,
}

/// A pipeline with the given processors and a chunk and/or OTLP recording exporter.
fn setup(processors: &[&ProcessorSpec], to_chunks: bool, to_otlp: bool) -> Setup {
    let (ce, chunks) = recorder("chunks");
    let (oe, otlp) = recorder("otlp");
    let counters = Arc::new(ServiceCounters::default());
    let pipeline = Pipeline::new(
        "profiles",
        processors,
        if to_chunks { vec![ce] } else { vec![] },
        if to_otlp { vec![oe] } else { vec![] },
        counters.clone(),
    );
    Setup {
        pipeline,
        chunks,
        otlp,
        counters,
    }
}

#[tokio::test]
async fn otlp_to_chunks_keeps_every_observation() {
    let s = setup(&[], true, false);
    let data = ebpf();
    let want = profile_counts(&data.resource_profiles).samples;
    assert!(want > 0);
    s.pipeline.consume(Payload::Otlp(data)).await.unwrap();
    let batches = s.chunks.take();
    assert_eq!(batches.len(), 1, "one export call per request");
    let chunks = &batches[0];
    assert!(!chunks.is_empty());
    assert_eq!(chunk_samples(chunks), want, "observations kept");
    assert!(s.otlp.take().is_empty());
    assert_eq!(
        s.counters.translated_chunks.load(Ordering::Relaxed),
        chunks.len() as u64
    );
}

#[tokio::test]
async fn otlp_forward_hands_on_the_request_unchanged() {
    let s = setup(&[], false, true);
    let data = ebpf();
    let want = request_from_data(data.clone());
    s.pipeline.consume(Payload::Otlp(data)).await.unwrap();
    assert_eq!(s.otlp.take(), vec![want]);
    assert!(s.chunks.take().is_empty());
}

#[tokio::test]
async fn otlp_goes_to_both_kinds_of_exporter() {
    let s = setup(&[], true, true);
    let data = ebpf();
    let want = profile_counts(&data.resource_profiles).samples;
    s.pipeline.consume(Payload::Otlp(data)).await.unwrap();
    assert_eq!(chunk_samples(&s.chunks.take().concat()), want);
    assert_eq!(otlp_samples(&s.otlp.take()), want);
}

#[tokio::test]
async fn sentry_chunks_pass_through_with_every_thread_linked() {
    let s = setup(&[], true, false);
    let batch = sentry(&CHUNKS);
    let sent = batch.chunks.clone();
    assert_eq!(sent.len(), 2);
    s.pipeline.consume(Payload::Sentry(batch)).await.unwrap();
    let got = s.chunks.take().concat();
    assert_eq!(
        got.iter().map(|c| c.chunk.clone()).collect::<Vec<_>>(),
        sent,
        "chunks unchanged"
    );
    for c in &got {
        let mut threads: Vec<_> = c
            .chunk
            .profile
            .samples
            .iter()
            .map(|s| s.thread_id.clone())
            .collect();
        threads.sort();
        threads.dedup();
        let mut linked = c.linked_threads.clone();
        linked.sort();
        assert_eq!(linked, threads, "SDK threads are never grouped");
    }
}

#[tokio::test]
async fn sentry_to_otlp_translates_and_links_chunks() {
    let s = setup(&[], false, true);
    let (batch, want) = chunks_with_transactions();
    s.pipeline.consume(Payload::Sentry(batch)).await.unwrap();
    let reqs = s.otlp.take();
    assert_eq!(
        otlp_samples(&reqs),
        want,
        "every sample becomes an observation"
    );
    assert!(s.chunks.take().is_empty());
}

#[tokio::test]
async fn sentry_to_otlp_through_the_join_buffer() {
    let s = setup(&[], false, true);
    let pipeline = s.pipeline.with_join(Some(JoinConfig {
        window: Duration::ZERO,
        ..Default::default()
    }));
    assert!(pipeline.join_metrics().is_some());
    let (batch, want) = chunks_with_transactions();
    pipeline.consume(Payload::Sentry(batch)).await.unwrap();
    pipeline.flush_join().await;
    let reqs = s.otlp.take();
    assert_eq!(reqs.len(), 2, "one request per released chunk");
    assert_eq!(otlp_samples(&reqs), want);
}

#[tokio::test]
async fn v1_profiles_reach_both_kinds_of_exporter() {
    let s = setup(&[], true, true);
    let batch = sentry(&["sentry/python-v1/v1-0001.envelope"]);
    assert_eq!(batch.v1_profiles.len(), 1);
    let want = batch.v1_profiles[0].0.profile.samples.len() as u64;
    s.pipeline.consume(Payload::Sentry(batch)).await.unwrap();
    let chunks = s.chunks.take().concat();
    assert!(!chunks.is_empty(), "V1 → OTLP → chunks");
    assert_eq!(chunk_samples(&chunks), want);
    assert_eq!(otlp_samples(&s.otlp.take()), want);
}

#[tokio::test]
async fn a_full_exporter_refuses_before_the_body_is_read() {
    let s = setup(&[], true, true);
    assert!(s.pipeline.check_ready().is_ok());
    s.chunks.full.store(true, Ordering::Relaxed);
    assert!(matches!(
        s.pipeline.check_ready(),
        Err(ConsumeError::Full { .. })
    ));
}

#[tokio::test]
async fn a_refusing_exporter_refuses_the_request() {
    for (chunks, otlp) in [(true, false), (false, true)] {
        let s = setup(&[], chunks, otlp);
        s.chunks.refuse.store(true, Ordering::Relaxed);
        s.otlp.refuse.store(true, Ordering::Relaxed);
        let e = s.pipeline.consume(Payload::Otlp(ebpf())).await.unwrap_err();
        assert_eq!(
            e,
            ConsumeError::Full {
                retry_after: Duration::from_secs(3)
            },
            "chunks={chunks} otlp={otlp}"
        );
        let e = s
            .pipeline
            .consume(Payload::Sentry(sentry(&CHUNKS)))
            .await
            .unwrap_err();
        assert!(matches!(e, ConsumeError::Full { .. }), "{e:?}");
    }
}

#[tokio::test]
async fn sampling_drops_whole_sessions_and_counts_them() {
    let none = ProcessorSpec::Sampling(SamplingConfig {
        session_sample_rate: 0.0,
    });
    let all = ProcessorSpec::Sampling(SamplingConfig {
        session_sample_rate: 1.0,
    });
    let s = setup(&[&none], true, true);
    s.pipeline.consume(Payload::Otlp(ebpf())).await.unwrap();
    s.pipeline
        .consume(Payload::Sentry(sentry(&CHUNKS)))
        .await
        .unwrap();
    assert!(s.chunks.take().concat().is_empty());
    assert!(s.otlp.take().iter().all(|r| r.resource_profiles.is_empty()));
    assert!(s.counters.sampling_dropped_chunks.load(Ordering::Relaxed) > 2);
    assert!(s.counters.sampling_dropped_profiles.load(Ordering::Relaxed) > 0);

    let s = setup(&[&all], true, false);
    let data = ebpf();
    let want = profile_counts(&data.resource_profiles).samples;
    s.pipeline.consume(Payload::Otlp(data)).await.unwrap();
    assert_eq!(chunk_samples(&s.chunks.take().concat()), want);
    assert_eq!(
        s.counters.sampling_dropped_chunks.load(Ordering::Relaxed),
        0
    );
}

/// A traces request of `n` spans of one trace, from a resource with a service name.
fn traces(n: u8) -> profilink_proto::otlp::ExportTraceServiceRequest {
    use profilink_proto::otlp::{
        AnyValue, KeyValue, Resource, ResourceSpans, ScopeSpans, Span, any_value,
    };
    let spans = (1..=n)
        .map(|i| Span {
            trace_id: vec![7; 16],
            span_id: vec![i; 8],
            name: format!("span {i}"),
            start_time_unix_nano: 1_750_000_000_000_000_000,
            end_time_unix_nano: 1_750_000_001_000_000_000,
            ..Default::default()
        })
        .collect();
    profilink_proto::otlp::ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::StringValue("checkout".into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[tokio::test]
async fn traces_are_forwarded_or_stamped() {
    use profilink_processor::{LinkingConfig, TracesPipeline, span_threads};
    // Without profile_linking: forwarded unchanged.
    let (e, got) = recorder("traces");
    let p = TracesPipeline::new("traces", vec![e], None);
    let req = traces(3);
    p.consume(req.clone()).await.unwrap();
    assert_eq!(got.take(), vec![req.clone()]);

    // With profile_linking and no wait: stamped at once, every span given a profiler id.
    let cfg = LinkingConfig {
        wait: Duration::ZERO,
        ..Default::default()
    };
    let (e, got) = recorder("traces");
    let p = TracesPipeline::new("traces", vec![e], Some((cfg.clone(), span_threads(&cfg))));
    p.consume(req).await.unwrap();
    let out = got.take();
    assert_eq!(out.len(), 1);
    let spans = &out[0].resource_spans[0].scope_spans[0].spans;
    assert_eq!(spans.len(), 3);
    assert!(
        spans
            .iter()
            .all(|s| s.attributes.iter().any(|a| a.key == "sentry.profiler_id"))
    );
    assert_eq!(p.counters().spans.load(Ordering::Relaxed), 3);

    // A refusing exporter refuses the request.
    let (e, h) = recorder::<profilink_proto::otlp::ExportTraceServiceRequest>("traces");
    h.refuse.store(true, Ordering::Relaxed);
    let p = TracesPipeline::new("traces", vec![e], None);
    assert!(matches!(
        p.consume(traces(1)).await,
        Err(ConsumeError::Full { .. })
    ));
}
