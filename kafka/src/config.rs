//! The configuration of the `kafka` receiver and exporter, with the keys and defaults of the
//! OpenTelemetry Collector's `kafkareceiver` and `kafkaexporter` (contrib), and the settings
//! both share ([`ClientConfig`], the Collector's `configkafka.ClientConfig`).
//!
//! Keys the Collector has and profilink does not implement are refused with a message naming
//! them (`deny_unknown_fields`). `tls` and `auth` (SASL, TLS): [`crate::auth`].

use crate::auth::Security;
pub use crate::auth::{AuthConfig, PlainTextConfig, SaslConfig, Secret};
use profilink_exporter::{QueueConfig, RetryConfig};
pub use profilink_tls::ClientTlsConfig;
use serde::Deserialize;
use std::time::Duration;

/// The Collector's default topic of profiles.
pub const DEFAULT_PROFILES_TOPIC: &str = "otlp_profiles";
/// The Collector's default topic of traces.
pub const DEFAULT_TRACES_TOPIC: &str = "otlp_spans";
/// The Collector's default `client_id` and `group_id`.
pub const DEFAULT_CLIENT_ID: &str = "otel-collector";

/// How a message's payload is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// One protobuf `Export{Profiles,Trace}ServiceRequest` per message (the default).
    #[default]
    OtlpProto,
    /// One OTLP/JSON request per message (receiver only).
    OtlpJson,
}

impl Encoding {
    /// The name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::OtlpProto => "otlp_proto",
            Encoding::OtlpJson => "otlp_json",
        }
    }
}

/// Settings of the Kafka client, shared by the receiver and the exporter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// Bootstrap brokers, `host:port` (default `localhost:9092`).
    pub brokers: Vec<String>,
    /// The client id brokers see (default `otel-collector`).
    pub client_id: String,
    /// The Collector's `protocol_version`: accepted and ignored (librdkafka negotiates the
    /// protocol version with the brokers).
    pub protocol_version: Option<String>,
    /// TLS to the brokers (the Collector's `configtls.ClientConfig` keys); none: plaintext.
    pub tls: Option<ClientTlsConfig>,
    /// SASL authentication (and the deprecated `auth.tls`).
    pub auth: AuthConfig,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            brokers: vec!["localhost:9092".into()],
            client_id: DEFAULT_CLIENT_ID.into(),
            protocol_version: None,
            tls: None,
            auth: AuthConfig::default(),
        }
    }
}

impl ClientConfig {
    /// `bootstrap.servers`, or why the brokers are unusable.
    pub fn bootstrap_servers(&self) -> Result<String, String> {
        if self.brokers.is_empty() || self.brokers.iter().any(|b| b.trim().is_empty()) {
            return Err("brokers: at least one non-empty host:port is required".into());
        }
        Ok(self.brokers.join(","))
    }

    fn security(&self) -> Security<'_> {
        Security {
            auth: &self.auth,
            tls: self.tls.as_ref(),
        }
    }

    /// The librdkafka properties of `tls` and `auth` (`security.protocol`, `sasl.*`, `ssl.*`),
    /// or why they cannot be used (`key: problem`). The list holds the SASL password: it is
    /// for the client only, never to be shown.
    pub fn security_properties(&self) -> Result<Vec<(&'static str, String)>, String> {
        self.security().properties()
    }

    /// Whether connections to the brokers use TLS.
    pub fn uses_tls(&self) -> bool {
        self.security().uses_tls()
    }

    /// True when the TLS settings come from the deprecated `auth.tls`.
    pub fn deprecated_auth_tls(&self) -> bool {
        self.tls.is_none() && self.auth.tls.is_some()
    }

    /// Checks the settings and reads every file `tls` names; the error is `key: problem`.
    pub fn check(&self) -> Result<(), String> {
        self.bootstrap_servers()?;
        self.security().check()
    }

    /// Sets the librdkafka properties of the brokers, `client.id`, `tls` and `auth` on `c`.
    pub fn apply(&self, c: &mut rdkafka::ClientConfig) -> Result<(), String> {
        c.set("bootstrap.servers", self.bootstrap_servers()?)
            .set("client.id", &self.client_id);
        for (key, value) in self.security_properties()? {
            c.set(key, value);
        }
        Ok(())
    }
}

/// `profiles:` / `traces:` of the exporter: where a signal goes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ExporterSignalConfig {
    /// The topic (default `otlp_profiles` / `otlp_spans`).
    pub topic: Option<String>,
    /// The encoding: `otlp_proto` (default) or `otlp_json`.
    pub encoding: Encoding,
}

