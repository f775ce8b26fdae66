//! Serving an axum [`Router`] over HTTP/1.1 and HTTP/2 with the Collector's `confighttp`
//! server timeouts (`read_timeout`, `read_header_timeout`, `idle_timeout`, `write_timeout`)
//! and profilink's `max_connections`, on hyper-util's connection builder.

use crate::server::connections::{self, ConnectionLimits};
use crate::server::detach::Detached;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use serde::Deserialize;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};
use tower::Service;

/// How often an HTTP/2 connection is pinged, and how long the answer may take, to find peers
/// that vanished without closing.
const HTTP2_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
const HTTP2_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Declares the configuration struct of an HTTP listener: the fields given, each with its
/// default after `=`, then the connection settings every HTTP listener has, flat under the
/// Collector's `confighttp` key names (`read_timeout`, `read_header_timeout`, `idle_timeout`,
/// `write_timeout`) and profilink's `max_connections` and `handshake_timeout`; its `Default`;
/// and `From<&$name>` for [`HttpServerSettings`], the settings alone (declared with it too).
/// One list of those settings, their documentation and defaults, for every listener.
macro_rules! http_listener_config {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $( $(#[$field_attr:meta])* pub $field:ident: $ty:ty = $default:expr, )*
        }
    ) => {
        $(#[$attr])*
        pub struct $name {
            $( $(#[$field_attr])* pub $field: $ty, )*
            /// Longest time to read a whole request, headers and body, counted from its first
            /// byte; a body still arriving then fails (the request is refused and the
            /// connection closed). Default 1m; `0s`: none.
            #[serde(with = "humantime_serde")]
            pub read_timeout: ::std::time::Duration,
            /// Longest time to read a request's headers (HTTP/1.1), including the wait for the
            /// next request on a kept-alive connection. Default 1m (the Collector's); `0s`:
            /// none.
            #[serde(with = "humantime_serde")]
            pub read_header_timeout: ::std::time::Duration,
            /// A connection without a byte either way and no request in flight for this long
            /// is closed. Default 1m (the Collector's); `0s`: never.
            #[serde(with = "humantime_serde")]
            pub idle_timeout: ::std::time::Duration,
            /// A response write that makes no progress for this long (the client stopped
            /// reading) closes the connection. Default 30s (the Collector's); `0s`: never.
            #[serde(with = "humantime_serde")]
            pub write_timeout: ::std::time::Duration,
            /// Most connections open at once on this listener. At the bound, the oldest
            /// connection that never sent a request is closed for each new client; when every
            /// one has sent one, further clients wait in the accept backlog. Default 1024.
            pub max_connections: usize,
            /// Close a connection that has not started a request (complete headers) this long
            /// after it was accepted. Default 10s; `0s`: never. (profilink's key.)
            #[serde(with = "humantime_serde")]
            pub handshake_timeout: ::std::time::Duration,
        }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                $name {
                    $( $field: $default, )*
                    read_timeout: ::std::time::Duration::from_secs(60),
                    read_header_timeout: ::std::time::Duration::from_secs(60),
                    idle_timeout: ::std::time::Duration::from_secs(60),
                    write_timeout: ::std::time::Duration::from_secs(30),
                    max_connections: 1024,
                    handshake_timeout: $crate::server::connections::DEFAULT_HANDSHAKE_TIMEOUT,
                }
            }
        }

        impl ::std::convert::From<&$name> for $crate::HttpServerSettings {
            fn from(config: &$name) -> Self {
                $crate::HttpServerSettings {
                    read_timeout: config.read_timeout,
                    read_header_timeout: config.read_header_timeout,
                    idle_timeout: config.idle_timeout,
                    write_timeout: config.write_timeout,
                    max_connections: config.max_connections,
                    handshake_timeout: config.handshake_timeout,
                }
            }
        }
    };
}
pub(crate) use http_listener_config;

http_listener_config! {
    /// The connection settings of an HTTP listener, with the Collector's `confighttp` key
    /// names. Durations are humantime strings (`30s`, `1m`); `0s` disables a timeout.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct HttpServerSettings {}
}

/// Whole seconds for `Retry-After`, rounded up, at least 1.
pub(crate) fn retry_after_secs(delay: Duration) -> u64 {
    let secs = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
    secs.max(1)
}

fn nonzero(d: Duration) -> Option<Duration> {
    (!d.is_zero()).then_some(d)
}

impl HttpServerSettings {
    /// The per-connection limits these settings ask for.
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: self.max_connections,
            handshake_timeout: nonzero(self.handshake_timeout),
            idle_timeout: nonzero(self.idle_timeout),
            write_timeout: nonzero(self.write_timeout),
        }
    }
}

/// Serves `router` on the connections `incoming` yields until `shutdown` resolves, then stops
/// accepting and waits for open connections to finish their requests. `what` names the
/// listener in logs.
pub async fn serve<St, S, F>(
    incoming: St,
    router: Router,
    settings: HttpServerSettings,
    shutdown: F,
    what: &'static str,
) where
    St: Stream<Item = io::Result<S>> + Send + Unpin + 'static,
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    F: Future<Output = ()> + Send,
{
    let mut incoming = connections::limit(incoming, settings.connection_limits(), what);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(nonzero(settings.read_header_timeout));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(HTTP2_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(HTTP2_KEEPALIVE_TIMEOUT);
    let read_timeout = nonzero(settings.read_timeout);
    let graceful = GracefulShutdown::new();
    let detached = Detached::default();
    tokio::pin!(shutdown);
    loop {
        let conn = tokio::select! {
            _ = &mut shutdown => break,
            conn = incoming.next() => conn,
        };
        let conn = match conn {
            Some(Ok(conn)) => conn,
            Some(Err(_)) => continue,
            None => break,
        };
        let in_flight = conn.in_flight();
        let router = router.clone();
        let detached = detached.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let guard = in_flight.enter();
            let req = req.map(|b| DeadlineBody::new(b, read_timeout));
            let mut router = router.clone();
            // All or nothing: the handler runs to its end even if the client goes away.
            let call = detached.run(async move {
                let response: Result<Response<axum::body::Body>, Infallible> =
                    router.call(req).await;
                drop(guard);
                response
            });
            async move {
                call.await.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "{what}: request handler panicked");
                    let mut response = Response::new(axum::body::Body::empty());
                    *response.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                    Ok(response)
                })
            }
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(conn), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "{what}: connection ended with an error");
            }
        });
    }
    drop(incoming);
    graceful.shutdown().await;
    // Requests whose clients went away still run; the pipelines stop after them.
    detached.idle().await;
}

/// A request body that fails once `read_timeout` (when set) has passed since the request
/// began.
struct DeadlineBody {
    inner: Incoming,
    deadline: Option<(Pin<Box<Sleep>>, Duration)>,
}

impl DeadlineBody {
    fn new(inner: Incoming, limit: Option<Duration>) -> Self {
        DeadlineBody {
            inner,
            deadline: limit.map(|d| (Box::pin(tokio::time::sleep_until(Instant::now() + d)), d)),
        }
    }
}

/// The error a body read gets once `read_timeout` has passed.
#[derive(Debug, thiserror::Error)]
#[error("read_timeout: the request was not read within {0:?}")]
pub struct ReadTimeout(Duration);

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match &mut this.deadline {
                Some((sleep, limit)) => match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(ReadTimeout(*limit).into()))),
                    Poll::Pending => Poll::Pending,
                },
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}
