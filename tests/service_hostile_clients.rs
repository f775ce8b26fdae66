//! Hostile and careless clients against the real binary (issue 28): requests that ask for far
//! more than they carry, implausible claims that used to freeze a counter, and requests whose
//! clients give up while they are being processed.
//!
//! Each test runs `profilink` with an OTLP receiver (gRPC and HTTP) and a `file` exporter with
//! a durable queue, and reads `/metrics` and the process's peak resident memory (`VmHWM`).

mod service_support;

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, Profile, ResourceProfiles, ScopeProfiles,
    any_value,
};
use prost::Message;
use service_support::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// The tests of this file load the machine (large requests, thousands of sockets): one at a
/// time, so each one's time bounds hold on a busy 2-core machine.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A running binary with its addresses.
struct Service {
    process: Profilink,
    grpc: String,
    http: String,
    metrics: String,
    dir: tempfile::TempDir,
}

impl Service {
    fn start() -> Service {
        let dir = tempfile::tempdir().unwrap();
        let (grpc, http, metrics) = (free_addr(), free_addr(), free_addr());
        let process = start_with_config(
            dir.path(),
            &format!(
                r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
      http: {{ endpoint: "{http}" }}
exporters:
  file:
    path: ./out
    chunk_idle_timeout: 200ms
    sending_queue: {{ storage: ./data/queue }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], exporters: [file] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
            ),
            &[&grpc, &http, &metrics],
        );
        Service {
            process,
            grpc,
            http,
            metrics,
            dir,
        }
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        metric(&self.metrics, name, labels).await
    }

    /// Peak resident memory of the process so far, in bytes.
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.pid()))
            .expect("/proc/<pid>/status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM");
        kib * 1024
    }

    fn out(&self) -> &Path {
        self.dir.path()
    }
}

/// The real sentry-python profile of the OTLP fixture, `copies` times in one request (its
/// dictionary once), every sample turned into an aggregated one (values only) worth `value`.
fn aggregated(copies: usize, value: i64) -> ExportProfilesServiceRequest {
    let fixture = otlp_fixture("python-sdk-trace-chunk-00.pb");
    let mut profile: Profile = fixture.resource_profiles[0].scope_profiles[0].profiles[0].clone();
    for s in &mut profile.samples {
        s.timestamps_unix_nano.clear();
        s.values = vec![value];
    }
    with_profile_copies(fixture, profile, copies)
}