/// `producer:` of the exporter.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProducerConfig {
    /// The largest message the producer sends, in bytes (default 1000000, librdkafka's
    /// `message.max.bytes`). A larger request is dropped and counted (`too_large`).
    pub max_message_bytes: usize,
    /// Acknowledgements the leader waits for: 0 none, 1 the leader (default), -1 all in-sync
    /// replicas (librdkafka's `acks`).
    pub required_acks: i16,
    /// `none` (default), `gzip`, `snappy`, `lz4` or `zstd`.
    pub compression: String,
    /// Messages per produce batch (default 10000, librdkafka's `batch.num.messages`).
    pub flush_max_messages: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            max_message_bytes: 1_000_000,
            required_acks: 1,
            compression: "none".into(),
            flush_max_messages: 10_000,
        }
    }
}

/// `exporters.kafka`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaExporterConfig {
    /// Bootstrap brokers, `host:port` (default `localhost:9092`).
    pub brokers: Vec<String>,
    /// The client id brokers see (default `otel-collector`).
    pub client_id: String,
    /// The Collector's `protocol_version`: accepted and ignored (librdkafka negotiates the
    /// protocol version with the brokers).
    pub protocol_version: Option<String>,
    /// TLS to the brokers ([`crate::auth`]); none: plaintext.
    pub tls: Option<ClientTlsConfig>,
    /// SASL authentication ([`crate::auth`]).
    pub auth: AuthConfig,
    /// The Collector's older top-level topic (overrides `profiles.topic` when set).
    pub topic: Option<String>,
    /// The Collector's older top-level encoding (overrides `profiles.encoding` when set).
    pub encoding: Option<Encoding>,
    /// Where profiles go (`otlp_profiles`, `otlp_proto`).
    pub profiles: ExporterSignalConfig,
    /// Where traces go (`otlp_spans`, `otlp_proto`).
    pub traces: ExporterSignalConfig,
    /// Split profiles requests per profiler session and key each message with the session's
    /// profiler id (default true), so a downstream consumer group keeps a session on one
    /// consumer. False: one unkeyed message per request, as the Collector sends.
    pub partition_profiles_by_session: bool,
    /// Split traces requests per trace and key each message with the trace id (the
    /// Collector's key; profilink's default true, the Collector's false).
    pub partition_traces_by_id: bool,
    /// Time allowed for one message's delivery, retries inside librdkafka included (default
    /// 5 s; librdkafka's `message.timeout.ms`).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// The producer settings.
    pub producer: ProducerConfig,
    /// The sending queue (in memory, or durable with `storage`), as the OTLP exporters'.
    pub sending_queue: QueueConfig,
    /// Retries of a message whose delivery failed (the Collector's `retry_on_failure`).
    pub retry_on_failure: RetryConfig,
}

impl Default for KafkaExporterConfig {
    fn default() -> Self {
        KafkaExporterConfig {
            brokers: ClientConfig::default().brokers,
            client_id: DEFAULT_CLIENT_ID.into(),
            protocol_version: None,
            tls: None,
            auth: AuthConfig::default(),
            topic: None,
            encoding: None,
            profiles: ExporterSignalConfig::default(),
            traces: ExporterSignalConfig::default(),
            partition_profiles_by_session: true,
            partition_traces_by_id: true,
            timeout: Duration::from_secs(5),
            producer: ProducerConfig::default(),
            sending_queue: QueueConfig::default(),
            retry_on_failure: RetryConfig::default(),
        }
    }
}

impl KafkaExporterConfig {
    /// The profiles encoding (`encoding` when set, else `profiles.encoding`).
    pub fn profiles_encoding(&self) -> Encoding {
        self.encoding.unwrap_or(self.profiles.encoding)
    }

    /// The traces encoding (`traces.encoding`).
    pub fn traces_encoding(&self) -> Encoding {
        self.traces.encoding
    }

    /// The client settings.
    pub fn client(&self) -> ClientConfig {
        ClientConfig {
            brokers: self.brokers.clone(),
            client_id: self.client_id.clone(),
            protocol_version: self.protocol_version.clone(),
            tls: self.tls.clone(),
            auth: self.auth.clone(),
        }
    }

    /// The profiles topic (`topic` when set, else `profiles.topic`, else `otlp_profiles`).
    pub fn profiles_topic(&self) -> &str {
        self.topic
            .as_deref()
            .or(self.profiles.topic.as_deref())
            .unwrap_or(DEFAULT_PROFILES_TOPIC)
    }

    /// The traces topic (`topic` when set, else `traces.topic`, else `otlp_spans`).
    pub fn traces_topic(&self) -> &str {
        self.topic
            .as_deref()
            .or(self.traces.topic.as_deref())
            .unwrap_or(DEFAULT_TRACES_TOPIC)
    }

