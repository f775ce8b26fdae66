//! `/metrics` of the real binary after a known workload, under the Collector's own names:
//! OTLP profiles over gRPC and HTTP (one valid and one invalid request each) into one pipeline
//! with two Sentry exporters, one whose Sentry fails twice and then accepts, one whose Sentry
//! always fails so every chunk is given up after its retries. The Collector's counters must
//! hold exactly the workload's numbers: the receivers' profile samples are sample records
//! with their `sample_type` label (49 for the eBPF fixture, as a Collector counts it), next to
//! profilink's observations (189) under `profilink_receiver_*_samples_total`;
//! `otelcol_exporter_send_failed_*` once per sample given up (never once per attempt), and
//! the attempt-duration histograms one observation per attempt.

mod service_support;

use profilink::telemetry::metrics::{scrape, scrape_f64};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use prost::Message;
use service_support::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `req` with a dictionary error (a function naming a string that does not exist): the
/// receivers refuse the whole request.
fn invalid(req: &ExportProfilesServiceRequest) -> ExportProfilesServiceRequest {
    let mut req = req.clone();
    let d = req.dictionary.get_or_insert_with(Default::default);
    let mut f = d.function_table.last().cloned().unwrap_or_default();
    f.name_strindex = i32::MAX;
    d.function_table.push(f);
    req
}

