//! Rendering a registry and scraping it back.

use super::*;
use profilink_exporter::ExporterMetrics;
use profilink_receiver::Stats;
use profilink_translator::TranslateError;
use std::sync::atomic::Ordering;

#[test]
fn renders_and_scrapes() {
    let stats = Arc::new(Stats::default());
    stats.otlp_grpc.accept(2, 189);
    let m = Arc::new(ExporterMetrics::default());
    ExporterMetrics::add(&m.sent_chunks, 3);
    m.add_dropped(profilink_exporter::DiscardReason::SendError, 1);
    let counters = Arc::new(ServiceCounters::default());
    counters.translation_error(&TranslateError::Invalid("x".into()));
    counters.invalid_chunks(2);
    let r = Registry {
        receivers: vec![ReceiverEntry {
            id: "otlp".into(),
            transport: "grpc",
            stats,
        }],
        exporters: vec![ExporterEntry {
            id: "sentry".into(),
            metrics: m,
        }],
        counters,
        store: Some(Arc::new(StoreCounters::default())),
        joins: vec![("profiles/x".into(), Arc::new(JoinMetrics::default()))],
        traces_exporters: vec![("sentry".into(), Arc::new(TracesMetrics::default()))],
        stamping: vec![("traces".into(), Arc::new(StampCounters::default()))],
        forwarders: Vec::new(),
    };
    r.traces_exporters[0]
        .1
        .sent_spans
        .fetch_add(5, Ordering::Relaxed);
    r.stamping[0].1.thread_ids.fetch_add(2, Ordering::Relaxed);
    r.joins[0].1.released_window.fetch_add(3, Ordering::Relaxed);
    if let Some(st) = &r.store {
        st.dropped.fetch_add(4, Ordering::Relaxed);
    }
    let text = r.render();
    assert!(text.contains("profilink_store_chunks_total{outcome=\"dropped\"} 4\n"));
    assert_eq!(
        scrape(
            &text,
            "profilink_traces_exporter_sent_spans_total",
            &[("exporter", "sentry")]
        ),
        Some(5)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_linking_thread_ids_total",
            &[("pipeline", "traces")]
        ),
        Some(2)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_join_released_chunks_total",
            &[("pipeline", "profiles/x"), ("reason", "window")]
        ),
        Some(3)
    );
    assert!(text.contains("# TYPE profilink_receiver_accepted_samples_total counter\n"));
    assert!(
        text.contains(
            "profilink_receiver_accepted_samples_total{receiver=\"otlp\",transport=\"grpc\"} 189\n"
        ),
        "{text}"
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_exporter_sent_chunks_total",
            &[("exporter", "sentry")]
        ),
        Some(3)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_exporter_dropped_chunks_total",
            &[("reason", "send_error")]
        ),
        Some(1)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_translation_errors_total",
            &[("reason", "invalid")]
        ),
        Some(1)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_translation_errors_total",
            &[("reason", "invalid_chunk")]
        ),
        Some(2)
    );
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}
