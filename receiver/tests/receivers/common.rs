//! Shared helpers: fixtures, servers on 127.0.0.1:0 with a channel consumer, compression, a raw
//! gRPC client.

use bytes::BufMut;
use profilink_consumer::{Batch, ChannelConsumer, Payload, ReceiverKind, SentryBatch};
use profilink_proto::otlp::{
    EXPORT_PATH, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    ExportTraceServiceRequest, ProfilesData, data_from_request,
};
use profilink_receiver::{
    OtlpGrpcConfig, OtlpHttpConfig, ReceiverError, SentryReceiverConfig, ServerHandle, Stats,
    serve_otlp_grpc, serve_otlp_http, serve_sentry,
};
use prost::Message;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint};

pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
pub const TLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls");

/// A well-formed 32-character public key.
pub const KEY: &str = "0123456789abcdef0123456789abcdef";

/// The auth header sentry-python 2.75.0 sends.
pub fn sdk_auth(key: &str) -> String {
    format!("Sentry sentry_key={key}, sentry_version=7, sentry_client=sentry.python/2.75.0")
}

/// `(name, bytes, decoded)` for every OTLP fixture.
pub fn otlp_fixtures() -> Vec<(String, Vec<u8>, ExportProfilesServiceRequest)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(format!("{FIXTURES}/otlp"))
        .expect("OTLP fixtures directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pb"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 4, "expected the OTLP fixtures");
    paths
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("fixture");
            let req = ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("decodes");
            (name(&p), bytes, req)
        })
        .collect()
}

pub fn otlp_fixture(file: &str) -> ExportProfilesServiceRequest {
    let bytes = std::fs::read(format!("{FIXTURES}/otlp/{file}")).expect("fixture");
    ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("decodes")
}

/// `(name, bytes)` for every envelope fixture.
pub fn envelope_fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["python", "python-v1"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(format!("{FIXTURES}/sentry/{dir}"))
            .expect("Sentry fixtures directory")
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "envelope"))
            .collect();
        paths.sort();
        for p in paths {
            out.push((name(&p), std::fs::read(&p).expect("fixture")));
        }
    }
    assert!(out.len() >= 5, "expected the envelope fixtures");
    out
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A server under test: its address, the consumer's channel, its counters.
pub struct Running {
    pub addr: SocketAddr,
    pub batches: mpsc::Receiver<Batch>,
    pub stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<ServerHandle>,
}

impl Running {
    /// The next batch the consumer received (fails after 10 s).
    pub async fn next_batch(&mut self) -> Batch {
        tokio::time::timeout(Duration::from_secs(10), self.batches.recv())
            .await
            .expect("a batch within 10 s")
            .expect("channel open")
    }

    /// Asserts the consumer received nothing.
    pub fn assert_no_batch(&mut self) {
        assert!(self.batches.try_recv().is_err(), "unexpected batch");
    }

    /// Graceful shutdown.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), handle.wait())
                .await
                .expect("stops within 10 s")
                .expect("stops cleanly");
        }
    }
}

