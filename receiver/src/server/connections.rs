//! Bounding a listener's connections: at most `max_connections` open at once, each closed when
//! it says nothing in time, stays idle too long or a response write stalls; and, at the bound,
//! room for new clients made by shedding connections that never sent a request.
//!
//! [`limit`] takes a stream of accepted connections (plain TCP or finished TLS handshakes) and
//! yields them wrapped in [`Tracked`], each holding a semaphore permit.
//!
//! **Admission.** A connection counts as *requesting* once it started a request: an HTTP/2
//! `HEADERS` frame read from it (gRPC and HTTP/2 alike), or a request the HTTP/1.1 service
//! began ([`InFlight::enter`]). With `max_connections` open, the next connection is accepted
//! and the oldest connection that never requested anything is shed (closed) to make room, so
//! a flood of silent sockets cannot lock real clients out (before, 1,100 silent connections
//! left new gRPC clients with `DEADLINE_EXCEEDED` for 300 s). When every open connection has
//! requested something, the new one waits for a slot, and further clients wait in the
//! kernel's accept backlog.
//!
//! **Handshake timeout.** A connection that has not started a request within
//! `handshake_timeout` of being accepted is closed (HTTP/1.1: its headers; HTTP/2: its preface,
//! settings and first `HEADERS`), as grpc-go's `ConnectionTimeout` and Go's
//! `ReadHeaderTimeout` do for their part.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};

/// TCP keepalive probes on accepted connections start after this long without traffic, so
/// that peers that vanished are found even without an application timeout.
pub(crate) const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// The default `handshake_timeout` of every listener: 10 s.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits applied to every connection of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
    /// Close a connection that has not started a request this long after it was accepted.
    /// `None`: never.
    pub handshake_timeout: Option<Duration>,
    /// Close a connection after this long without a byte read or written while no request is
    /// in flight. `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose response write has made no progress for this long (the client
    /// stopped reading). `None`: never.
    pub write_timeout: Option<Duration>,
}

/// What the listener knows of one open connection.
#[derive(Debug, Default)]
struct Conn {
    /// A request was started on it.
    requested: AtomicBool,
    /// Chosen to be closed to make room.
    shed: AtomicBool,
    /// The waker of its last pending read or write, woken when it is shed.
    waker: Mutex<Option<Waker>>,
}

impl Conn {
    fn mark_requested(&self) {
        if !self.requested.load(Ordering::Relaxed) {
            self.requested.store(true, Ordering::Relaxed);
        }
    }

    fn park(&self, cx: &Context<'_>) {
        let mut w = self.waker.lock().unwrap_or_else(|p| p.into_inner());
        match &*w {
            Some(old) if old.will_wake(cx.waker()) => {}
            _ => *w = Some(cx.waker().clone()),
        }
    }

    fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        let w = self.waker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = w {
            w.wake();
        }
    }
}

/// The open connections of one listener, oldest first.
#[derive(Debug, Default)]
struct Registry {
    conns: Mutex<std::collections::VecDeque<Weak<Conn>>>,
}

impl Registry {
    fn add(&self, conn: &Arc<Conn>, max: usize) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        if conns.len() >= 2 * max.max(16) {
            conns.retain(|c| c.strong_count() > 0);
        }
        conns.push_back(Arc::downgrade(conn));
    }

    /// Sheds the oldest open connection that never requested anything; false if none.
    fn shed_oldest_silent(&self) -> bool {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        while conns.front().is_some_and(|c| c.strong_count() == 0) {
            conns.pop_front();
        }
        for c in conns.iter().filter_map(Weak::upgrade) {
            if !c.requested.load(Ordering::Relaxed) && !c.shed.load(Ordering::Acquire) {
                c.shed();
                return true;
            }
        }
        false
    }
}

/// Counts the requests in flight on one connection, so that waiting for a slow handler does not
/// count as idle.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>, Arc<Conn>);

