//! Rendering a registry and scraping it back.

use super::*;
use profilink_consumer::telemetry::escape;
use profilink_exporter::ExporterMetrics;
use profilink_receiver::sample_records::SampleRecords;
use profilink_receiver::{RefusalReason, Stats};
use profilink_translator::{Malformed, TranslateError};
use std::sync::atomic::Ordering;

#[test]
fn renders_and_scrapes() {
    let stats = Arc::new(Stats::default());
    stats.otlp_grpc.accept(2, 189);
    let m = Arc::new(ExporterMetrics::default());
    ExporterMetrics::add(&m.sent_chunks, 3);
    for _ in 0..4 {
        m.add_closed(profilink_exporter::EmitReason::Memory);
    }
    m.add_closed(profilink_exporter::EmitReason::Late);
    m.add_dropped(profilink_exporter::DiscardReason::SendError, 1);
    let counters = Arc::new(ServiceCounters::default());
    counters.translation_error(&TranslateError::Invalid(Malformed::NoTimestamps {
        sample: 0,
    }));
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
        symbolizers: vec![(
            "profiles/x".into(),
            Arc::new(profilink_symbolizer::SymbolizerMetrics::default()),
        )],
        traces_exporters: vec![("sentry".into(), Arc::new(TracesMetrics::default()))],
        stamping: vec![("traces".into(), Arc::new(StampCounters::default()))],
        forwarders: Vec::new(),
        kafka_receivers: vec![("kafka".into(), {
            let k = Arc::new(profilink_kafka::KafkaReceiverMetrics::default());
            k.received("otlp_profiles", 3, 41, 100);
            profilink_kafka::KafkaReceiverMetrics::add(&k.rebalances, 2);
            k
        })],
    };
    r.traces_exporters[0]
        .1
        .sent_spans
        .fetch_add(5, Ordering::Relaxed);
    r.stamping[0].1.thread_ids.fetch_add(2, Ordering::Relaxed);
    r.joins[0].1.released_window.fetch_add(3, Ordering::Relaxed);
    r.symbolizers[0]
        .1
        .add_frames(profilink_symbolizer::Outcome::Timeout, 7);
    if let Some(st) = &r.store {
        st.dropped.fetch_add(4, Ordering::Relaxed);
    }
    let text = r.render();
    assert!(text.contains("profilink_store_chunks_total{outcome=\"dropped\"} 4\n"));
    assert_eq!(
        scrape(
            &text,
            "otelcol_kafka_receiver_messages_total",
            &[
                ("receiver", "kafka"),
                ("topic", "otlp_profiles"),
                ("partition", "3")
            ]
        ),
        Some(1)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_kafka_receiver_rebalances_total",
            &[("receiver", "kafka")]
        ),
        Some(2)
    );
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
    assert_eq!(
        scrape(
            &text,
            "profilink_symbolizer_frames_total",
            &[("pipeline", "profiles/x"), ("outcome", "timeout")]
        ),
        Some(7)
    );
    assert!(text.contains("# TYPE profilink_receiver_accepted_samples counter\n"));
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
            "profilink_exporter_chunks_cut_early_total",
            &[("exporter", "sentry"), ("reason", "memory")]
        ),
        Some(4)
    );
    assert_eq!(
        scrape(
            &text,
            "profilink_exporter_chunks_cut_early_total",
            &[("exporter", "sentry"), ("reason", "size")]
        ),
        Some(0)
    );
    for (reason, n) in [("memory", 4), ("late", 1), ("duration", 0)] {
        assert_eq!(
            scrape(
                &text,
                "profilink_exporter_chunks_closed_total",
                &[("exporter", "sentry"), ("reason", reason)]
            ),
            Some(n),
            "{reason}"
        );
    }
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

