//! The service's stop signals as futures.

use std::future::Future;
use tokio::sync::watch;

/// A future resolving once `rx` says stop.
pub fn waiter(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}
