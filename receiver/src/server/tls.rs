//! TLS for the listeners: rustls (ring provider) server configs from PEM files, and a listener
//! that runs handshakes concurrently and yields finished TLS connections to tonic and axum.

use crate::error::ReceiverError;
use profilink_tls::ServerTlsConfig as TlsConfig;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

/// How long a client may take to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most TLS handshakes in progress at once per listener: beyond it the oldest is abandoned
/// for each new connection, so sockets that never finish a handshake cannot hold descriptors
/// without bound nor keep real clients waiting.
pub const MAX_HANDSHAKES: usize = 1024;

/// ALPN for gRPC: HTTP/2 only.
pub const ALPN_GRPC: &[&[u8]] = profilink_tls::ALPN_GRPC;
/// ALPN for the HTTP receivers: HTTP/2 or HTTP/1.1.
pub const ALPN_HTTP: &[&[u8]] = profilink_tls::ALPN_HTTP;

/// Builds a rustls server config from `config` (certificate reloading and client certificate
/// verification included), offering `alpn`.
pub fn server_config(
    config: &TlsConfig,
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, ReceiverError> {
    config
        .rustls_config(alpn)
        .map(Arc::new)
        .map_err(ReceiverError::Tls)
}

/// A TLS connection with the client's address.
#[derive(Debug)]
pub struct TlsConnection {
    stream: TlsStream<TcpStream>,
    remote: SocketAddr,
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for TlsConnection {
    type ConnectInfo = SocketAddr;

    fn connect_info(&self) -> SocketAddr {
        self.remote
    }
}

/// Accepts TCP connections and completes TLS handshakes in the background (each with
/// [`HANDSHAKE_TIMEOUT`], so a slow client cannot hold up others). Dropping it stops accepting.
#[derive(Debug)]
pub struct TlsListener {
    connections: mpsc::Receiver<TlsConnection>,
    local_addr: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener` with `config`. Must run inside a tokio runtime.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
        Ok(TlsListener {
            connections: rx,
            local_addr,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<TlsConnection>,
) {
    let mut handshakes: std::collections::VecDeque<tokio::task::AbortHandle> =
        std::collections::VecDeque::new();
    let mut abandoned = 0u64;
    loop {
        let accepted = tokio::select! {
            _ = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, remote) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let keepalive =
            socket2::TcpKeepalive::new().with_time(crate::server::connections::TCP_KEEPALIVE);
        let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        handshakes.retain(|h| !h.is_finished());
        if handshakes.len() >= MAX_HANDSHAKES
            && let Some(oldest) = handshakes.pop_front()
        {
            oldest.abort();
            abandoned += 1;
            if abandoned.is_power_of_two() {
                tracing::warn!(
                    abandoned,
                    "{MAX_HANDSHAKES} TLS handshakes in progress: abandoning the oldest for new connections"
                );
            }
        }
        let handshake = tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send(TlsConnection { stream, remote }).await;
                }
                // A client without a valid certificate (`client_ca_file`) ends here too.
                Ok(Err(error)) => tracing::debug!(%remote, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
            }
        });
        handshakes.push_back(handshake.abort_handle());
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConnection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(conn) => {
                let addr = conn.remote;
                (conn, addr)
            }
            // The accept loop only stops when this listener is dropped; never reached.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

impl tokio_stream::Stream for TlsListener {
    type Item = Result<TlsConnection, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.connections.poll_recv(cx).map(|c| c.map(Ok))
    }
}