/// What a test server's shutdown waits for.
type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Starts a server with `serve`, on a channel consumer of `capacity` that takes traces when
/// `traces` is true.
async fn start<F, Fut>(capacity: usize, traces: bool, serve: F) -> Running
where
    F: FnOnce(Arc<ChannelConsumer>, Arc<Stats>, Shutdown) -> Fut,
    Fut: Future<Output = Result<ServerHandle, ReceiverError>>,
{
    let (consumer, batches) = ChannelConsumer::new(capacity);
    let consumer = Arc::new(consumer.with_traces(traces));
    let stats = Arc::new(Stats::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = Box::pin(async move {
        let _ = stopped.await;
    });
    let handle = serve(consumer, Arc::clone(&stats), shutdown)
        .await
        .expect("the server starts");
    Running {
        addr: handle.local_addr(),
        batches,
        stats,
        stop: Some(stop),
        handle: Some(handle),
    }
}

pub async fn start_grpc(config: OtlpGrpcConfig, capacity: usize) -> Running {
    start_grpc_with(config, capacity, false).await
}

/// A gRPC server whose consumer takes traces when `traces` is true.
pub async fn start_grpc_with(config: OtlpGrpcConfig, capacity: usize, traces: bool) -> Running {
    let config = OtlpGrpcConfig {
        endpoint: "127.0.0.1:0".into(),
        ..config
    };
    start(capacity, traces, async |consumer, stats, shutdown| {
        serve_otlp_grpc(&config, consumer, stats, shutdown).await
    })
    .await
}

pub async fn start_http(config: OtlpHttpConfig, capacity: usize) -> Running {
    start_http_with(config, capacity, false).await
}

/// An HTTP server whose consumer takes traces when `traces` is true.
pub async fn start_http_with(config: OtlpHttpConfig, capacity: usize, traces: bool) -> Running {
    let config = OtlpHttpConfig {
        endpoint: "127.0.0.1:0".into(),
        ..config
    };
    start(capacity, traces, async |consumer, stats, shutdown| {
        serve_otlp_http(&config, consumer, stats, shutdown).await
    })
    .await
}

pub async fn start_sentry(config: SentryReceiverConfig, capacity: usize) -> Running {
    let config = SentryReceiverConfig {
        endpoint: "127.0.0.1:0".into(),
        ..config
    };
    start(capacity, false, async |consumer, stats, shutdown| {
        serve_sentry(&config, consumer, stats, shutdown).await
    })
    .await
}

/// POSTs `body` to `url` as `content_type`, with `Content-Encoding: encoding` when given.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
) -> reqwest::Response {
    let mut request = client
        .post(url)
        .header("content-type", content_type)
        .body(body);
    if let Some(e) = encoding {
        request = request.header("content-encoding", e);
    }
    request.send().await.expect("request sent")
}

/// The OTLP data of a batch.
pub fn otlp_payload(batch: Batch) -> ProfilesData {
    match batch.payload {
        Payload::Otlp(data) => data,
        Payload::Sentry(_) | Payload::Traces(_) => panic!("expected an OTLP profiles batch"),
    }
}

/// The Sentry data of a batch.
pub fn sentry_payload(batch: Batch) -> SentryBatch {
    match batch.payload {
        Payload::Sentry(data) => data,
        Payload::Otlp(_) | Payload::Traces(_) => panic!("expected a Sentry batch"),
    }
}

/// The OTLP traces of a batch.
pub fn traces_payload(batch: Batch) -> ExportTraceServiceRequest {
    assert_eq!(
        (batch.receiver, batch.samples, batch.profiles),
        (ReceiverKind::Otlp, 0, 0)
    );
    match batch.payload {
        Payload::Traces(request) => request,
        Payload::Otlp(_) | Payload::Sentry(_) => panic!("expected an OTLP traces batch"),
    }
}

/// What the consumer should receive for a fully valid request.
pub fn expected_data(req: &ExportProfilesServiceRequest) -> ProfilesData {
    data_from_request(req.clone())
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).expect("zlib");
    e.finish().expect("zlib")
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).expect("zstd")
}

/// A gzip body that inflates to `total` bytes of zeros, cheaply: one member of 1 MiB of zeros
/// (about 1 KiB compressed), repeated.
pub fn gzip_bomb(total: usize) -> Vec<u8> {
    const MEMBER: usize = 1 << 20;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; MEMBER]).expect("gzip");
    let member = e.finish().expect("gzip");
    member.repeat(total / MEMBER)
}

pub async fn grpc_channel(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connects")
}

/// Sends raw bytes as the Export request message (for garbage and truncated input).
pub async fn grpc_raw_export(
    channel: Channel,
    message: Vec<u8>,
    compression: Option<CompressionEncoding>,
) -> Result<ExportProfilesServiceResponse, tonic::Status> {
    grpc_raw_call(channel, EXPORT_PATH, message, compression).await
}

/// Sends raw bytes to `path`.
pub async fn grpc_raw_call(
    channel: Channel,
    path: &'static str,
    message: Vec<u8>,
    compression: Option<CompressionEncoding>,
) -> Result<ExportProfilesServiceResponse, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Some(c) = compression {
        grpc = grpc.send_compressed(c);
    }
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unknown(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(message), path, RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = ExportProfilesServiceResponse;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> Result<Option<ExportProfilesServiceResponse>, tonic::Status> {
        ExportProfilesServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| tonic::Status::internal(e.to_string()))
    }
}