    /// Checks the settings, reading every file `tls` names; the error is `key: problem`.
    pub fn check(&self) -> Result<(), String> {
        self.client().check()?;
        self.sending_queue
            .check_request_keys()
            .map_err(|e| e.to_string())?;
        if self.profiles_topic().trim().is_empty() {
            return Err("profiles.topic: is empty".into());
        }
        if !matches!(self.producer.required_acks, -1..=1) {
            return Err("producer.required_acks: must be -1, 0 or 1".into());
        }
        if !matches!(
            self.producer.compression.as_str(),
            "none" | "gzip" | "snappy" | "lz4" | "zstd"
        ) {
            return Err(format!(
                "producer.compression: {:?} is not one of none, gzip, snappy, lz4, zstd",
                self.producer.compression
            ));
        }
        if self.producer.max_message_bytes < 1000 {
            return Err("producer.max_message_bytes: must be at least 1000".into());
        }
        Ok(())
    }
}

/// `profiles:` / `traces:` of the receiver: what a signal is read from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ReceiverSignalConfig {
    /// Topics to read (default `[otlp_profiles]` / `[otlp_spans]`). `topic` is accepted for
    /// one.
    #[serde(alias = "topic", deserialize_with = "one_or_many")]
    pub topics: Option<Vec<String>>,
    /// Topics not to read (meaningful with regular-expression topics, `^…`).
    pub exclude_topics: Vec<String>,
    /// `otlp_proto` (default) or `otlp_json`.
    pub encoding: Encoding,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Some(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    }))
}

/// `message_marking:` of the receiver: when a message's offset is marked (stored for the next
/// commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MessageMarking {
    /// Mark after the pipeline accepted the message (default true: profilink's default; the
    /// Collector's is false, marking before, which loses what a crash interrupts).
    pub after: bool,
    /// Mark a message the pipeline failed on (not a permanent error) and move on, dropping it
    /// counted (default false: it is retried with backoff and its partition waits).
    pub on_error: bool,
    /// Mark a message that can never be accepted (does not decode, unsupported version,
    /// refused by the pipeline for good) when it is skipped (default: `on_error`'s value).
    /// Either way it is skipped, counted and logged, never blocking its partition; unmarked,
    /// its offset is committed with the next accepted message of its partition.
    pub on_permanent_error: Option<bool>,
}

impl Default for MessageMarking {
    fn default() -> Self {
        MessageMarking {
            after: true,
            on_error: false,
            on_permanent_error: None,
        }
    }
}

impl MessageMarking {
    /// `on_permanent_error`, defaulting to `on_error`.
    pub fn permanent(&self) -> bool {
        self.on_permanent_error.unwrap_or(self.on_error)
    }
}

/// `header_extraction:` of the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct HeaderExtraction {
    /// Copy the listed message headers into every resource's attributes as
    /// `kafka.header.<name>` (default false).
    pub extract_headers: bool,
    /// The header names.
    pub headers: Vec<String>,
}

/// `error_backoff:` of the receiver: the wait before retrying a message the pipeline failed on
/// (a full pipeline waits the time it asks for, at least `initial_interval`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ErrorBackoff {
    /// Back off at all (default true here; a disabled backoff still waits `initial_interval`).
    pub enabled: bool,
    /// First wait (default 100 ms).
    #[serde(with = "humantime_serde")]
    pub initial_interval: Duration,
    /// Longest wait (default 5 s).
    #[serde(with = "humantime_serde")]
    pub max_interval: Duration,
    /// Growth factor (default 1.5).
    pub multiplier: f64,
    /// Accepted for the Collector's key; profilink never gives up on a retryable message (it
    /// would lose it), so this has no effect.
    #[serde(with = "humantime_serde")]
    pub max_elapsed_time: Duration,
    /// Accepted for the Collector's key; no jitter is applied.
    pub randomization_factor: f64,
}

impl Default for ErrorBackoff {
    fn default() -> Self {
        ErrorBackoff {
            enabled: true,
            initial_interval: Duration::from_millis(100),
            max_interval: Duration::from_secs(5),
            multiplier: 1.5,
            max_elapsed_time: Duration::ZERO,
            randomization_factor: 0.0,
        }
    }
}

/// `autocommit:` of the receiver.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoCommit {
    /// Commit marked offsets periodically (default true; false commits only at rebalances
    /// and shutdown).
    pub enable: bool,
    /// The period (default 1 s).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for AutoCommit {
    fn default() -> Self {
        AutoCommit {
            enable: true,
            interval: Duration::from_secs(1),
        }
    }
}

