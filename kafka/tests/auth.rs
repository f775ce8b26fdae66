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
//!
//! SASL (see the section below for why): against Tansu requiring authentication, SCRAM-SHA-256
//! and SCRAM-SHA-512 exchanges run and are refused visibly (Tansu holds no credentials), PLAIN is
//! refused (Tansu does not offer it); through a SASL front that verifies PLAIN and SCRAM
//! independently, the receiver and exporter authenticate with each mechanism, also over TLS,
//! and a wrong password is refused visibly. No log line holds a password.

use profilink_consumer::{Batch, ConsumeError, Consumer};
use profilink_kafka::testing::{Broker, BrokerOptions, free_loopback_port};
use profilink_kafka::{
    KafkaExporter, KafkaExporterConfig, KafkaReceiver, KafkaReceiverConfig, KafkaReceiverMetrics,
};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_receiver::Stats;
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

/// Serves a free loopback port on its own thread and runtime, handing each accepted
/// connection to `serve` (a task per connection) until the returned sender is dropped.
fn serve_loopback<F, Fut>(serve: F) -> (String, tokio::sync::oneshot::Sender<()>)
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
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
                tokio::spawn(serve(tcp));
            }
        });
    });
    (address, stop)
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
        let handshakes = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let (h, r) = (handshakes.clone(), refused.clone());
        let (address, stop) = serve_loopback(move |tcp| {
            let (acceptor, target, h, r) = (acceptor.clone(), target.clone(), h.clone(), r.clone());
            async move {
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
            }
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

// ---------------------------------------------------------------------------------------------
// SASL.
//
// Tansu 0.6.0 with `--authentication` offers SCRAM-SHA-256, SCRAM-SHA-512 (and OAUTHBEARER),
// not PLAIN, and its in-memory and S3 storage keep no SCRAM credentials (`tansu user create`
// answers success and stores nothing), so every SASL authentication against it fails: against
// the real broker these tests can show only that a refused authentication is visible and reads
// nothing. That the configured mechanism, user and password are what goes on the wire, and that
// the receiver and exporter work over an authenticated connection, is shown with a SASL front:
// it answers the SASL requests itself (PLAIN, or SCRAM verified as RFC 5802/7677 say, with
// ring's PBKDF2 and HMAC, independently of librdkafka) and then forwards the connection to a
// Tansu without authentication.

const USER: &str = "profilink";
const PASSWORD: &str = "s3cr3t-Pa55w0rd";
const WRONG_PASSWORD: &str = "not-the-Pa55w0rd";

/// A Kafka request or response frame: its size-prefixed bytes.
async fn read_frame(r: &mut (impl tokio::io::AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let size = r.read_i32().await?;
    let mut body = vec![0; size.max(0) as usize];
    r.read_exact(&mut body).await?;
    Ok(body)
}

async fn write_frame(
    w: &mut (impl tokio::io::AsyncWrite + Unpin),
    body: &[u8],
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    w.write_i32(body.len() as i32).await?;
    w.write_all(body).await?;
    w.flush().await
}

/// Reads Kafka's primitive types.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take(2).try_into().unwrap_or_default())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take(4).try_into().unwrap_or_default())
    }
    fn string(&mut self) -> String {
        let n = self.i16();
        String::from_utf8_lossy(self.take(n.max(0) as usize)).into_owned()
    }
    fn bytes(&mut self) -> Vec<u8> {
        let n = self.i32();
        self.take(n.max(0) as usize).to_vec()
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// What a SASL front accepts: one mechanism, one user.
#[derive(Clone)]
struct SaslAccount {
    mechanism: &'static str,
    user: &'static str,
    password: &'static str,
}

/// One SASL exchange of the front (the server side).
enum Exchange {
    /// Waiting for SCRAM's client-first message.
    ScramFirst,
    /// Sent server-first; waiting for client-final.
    ScramFinal {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        salted: Vec<u8>,
    },
}

fn scram_algorithms(
    mechanism: &str,
) -> (
    ring::pbkdf2::Algorithm,
    ring::hmac::Algorithm,
    &'static ring::digest::Algorithm,
) {
    if mechanism == "SCRAM-SHA-512" {
        (
            ring::pbkdf2::PBKDF2_HMAC_SHA512,
            ring::hmac::HMAC_SHA512,
            &ring::digest::SHA512,
        )
    } else {
        (
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            ring::hmac::HMAC_SHA256,
            &ring::digest::SHA256,
        )
    }
}

/// The server's answer to one SASL message: `Ok(reply, done)` or `Err(why)`.
fn sasl_step(
    account: &SaslAccount,
    exchange: &mut Exchange,
    message: &[u8],
) -> Result<(Vec<u8>, bool), String> {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let text = String::from_utf8_lossy(message).into_owned();
    if account.mechanism == "PLAIN" {
        let mut parts = message.split(|b| *b == 0);
        let (_authz, user, password) = (parts.next(), parts.next(), parts.next());
        return if user == Some(account.user.as_bytes())
            && password == Some(account.password.as_bytes())
        {
            Ok((Vec::new(), true))
        } else {
            Err("invalid user or password".into())
        };
    }
    let (pbkdf2, hmac, digest) = scram_algorithms(account.mechanism);
    let attr = |s: &str, k: char| -> Option<String> {
        s.split(',')
            .find_map(|a| a.strip_prefix(&format!("{k}=")).map(str::to_string))
    };
    match exchange {
        Exchange::ScramFirst => {
            let bare = text.strip_prefix("n,,").ok_or("no gs2 header")?.to_string();
            if attr(&bare, 'n').as_deref() != Some(account.user) {
                return Err("unknown user".into());
            }
            let client_nonce = attr(&bare, 'r').ok_or("no nonce")?;
            let nonce = format!("{client_nonce}front{}", std::process::id());
            let salt = b"profilink-test-salt";
            let iterations = 4096;
            let mut salted = vec![0; digest.output_len()];
            ring::pbkdf2::derive(
                pbkdf2,
                std::num::NonZeroU32::new(iterations).unwrap(),
                salt,
                account.password.as_bytes(),
                &mut salted,
            );
            let server_first = format!("r={nonce},s={},i={iterations}", b64.encode(salt));
            *exchange = Exchange::ScramFinal {
                client_first_bare: bare,
                server_first: server_first.clone(),
                nonce,
                salted,
            };
            Ok((server_first.into_bytes(), false))
        }
        Exchange::ScramFinal {
            client_first_bare,
            server_first,
            nonce,
            salted,
        } => {
            let (without_proof, proof) = text.rsplit_once(",p=").ok_or("no proof")?;
            if attr(without_proof, 'r').as_deref() != Some(nonce.as_str()) {
                return Err("wrong nonce".into());
            }
            let proof = b64.decode(proof).map_err(|e| e.to_string())?;
            let key = ring::hmac::Key::new(hmac, salted);
            let client_key = ring::hmac::sign(&key, b"Client Key");
            let stored_key = ring::digest::digest(digest, client_key.as_ref());
            let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
            let signature = ring::hmac::sign(
                &ring::hmac::Key::new(hmac, stored_key.as_ref()),
                auth_message.as_bytes(),
            );
            let expected: Vec<u8> = client_key
                .as_ref()
                .iter()
                .zip(signature.as_ref())
                .map(|(a, b)| a ^ b)
                .collect();
            if proof != expected {
                return Err("invalid proof".into());
            }
            let server_key = ring::hmac::sign(&key, b"Server Key");
            let server_signature = ring::hmac::sign(
                &ring::hmac::Key::new(hmac, server_key.as_ref()),
                auth_message.as_bytes(),
            );
            Ok((
                format!("v={}", b64.encode(server_signature.as_ref())).into_bytes(),
                true,
            ))
        }
    }
}

/// A front that authenticates each connection with SASL (`account`) and then forwards it to
/// `target`; before that it forwards only ApiVersions and closes a connection that sends
/// anything else. Stopped on drop.
struct SaslFront {
    address: String,
    /// Authentications that succeeded.
    authenticated: Arc<AtomicU64>,
    /// Authentications refused (wrong password, unknown user, another mechanism).
    refused: Arc<AtomicU64>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl SaslFront {
    fn start(account: SaslAccount, target: String) -> SaslFront {
        let authenticated = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let (ok, no) = (authenticated.clone(), refused.clone());
        let (address, stop) = serve_loopback(move |client| {
            let (account, target, ok, no) =
                (account.clone(), target.clone(), ok.clone(), no.clone());
            async move {
                let _ = Self::serve(client, account, target, ok, no).await;
            }
        });
        SaslFront {
            address,
            authenticated,
            refused,
            _stop: stop,
        }
    }

    async fn serve(
        mut client: tokio::net::TcpStream,
        account: SaslAccount,
        target: String,
        ok: Arc<AtomicU64>,
        no: Arc<AtomicU64>,
    ) -> std::io::Result<()> {
        let mut broker = tokio::net::TcpStream::connect(&target).await?;
        let mut exchange = Exchange::ScramFirst;
        loop {
            let request = read_frame(&mut client).await?;
            let mut r = Reader(&request);
            let (api_key, version, correlation) = (r.i16(), r.i16(), r.i32());
            let _client_id = r.string();
            let mut response = correlation.to_be_bytes().to_vec();
            match api_key {
                // ApiVersions: the broker's answer.
                18 => {
                    write_frame(&mut broker, &request).await?;
                    let answer = read_frame(&mut broker).await?;
                    write_frame(&mut client, &answer).await?;
                    continue;
                }
                // SaslHandshake v0/v1: error, [mechanisms].
                17 => {
                    let mechanism = r.string();
                    let supported = mechanism == account.mechanism;
                    if !supported {
                        no.fetch_add(1, Ordering::SeqCst);
                    }
                    response.extend_from_slice(&(if supported { 0i16 } else { 33 }).to_be_bytes());
                    response.extend_from_slice(&1i32.to_be_bytes());
                    put_string(&mut response, account.mechanism);
                }
                // SaslAuthenticate v0/v1: error, message, bytes[, session lifetime].
                36 => {
                    let message = r.bytes();
                    let (code, text, reply, done) =
                        match sasl_step(&account, &mut exchange, &message) {
                            Ok((reply, done)) => (0i16, None, reply, done),
                            Err(why) => (
                                58,
                                Some(format!("Authentication failed: {why}")),
                                Vec::new(),
                                false,
                            ),
                        };
                    response.extend_from_slice(&code.to_be_bytes());
                    match &text {
                        Some(t) => put_string(&mut response, t),
                        None => response.extend_from_slice(&(-1i16).to_be_bytes()),
                    }
                    response.extend_from_slice(&(reply.len() as i32).to_be_bytes());
                    response.extend_from_slice(&reply);
                    if version >= 1 {
                        response.extend_from_slice(&0i64.to_be_bytes());
                    }
                    write_frame(&mut client, &response).await?;
                    if code != 0 {
                        no.fetch_add(1, Ordering::SeqCst);
                        return Ok(());
                    }
                    if done {
                        ok.fetch_add(1, Ordering::SeqCst);
                        // Authenticated: the rest of the connection is the broker's.
                        tokio::io::copy_bidirectional(&mut client, &mut broker).await?;
                        return Ok(());
                    }
                    continue;
                }
                // Anything else before authenticating: refused, as a broker requiring SASL.
                _ => return Ok(()),
            }
            write_frame(&mut client, &response).await?;
        }
    }
}

/// A broker behind a SASL front accepting `account`; its helper clients authenticate.
fn broker_behind_sasl(account: SaslAccount) -> Option<(Broker, SaslFront)> {
    let port = free_loopback_port();
    let front = SaslFront::start(account.clone(), format!("127.0.0.1:{port}"));
    let broker = Broker::start_with(BrokerOptions {
        port: Some(port),
        advertised: Some(front.address.clone()),
        client: vec![
            ("security.protocol".into(), "sasl_plaintext".into()),
            ("sasl.mechanism".into(), account.mechanism.into()),
            ("sasl.username".into(), account.user.into()),
            ("sasl.password".into(), account.password.into()),
        ],
        ..Default::default()
    })?;
    Some((broker, front))
}

fn sasl_client(address: &str, mechanism: &str, password: &str) -> Value {
    json!({
        "brokers": [address],
        "auth": {"sasl": {"mechanism": mechanism, "username": USER, "password": password}}
    })
}

/// No captured log line holds either password.
fn no_password_logged() {
    let all = String::from_utf8_lossy(&logs().lock().unwrap()).into_owned();
    assert!(!all.contains(PASSWORD), "the password is in the log");
    assert!(
        !all.contains(WRONG_PASSWORD),
        "the wrong password is in the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_scram_authenticate_and_a_wrong_password_is_refused() {
    logs();
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let account = SaslAccount {
            mechanism,
            user: USER,
            password: PASSWORD,
        };
        let Some((broker, front)) = broker_behind_sasl(account) else {
            return;
        };
        let topic = format!("sasl_{}", mechanism.replace('-', "_").to_lowercase());
        broker.create_topic(&topic, 1);
        let client = sasl_client(&front.address, mechanism, PASSWORD);
        let sent = export(client.clone(), &topic).await;
        assert!(sent.sent_chunks >= 1, "{mechanism}: {sent:?}");
        let pipeline = Arc::new(Recorder::default());
        let group = format!("{topic}_group");
        let r = receiver(client, &topic, &group, pipeline.clone());
        wait_for(mechanism, Duration::from_secs(30), || {
            pipeline.batches.load(Ordering::SeqCst) == sent.sent_chunks
        })
        .await;
        wait_for("the commit", Duration::from_secs(10), || {
            broker.committed(&group, &topic, 1)[0] >= 1
        })
        .await;
        r.shutdown(Duration::from_secs(10)).await;
        assert!(
            front.authenticated.load(Ordering::SeqCst) >= 2,
            "{mechanism}"
        );
        assert_eq!(front.refused.load(Ordering::SeqCst), 0, "{mechanism}");

        // A wrong password: refused visibly, nothing read or committed, nothing produced.
        let wrong = sasl_client(&front.address, mechanism, WRONG_PASSWORD);
        let pipeline = Arc::new(Recorder::default());
        let r = receiver(wrong.clone(), &topic, "wrong-password", pipeline.clone());
        let m = r.metrics();
        wait_for("a refused authentication", Duration::from_secs(20), || {
            KafkaReceiverMetrics::get(&m.client_errors) > 0
        })
        .await;
        r.shutdown(Duration::from_secs(5)).await;
        assert_eq!(pipeline.batches.load(Ordering::SeqCst), 0);
        assert_eq!(broker.committed("wrong-password", &topic, 1), vec![-1]);
        let failed = export(wrong, &topic).await;
        assert_eq!(failed.sent_chunks, 0, "{mechanism}: {failed:?}");
        assert!(failed.send_failed_chunks >= 1, "{mechanism}: {failed:?}");
        assert!(front.refused.load(Ordering::SeqCst) >= 2, "{mechanism}");
        let why = log_lines_with(&front.address);
        for client in ["consumer", "producer"] {
            assert!(
                why.iter().any(|l| l.contains("Authentication failed")
                    && l.contains(&format!("client=\"{client}\""))),
                "{mechanism}: no log line says why the {client} failed"
            );
        }
        assert_eq!(
            broker.read_all(&topic, 1, Duration::from_secs(2)).len() as u64,
            sent.sent_chunks
        );
    }
    no_password_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_over_tls() {
    logs();
    let pki = Pki::new();
    let account = SaslAccount {
        mechanism: "SCRAM-SHA-512",
        user: USER,
        password: PASSWORD,
    };
    // client ─TLS─► TLS front ─► SASL front ─► Tansu, which advertises the TLS front.
    let port = free_loopback_port();
    let sasl = SaslFront::start(account, format!("127.0.0.1:{port}"));
    let tls = TlsFront::start(
        &ServerTlsConfig::new(&pki.server.0, &pki.server.1),
        sasl.address.clone(),
    );
    let Some(broker) = Broker::start_with(BrokerOptions {
        port: Some(port),
        advertised: Some(tls.address.clone()),
        client: vec![
            ("security.protocol".into(), "sasl_ssl".into()),
            ("ssl.ca.location".into(), Pki::path(&pki.ca)),
            ("sasl.mechanism".into(), "SCRAM-SHA-512".into()),
            ("sasl.username".into(), USER.into()),
            ("sasl.password".into(), PASSWORD.into()),
        ],
        ..Default::default()
    }) else {
        return;
    };
    broker.create_topic("sasl_ssl", 1);
    let client = with(
        sasl_client(&tls.address, "SCRAM-SHA-512", PASSWORD),
        json!({"tls": {"ca_file": pki.ca}}),
    );
    let sent = export(client.clone(), "sasl_ssl").await;
    assert!(sent.sent_chunks >= 1, "{sent:?}");
    let pipeline = Arc::new(Recorder::default());
    let r = receiver(client, "sasl_ssl", "sasl_ssl_group", pipeline.clone());
    wait_for(
        "the messages over SASL_SSL",
        Duration::from_secs(30),
        || pipeline.batches.load(Ordering::SeqCst) == sent.sent_chunks,
    )
    .await;
    r.shutdown(Duration::from_secs(10)).await;
    assert!(sasl.authenticated.load(Ordering::SeqCst) >= 2);
    assert!(tls.handshakes.load(Ordering::SeqCst) >= 2);
    no_password_logged();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tansu_refuses_scram_without_the_user_and_plain_visibly() {
    logs();
    // The real broker requiring SASL (see above: it holds no credentials, and no PLAIN).
    let Some(broker) = Broker::start_with(BrokerOptions {
        authentication: true,
        ..Default::default()
    }) else {
        return;
    };
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"] {
        // What librdkafka says: the SCRAM exchange ran and the broker refused the user; PLAIN
        // is not among the broker's mechanisms (Tansu closes the connection).
        let needle = if mechanism == "PLAIN" {
            "SASL PLAIN mechanism handshake failed"
        } else {
            "SASL SCRAM authentication failed: broker responded with unknown-user"
        };
        let said = || {
            log_lines_with(&broker.address)
                .iter()
                .filter(|l| l.contains(needle))
                .count()
        };
        let before = said();
        let client = sasl_client(&broker.address, mechanism, PASSWORD);
        let pipeline = Arc::new(Recorder::default());
        let group = format!("tansu-{mechanism}");
        let r = receiver(client.clone(), "sasl_tansu", &group, pipeline.clone());
        let m = r.metrics();
        wait_for("a refused authentication", Duration::from_secs(20), || {
            KafkaReceiverMetrics::get(&m.client_errors) > 0
        })
        .await;
        r.shutdown(Duration::from_secs(5)).await;
        assert_eq!(pipeline.batches.load(Ordering::SeqCst), 0);
        let failed = export(client, "sasl_tansu").await;
        assert_eq!(failed.sent_chunks, 0, "{mechanism}: {failed:?}");
        assert!(failed.send_failed_chunks >= 1, "{mechanism}: {failed:?}");
        assert!(said() > before, "{mechanism}: no log line with {needle:?}");
    }
    no_password_logged();
}
