//! `tls` and `auth` of the kafka receiver and exporter against a real broker (Tansu).
//!
//! Tansu 0.6.0 does not serve TLS itself (its `--cert` and `--key` flags refuse each other), so
//! the TLS tests put a TLS-terminating front (tokio-rustls on loopback, forwarding bytes) before
//! it and start it advertising the front's address: every connection of a client, bootstrap and
//! partition leaders alike, goes through TLS. They show that the receiver consumes and the
//! exporter produces through it with `tls.ca_file`, with a client certificate when the front
//! requires one, and that a wrong CA or a missing client certificate is refused visibly (a log
//! line, the receiver's `client_errors`, the exporter's failed sends) with nothing consumed or
//! committed.

use profilink_kafka::testing::{Broker, BrokerOptions, free_loopback_port};
use profilink_kafka::{
    KafkaExporter, KafkaExporterConfig, KafkaReceiver, KafkaReceiverConfig, KafkaReceiverMetrics,
};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_receiver::{Batch, ConsumeError, Consumer, Stats};
use profilink_tls::ServerTlsConfig;
use profilink_tls::test_pki::TestCa;
use prost::Message;
use serde_json::{Value, json};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio_rustls::TlsAcceptor;

// ---------------------------------------------------------------------------------------------
// Support: captured log lines, a TLS front, a recording pipeline.

/// Every log line of this test binary (the clients log from librdkafka's threads, so a
/// per-test subscriber would miss them).
fn logs() -> &'static Mutex<Vec<u8>> {
    static LOGS: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    let captured = LOGS.get_or_init(|| Mutex::new(Vec::new()));
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        struct Sink;
        impl Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                logs().lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        tracing_subscriber::fmt()
            .with_env_filter("info,profilink_kafka=debug")
            .with_ansi(false)
            .with_writer(|| Sink)
            .init();
    });
    captured
}

/// The log lines so far that contain `needle`.
fn log_lines_with(needle: &str) -> Vec<String> {
    String::from_utf8_lossy(&logs().lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// A TLS-terminating front on a free loopback port forwarding each connection's bytes to
/// `target`, on its own thread; stopped on drop.
struct TlsFront {
    address: String,
    /// Handshakes completed.
    handshakes: Arc<AtomicU64>,
    /// Handshakes that failed (the client refused the certificate, or sent none when one is
    /// required).
    refused: Arc<AtomicU64>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TlsFront {
    fn start(tls: &ServerTlsConfig, target: String) -> TlsFront {
        let config = tls.rustls_config(&[]).expect("front TLS config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let handshakes = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (h, r) = (handshakes.clone(), refused.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let (tcp, _) = tokio::select! {
                        _ = &mut stopped => return,
                        accepted = listener.accept() => match accepted {
                            Ok(a) => a,
                            Err(_) => continue,
                        },
                    };
                    let (acceptor, target, h, r) =
                        (acceptor.clone(), target.clone(), h.clone(), r.clone());
                    tokio::spawn(async move {
                        let mut tls = match acceptor.accept(tcp).await {
                            Ok(tls) => tls,
                            Err(_) => {
                                r.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                        };
                        h.fetch_add(1, Ordering::SeqCst);
                        if let Ok(mut broker) = tokio::net::TcpStream::connect(&target).await {
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut broker).await;
                        }
                    });
                }
            });
        });
        TlsFront {
            address,
            handshakes,
            refused,
            _stop: stop,
        }
    }
}

/// A CA, the front's certificate (for 127.0.0.1) signed by it, one for another name, a client
/// certificate it signed, and a CA that signed none of them, as files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    other_ca: PathBuf,
    server: (PathBuf, PathBuf),
    other_name: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("kafka test CA");
        let other = TestCa::new("some other CA");
        Pki {
            ca: ca.write(dir.path(), "ca.pem"),
            other_ca: other.write(dir.path(), "other-ca.pem"),
            server: ca.server(&["127.0.0.1"]).write(dir.path(), "broker"),
            other_name: ca.server(&["kafka.example"]).write(dir.path(), "elsewhere"),
            client: ca.client("profilink").write(dir.path(), "client"),
            _dir: dir,
        }
    }

    fn path(p: &Path) -> String {
        p.display().to_string()
    }
}

/// A broker behind a TLS front (`front`'s settings); its own helper clients trust `pki.ca`
/// (and present `pki.client`).
fn broker_behind_tls(pki: &Pki, front: ServerTlsConfig) -> Option<(Broker, TlsFront)> {
    let port = free_loopback_port();
    let front = TlsFront::start(&front, format!("127.0.0.1:{port}"));
    let broker = Broker::start_with(BrokerOptions {
        port: Some(port),
        advertised: Some(front.address.clone()),
        client: vec![
            ("security.protocol".into(), "ssl".into()),
            ("ssl.ca.location".into(), Pki::path(&pki.ca)),
            ("ssl.certificate.location".into(), Pki::path(&pki.client.0)),
            ("ssl.key.location".into(), Pki::path(&pki.client.1)),
        ],
        ..Default::default()
    })?;
    Some((broker, front))
}

