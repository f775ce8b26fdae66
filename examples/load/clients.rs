//! The producers: `--clients` HTTP/2 connections, each sending its pre-built gRPC bodies in
//! order and retrying the refused ones, as an OTLP client does.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use profilink_proto::otlp::ExportProfilesServiceRequest;
use prost::Message;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// A gRPC message frame: compressed flag, big-endian length, gzipped protobuf.
pub fn frame(req: &ExportProfilesServiceRequest) -> Bytes {
    frame_encoded(&req.encode_to_vec())
}

/// [`frame`] of a request already encoded (`protobuf`).
pub fn frame_encoded(protobuf: &[u8]) -> Bytes {
    let gz = crate::load_request::gzip(protobuf);
    let mut out = Vec::with_capacity(gz.len() + 5);
    out.push(1);
    out.extend_from_slice(&(gz.len() as u32).to_be_bytes());
    out.extend_from_slice(&gz);
    Bytes::from(out)
}

/// What the clients saw.
#[derive(Default)]
pub struct ClientStats {
    pub accepted_samples: u64,
    pub accepted_requests: u64,
    pub refused: u64,
    pub errors: u64,
    /// Seconds per accepted export call.
    pub latencies: Vec<f64>,
}

impl ClientStats {
    fn add(&mut self, s: ClientStats) {
        self.accepted_samples += s.accepted_samples;
        self.accepted_requests += s.accepted_requests;
        self.refused += s.refused;
        self.errors += s.errors;
        self.latencies.extend(s.latencies);
    }
}

/// What every client shares.
#[derive(Clone)]
pub struct Plan {
    /// The OTLP/gRPC endpoint.
    pub addr: String,
    /// Observations in each request.
    pub samples_per_request: u64,
    /// No request starts after it.
    pub deadline: Instant,
    /// The clock the acknowledgement times count from.
    pub start: Instant,
    /// Set to stop early.
    pub stop: Arc<AtomicBool>,
}

/// Runs one client per element of `bodies` (client `c` sends the header `x-agent-id: load-<c>`
/// and records in `acks[c][round]` when its round was accepted, when `acks[c]` is long
/// enough) until each has sent its bodies or the deadline passed; their stats summed.
pub async fn run(
    plan: &Plan,
    bodies: Vec<Vec<Bytes>>,
    acks: &[Arc<Vec<AtomicU64>>],
) -> ClientStats {
    let tasks: Vec<_> = bodies
        .into_iter()
        .enumerate()
        .map(|(c, b)| {
            let acks = acks.get(c).cloned().unwrap_or_default();
            tokio::spawn(client(plan.clone(), format!("load-{c}"), b, acks))
        })
        .collect();
    let mut total = ClientStats::default();
    for t in tasks {
        total.add(t.await.unwrap());
    }
    total
}

/// The gRPC status of a response: from the headers (trailers-only) or the trailers.
fn grpc_status(headers: &hyper::HeaderMap, trailers: Option<&hyper::HeaderMap>) -> (i32, Duration) {
    let get = |h: &hyper::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
    };
    let code = get(headers)
        .or_else(|| trailers.and_then(get))
        .unwrap_or(-1);
    // RetryInfo is in grpc-status-details-bin; honour a fixed short delay instead.
    (code, Duration::from_millis(if code == 14 { 50 } else { 0 }))
}

async fn client(
    plan: Plan,
    agent: String,
    bodies: Vec<Bytes>,
    acks: Arc<Vec<AtomicU64>>,
) -> ClientStats {
    let mut stats = ClientStats::default();
    let stream = TcpStream::connect(&plan.addr).await.expect("connect");
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(4 << 20)
        .initial_connection_window_size(8 << 20)
        .handshake(TokioIo::new(stream))
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let uri = format!(
        "http://{}/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
        plan.addr
    );
    let mut round = 0;
    while round < bodies.len()
        && Instant::now() < plan.deadline
        && !plan.stop.load(Ordering::Relaxed)
    {
        let req = Request::post(&uri)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-encoding", "gzip")
            .header("grpc-accept-encoding", "gzip")
            .header("x-agent-id", agent.as_str())
            .body(Full::new(bodies[round].clone()))
            .unwrap();
        let t0 = Instant::now();
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("request failed: {e}");
                stats.errors += 1;
                break;
            }
        };
        let (parts, body) = resp.into_parts();
        let collected = match body.collect().await {
            Ok(c) => c,
            Err(_) => {
                stats.errors += 1;
                break;
            }
        };
        let (code, wait) = grpc_status(&parts.headers, collected.trailers());
        let dt = t0.elapsed().as_secs_f64();
        match code {
            0 => {
                stats.latencies.push(dt);
                stats.accepted_samples += plan.samples_per_request;
                stats.accepted_requests += 1;
                if let Some(a) = acks.get(round) {
                    a.store(plan.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                round += 1;
            }
            14 | 8 => {
                stats.refused += 1;
                tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
            }
            other => {
                if stats.errors < 3 {
                    eprintln!("grpc-status {other}");
                }
                stats.errors += 1;
                round += 1;
            }
        }
    }
    stats
}
