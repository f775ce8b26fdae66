//! The Sentry stand-in: answers every request `200 {}` (after the overload delay), counts
//! envelopes and bytes, and keeps one envelope in 8, as received, with its arrival time (for
//! the delivery latency).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// What the stand-in received.
pub struct StandIn {
    pub envelopes: AtomicU64,
    /// Request bytes, as sent (compressed).
    pub bytes: AtomicU64,
    delay: Duration,
    start: Instant,
    /// (receive time since start in seconds, raw compressed body) of sampled envelopes.
    pub sampled: Mutex<Vec<(f64, Vec<u8>)>>,
}

impl StandIn {
    /// Serves on a free loopback port, answering each request after `delay`; times count
    /// from `start`.
    pub async fn start(delay: Duration, start: Instant) -> (Arc<StandIn>, SocketAddr) {
        let st = Arc::new(StandIn {
            envelopes: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            delay,
            start,
            sampled: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .fallback(receive)
            .layer(DefaultBodyLimit::disable())
            .with_state(st.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (st, addr)
    }
}

async fn receive(State(st): State<Arc<StandIn>>, body: Bytes) -> &'static str {
    let n = st.envelopes.fetch_add(1, Ordering::Relaxed);
    st.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    if n.is_multiple_of(8) {
        let t = st.start.elapsed().as_secs_f64();
        st.sampled.lock().unwrap().push((t, body.to_vec()));
    }
    if !st.delay.is_zero() {
        tokio::time::sleep(st.delay).await;
    }
    "{}"
}