#[test]
fn serves_the_collector_names_from_the_same_counters() {
    let stats = Arc::new(Stats::default());
    // Observations (profilink's samples) and sample records (the Collector's) differ.
    stats.otlp_http.accept(1, 40);
    stats.otlp_http.refuse(1, 7);
    let mut accepted = SampleRecords::single("cpu:nanoseconds", 10);
    accepted.add("samples:count", 2);
    stats.otlp_http.accept_records(&accepted);
    stats
        .otlp_http
        .refuse_records(&SampleRecords::single("cpu:nanoseconds", 3));
    stats.otlp_http.request_accepted();
    stats
        .otlp_http
        .request_refused_for(RefusalReason::UnsupportedVersion);
    let m = Arc::new(ExporterMetrics::default());
    ExporterMetrics::add(&m.sent_samples, 30);
    ExporterMetrics::add(&m.send_failed_chunks, 5);
    ExporterMetrics::add(&m.refused_full_samples, 9);
    ExporterMetrics::add(&m.queue_capacity_bytes, 1024);
    m.add_dropped_samples(profilink_exporter::DiscardReason::SendError, 10);
    m.add_dropped_samples(profilink_exporter::DiscardReason::NetworkError, 2);
    m.add_dropped_samples(profilink_exporter::DiscardReason::QueueOverflow, 100);
    m.attempt_durations.record(
        profilink_exporter::AttemptOutcome::Success,
        std::time::Duration::from_millis(30),
    );
    m.attempt_durations.record(
        profilink_exporter::AttemptOutcome::NetworkError,
        std::time::Duration::from_secs(20),
    );
    let traces = Arc::new(TracesMetrics::default());
    traces.add_dropped(profilink_exporter::DiscardReason::SendError, 4);
    let r = Registry {
        receivers: vec![ReceiverEntry {
            id: "otlp".into(),
            transport: "http",
            stats,
        }],
        exporters: vec![ExporterEntry {
            id: "sentry/eu".into(),
            metrics: m,
        }],
        traces_exporters: vec![("sentry/eu".into(), traces)],
        stamping: vec![("traces".into(), Arc::new(StampCounters::default()))],
        ..Registry::default()
    };
    let text = r.render();
    let l = [("receiver", "otlp"), ("transport", "http")];
    let e = [("exporter", "sentry/eu")];
    let get = |name: &str, labels: &[(&str, &str)]| scrape(&text, name, labels);
    let typed = |t| [l[0], l[1], ("sample_type", t)];
    let cpu = typed("cpu:nanoseconds");
    let count = typed("samples:count");
    assert_eq!(
        get("otelcol_receiver_accepted_profile_samples_total", &cpu),
        Some(10)
    );
    assert_eq!(
        get("otelcol_receiver_accepted_profile_samples_total", &count),
        Some(2)
    );
    assert_eq!(
        get("otelcol_receiver_refused_profile_samples_total", &cpu),
        Some(3)
    );
    assert_eq!(
        get("otelcol_receiver_refused_profile_samples_total", &count),
        Some(0)
    );
    assert_eq!(
        get("otelcol_receiver_failed_profile_samples_total", &cpu),
        Some(0)
    );
    assert!(text.contains(
        "otelcol_receiver_accepted_profile_samples_total{receiver=\"otlp\",transport=\"http\",sample_type=\"cpu:nanoseconds\"} 10\n"
    ));
    assert_eq!(
        get("profilink_receiver_accepted_samples_total", &l),
        Some(40)
    );
    assert_eq!(get("profilink_receiver_refused_samples_total", &l), Some(7));
    assert_eq!(
        get(
            "profilink_receiver_refusals_total",
            &[l[0], l[1], ("reason", "unsupported_version")]
        ),
        Some(1)
    );
    assert_eq!(
        get("profilink_receiver_refused_requests_total", &l),
        Some(1)
    );
    assert_eq!(get("otelcol_receiver_accepted_spans_total", &l), Some(0));
    let outcome = |o| [l[0], l[1], ("outcome", o)];
    assert_eq!(
        get("otelcol_receiver_requests_total", &outcome("success")),
        Some(1)
    );
    assert_eq!(
        get("otelcol_receiver_requests_total", &outcome("refused")),
        Some(1)
    );
    assert_eq!(
        get("otelcol_exporter_sent_profile_samples_total", &e),
        Some(30)
    );
    // Given up after sending failed; the queue overflow never failed a send.
    assert_eq!(
        get("otelcol_exporter_send_failed_profile_samples_total", &e),
        Some(12)
    );
    assert_eq!(
        get("otelcol_exporter_enqueue_failed_profile_samples_total", &e),
        Some(9)
    );
    assert_eq!(get("otelcol_exporter_send_failed_spans_total", &e), Some(4));
    assert_eq!(get("profilink_exporter_failed_attempts_total", &e), Some(5));
    assert_eq!(
        get("profilink_exporter_send_failed_chunks_total", &e),
        Some(5)
    );
    let q = [e[0], ("data_type", "profiles")];
    assert_eq!(get("otelcol_exporter_queue_capacity", &q), Some(1024));
    assert_eq!(get("otelcol_exporter_queue_size", &q), Some(0));
    // The traces instance has no byte bound here: no queue gauges for it.
    assert_eq!(
        get(
            "otelcol_exporter_queue_capacity",
            &[e[0], ("data_type", "traces")]
        ),
        None
    );
    let h = "otel_sdk_exporter_operation_duration_seconds";
    assert_eq!(get(&format!("{h}_count"), &q), Some(2));
    let net = [
        e[0],
        ("data_type", "profiles"),
        ("error_type", "network_error"),
    ];
    assert_eq!(get(&format!("{h}_count"), &net), Some(1));
    assert_eq!(
        get(
            &format!("{h}_bucket"),
            &[net[0], net[1], net[2], ("le", "10.0")]
        ),
        Some(0)
    );
    assert_eq!(
        get(
            &format!("{h}_bucket"),
            &[net[0], net[1], net[2], ("le", "+Inf")]
        ),
        Some(1)
    );
    assert_eq!(
        get(&format!("{h}_bucket"), &[q[0], q[1], ("le", "0.05")]),
        Some(1)
    );
    assert!((scrape_f64(&text, &format!("{h}_sum"), &q).unwrap() - 20.03).abs() < 1e-6);
    // No failures of a kind: no series for it.
    assert!(!text.contains("error_type=\"rate_limited\""));
    assert!(scrape_f64(&text, "otelcol_process_uptime_total", &[]).is_some());
    assert!(text.contains("# TYPE otelcol_exporter_sent_profile_samples counter\n"));
    assert!(text.contains(&format!("# TYPE {h} histogram\n# UNIT {h} seconds\n")));
    assert!(text.ends_with("# EOF\n"));
    // Every family once.
    let types: Vec<&str> = text.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    let unique: std::collections::BTreeSet<&str> = types.iter().copied().collect();
    assert_eq!(types.len(), unique.len());
}

#[test]
fn sample_types_are_escaped_and_bounded() {
    let stats = Arc::new(Stats::default());
    stats
        .sentry_http
        .accept_records(&SampleRecords::single("a\"b:c\\d", 1));
    for i in 0..=profilink_receiver::sample_records::MAX_SAMPLE_TYPES {
        stats
            .sentry_http
            .refuse_records(&SampleRecords::single(&format!("t{i}:count"), 1));
    }
    let r = Registry {
        receivers: vec![ReceiverEntry {
            id: "sentry".into(),
            transport: "http",
            stats,
        }],
        ..Registry::default()
    };
    let text = r.render();
    assert!(
        text.contains("sample_type=\"a\\\"b:c\\\\d\"} 1\n"),
        "{text}"
    );
    let overflow = [("receiver", "sentry"), ("otel_metric_overflow", "true")];
    assert_eq!(
        scrape(
            &text,
            "otelcol_receiver_refused_profile_samples_total",
            &overflow
        ),
        Some(2)
    );
}
