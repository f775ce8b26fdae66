//! The processor's own periodic work: every profiles pipeline with a join buffer releases due
//! chunks and retries parked requests every `join::TICK` (250 ms), and every traces
//! pipeline whose spans wait releases them every `traces::TICK` (100 ms), until the
//! service says stop.

use crate::profiles::Pipeline;
use crate::traces::TracesPipeline;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Starts the timers of `profiles` and `traces` pipelines that need one; each runs until its
/// future from `stop` resolves. Await the handles after stopping to be sure no tick is running.
pub fn start_timers<S>(
    profiles: &[Arc<Pipeline>],
    traces: &[Arc<TracesPipeline>],
    stop: impl Fn() -> S,
) -> Vec<JoinHandle<()>>
where
    S: Future<Output = ()> + Send + 'static,
{
    let mut timers = Vec::new();
    for p in profiles.iter().filter(|p| p.join_metrics().is_some()) {
        let p = p.clone();
        timers.push(every(crate::join::TICK, stop(), move || {
            let p = p.clone();
            async move { p.tick().await }
        }));
    }
    for p in traces.iter().filter(|p| p.waits()) {
        let p = p.clone();
        timers.push(every(crate::traces::TICK, stop(), move || {
            let p = p.clone();
            async move { p.release(false).await }
        }));
    }
    timers
}

/// Runs `tick` every `period` until `stop` resolves.
fn every<F, Fut, S>(period: Duration, stop: S, mut tick: F) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
    S: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = interval.tick() => tick().await,
                _ = &mut stop => break,
            }
        }
    })
}
