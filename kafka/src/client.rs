//! What the receiver's and the exporter's librdkafka clients report, as profilink log lines:
//! librdkafka's own log (a failed TLS handshake, a refused SASL authentication, an unreachable
//! broker) and its client errors, under the `profilink_kafka` target instead of the `log`
//! crate's `librdkafka` one.

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;

/// One line of librdkafka's log (`fac` is its facility: `SSL`, `SASL`, `FAIL`, …). Its
/// messages never hold the SASL password (librdkafka logs its configuration only with
/// `debug: conf`, which profilink does not set).
pub(crate) fn log(side: &str, level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error
        | RDKafkaLogLevel::Warning => {
            tracing::warn!(client = side, facility = fac, "librdkafka: {message}")
        }
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::info!(client = side, facility = fac, "librdkafka: {message}")
        }
        RDKafkaLogLevel::Debug => {
            tracing::debug!(client = side, facility = fac, "librdkafka: {message}")
        }
    }
}

/// A client error (brokers down, a TLS or SASL failure, …): librdkafka retries by itself.
pub(crate) fn error(side: &str, error: &KafkaError, reason: &str) {
    tracing::warn!(client = side, error = %error, "Kafka client error: {reason}");
}