/// Scrapes `/metrics` until `done` holds for the text (or `timeout` passes); the last text.
async fn scrape_until(url: &str, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let (status, text) = get_text(url).await;
        assert_eq!(status, 200);
        if done(&text) || start.elapsed() > timeout {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sample records (`Sample` messages) of `req` by `"<type>:<unit>"` of their profile's
/// `sample_type`, resolved here independently of the receivers.
fn records_by_type(req: &ExportProfilesServiceRequest) -> BTreeMap<String, u64> {
    let strings = &req.dictionary.as_ref().unwrap().string_table;
    let mut out = BTreeMap::new();
    for p in req
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
    {
        let t = p.sample_type.unwrap();
        let label = format!(
            "{}:{}",
            strings[t.type_strindex as usize], strings[t.unit_strindex as usize]
        );
        *out.entry(label).or_default() += p.samples.len() as u64;
    }
    out
}

fn get(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    scrape(text, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_metric_names_count_the_workload_exactly() {
    let flaky = SentryStandIn::start(None).await;
    let down = SentryStandIn::start(None).await;
    flaky.set_status(503);
    down.set_status(503);
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
    let exporter = |name: &str, dsn: &str, max_elapsed: &str| {
        format!(
            r#"
  sentry/{name}:
    dsn: "${{env:{dsn}}}"
    chunk_idle_timeout: 300ms
    sparse_threads: drop
    tick: 20ms
    retry_on_failure: {{ enabled: true, initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: {max_elapsed} }}
    sending_queue: {{ enabled: true, storage: ./data/{name}, max_size_mib: 64 }}"#
        )
    };
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
      http: {{ endpoint: "{http}" }}
exporters:{}{}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [sentry/flaky, sentry/down] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            exporter("flaky", "FLAKY_DSN", "60s"),
            exporter("down", "DOWN_DSN", "400ms"),
        ),
    );
    let (flaky_dsn, down_dsn) = (flaky.dsn(), down.dsn());
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[
            ("FLAKY_DSN", Some(&flaky_dsn)),
            ("DOWN_DSN", Some(&down_dsn)),
        ],
    );
    p.wait_port(&metrics, Duration::from_secs(10));
    p.wait_port(&grpc, Duration::from_secs(10));
    p.wait_port(&http, Duration::from_secs(10));

    // The workload: one valid and one invalid request on each transport.
    let req = otlp_fixture("ebpf-profile.pb");
    let over_http = tagged(&req, "over-http");
    let (_, samples) = otlp_counts(&req);
    let (_, http_samples) = otlp_counts(&over_http);
    let bad = invalid(&req);
    let (_, bad_samples) = otlp_counts(&bad);
    assert!(samples > 0 && bad_samples > 0);
    grpc_export(&grpc, req.clone()).await;
    let refused = grpc_client(&grpc).await.export(bad.clone()).await;
    assert_eq!(
        refused.expect_err("invalid request").code(),
        tonic::Code::InvalidArgument
    );
    let client = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        client
            .post(format!("http://{http}/v1development/profiles"))
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
    };
    assert_eq!(post(over_http.encode_to_vec()).await.unwrap().status(), 200);
    assert_eq!(post(bad.encode_to_vec()).await.unwrap().status(), 400);

    // The flaky Sentry fails two attempts, then accepts everything.
    let start = Instant::now();
    while flaky.requests() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no delivery attempt; stderr:\n{}",
            p.stderr()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flaky.set_status(200);

    // Settled: every sample the exporters accepted is delivered (flaky) or given up (down).
    let url = format!("http://{metrics}/metrics");
    let fl = [("exporter", "sentry/flaky")];
    let dn = [("exporter", "sentry/down")];
    let kept = |text: &str, e: &[(&str, &str)]| {
        scrape(text, "profilink_exporter_accepted_samples_total", e).unwrap_or(0)
            - scrape(text, "profilink_exporter_sparse_samples_dropped_total", e).unwrap_or(0)
    };
    let text = scrape_until(&url, Duration::from_secs(30), |t| {
        let accepted = samples + http_samples;
        scrape(t, "otelcol_exporter_sent_profile_samples_total", &fl) == Some(kept(t, &fl))
            && scrape(t, "otelcol_exporter_send_failed_profile_samples_total", &dn)
                == Some(kept(t, &dn))
            && scrape(t, "profilink_exporter_accepted_samples_total", &fl) == Some(accepted)
            && scrape(t, "profilink_exporter_accepted_samples_total", &dn) == Some(accepted)
    })
    .await;
    let (all, all_down) = (kept(&text, &fl), kept(&text, &dn));
    assert!(
        all > 0 && all_down > 0,
        "nothing kept after sparse threads:\n{text}"
    );

    // Receivers: exact sample records (by sample_type), observations and requests per
    // transport. The eBPF fixture: 49 Sample messages holding 189 timestamps.
    let records = records_by_type(&req);
    assert_eq!(records.values().sum::<u64>(), 49, "{records:?}");
    assert_eq!(samples, 189);
    assert_eq!(records_by_type(&over_http), records);
    assert_eq!(records_by_type(&bad), records);
    for (transport, ok, bad) in [
        ("grpc", samples, bad_samples),
        ("http", http_samples, bad_samples),
    ] {
        let l = [("receiver", "otlp"), ("transport", transport)];
        for (sample_type, n) in &records {
            let typed = [l[0], l[1], ("sample_type", sample_type.as_str())];
            let what = format!("{transport} {sample_type}");
            for (name, want) in [
                ("otelcol_receiver_accepted_profile_samples_total", *n),
                ("otelcol_receiver_refused_profile_samples_total", *n),
                ("otelcol_receiver_failed_profile_samples_total", 0),
            ] {
                assert_eq!(get(&text, name, &typed), want, "{name} {what}:\n{text}");
            }
        }
        // No other sample type: the per-listener sums are the labelled series.
        let all: u64 = records.values().sum();
        assert_eq!(
            get(&text, "otelcol_receiver_accepted_profile_samples_total", &l),
            all
        );
        assert_eq!(
            get(&text, "otelcol_receiver_refused_profile_samples_total", &l),
            all
        );
        // Observations stay under profilink's names.
        assert_eq!(
            get(&text, "profilink_receiver_accepted_samples_total", &l),
            ok,
            "{transport}"
        );
        assert_eq!(
            get(&text, "profilink_receiver_refused_samples_total", &l),
            bad,
            "{transport}"
        );
        assert_eq!(
            get(
                &text,
                "profilink_receiver_refusals_total",
                &[l[0], l[1], ("reason", "invalid")]
            ),
            1
        );
        for (outcome, n) in [("success", 1), ("refused", 1), ("failure", 0)] {
            let l = [
                ("receiver", "otlp"),
                ("transport", transport),
                ("outcome", outcome),
            ];
            assert_eq!(
                get(&text, "otelcol_receiver_requests_total", &l),
                n,
                "{l:?}"
            );
        }
    }

    // The flaky exporter delivered everything, failed attempts included: nothing given up.
    assert_eq!(all, flaky.sample_count() as u64);
    assert_eq!(
        get(&text, "otelcol_exporter_sent_profile_samples_total", &fl),
        all
    );
    assert_eq!(
        get(
            &text,
            "otelcol_exporter_send_failed_profile_samples_total",
            &fl
        ),
        0
    );
    let flaky_failed = get(&text, "profilink_exporter_failed_attempts_total", &fl);
    assert!(flaky_failed >= 2, "{text}");
    assert_eq!(
        get(&text, "profilink_exporter_send_failed_chunks_total", &fl),
        flaky_failed,
        "the deprecated name is the same counter"
    );

    // The down exporter gave every chunk up after several attempts each: send_failed counts
    // each sample once, however many attempts its chunk took.
    assert_eq!(
        get(&text, "otelcol_exporter_sent_profile_samples_total", &dn),
        0
    );
    assert_eq!(
        get(
            &text,
            "otelcol_exporter_send_failed_profile_samples_total",
            &dn
        ),
        all_down
    );
    let given_up = get(&text, "profilink_exporter_dropped_chunks_total", &dn);
    let down_failed = get(&text, "profilink_exporter_failed_attempts_total", &dn);
    assert!(given_up > 0);
    assert!(
        down_failed >= 2 * given_up,
        "{down_failed} attempts for {given_up} chunks"
    );
    assert_eq!(
        get(
            &text,
            "profilink_exporter_dropped_samples_total",
            &[("exporter", "sentry/down"), ("reason", "send_error")]
        ),
        all_down
    );
    for e in [fl, dn] {
        assert_eq!(
            get(
                &text,
                "otelcol_exporter_enqueue_failed_profile_samples_total",
                &e
            ),
            0
        );
        let q = [e[0], ("data_type", "profiles")];
        assert_eq!(get(&text, "otelcol_exporter_queue_capacity", &q), 64 << 20);
        assert!(scrape(&text, "otelcol_exporter_queue_size", &q).is_some());
    }

    // One duration observation per attempt: failures under error_type="send_error" (503).
    let hist = "otel_sdk_exporter_operation_duration_seconds";
    for (e, failed) in [(fl, flaky_failed), (dn, down_failed)] {
        let sent = get(&text, "profilink_exporter_sent_chunks_total", &e);
        let all_attempts = [e[0], ("data_type", "profiles")];
        let failures = [
            e[0],
            ("data_type", "profiles"),
            ("error_type", "send_error"),
        ];
        assert_eq!(
            get(&text, &format!("{hist}_count"), &all_attempts),
            sent + failed
        );
        assert_eq!(get(&text, &format!("{hist}_count"), &failures), failed);
        let inf = [e[0], ("data_type", "profiles"), ("le", "+Inf")];
        assert_eq!(get(&text, &format!("{hist}_bucket"), &inf), sent + failed);
        assert!(scrape_f64(&text, &format!("{hist}_sum"), &all_attempts).unwrap() > 0.0);
    }

    // The process, and the exposition itself (OpenMetrics, as the Collector answers Prometheus).
    assert!(scrape_f64(&text, "otelcol_process_uptime_total", &[]).unwrap() > 0.0);
    assert!(scrape_f64(&text, "otelcol_process_cpu_seconds_total", &[]).unwrap() > 0.0);
    assert!(get(&text, "otelcol_process_memory_rss", &[]) > 0);
    assert!(text.contains("# TYPE otelcol_receiver_accepted_profile_samples counter\n"));
    assert!(text.contains(&format!("# TYPE {hist} histogram\n")));
    assert!(text.ends_with("# EOF\n"), "{text}");
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
}
