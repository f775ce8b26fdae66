//! What the OTLP profiles exporter counts for the Collector's names: samples delivered,
//! samples given up (once, however many attempts), and one duration observation per attempt
//! under its outcome. Against the HTTP stand-in on 127.0.0.1.

mod common;

use common::*;
use profilink_exporter::{
    AttemptOutcome, DiscardReason, OtlpExporter, OtlpExporterConfig, OtlpProtocol, RetryConfig,
};
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, Profile, ResourceProfiles, Sample, ScopeProfiles,
};
use std::time::Duration;

/// One profile whose samples hold `timestamps` observations in all.
fn request(timestamps: &[u64]) -> ExportProfilesServiceRequest {
    let samples = timestamps
        .iter()
        .map(|n| Sample {
            timestamps_unix_nano: (0..*n).collect(),
            ..Default::default()
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    samples,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_are_given_up_once_and_every_attempt_is_timed() {
    let server = StandIn::start().await;
    server.script(vec![
        // The first request: a 503, no answer, then accepted (three attempts).
        Behaviour::with_header(503, "Retry-After", "0"),
        Behaviour::Drop,
        Behaviour::ok(),
        // The second: refused for good (one attempt).
        Behaviour::status(400),
    ]);
    let cfg = OtlpExporterConfig {
        endpoint: format!("http://{}", server.addr),
        protocol: OtlpProtocol::Http,
        retry_on_failure: RetryConfig {
            initial_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(50),
            max_elapsed_time: Duration::from_secs(5),
            ..Default::default()
        },
        num_consumers: 1,
        ..Default::default()
    };
    let exp = OtlpExporter::start(cfg).await.unwrap();
    let metrics = exp.metrics();
    exp.export(request(&[2, 3])).await.unwrap();
    exp.export(request(&[1, 1, 4])).await.unwrap();
    exp.shutdown(Duration::from_secs(10)).await;
    assert_eq!(server.requests().len(), 4);

    let m = metrics.snapshot();
    assert_eq!(m.accepted_samples, 11);
    assert_eq!(m.sent_samples, 5);
    assert_eq!(m.dropped_samples, {
        let mut d: Vec<_> = DiscardReason::ALL.iter().map(|r| (*r, 0)).collect();
        d[3].1 = 6;
        d
    });
    assert_eq!(
        m.send_failed_samples(),
        6,
        "once per sample, not per attempt"
    );
    assert_eq!(m.send_failed_chunks, 3, "failed attempts");
    assert_eq!(m.refused_full_samples, 0);
    let counts: Vec<(AttemptOutcome, u64)> = metrics
        .attempt_durations
        .snapshot()
        .into_iter()
        .map(|(o, h)| (o, h.count))
        .collect();
    assert_eq!(
        counts,
        vec![
            (AttemptOutcome::Success, 1),
            (AttemptOutcome::RateLimited, 0),
            (AttemptOutcome::NetworkError, 1),
            (AttemptOutcome::SendError, 2),
        ]
    );
}
