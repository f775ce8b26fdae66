//! Integration tests of the receivers with real clients over 127.0.0.1 (one test binary).

mod auth;
mod backpressure;
mod common;
mod hardening;
mod otlp_grpc;
mod otlp_http;
mod sentry;
mod tls;
mod traces;
