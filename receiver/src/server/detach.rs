//! Requests run to completion even when their client goes away.
//!
//! hyper and tonic drop a request's future when its connection closes or the client cancels
//! the stream. A future dropped between "the durable queue wrote the batch" and "the exporter
//! took it into its accumulator" leaves a record that is neither delivered in this run nor
//! counted: an abandoned 15 MB request stayed in the queue, invisible, until a restart sent it
//! (as data whose client had been told it failed). So every request is *all or nothing*:
//! [`Detached::run`] moves the handler into a task of its own, which finishes (accepted,
//! counted and delivered, or refused and counted) whatever happens to the connection. A client
//! that went away while its body was still arriving gets nothing accepted: reading the body
//! fails. One that went away later sees its data delivered, at least once (the Collector's
//! receivers behave the same).
//!
//! The server waits for its detached requests ([`Detached::idle`]) after its connections
//! closed, so a shutdown still drains them before the pipelines stop.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The requests of one server that run detached from their connections.
#[derive(Debug, Clone, Default)]
pub struct Detached(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    running: AtomicUsize,
    idle: Notify,
}

/// Ends one detached request when dropped (also when its task panics).
struct Running(Arc<Inner>);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Detached {
    /// Runs `request` in a task of its own and waits for its output. Dropping the returned
    /// future does not stop the task. `Err` only when the task panicked.
    pub fn run<F>(
        &self,
        request: F,
    ) -> impl Future<Output = Result<F::Output, tokio::task::JoinError>> + Send + use<F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.running.fetch_add(1, Ordering::AcqRel);
        let running = Running(Arc::clone(&self.0));
        tokio::spawn(async move {
            let output = request.await;
            drop(running);
            output
        })
    }

    /// Detached requests still running.
    pub fn running(&self) -> usize {
        self.0.running.load(Ordering::Acquire)
    }

    /// Waits until no detached request is running.
    pub async fn idle(&self) {
        loop {
            let notified = self.0.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[tokio::test]
    async fn a_dropped_caller_does_not_stop_the_request() {
        let d = Detached::default();
        let done = Arc::new(AtomicBool::new(false));
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let flag = Arc::clone(&done);
        let caller = d.run(async move {
            let _ = started_tx.send(());
            tokio::time::sleep(Duration::from_millis(50)).await;
            flag.store(true, Ordering::SeqCst);
        });
        let caller = tokio::spawn(caller);
        started.await.unwrap();
        caller.abort();
        assert_eq!(d.running(), 1);
        tokio::time::timeout(Duration::from_secs(5), d.idle())
            .await
            .unwrap();
        assert!(done.load(Ordering::SeqCst), "the request ran to its end");
        assert_eq!(d.running(), 0);
    }

    #[tokio::test]
    async fn output_and_panics_reach_the_caller() {
        let d = Detached::default();
        assert_eq!(d.run(async { 7 }).await.unwrap(), 7);
        let panicked = d
            .run(async {
                if true {
                    panic!("boom")
                }
            })
            .await;
        assert!(panicked.unwrap_err().is_panic());
        d.idle().await;
        assert_eq!(
            d.running(),
            0,
            "a panicking request is not counted as running"
        );
    }
}