/// `receivers.kafka`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaReceiverConfig {
    /// Bootstrap brokers, `host:port` (default `localhost:9092`).
    pub brokers: Vec<String>,
    /// The client id brokers see (default `otel-collector`).
    pub client_id: String,
    /// The Collector's `protocol_version`: accepted and ignored (librdkafka negotiates the
    /// protocol version with the brokers).
    pub protocol_version: Option<String>,
    /// TLS to the brokers ([`crate::auth`]); none: plaintext.
    pub tls: Option<ClientTlsConfig>,
    /// SASL authentication ([`crate::auth`]).
    pub auth: AuthConfig,
    /// The consumer group (default `otel-collector`).
    pub group_id: String,
    /// Where a group without a committed offset starts: `latest` (default) or `earliest`.
    pub initial_offset: String,
    /// The Collector's older top-level topic (overrides `profiles.topics` when set).
    pub topic: Option<String>,
    /// The Collector's older top-level encoding (overrides `profiles.encoding` when set).
    pub encoding: Option<Encoding>,
    /// What profiles are read from.
    pub profiles: ReceiverSignalConfig,
    /// What traces are read from (only when a traces pipeline lists the receiver).
    pub traces: ReceiverSignalConfig,
    /// When offsets are marked.
    pub message_marking: MessageMarking,
    /// Message headers copied into resource attributes.
    pub header_extraction: HeaderExtraction,
    /// The wait before retrying a message the pipeline could not take.
    pub error_backoff: ErrorBackoff,
    /// Periodic commits of marked offsets.
    pub autocommit: AutoCommit,
    /// The group session timeout (default 10 s).
    #[serde(with = "humantime_serde")]
    pub session_timeout: Duration,
    /// The group heartbeat interval (default 3 s).
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// `range`, `roundrobin` or `cooperative-sticky` (default `cooperative-sticky`: a
    /// rebalance moves only the partitions that change owner).
    pub group_rebalance_strategy: String,
    /// The order messages are handed over in across partitions ([`crate::align`]).
    pub alignment: crate::align::Alignment,
}

impl Default for KafkaReceiverConfig {
    fn default() -> Self {
        KafkaReceiverConfig {
            brokers: ClientConfig::default().brokers,
            client_id: DEFAULT_CLIENT_ID.into(),
            protocol_version: None,
            tls: None,
            auth: AuthConfig::default(),
            group_id: DEFAULT_CLIENT_ID.into(),
            initial_offset: "latest".into(),
            topic: None,
            encoding: None,
            profiles: ReceiverSignalConfig::default(),
            traces: ReceiverSignalConfig::default(),
            message_marking: MessageMarking::default(),
            header_extraction: HeaderExtraction::default(),
            error_backoff: ErrorBackoff::default(),
            autocommit: AutoCommit::default(),
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            group_rebalance_strategy: "cooperative-sticky".into(),
            alignment: crate::align::Alignment::default(),
        }
    }
}

impl KafkaReceiverConfig {
    /// The client settings.
    pub fn client(&self) -> ClientConfig {
        ClientConfig {
            brokers: self.brokers.clone(),
            client_id: self.client_id.clone(),
            protocol_version: self.protocol_version.clone(),
            tls: self.tls.clone(),
            auth: self.auth.clone(),
        }
    }

    /// The profiles topics (`topic` when set, else `profiles.topics`).
    pub fn profiles_topics(&self) -> Vec<String> {
        match (&self.topic, &self.profiles.topics) {
            (Some(t), _) => vec![t.clone()],
            (None, Some(t)) => t.clone(),
            (None, None) => vec![DEFAULT_PROFILES_TOPIC.into()],
        }
    }

    /// The traces topics (`traces.topics`, else `otlp_spans`).
    pub fn traces_topics(&self) -> Vec<String> {
        self.traces
            .topics
            .clone()
            .unwrap_or_else(|| vec![DEFAULT_TRACES_TOPIC.into()])
    }

    /// The profiles encoding (`encoding` when set, else `profiles.encoding`).
    pub fn profiles_encoding(&self) -> Encoding {
        self.encoding.unwrap_or(self.profiles.encoding)
    }

    /// Checks the settings, reading every file `tls` names; the error is `key: problem`.
    pub fn check(&self) -> Result<(), String> {
        self.client().check()?;
        if self.group_id.trim().is_empty() {
            return Err("group_id: is empty".into());
        }
        if !matches!(self.initial_offset.as_str(), "latest" | "earliest") {
            return Err(format!(
                "initial_offset: {:?} is not latest or earliest",
                self.initial_offset
            ));
        }
        if self.profiles_topics().iter().all(|t| t.trim().is_empty()) {
            return Err("profiles.topics: at least one topic is required".into());
        }
        if !matches!(
            self.group_rebalance_strategy.as_str(),
            "range" | "roundrobin" | "cooperative-sticky"
        ) {
            return Err(format!(
                "group_rebalance_strategy: {:?} is not range, roundrobin or cooperative-sticky",
                self.group_rebalance_strategy
            ));
        }
        if self.session_timeout <= self.heartbeat_interval {
            return Err("heartbeat_interval: must be shorter than session_timeout".into());
        }
        Ok(())
    }
}
