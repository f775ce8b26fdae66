//! What the exporter's sending queue holds: one Kafka message ready to produce (topic, key,
//! encoded payload), so a durable queue replays exactly the messages the first run cut.

use profilink_exporter::Queued;

/// One message to produce.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KafkaRecord {
    /// The topic.
    #[prost(string, tag = "1")]
    pub topic: String,
    /// The message key (empty: unkeyed).
    #[prost(string, tag = "2")]
    pub key: String,
    /// The encoded request.
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    /// Observations (profiles) or spans (traces) the payload holds, for the counters.
    #[prost(uint64, tag = "4")]
    pub samples: u64,
    /// Whether the payload is an OTLP profiles request (it then carries the profiles version
    /// header).
    #[prost(bool, tag = "5")]
    pub profiles: bool,
}

impl Queued for KafkaRecord {
    const KIND: u8 = b'K';
}
