//! Throughput of the OTLP profiles exporter with its sending queue in memory and on disk
//! (`sending_queue.storage`, fsync off and on): the real eBPF request `ebpf-k8s-1.pb` (73 KB)
//! exported `N` times as fast as the queue takes it, over gRPC (gzip) to a counting tonic
//! server on 127.0.0.1. Prints, per mode, requests/s and MB/s (uncompressed protobuf) from the
//! first `export` to the last delivery, and the mean time an `export` call takes.
//!
//! ```sh
//! cargo run --release -p profilink-exporter --example otlp_queue_throughput -- [requests]
//! ```
//! Default: 2000 requests per mode.

use profilink_consumer::ExportError;
use profilink_exporter::{ClientTlsConfig, OtlpExporter, OtlpExporterConfig, QueueConfig};
use profilink_proto::otlp::profiles_service_server::{ProfilesService, ProfilesServiceServer};
use profilink_proto::otlp::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};
use prost::Message;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Counter(Arc<AtomicU64>);

#[tonic::async_trait]
impl ProfilesService for Counter {
    async fn export(
        &self,
        _req: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, tonic::Status> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(tonic::Response::new(
            ExportProfilesServiceResponse::default(),
        ))
    }
}

async fn run(
    name: &str,
    endpoint: &str,
    queue: QueueConfig,
    req: &ExportProfilesServiceRequest,
    n: u64,
    received: &AtomicU64,
) {
    let cfg = OtlpExporterConfig {
        endpoint: endpoint.to_string(),
        tls: ClientTlsConfig {
            insecure: true,
            ..Default::default()
        },
        sending_queue: queue,
        ..Default::default()
    };
    let exp = OtlpExporter::start(cfg).await.expect("exporter");
    let before = received.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut in_export = Duration::ZERO;
    for _ in 0..n {
        loop {
            let t = Instant::now();
            let outcome = exp.export(req.clone()).await;
            in_export += t.elapsed();
            match outcome {
                Ok(()) => break,
                Err(ExportError::Full { .. }) => tokio::time::sleep(Duration::from_millis(1)).await,
                Err(e) => panic!("{e}"),
            }
        }
    }
    while received.load(Ordering::Relaxed) - before < n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    exp.shutdown(Duration::from_secs(10)).await;
    let mb = (n * req.encoded_len() as u64) as f64 / 1e6;
    println!(
        "{name:<22} {:>8.0} req/s {:>8.1} MB/s   export() mean {:>7.1} µs",
        n as f64 / secs,
        mb / secs,
        in_export.as_secs_f64() * 1e6 / n as f64
    );
}

#[tokio::main]
async fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/otlp/ebpf-k8s-1.pb"
    );
    let req = ExportProfilesServiceRequest::decode(&std::fs::read(path).expect("fixture")[..])
        .expect("fixture decodes");
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let received = Arc::new(AtomicU64::new(0));
    let svc = ProfilesServiceServer::new(Counter(received.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
        .max_decoding_message_size(64 << 20);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve(addr),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let endpoint = addr.to_string();
    println!(
        "{n} requests of {} bytes each, gRPC + gzip, 4 consumers",
        req.encoded_len()
    );
    run(
        "memory",
        &endpoint,
        QueueConfig::default(),
        &req,
        n,
        &received,
    )
    .await;
    for fsync in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueConfig {
            storage: Some(dir.path().to_path_buf()),
            fsync,
            ..Default::default()
        };
        let name = format!("storage, fsync {}", if fsync { "on" } else { "off" });
        run(&name, &endpoint, q, &req, n, &received).await;
    }
}