fn fixture(name: &str) -> ExportProfilesServiceRequest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/otlp")
        .join(name);
    ExportProfilesServiceRequest::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

/// Counts what the pipeline took.
#[derive(Default)]
struct Recorder {
    batches: AtomicU64,
    samples: AtomicU64,
}

impl Consumer for Recorder {
    fn consume(&self, batch: Batch) -> impl Future<Output = Result<(), ConsumeError>> + Send {
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.samples.fetch_add(batch.samples, Ordering::SeqCst);
        std::future::ready(Ok(()))
    }
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `base` with the keys of `extra` set (one level deep).
fn with(base: Value, extra: Value) -> Value {
    let mut v = base;
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Produces the eBPF fixture through a kafka exporter configured with `client` (brokers,
/// tls, auth) to `topic`; the exporter's counters after its shutdown.
async fn export(client: Value, topic: &str) -> profilink_exporter::MetricsSnapshot {
    let cfg: KafkaExporterConfig = serde_json::from_value(with(
        client,
        json!({
            "profiles": {"topic": topic},
            "timeout": "3s",
            "retry_on_failure": {"enabled": false},
        }),
    ))
    .unwrap();
    let exporter = KafkaExporter::start(cfg, "profiles").await.unwrap();
    exporter
        .export_profiles(fixture("ebpf-profile.pb"))
        .await
        .unwrap();
    let m = exporter.metrics();
    exporter.shutdown(Duration::from_secs(10)).await;
    m.snapshot()
}

/// A kafka receiver configured with `client` reading `topic` from the start in `group`.
fn receiver(client: Value, topic: &str, group: &str, pipeline: Arc<Recorder>) -> KafkaReceiver {
    let cfg: KafkaReceiverConfig = serde_json::from_value(with(
        client,
        json!({
            "group_id": group,
            "initial_offset": "earliest",
            "profiles": {"topics": [topic]},
            "autocommit": {"interval": "200ms"},
        }),
    ))
    .unwrap();
    KafkaReceiver::start(
        cfg,
        pipeline,
        Arc::new(Stats::default()),
        Arc::new(KafkaReceiverMetrics::default()),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// TLS.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporter_produces_and_the_receiver_consumes_through_tls() {
    logs();
    let pki = Pki::new();
    let front = ServerTlsConfig::new(&pki.server.0, &pki.server.1);
    let Some((broker, front)) = broker_behind_tls(&pki, front) else {
        return;
    };
    broker.create_topic("tls_profiles", 2);
    let client = json!({"brokers": [front.address], "tls": {"ca_file": pki.ca}});

    let sent = export(client.clone(), "tls_profiles").await;
    assert!(sent.sent_chunks >= 1, "{sent:?}");
    assert_eq!(sent.send_failed_chunks, 0, "{sent:?}");
    let messages = broker.read_all("tls_profiles", 2, Duration::from_secs(2));
    assert_eq!(messages.len() as u64, sent.sent_chunks);

    let pipeline = Arc::new(Recorder::default());
    let r = receiver(client, "tls_profiles", "tls-group", pipeline.clone());
    let m = r.metrics();
    wait_for("every message through TLS", Duration::from_secs(30), || {
        pipeline.batches.load(Ordering::SeqCst) == messages.len() as u64
    })
    .await;
    let want = ExportProfilesServiceRequest::decode(messages[0].4.as_slice()).map(|_| ());
    assert!(want.is_ok());
    // Everything consumed is committed, through TLS too.
    let ends: Vec<i64> = (0..2)
        .map(|p| {
            messages
                .iter()
                .filter(|m| m.0 == p)
                .map(|m| m.1 + 1)
                .max()
                .unwrap_or(-1)
        })
        .collect();
    wait_for("the commits", Duration::from_secs(10), || {
        broker
            .committed("tls-group", "tls_profiles", 2)
            .iter()
            .zip(&ends)
            .all(|(c, e)| *e < 0 || c == e)
    })
    .await;
    r.shutdown(Duration::from_secs(10)).await;
    assert_eq!(KafkaReceiverMetrics::get(&m.client_errors), 0);
    assert!(front.handshakes.load(Ordering::SeqCst) >= 2);
    assert_eq!(front.refused.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_refused_visibly_and_nothing_is_consumed() {
    logs();
    let pki = Pki::new();
    let front = ServerTlsConfig::new(&pki.server.0, &pki.server.1);
    let Some((broker, front)) = broker_behind_tls(&pki, front) else {
        return;
    };
    broker.create_topic("tls_wrong_ca", 1);
    let good = json!({"brokers": [front.address], "tls": {"ca_file": pki.ca}});
    let sent = export(good, "tls_wrong_ca").await;
    assert!(sent.sent_chunks >= 1, "{sent:?}");
    let before = front.refused.load(Ordering::SeqCst);

    let wrong = json!({"brokers": [front.address], "tls": {"ca_file": pki.other_ca}});
    // The receiver: refused handshakes, logged and counted; nothing taken, nothing committed.
    let pipeline = Arc::new(Recorder::default());
    let r = receiver(
        wrong.clone(),
        "tls_wrong_ca",
        "wrong-ca-group",
        pipeline.clone(),
    );
    let m = r.metrics();
    wait_for("a refused handshake", Duration::from_secs(20), || {
        KafkaReceiverMetrics::get(&m.client_errors) > 0
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    r.shutdown(Duration::from_secs(5)).await;
    assert_eq!(pipeline.batches.load(Ordering::SeqCst), 0);
    assert!(m.partitions().is_empty(), "{:?}", m.partitions());
    assert_eq!(
        broker.committed("wrong-ca-group", "tls_wrong_ca", 1),
        vec![-1]
    );
    // Why, in the log: this front's address, the client, OpenSSL's verdict.
    let refusal = |client: &str| {
        log_lines_with(&front.address).iter().any(|l| {
            l.contains("certificate verify failed") && l.contains(&format!("client=\"{client}\""))
        })
    };
    assert!(
        refusal("consumer"),
        "no log line says why the consumer failed"
    );

    // The exporter: its send fails (counted, logged), nothing reaches the topic.
    let failed = export(wrong, "tls_wrong_ca").await;
    assert_eq!(failed.sent_chunks, 0, "{failed:?}");
    assert!(failed.send_failed_chunks >= 1, "{failed:?}");
    assert!(
        refusal("producer"),
        "no log line says why the producer failed"
    );
    assert_eq!(
        broker
            .read_all("tls_wrong_ca", 1, Duration::from_secs(2))
            .len() as u64,
        sent.sent_chunks
    );
    assert!(front.refused.load(Ordering::SeqCst) > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_with_cert_file_and_key_file() {
    logs();
    let pki = Pki::new();
    let mut front = ServerTlsConfig::new(&pki.server.0, &pki.server.1);
    front.client_ca_file = Some(pki.ca.clone());
    let Some((broker, front)) = broker_behind_tls(&pki, front) else {
        return;
    };
    broker.create_topic("mtls_profiles", 1);
    let with_cert = json!({
        "brokers": [front.address],
        "tls": {"ca_file": pki.ca, "cert_file": pki.client.0, "key_file": pki.client.1}
    });
    let sent = export(with_cert.clone(), "mtls_profiles").await;
    assert!(sent.sent_chunks >= 1, "{sent:?}");
    let pipeline = Arc::new(Recorder::default());
    let r = receiver(with_cert, "mtls_profiles", "mtls-group", pipeline.clone());
    wait_for(
        "the messages through mutual TLS",
        Duration::from_secs(30),
        || pipeline.batches.load(Ordering::SeqCst) == sent.sent_chunks,
    )
    .await;
    r.shutdown(Duration::from_secs(10)).await;
    assert_eq!(front.refused.load(Ordering::SeqCst), 0);

    // Without a client certificate the front refuses the handshake: visible, nothing read.
    let without = json!({"brokers": [front.address], "tls": {"ca_file": pki.ca}});
    let pipeline = Arc::new(Recorder::default());
    let r = receiver(without, "mtls_profiles", "no-cert-group", pipeline.clone());
    let m = r.metrics();
    wait_for("a refused handshake", Duration::from_secs(20), || {
        KafkaReceiverMetrics::get(&m.client_errors) > 0
    })
    .await;
    r.shutdown(Duration::from_secs(5)).await;
    assert_eq!(pipeline.batches.load(Ordering::SeqCst), 0);
    assert!(front.refused.load(Ordering::SeqCst) > 0);
    assert_eq!(
        broker.committed("no-cert-group", "mtls_profiles", 1),
        vec![-1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_name_is_verified_unless_insecure_skip_verify() {
    logs();
    let pki = Pki::new();
    // A certificate the CA signed, but for another name than the address clients dial.
    let front = ServerTlsConfig::new(&pki.other_name.0, &pki.other_name.1);
    let port = free_loopback_port();
    let front = TlsFront::start(&front, format!("127.0.0.1:{port}"));
    let Some(broker) = Broker::start_with(BrokerOptions {
        port: Some(port),
        advertised: Some(front.address.clone()),
        client: vec![
            ("security.protocol".into(), "ssl".into()),
            ("ssl.ca.location".into(), Pki::path(&pki.ca)),
            (
                "ssl.endpoint.identification.algorithm".into(),
                "none".into(),
            ),
        ],
        ..Default::default()
    }) else {
        return;
    };
    broker.create_topic("tls_names", 1);
    let verified = json!({"brokers": [front.address], "tls": {"ca_file": pki.ca}});
    let refused = export(verified, "tls_names").await;
    assert_eq!(refused.sent_chunks, 0, "{refused:?}");
    assert!(refused.send_failed_chunks >= 1, "{refused:?}");
    assert!(front.refused.load(Ordering::SeqCst) > 0);
    let skip = json!({"brokers": [front.address], "tls": {"insecure_skip_verify": true}});
    let sent = export(skip, "tls_names").await;
    assert!(sent.sent_chunks >= 1, "{sent:?}");
    assert_eq!(
        broker
            .read_all("tls_names", 1, Duration::from_secs(2))
            .len() as u64,
        sent.sent_chunks
    );
}
