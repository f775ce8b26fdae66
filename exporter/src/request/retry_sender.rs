//! One claimed request, sent until it is delivered, refused for good, or its retry budget
//! (`retry_on_failure`) runs out: the Collector's `retry_sender`, with every attempt counted.

use super::retry_rules::{Next, after_failure};
use super::{RequestMetrics, RequestSender, SendOutcome};
use crate::clock::Clock;
use crate::config::RetryConfig;
use crate::durations::AttemptOutcome;
use crate::retry::Backoff;
use std::time::Instant;

/// Sends `request` (of `items` items) with `sender` until it is delivered or given up. The
/// backoff's `max_elapsed_time` is measured on `clock`. Every outcome is counted in `metrics`
/// before this returns, and after its last await.
pub(super) async fn send<S: RequestSender>(
    sender: &S,
    metrics: &S::Metrics,
    retry: &RetryConfig,
    clock: &dyn Clock,
    request: &S::Request,
    items: u64,
) {
    let mut backoff = Backoff::new(retry);
    loop {
        sender.ready().await;
        let started = Instant::now();
        let outcome = sender.attempt(request).await;
        let timed = match &outcome {
            SendOutcome::Delivered(_) => AttemptOutcome::Success,
            SendOutcome::RateLimited => AttemptOutcome::RateLimited,
            SendOutcome::Failed(error) => sender.failure_outcome(error),
        };
        metrics.attempt_durations().record(timed, started.elapsed());
        let error = match outcome {
            SendOutcome::Delivered(rejected) => {
                metrics.sent(items);
                if let Some(rejected) = rejected {
                    metrics.partial_success(rejected);
                }
                return;
            }
            SendOutcome::RateLimited => {
                metrics.failed_attempt();
                tracing::debug!(
                    exporter = S::NAME,
                    destination = sender.destination(),
                    "request rate limited; it waits for the limit"
                );
                continue;
            }
            SendOutcome::Failed(error) => error,
        };
        metrics.failed_attempt();
        match after_failure(&mut backoff, retry, clock.now(), error) {
            Next::Retry(wait, message) => {
                metrics.retry();
                tracing::debug!(
                    exporter = S::NAME,
                    destination = sender.destination(),
                    %message,
                    ?wait,
                    "export failed; retrying"
                );
                tokio::time::sleep(wait).await;
            }
            Next::GiveUp(reason, message) => {
                metrics.dropped(reason, 1, items);
                tracing::warn!(
                    exporter = S::NAME,
                    destination = sender.destination(),
                    items,
                    %message,
                    reason = reason.as_str(),
                    "export failed; request dropped"
                );
                return;
            }
        }
    }
}
