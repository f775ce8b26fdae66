//! The gRPC exporters' channel: TLS decided as the Collector's `configgrpc` decides, rustls
//! through `hyper-rustls`, and proxies from the environment through an HTTP `CONNECT` tunnel.

use super::client::{handshake_failed, is_tls_error};
use crate::{SDK_NAME, VERSION};
use ::http::Uri;
use hyper_rustls::{FixedServerNameResolver, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;
use hyper_util::rt::TokioIo;
use profilink_consumer::ExportError;
use profilink_tls::ClientTlsConfig;
use profilink_tls::rustls::pki_types::ServerName;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tower::{Service, ServiceExt as _};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The URL a gRPC exporter dials for `endpoint` (`host:port` or a URL): `https://` when it
/// uses TLS ([`ClientTlsConfig::grpc_uses_tls`]), else `http://`.
pub fn grpc_url(endpoint: &str, tls: &ClientTlsConfig) -> String {
    let e = endpoint.trim();
    let rest = e
        .strip_prefix("https://")
        .or_else(|| e.strip_prefix("http://"))
        .unwrap_or(e);
    let scheme = if tls.grpc_uses_tls(e) {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{rest}")
}

/// A lazily connecting channel to `endpoint` with `timeout` to connect. Reads the `tls` files
/// now (errors name their key) and the proxy variables (`HTTPS_PROXY`, `HTTP_PROXY`,
/// `ALL_PROXY`, `NO_PROXY`).
pub fn grpc_channel(
    endpoint: &str,
    timeout: Duration,
    tls: &ClientTlsConfig,
) -> Result<Channel, ExportError> {
    let url = grpc_url(endpoint, tls);
    let ep = Endpoint::from_shared(url.clone())
        .map_err(|e| ExportError::Config(format!("invalid OTLP endpoint {endpoint:?}: {e}")))?
        .connect_timeout(timeout)
        .user_agent(format!("{SDK_NAME}/{VERSION}"))
        .map_err(|e| ExportError::Config(e.to_string()))?;
    let proxy = ProxyConnector::from_env();
    if !url.starts_with("https://") {
        return Ok(ep.connect_with_connector_lazy(proxy));
    }
    // hyper-rustls offers `h2` itself (`enable_http2`) and refuses a preset ALPN list.
    let config = tls
        .rustls_config(&[])
        .map_err(|e| ExportError::Config(e.to_string()))?;
    let builder = HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only();
    let https = match &tls.server_name_override {
        Some(name) => {
            let name = ServerName::try_from(name.trim().to_string()).map_err(|e| {
                ExportError::Config(format!("tls.server_name_override: {name:?}: {e}"))
            })?;
            builder
                .with_server_name_resolver(FixedServerNameResolver::new(name))
                .enable_http2()
                .wrap_connector(proxy)
        }
        None => builder.enable_http2().wrap_connector(proxy),
    };
    Ok(ep.connect_with_connector_lazy(HandshakeLog(https)))
}

/// Connects over TCP, through an HTTP `CONNECT` proxy when the environment names one for the
/// destination (as curl reads `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`).
#[derive(Clone, Debug)]
pub struct ProxyConnector {
    http: HttpConnector,
    matcher: Arc<Matcher>,
}

impl ProxyConnector {
    /// Proxies from the current environment.
    pub fn from_env() -> Self {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        ProxyConnector {
            http,
            matcher: Arc::new(Matcher::from_env()),
        }
    }
}

impl Service<Uri> for ProxyConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let http = self.http.clone();
        let Some(proxy) = self.matcher.intercept(&dst) else {
            return Box::pin(async move { http.oneshot(dst).await.map_err(Into::into) });
        };
        let proxy_uri = proxy.uri().clone();
        if proxy_uri.scheme_str() != Some("http") {
            return Box::pin(async move {
                Err(format!(
                    "proxy {proxy_uri} for {dst}: only http:// proxies are supported for gRPC"
                )
                .into())
            });
        }
        let mut tunnel = Tunnel::new(proxy_uri.clone(), http);
        if let Some(auth) = proxy.basic_auth() {
            tunnel = tunnel.with_auth(auth.clone());
        }
        Box::pin(async move {
            tunnel
                .oneshot(dst)
                .await
                .map_err(|e| format!("through proxy {proxy_uri}: {e}").into())
        })
    }
}

/// Logs and counts failed TLS handshakes of the wrapped connector, naming the peer.
#[derive(Clone, Debug)]
struct HandshakeLog<C>(C);

impl<C> Service<Uri> for HandshakeLog<C>
where
    C: Service<Uri, Error = BoxError> + Clone + Send + 'static,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let fut = self.0.call(dst.clone());
        Box::pin(async move {
            fut.await.map_err(|e| {
                if is_tls_error(e.as_ref()) {
                    let peer = dst
                        .authority()
                        .map_or("unknown", |a| a.as_str())
                        .to_string();
                    handshake_failed(&peer, &e);
                    format!("TLS handshake with {peer} failed: {e}").into()
                } else {
                    e
                }
            })
        })
    }
}
