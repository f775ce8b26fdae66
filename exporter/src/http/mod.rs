//! What every exporter's transport shares: HTTP and gRPC clients built from the `tls:` settings
//! (system roots, private CAs, client certificates) with proxies from the environment, request
//! compression, and Sentry's rate-limit and `Retry-After` headers.
//!
//! * [`client`]: one pooled `reqwest` client (HTTP/1.1 and HTTP/2 over rustls). Proxies come
//!   from `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` minus `NO_PROXY`.
//! * [`grpc_channel`]: a lazily connecting tonic channel; TLS as the Collector's `configgrpc`
//!   decides ([`ClientTlsConfig::grpc_uses_tls`]); the same proxy variables through an HTTP
//!   `CONNECT` tunnel (only `http://` proxy URLs).
//! * [`request_error`]: the text of a failed request, with TLS handshake failures logged with
//!   their peer and counted ([`tls_handshake_failures`]).
//! * [`read_response`]: a response's status, rate-limit headers and the start of its body.
//!
//! [`ClientTlsConfig::grpc_uses_tls`]: profilink_tls::ClientTlsConfig::grpc_uses_tls

mod client;
mod compress;
mod grpc;
pub mod rate_limits;
mod response;

pub use client::{client, request_error, tls_handshake_failures};
pub use compress::{compress, compress_level, compress_written, content_encoding};
pub use grpc::{grpc_channel, grpc_url};
pub use rate_limits::{RateLimits, parse_retry_after};
pub use response::read_response;
