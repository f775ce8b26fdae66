//! What the engine delivers to: a [`Sink`] (Sentry, envelope files) and the result of one
//! delivery attempt.

use crate::metrics::DiscardReason;
use crate::queue::ReadyMeta;
use std::future::Future;
use std::time::{Duration, Instant};

/// The result of one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Accepted by the destination.
    Delivered,
    /// Refused because of a rate limit that the sink has recorded: wait, do not count a retry.
    RateLimited,
    /// Failed in a way worth retrying (5xx, timeout, connection error).
    Retry {
        /// A delay the server asked for.
        after: Option<Duration>,
        /// The reason to report if retries run out.
        reason: DiscardReason,
        /// What went wrong.
        message: String,
    },
    /// Refused for good (already logged and dead-lettered by the sink).
    Permanent {
        /// What went wrong.
        message: String,
    },
}

/// A destination for merged chunks.
pub trait Sink: Send + Sync + 'static {
    /// The instant until which chunks of `category` for `route` must not be sent, if limited.
    fn blocked_until(&self, route: &str, category: &str, now: Instant) -> Option<Instant>;
    /// Delivers one merged chunk (`json` is its payload).
    fn deliver(&self, meta: ReadyMeta, json: Vec<u8>) -> impl Future<Output = Delivery> + Send;
    /// True when chunks of `category` for `route` are limited for so long that they are
    /// dropped (`ratelimit_backoff`) instead of waiting.
    fn dropping(&self, _route: &str, _category: &str, _now: Instant) -> bool {
        false
    }
    /// Records that `n` chunks like `meta` were given up for `reason`.
    fn discarded(&self, meta: &ReadyMeta, reason: DiscardReason, n: u64);
    /// The Sentry project chunks of `route` go to, if the sink knows one.
    fn project_id(&self, _route: &str) -> Option<u64> {
        None
    }
}