impl InFlight {
    /// Marks a request in flight until the returned guard is dropped.
    pub fn enter(&self) -> InFlightGuard {
        self.1.mark_requested();
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

/// The HTTP/2 client preface (RFC 9113 section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Watches the bytes a connection sends for its first request: an HTTP/2 `HEADERS` frame
/// after the preface. Anything that is not HTTP/2 is left to [`InFlight::enter`].
#[derive(Debug)]
enum Sniffer {
    /// Reading the preface: bytes matched so far.
    Preface(usize),
    /// Reading a frame header: its bytes so far.
    FrameHeader([u8; 9], usize),
    /// Skipping a frame's payload: bytes left.
    Payload(u64),
    /// Done: a request was seen, or the connection is not HTTP/2.
    Done,
}

const HEADERS: u8 = 0x1;

impl Sniffer {
    /// Feeds bytes read; true once a `HEADERS` frame header was read.
    fn feed(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            match self {
                Sniffer::Done => return false,
                Sniffer::Preface(matched) => {
                    let want = &H2_PREFACE[*matched..];
                    let n = want.len().min(data.len());
                    if data[..n] != want[..n] {
                        *self = Sniffer::Done;
                        return false;
                    }
                    *matched += n;
                    data = &data[n..];
                    if *matched == H2_PREFACE.len() {
                        *self = Sniffer::FrameHeader([0; 9], 0);
                    }
                }
                Sniffer::FrameHeader(head, got) => {
                    let n = (9 - *got).min(data.len());
                    head[*got..*got + n].copy_from_slice(&data[..n]);
                    *got += n;
                    data = &data[n..];
                    if *got == 9 {
                        if head[3] == HEADERS {
                            *self = Sniffer::Done;
                            return true;
                        }
                        let len =
                            u64::from(head[0]) << 16 | u64::from(head[1]) << 8 | u64::from(head[2]);
                        *self = if len == 0 {
                            Sniffer::FrameHeader([0; 9], 0)
                        } else {
                            Sniffer::Payload(len)
                        };
                    }
                }
                Sniffer::Payload(left) => {
                    let n = (*left).min(data.len() as u64);
                    *left -= n;
                    data = &data[n as usize..];
                    if *left == 0 {
                        *self = Sniffer::FrameHeader([0; 9], 0);
                    }
                }
            }
        }
        false
    }
}

/// An accepted connection holding its slot of `max_connections`, with handshake, idle and
/// write-stall deadlines: when one passes (or the connection is shed to make room), reads and
/// writes fail, and the server drops it.
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    limits: ConnectionLimits,
    in_flight: InFlight,
    accepted: Instant,
    sniffer: Sniffer,
    last_activity: Instant,
    write_stalled_since: Option<Instant>,
    timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl<S> Tracked<S> {
    fn new(
        inner: S,
        limits: ConnectionLimits,
        conn: Arc<Conn>,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        let now = Instant::now();
        Tracked {
            inner,
            limits,
            in_flight: InFlight(Arc::default(), conn),
            accepted: now,
            sniffer: Sniffer::Preface(0),
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

    fn conn(&self) -> &Conn {
        &self.in_flight.1
    }

    fn deadline(&self) -> Option<(Instant, &'static str)> {
        let requested = self.conn().requested.load(Ordering::Relaxed);
        let handshake = match self.limits.handshake_timeout {
            Some(d) if !requested => Some((
                self.accepted + d,
                "handshake_timeout: no request started in time",
            )),
            _ => None,
        };
        let idle = match self.limits.idle_timeout {
            Some(d) if !self.in_flight.busy() => {
                Some((self.last_activity + d, "idle_timeout: connection idle"))
            }
            _ => None,
        };
        let stall = match (self.write_stalled_since, self.limits.write_timeout) {
            (Some(since), Some(d)) => Some((
                since + d,
                "write_timeout: the client stopped reading the response",
            )),
            _ => None,
        };
        [handshake, idle, stall]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at)
    }

    /// Notes the outcome of a write on the connection: progress ends a stall and counts as
    /// activity; a write that cannot proceed starts (or continues) a stall, and fails once
    /// `write_timeout` or another deadline has passed.
    fn written(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match poll {
            Poll::Ready(result) => {
                self.write_stalled_since = None;
                self.last_activity = Instant::now();
                Poll::Ready(result)
            }
            Poll::Pending => {
                self.write_stalled_since.get_or_insert_with(Instant::now);
                self.poll_deadline(cx).map(Err)
            }
        }
    }

    /// Ready with an error once the connection was shed or a deadline has passed; otherwise
    /// arms the timer and registers for shedding.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        self.conn().park(cx);
        loop {
            if self.conn().shed.load(Ordering::Acquire) {
                return Poll::Ready(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "max_connections reached: a connection that never sent a request was shed",
                ));
            }
            let Some((deadline, what)) = self.deadline() else {
                return Poll::Pending;
            };
            if Instant::now() >= deadline {
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
                    if this.sniffer.feed(&buf.filled()[before..]) {
                        this.conn().mark_requested();
                    }
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
        let written = Pin::new(&mut self.inner).poll_write(cx, data);
        self.written(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.written(cx, written)
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

/// Takes connections from `incoming` and yields them [`Tracked`], at most
/// `limits.max_connections` open at once; at the bound, the oldest connection that never sent a
/// request is shed for each new one, and without such a connection the new one waits for a
/// slot (see the module docs). Accept errors (e.g. out of file descriptors) are logged and
/// retried after a short pause. Dropping the returned stream stops accepting.
pub fn limit<St, S>(
    mut incoming: St,
    limits: ConnectionLimits,
    what: &'static str,
) -> impl Stream<Item = io::Result<Tracked<S>>> + Send + Unpin + 'static
where
    St: Stream<Item = io::Result<S>> + Send + Unpin + 'static,
    S: Send + 'static,
{
    let max = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(max));
    let registry = Registry::default();
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut warned_full = false;
        let mut shed = 0u64;
        loop {
            let next = tokio::select! {
                _ = tx.closed() => return,
                next = incoming.next() => next,
            };
            let conn = match next {
                Some(Ok(conn)) => conn,
                Some(Err(error)) => {
                    tracing::warn!(%error, "{what}: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                None => return,
            };
            let permit = match slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    warned_full = false;
                    permit
                }
                Err(_) => {
                    if registry.shed_oldest_silent() {
                        shed += 1;
                        if shed.is_power_of_two() {
                            tracing::warn!(
                                max_connections = max,
                                shed,
                                "{what}: max_connections reached; shedding connections that never sent a request"
                            );
                        }
                    } else if !warned_full {
                        tracing::warn!(
                            max_connections = max,
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
            let state = Arc::new(Conn::default());
            registry.add(&state, max);
            if tx
                .send(Ok(Tracked::new(conn, limits, state, permit)))
                .await
                .is_err()
            {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sniffer_finds_the_first_headers_frame_after_preface_and_settings() {
        let mut wire = H2_PREFACE.to_vec();
        // SETTINGS with one 6-byte setting, WINDOW_UPDATE (4 bytes), then HEADERS.
        wire.extend_from_slice(&[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
        wire.extend_from_slice(&[0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
        let headers_at = wire.len();
        wire.extend_from_slice(&[0, 0, 1, HEADERS, 4, 0, 0, 0, 1, 0x82]);
        // Fed whole, or a byte at a time, it fires exactly at the HEADERS frame header.
        let mut whole = Sniffer::Preface(0);
        assert!(!whole.feed(&wire[..headers_at + 8]));
        assert!(whole.feed(&wire[headers_at + 8..]));
        let mut bytewise = Sniffer::Preface(0);
        let fired: Vec<usize> = (0..wire.len())
            .filter(|&i| bytewise.feed(&wire[i..=i]))
            .collect();
        assert_eq!(fired, vec![headers_at + 8]);
    }

    #[test]
    fn the_sniffer_ignores_what_is_not_http2() {
        let mut s = Sniffer::Preface(0);
        assert!(!s.feed(b"POST /v1development/profiles HTTP/1.1\r\n"));
        assert!(matches!(s, Sniffer::Done));
        // A HEADERS-looking byte later changes nothing.
        assert!(!s.feed(&[0, 0, 1, HEADERS, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn shedding_takes_the_oldest_connection_that_never_requested() {
        let r = Registry::default();
        let (a, b, c) = (
            Arc::new(Conn::default()),
            Arc::new(Conn::default()),
            Arc::new(Conn::default()),
        );
        for x in [&a, &b, &c] {
            r.add(x, 8);
        }
        a.mark_requested();
        assert!(r.shed_oldest_silent());
        assert!(
            !a.shed.load(Ordering::Acquire),
            "a client that sent a request stays"
        );
        assert!(b.shed.load(Ordering::Acquire), "the oldest silent one goes");
        assert!(r.shed_oldest_silent());
        assert!(c.shed.load(Ordering::Acquire));
        assert!(!r.shed_oldest_silent(), "nothing left to shed");
        drop(b);
        drop(c);
        assert!(!r.shed_oldest_silent());
    }

    #[tokio::test]
    async fn a_connection_that_starts_no_request_is_closed_at_the_handshake_timeout() {
        let (client, server) = tokio::io::duplex(64);
        let slots = Arc::new(Semaphore::new(1));
        let limits = ConnectionLimits {
            max_connections: 1,
            handshake_timeout: Some(Duration::from_millis(200)),
            idle_timeout: None,
            write_timeout: None,
        };
        let mut t = Tracked::new(
            server,
            limits,
            Arc::new(Conn::default()),
            slots.clone().try_acquire_owned().unwrap(),
        );
        let mut buf = [0u8; 16];
        let start = Instant::now();
        let err = tokio::io::AsyncReadExt::read(&mut t, &mut buf)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("handshake_timeout"), "{err}");
        let took = start.elapsed();
        assert!(
            (Duration::from_millis(200)..Duration::from_secs(2)).contains(&took),
            "{took:?}"
        );
        drop(client);
    }
}