/// `fixture`'s first resource and dictionary holding `copies` of `profile`, each copy in a
/// resource of its own process (`service.instance.id`), so every copy is a session.
fn with_profile_copies(
    fixture: ExportProfilesServiceRequest,
    profile: Profile,
    copies: usize,
) -> ExportProfilesServiceRequest {
    let template = &fixture.resource_profiles[0];
    let resource_profiles = (0..copies)
        .map(|i| {
            let mut resource = template.resource.clone().unwrap_or_default();
            resource.attributes.push(KeyValue {
                key: "service.instance.id".into(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(format!("copy-{i}"))),
                }),
                ..Default::default()
            });
            ResourceProfiles {
                resource: Some(resource),
                scope_profiles: vec![ScopeProfiles {
                    scope: template.scope_profiles[0].scope.clone(),
                    profiles: vec![profile.clone()],
                    ..Default::default()
                }],
                ..Default::default()
            }
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: fixture.dictionary,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_request_claiming_billions_of_observations_is_refused_for_good_in_bounded_memory() {
    let _one = ONE_AT_A_TIME.lock().await;
    let svc = Service::start();
    // Issue 28: 0.8 MB drove the process past 4 GiB in 10 s, 7.8 MB to 23 GiB without an answer.
    let small = aggregated(100, 1_000_000_000_000);
    let big = aggregated(1000, 1_000_000_000_000);
    let (small_len, big_len) = (small.encoded_len(), big.encoded_len());
    assert!(small_len < 1 << 20, "{small_len} bytes");
    let (_, small_obs) = otlp_counts(&small);

    let start = Instant::now();
    let mut client = grpc_client(&svc.grpc).await;
    let status = client.export(small).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("aggregated sample values"),
        "the message says why: {}",
        status.message()
    );
    let answer = reqwest::Client::new()
        .post(format!("http://{}/v1development/profiles", svc.http))
        .header("content-type", "application/x-protobuf")
        .body(big.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        400,
        "{big_len} bytes over HTTP: a permanent refusal"
    );
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(10), "answered in {elapsed:?}");
    let peak = svc.peak_rss();
    eprintln!("answered in {elapsed:?}, peak RSS {} MiB", peak >> 20);
    assert!(peak < 512 << 20, "peak RSS {} MiB", peak >> 20);

    // Both refusals are visible: the refused observations and the reason.
    assert_eq!(
        svc.metric(
            "profilink_receiver_refused_samples_total",
            &[("receiver", "otlp"), ("transport", "grpc")]
        )
        .await,
        small_obs
    );
    assert_eq!(
        svc.metric(
            "profilink_translation_refused_requests_total",
            &[("reason", "amplification")]
        )
        .await,
        2
    );
    assert_eq!(
        svc.metric(
            "profilink_translation_dropped_samples_total",
            &[("reason", "expansion")]
        )
        .await,
        0,
        "nothing was translated, so nothing was dropped in translation"
    );
    // The service is still there for everyone else.
    grpc_export(&svc.grpc, otlp_fixture("ebpf-profile.pb")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implausible_claims_move_the_counters_by_real_amounts() {
    let _one = ONE_AT_A_TIME.lock().await;
    let svc = Service::start();
    // Issue 28: one request of 2^63-1 values saturated the expansion drop counter at 2^64-1.
    let implausible = aggregated(1, i64::MAX);
    let (_, obs) = otlp_counts(&implausible);
    let mut client = grpc_client(&svc.grpc).await;
    for round in 1..=2u64 {
        let status = client
            .export(implausible.clone())
            .await
            .expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert_eq!(
            svc.metric(
                "profilink_receiver_refused_samples_total",
                &[("receiver", "otlp"), ("transport", "grpc")]
            )
            .await,
            round * obs
        );
        assert_eq!(
            svc.metric(
                "profilink_translation_refused_requests_total",
                &[("reason", "amplification")]
            )
            .await,
            round
        );
    }

    // A plausible claim over the per-profile cap is scaled; the drop is what was claimed less
    // what was kept, the same amount for each of two identical requests.
    let samples = implausible.resource_profiles[0].scope_profiles[0].profiles[0]
        .samples
        .len() as u64;
    let per_sample = 3_000_000_000 / samples;
    let claim = per_sample * samples;
    let plausible = aggregated(1, per_sample as i64);
    let drop_counter = || {
        svc.metric(
            "profilink_translation_dropped_samples_total",
            &[("reason", "expansion")],
        )
    };
    client.export(plausible.clone()).await.expect("accepted");
    let first = drop_counter().await;
    assert!(
        (claim - 1_000_000..claim).contains(&first),
        "dropped {first} of a claim of {claim} with a cap of 1,000,000"
    );
    client.export(plausible).await.expect("accepted");
    assert_eq!(drop_counter().await, 2 * first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_gave_up_is_delivered_in_the_same_run() {
    let _one = ONE_AT_A_TIME.lock().await;
    let svc = Service::start();
    // Issue 28: a request abandoned after 0.3 s stayed in the queue, undelivered and
    // uncounted, until a restart sent it.
    let fixture = otlp_fixture("python-sdk-trace-chunk-00.pb");
    let profile = fixture.resource_profiles[0].scope_profiles[0].profiles[0].clone();
    let req = with_profile_copies(fixture, profile, 100);
    let (_, obs) = otlp_counts(&req);
    eprintln!(
        "abandoned request: {} bytes, {obs} observations",
        req.encoded_len()
    );
    let mut client = grpc_client(&svc.grpc).await;
    let mut call = tonic::Request::new(req);
    call.set_timeout(Duration::from_millis(300));
    let gave_up = client.export(call).await.expect_err("the client gives up");
    assert!(
        matches!(
            gave_up.code(),
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        "{gave_up:?}"
    );

    // Within a minute the request is accepted, counted and written, and the queue is empty.
    let since = Instant::now();
    let deadline = since + Duration::from_secs(60);
    let labels = [("receiver", "otlp"), ("transport", "grpc")];
    loop {
        let accepted = svc
            .metric("profilink_receiver_accepted_samples_total", &labels)
            .await;
        let delivered = svc
            .metric(
                "profilink_exporter_sent_samples_total",
                &[("exporter", "file")],
            )
            .await;
        let sparse = svc
            .metric(
                "profilink_exporter_sparse_samples_dropped_total",
                &[("exporter", "file")],
            )
            .await;
        let queued = svc
            .metric("profilink_queue_size_bytes", &[("exporter", "file")])
            .await;
        if accepted == obs && delivered + sparse == obs && queued == 0 {
            eprintln!(
                "delivered {delivered} (+{sparse} sparse) {:?} after the client gave up",
                since.elapsed()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 60 s: accepted {accepted}, delivered {delivered} (+{sparse} sparse) of {obs}, {queued} bytes queued; stderr:\n{}",
            svc.process.stderr()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let written = std::fs::read_dir(svc.out().join("out")).unwrap().count();
    assert!(written > 0, "envelopes written");
    // And the next request is accepted.
    grpc_export(&svc.grpc, otlp_fixture("ebpf-profile.pb")).await;
}

/// A dictionary with one stack of 1,000 frames (long names), and `sessions` processes that
/// each sampled it twice: a few hundred bytes per process on the wire, 1,000 frames in every
/// process's chunk (the fuzz case of issue 28: 409 KB that peaked at 1.07 GB).
fn shared_dictionary(sessions: i64) -> ExportProfilesServiceRequest {
    use profilink_proto::otlp::{
        Function, Line, Location, ProfilesDictionary, Sample, Stack, ValueType,
    };
    let mut d = ProfilesDictionary {
        string_table: vec![
            String::new(),
            "samples".into(),
            "count".into(),
            "/src/deep.rs".into(),
        ],
        function_table: vec![Function::default()],
        location_table: vec![Location::default()],
        stack_table: vec![Stack::default()],
        ..Default::default()
    };
    for i in 0..1000 {
        d.string_table.push(format!(
            "deep::module::path::function_{i:04}_{}",
            "x".repeat(150)
        ));
        d.function_table.push(Function {
            name_strindex: d.string_table.len() as i32 - 1,
            filename_strindex: 3,
            ..Default::default()
        });
        d.location_table.push(Location {
            lines: vec![Line {
                function_index: i + 1,
                line: 1,
                column: 0,
            }],
            ..Default::default()
        });
    }
    d.stack_table.push(Stack {
        location_indices: (1..=1000).collect(),
    });
    let t0 = 1_700_000_000_000_000_000u64;
    let resource_profiles = (0..sessions)
        .map(|pid| ResourceProfiles {
            resource: Some(profilink_proto::otlp::Resource {
                attributes: vec![KeyValue {
                    key: "process.pid".into(),
                    value: Some(AnyValue {
                        value: Some(any_value::Value::IntValue(pid + 1)),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    sample_type: Some(ValueType {
                        type_strindex: 1,
                        unit_strindex: 2,
                    }),
                    time_unix_nano: t0,
                    duration_nano: 1_000_000_000,
                    samples: vec![Sample {
                        stack_index: 1,
                        timestamps_unix_nano: vec![t0, t0 + 50_000_000],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(d),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dictionary_copied_into_thousands_of_sessions_is_refused_for_good_in_bounded_memory() {
    let _one = ONE_AT_A_TIME.lock().await;
    let svc = Service::start();
    let req = shared_dictionary(2500);
    let len = req.encoded_len();
    assert!(len < 1 << 20, "{len} bytes");
    let start = Instant::now();
    let answer = reqwest::Client::new()
        .post(format!("http://{}/v1development/profiles", svc.http))
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let body = answer.bytes().await.unwrap();
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(
        String::from_utf8_lossy(&body).contains("per-request bound"),
        "the message says why"
    );
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(30), "answered in {elapsed:?}");
    let peak = svc.peak_rss();
    eprintln!("answered in {elapsed:?}, peak RSS {} MiB", peak >> 20);
    assert!(peak < 512 << 20, "peak RSS {} MiB", peak >> 20);
    // A smaller request of the same shape fits and is delivered.
    grpc_export(&svc.grpc, shared_dictionary(20)).await;
}

/// Raises this process's soft `RLIMIT_NOFILE` to `needed` when the hard limit allows.
fn raise_fd_limit(needed: u64) -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < needed && lim.rlim_max >= needed {
            lim.rlim_cur = needed;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    lim.rlim_cur
}

/// `n` TCP connections to `addr` that never send a byte.
async fn silent_connections(addr: &str, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(
            tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects"),
        );
    }
    conns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_at_the_bound_do_not_lock_new_clients_out() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Issue 28: 1,100 sockets that never send a byte filled the 1,024-connection bound; a new
    // gRPC client got DEADLINE_EXCEEDED (slots held 300 s) and a new Sentry client timed out.
    let have = raise_fd_limit(8192);
    assert!(have >= 4096, "needs RLIMIT_NOFILE >= 4096, have {have}");
    let dir = tempfile::tempdir().unwrap();
    let (grpc, sentry, metrics) = (free_addr(), free_addr(), free_addr());
    let _process = start_with_config(
        dir.path(),
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
  sentry:
    endpoint: "{sentry}"
exporters:
  file:
    path: ./out
    sending_queue: {{ storage: ./data/queue }}
service:
  pipelines:
    profiles: {{ receivers: [otlp, sentry], exporters: [file] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#
        ),
        // The binary inherits this process's raised descriptor limit, which fits both bounds.
        &[&grpc, &sentry],
    );

    let silent_grpc = silent_connections(&grpc, 1100).await;
    let silent_sentry = silent_connections(&sentry, 1100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let start = Instant::now();
    let mut client = tokio::time::timeout(Duration::from_secs(5), grpc_client(&grpc))
        .await
        .expect("a new gRPC client connects within 5 s");
    let mut call = tonic::Request::new(otlp_fixture("ebpf-profile.pb"));
    call.set_timeout(Duration::from_secs(5));
    client.export(call).await.expect("answered within 5 s");
    let grpc_took = start.elapsed();

    let envelope = std::fs::read(fixtures().join("sentry/python/trace-chunk-00.envelope")).unwrap();
    let start = Instant::now();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let status = post_envelope(&http, &sentry, envelope).await;
    let sentry_took = start.elapsed();
    assert_eq!(status, 200);
    assert!(
        grpc_took < Duration::from_secs(5),
        "gRPC answered in {grpc_took:?}"
    );
    assert!(
        sentry_took < Duration::from_secs(5),
        "Sentry answered in {sentry_took:?}"
    );
    drop((silent_grpc, silent_sentry));
}
