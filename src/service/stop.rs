//! The service's stop signals as futures, and the pipelines' periodic work until the
//! receivers stop.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// A future resolving once `rx` says stop.
pub fn waiter(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Runs `tick` every `every` until `stop` says stop (the pipelines' periodic work: join
/// buffer releases, waiting traces).
pub fn spawn_ticker<F, Fut>(
    every: Duration,
    stop: &watch::Receiver<bool>,
    mut tick: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let stop = waiter(stop);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(every);
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
