//! Refused samples are counted (issue 28, item 6), with the real binary: an `otlp` exporter
//! with a tiny in-memory queue (2 requests, 1 sender) in front of an OTLP backend that never
//! answers. The first requests fill the queue; the next ones pass the door (the pipeline is
//! ready), are decoded, and are refused by the full queue with `UNAVAILABLE` / 503. Their
//! samples must appear as refused: sample records under `otelcol_receiver_refused_profile_samples`
//! (with `sample_type`), observations under `profilink_receiver_refused_samples_total` and in
//! the run summary, the requests under `reason="full"`, and the exporter's
//! `otelcol_exporter_enqueue_failed_profile_samples` agreeing with the receivers.

mod service_support;

use profilink::telemetry::metrics::scrape;
use profilink_proto::otlp::profiles_service_server::{ProfilesService, ProfilesServiceServer};
use profilink_proto::otlp::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};
use prost::Message;
use service_support::*;
use std::time::Duration;
use tonic::{Code, Status};

/// An OTLP/gRPC backend that takes requests and never answers.
struct Stalled;

#[tonic::async_trait]
impl ProfilesService for Stalled {
    async fn export(
        &self,
        _request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, Status> {
        std::future::pending().await
    }
}

async fn stalled_backend() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = ProfilesServiceServer::new(Stalled)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap()
    });
    format!("http://{addr}")
}

/// The field `key=<n>` of the first log line containing `line`.
fn logged(stderr: &str, line: &str, key: &str) -> Option<u64> {
    let l = stderr.lines().find(|l| l.contains(line))?;
    let start = l.find(&format!(" {key}="))? + key.len() + 2;
    l[start..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_refused_by_a_full_queue_after_decoding_are_counted() {
    let backend = stalled_backend().await;
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
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
exporters:
  otlp:
    endpoint: "{backend}"
    tls: {{ insecure: true }}
    timeout: 60s
    retry_on_failure: {{ enabled: true, max_elapsed_time: 0s }}
    sending_queue: {{ queue_size: 2, num_consumers: 1 }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [otlp] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
    );
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[],
    );
    p.wait_port(&grpc, Duration::from_secs(10));
    p.wait_port(&http, Duration::from_secs(10));
    p.wait_port(&metrics, Duration::from_secs(10));

    let req = otlp_fixture("ebpf-profile.pb");
    let (_, observations) = otlp_counts(&req);
    let records: u64 = req
        .resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles)
        .map(|p| p.samples.len() as u64)
        .sum();
    assert!(records > 0 && observations > records);
    let body = req.encode_to_vec();
    let client = reqwest::Client::new();

    // One request at a time, alternating transports: (accepted, refused) per transport.
    let mut grpc_outcome = (0u64, 0u64);
    let mut http_outcome = (0u64, 0u64);
    for i in 0..10 {
        if i % 2 == 0 {
            let answer = grpc_client(&grpc).await.export(req.clone()).await;
            match answer {
                Ok(_) => grpc_outcome.0 += 1,
                Err(status) => {
                    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                    grpc_outcome.1 += 1;
                }
            }
        } else {
            let r = client
                .post(format!("http://{http}/v1development/profiles"))
                .header("content-type", "application/x-protobuf")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            match r.status().as_u16() {
                200 => http_outcome.0 += 1,
                503 => {
                    assert!(r.headers().contains_key("retry-after"));
                    http_outcome.1 += 1;
                }
                other => panic!("unexpected {other}: {}", r.text().await.unwrap()),
            }
        }
    }
    let accepted = grpc_outcome.0 + http_outcome.0;
    let refused = grpc_outcome.1 + http_outcome.1;
    assert!(
        (2..=3).contains(&accepted) && grpc_outcome.1 > 0 && http_outcome.1 > 0,
        "grpc {grpc_outcome:?}, http {http_outcome:?}; stderr:\n{}",
        p.stderr()
    );

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let label = {
        let d = req.dictionary.as_ref().unwrap();
        let t = req.resource_profiles[0].scope_profiles[0].profiles[0]
            .sample_type
            .unwrap();
        format!(
            "{}:{}",
            d.string_table[t.type_strindex as usize], d.string_table[t.unit_strindex as usize]
        )
    };
    for (transport, (ok, no)) in [("grpc", grpc_outcome), ("http", http_outcome)] {
        let l = [("receiver", "otlp"), ("transport", transport)];
        let typed = [l[0], l[1], ("sample_type", label.as_str())];
        let get = |name: &str, labels: &[(&str, &str)]| {
            scrape(&text, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?}:\n{text}"))
        };
        assert_eq!(
            get("otelcol_receiver_refused_profile_samples_total", &typed),
            no * records,
            "{transport}"
        );
        assert_eq!(
            get("otelcol_receiver_accepted_profile_samples_total", &typed),
            ok * records,
            "{transport}"
        );
        assert_eq!(
            get("profilink_receiver_refused_samples_total", &l),
            no * observations
        );
        assert_eq!(
            get("profilink_receiver_accepted_samples_total", &l),
            ok * observations
        );
        assert_eq!(
            get(
                "profilink_receiver_refusals_total",
                &[l[0], l[1], ("reason", "full")]
            ),
            no
        );
        assert_eq!(
            get(
                "otelcol_receiver_requests_total",
                &[l[0], l[1], ("outcome", "refused")]
            ),
            no
        );
    }
    // The exporter refused the same samples (it counts observations).
    assert_eq!(
        scrape(
            &text,
            "otelcol_exporter_enqueue_failed_profile_samples_total",
            &[("exporter", "otlp")]
        ),
        Some(refused * observations)
    );

    // The run summary says the same.
    p.signal("TERM");
    p.wait_exit(Duration::from_secs(30));
    let stderr = p.stderr();
    let summary = "run summary: receivers";
    assert_eq!(
        logged(&stderr, summary, "refused_samples"),
        Some(refused * observations),
        "{stderr}"
    );
    assert_eq!(
        logged(&stderr, summary, "refused_sample_records"),
        Some(refused * records)
    );
    assert_eq!(logged(&stderr, summary, "refused_requests"), Some(refused));
    assert_eq!(
        logged(&stderr, summary, "received_samples"),
        Some(accepted * observations)
    );
}
