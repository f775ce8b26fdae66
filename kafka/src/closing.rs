//! A consumer that is closed on a thread of its own, never on the async runtime.
//!
//! Dropping an `rdkafka` consumer that belongs to a group closes it: it leaves the group and
//! then polls librdkafka's close queue **until the close completes, without a deadline**
//! (`BaseConsumer`'s `Drop`). With the brokers gone the close can never complete, and the
//! thread that drops the consumer is stuck for good. On a tokio worker that hangs the whole
//! process at shutdown: the runtime waits for its workers, and an aborted task's future is
//! dropped on one of them.
//!
//! [`Closing`] owns the consumer and, whatever path drops it (a clean stop, an aborted task,
//! a panic), hands it to a new `kafka-close` thread, which runs the last steps (the final
//! commit, leaving the group) and the drop there. The receiver waits for that thread within
//! its shutdown deadline; past it, the thread is left behind (it holds no lock and stops with
//! the process) and the stop is logged.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use tokio::sync::oneshot;

/// Owns `C` and drops it on a thread of its own (see the module docs).
pub(crate) struct Closing<C: Send + 'static> {
    inner: Option<C>,
}

impl<C: Send + 'static> Closing<C> {
    /// Wraps `consumer`.
    pub(crate) fn new(consumer: C) -> Self {
        Closing {
            inner: Some(consumer),
        }
    }

    /// Runs `last` with the consumer and then drops it, both on a `kafka-close` thread; the
    /// receiver completes when both are done (or with an error when the thread could not be
    /// started, in which case the consumer is leaked rather than dropped here).
    pub(crate) fn close(mut self, last: impl FnOnce(&C) + Send + 'static) -> oneshot::Receiver<()> {
        match self.inner.take() {
            Some(c) => spawn_close(c, last),
            None => oneshot::channel().1,
        }
    }
}

impl<C: Send + 'static> Deref for Closing<C> {
    type Target = C;

    fn deref(&self) -> &C {
        // `inner` is only taken by `close` (which consumes self) and `drop`.
        self.inner.as_ref().expect("consumer present until closed")
    }
}

impl<C: Send + 'static> Drop for Closing<C> {
    fn drop(&mut self) {
        if let Some(c) = self.inner.take() {
            spawn_close(c, |_| {});
        }
    }
}

/// Runs `last` and the drop of `consumer` on a new `kafka-close` thread; the receiver
/// completes once both are done.
fn spawn_close<C: Send + 'static>(
    consumer: C,
    last: impl FnOnce(&C) + Send + 'static,
) -> oneshot::Receiver<()> {
    let (done, closed) = oneshot::channel();
    // If the thread cannot be started, the closure is dropped here, and with it this
    // `ManuallyDrop`: the consumer is leaked instead of blocking this thread in its drop.
    let consumer = ManuallyDrop::new(consumer);
    let started = std::thread::Builder::new()
        .name("kafka-close".into())
        .spawn(move || {
            let c = ManuallyDrop::into_inner(consumer);
            last(&c);
            drop(c);
            let _ = done.send(());
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "Kafka consumer: no thread to close it on; it is abandoned");
    }
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// Stands in for a consumer whose drop blocks until released (a close that cannot
    /// complete), recording the thread it was dropped on.
    struct Stuck {
        release: Mutex<mpsc::Receiver<()>>,
        dropped_on: Arc<Mutex<Option<String>>>,
    }

    impl Drop for Stuck {
        fn drop(&mut self) {
            *self.dropped_on.lock().unwrap() = std::thread::current().name().map(str::to_owned);
            let _ = self.release.lock().unwrap().recv();
        }
    }

    /// A stuck consumer, the sender that releases it and where it was dropped.
    struct Fixture {
        consumer: Stuck,
        release: mpsc::Sender<()>,
        dropped_on: Arc<Mutex<Option<String>>>,
    }

    fn stuck() -> Fixture {
        let (release, rx) = mpsc::channel();
        let dropped_on = Arc::new(Mutex::new(None));
        Fixture {
            consumer: Stuck {
                release: Mutex::new(rx),
                dropped_on: dropped_on.clone(),
            },
            release,
            dropped_on,
        }
    }

    #[test]
    fn a_drop_that_never_ends_does_not_hold_the_dropping_thread() {
        let f = stuck();
        let started = std::time::Instant::now();
        drop(Closing::new(f.consumer));
        assert!(started.elapsed() < Duration::from_secs(2));
        for _ in 0..200 {
            if f.dropped_on.lock().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(f.dropped_on.lock().unwrap().as_deref(), Some("kafka-close"));
        f.release.send(()).unwrap();
    }

    #[tokio::test]
    async fn close_runs_the_last_steps_then_the_drop_and_reports_done() {
        let f = stuck();
        let last_ran = Arc::new(AtomicBool::new(false));
        let flag = last_ran.clone();
        let mut closed =
            Closing::new(f.consumer).close(move |_| flag.store(true, Ordering::SeqCst));
        // Still closing: the receiver's deadline is what bounds the wait.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut closed)
                .await
                .is_err()
        );
        assert!(last_ran.load(Ordering::SeqCst));
        f.release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), closed)
            .await
            .expect("closed once the drop ends")
            .unwrap();
        assert_eq!(f.dropped_on.lock().unwrap().as_deref(), Some("kafka-close"));
    }
}
