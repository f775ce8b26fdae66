//! Bounding a listener's connections: at most `max_connections` open at once, each closed when
//! it stays idle too long or a response write stalls.
//!
//! [`limit`] takes a stream of accepted connections (plain TCP or finished TLS handshakes) and
//! yields them wrapped in [`Tracked`], each holding a semaphore permit: once `max_connections`
//! are open, no further connection is taken from the listener until one closes (new clients wait
//! in the kernel's accept backlog and hold no file descriptor of profilink's).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};

/// TCP keepalive probes on accepted connections start after this long without traffic, so
/// that peers that vanished are found even without an application timeout.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Limits applied to every connection of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
    /// Close a connection after this long without a byte read or written while no request is
    /// in flight. `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose response write has made no progress for this long (the client
    /// stopped reading). `None`: never.
    pub write_timeout: Option<Duration>,
}

/// Counts the requests in flight on one connection, so that waiting for a slow handler does not
/// count as idle.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Marks a request in flight until the returned guard is dropped.
    pub fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self.0.clone())
    }

    fn busy(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// Ends one in-flight request when dropped.
#[derive(Debug)]
pub struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An accepted connection holding its slot of `max_connections`, with idle and write-stall
/// deadlines: when one passes, reads and writes fail with `TimedOut`, and the server drops it.
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    limits: ConnectionLimits,
    in_flight: InFlight,
    last_activity: Instant,
    write_stalled_since: Option<Instant>,
    timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl<S> Tracked<S> {
    fn new(inner: S, limits: ConnectionLimits, permit: OwnedSemaphorePermit) -> Self {
        let now = Instant::now();
        Tracked {
            inner,
            limits,
            in_flight: InFlight::default(),
            last_activity: now,
            write_stalled_since: None,
            timer: Box::pin(tokio::time::sleep_until(now)),
            _permit: permit,
        }
    }

    /// The connection's in-flight counter (for the per-connection service).
    pub fn in_flight(&self) -> InFlight {
        self.in_flight.clone()
    }

    fn deadline(&self) -> Option<Instant> {
        let idle = match self.limits.idle_timeout {
            Some(d) if !self.in_flight.busy() => Some(self.last_activity + d),
            _ => None,
        };
        let stall = match (self.write_stalled_since, self.limits.write_timeout) {
            (Some(since), Some(d)) => Some(since + d),
            _ => None,
        };
        match (idle, stall) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Ready with an error once a deadline has passed; otherwise arms the timer.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            let Some(deadline) = self.deadline() else {
                return Poll::Pending;
            };
            if Instant::now() >= deadline {
                let what = if self
                    .write_stalled_since
                    .is_some_and(|s| self.limits.write_timeout.is_some_and(|d| s + d <= deadline))
                {
                    "write_timeout: the client stopped reading the response"
                } else {
                    "idle_timeout: connection idle"
                };
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, what));
            }
            if self.timer.deadline() != deadline {
                self.timer.as_mut().reset(deadline);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.last_activity = Instant::now();
                }
                Poll::Ready(result)
            }
            Poll::Pending => this.poll_deadline(cx).map(Err),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, data) {
            Poll::Ready(result) => {
                this.write_stalled_since = None;
                this.last_activity = Instant::now();
                Poll::Ready(result)
            }
            Poll::Pending => {
                this.write_stalled_since.get_or_insert_with(Instant::now);
                this.poll_deadline(cx).map(Err)
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                this.write_stalled_since = None;
                this.last_activity = Instant::now();
                Poll::Ready(result)
            }
            Poll::Pending => {
                this.write_stalled_since.get_or_insert_with(Instant::now);
                this.poll_deadline(cx).map(Err)
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Tracked<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// Takes connections from `incoming` while fewer than `limits.max_connections` are open and
/// yields them [`Tracked`]. Accept errors (e.g. out of file descriptors) are logged and retried
/// after a short pause. Dropping the returned stream stops accepting.
pub fn limit<St, S>(
    mut incoming: St,
    limits: ConnectionLimits,
    what: &'static str,
) -> impl Stream<Item = io::Result<Tracked<S>>> + Send + Unpin + 'static
where
    St: Stream<Item = io::Result<S>> + Send + Unpin + 'static,
    S: Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut warned_full = false;
        loop {
            let permit = match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    warned_full = false;
                    permit
                }
                Err(_) => {
                    if !warned_full {
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            "{what}: max_connections reached; new connections wait"
                        );
                        warned_full = true;
                    }
                    tokio::select! {
                        _ = tx.closed() => return,
                        permit = slots.clone().acquire_owned() => match permit {
                            Ok(p) => p,
                            Err(_) => return,
                        },
                    }
                }
            };
            let next = tokio::select! {
                _ = tx.closed() => return,
                next = incoming.next() => next,
            };
            match next {
                Some(Ok(conn)) => {
                    if tx
                        .send(Ok(Tracked::new(conn, limits, permit)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "{what}: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                None => return,
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
