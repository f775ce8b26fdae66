//! The OTLP door: OTLP profiles and traces over gRPC ([`grpc`]) and HTTP ([`http`]), as the
//! Collector's otlpreceiver serves them.
//!
//! Both transports hand a decoded request to [`ingest`], which does what every signal shares
//! (partial success, the consumer, counting); what differs between signals is each signal's
//! [`IngestSignal`](ingest::IngestSignal) impl: [`profiles`] (with the development version of
//! the request, [`profiles_version`]) and [`traces`].

pub(crate) mod grpc;
pub(crate) mod http;
pub(crate) mod ingest;
pub(crate) mod profiles;
pub mod profiles_version;
pub(crate) mod traces;
