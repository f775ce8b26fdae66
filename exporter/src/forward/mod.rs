//! Forwarding what SDKs send to the Sentry receiver on to their real Sentry or Relay (the
//! receiver's `upstream`), as a Relay in front of them does.
//!
//! [`Forwarder`] implements the receiver's [`Upstream`](profilink_consumer::Upstream): each
//! request is appended to a durable queue ([`queue`], the exporter's segment log) before the
//! SDK is answered, then sent by a background task, one request at a time per project (in
//! order) and up to `num_consumers` projects at once. Answers:
//!
//! | upstream answer | what happens |
//! |---|---|
//! | 2xx | delivered, removed from the queue |
//! | 429 | dropped (`rate_limited`, as Relay drops it); its `X-Sentry-Rate-Limits` (or `Retry-After`, else 60 s, on every category) is kept and goes back to the SDKs on their next response |
//! | other 4xx | dropped (`rejected`), logged with the status and body start |
//! | 5xx, timeouts, connection errors | retried with backoff (`retry_on_failure`; by default without giving up), the project's later requests wait behind it |
//!
//! Any answer's `X-Sentry-Rate-Limits` is kept too. The queue is bounded in bytes
//! (`sending_queue.max_size_mib`): a full queue makes the receiver answer 503, nothing is
//! dropped to make room. After a restart the queue is sent on from where it stopped.
//!
//! A district of its own: nothing else in the crate uses its files (lib.rs re-exports
//! [`Forwarder`], [`ForwardConfig`] and [`ForwardMetrics`]), and it takes from the shared
//! rooms only the queue settings, backoff, rate-limit parsing, responses and start errors.
//! Files: [`config`] (the receiver's `upstream:` keys), `export` (the forwarder), [`queue`]
//! (its durable queue), [`send`] (one request), [`limits`] (upstream rate limits),
//! [`metrics`].

pub mod config;
mod export;
pub mod limits;
pub mod metrics;
pub mod queue;
pub mod send;

pub use config::ForwardConfig;
pub use export::Forwarder;
pub use metrics::ForwardMetrics;
