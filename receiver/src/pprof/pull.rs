//! What the pull modes (`remote`, `file`) share: the schedule (a first pull after
//! `initial_delay`, then one every `collection_interval`, never two at once; a pull that runs
//! late delays the next instead of bunching them) and the end of a pull (its profile handed to
//! the pipeline, the outcome counted and logged).

use crate::converted::{HandoffError, hand_off};
use crate::stats::Counters;
use crate::stats::scrape::ScrapeFailure;
use profilink_consumer::{ConsumeError, Consumer, ReceiverKind, Transport};
use profilink_proto::otlp::ProfilesData;
use std::future::Future;
use std::time::Duration;
use tokio::time::MissedTickBehavior;

/// Runs `pull` after `initial_delay`, then every `interval`, until `stop` resolves (a pull in
/// progress then is abandoned: nothing of it reached the pipeline yet, or all of it had).
pub(crate) async fn every<F, Fut>(
    initial_delay: Duration,
    interval: Duration,
    stop: impl Future<Output = ()>,
    mut pull: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    tokio::pin!(stop);
    let work = async {
        tokio::time::sleep(initial_delay).await;
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            pull().await;
        }
    };
    tokio::select! {
        _ = &mut stop => {}
        _ = work => {}
    }
}

/// Hands a pulled profile to the pipeline; `Err` is why it did not get there.
pub(crate) async fn deliver<C: Consumer + ?Sized>(
    consumer: &C,
    counters: &Counters,
    transport: Transport,
    data: ProfilesData,
) -> Result<u64, (ScrapeFailure, String)> {
    match hand_off(consumer, counters, (ReceiverKind::Pprof, transport), data).await {
        Ok(d) => Ok(d.samples),
        Err(HandoffError::Invalid(m)) => Err((ScrapeFailure::Invalid, m)),
        Err(HandoffError::Consumer(e)) => Err((consume_failure(&e), e.to_string())),
    }
}

fn consume_failure(e: &ConsumeError) -> ScrapeFailure {
    match e {
        ConsumeError::Full { .. } => ScrapeFailure::Full,
        ConsumeError::Rejected(_) => ScrapeFailure::Rejected,
        _ => ScrapeFailure::Unavailable,
    }
}
