//! The profilink under test: its configuration, the child process, and its `/metrics`.

use crate::args::Args;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A running profilink.
pub struct Service {
    child: Child,
    /// Its process id.
    pub pid: u32,
    /// Its OTLP/gRPC endpoint.
    pub grpc: String,
    metrics_addr: String,
    pprof_addr: String,
    /// Its working directory (the queue's), removed when the service is dropped.
    _dir: tempfile::TempDir,
}

/// The receiver the service under test reads from.
pub enum Door {
    /// The `otlp` receiver (gRPC).
    Otlp,
    /// The `kafka` receiver, reading `topic` from the start as group `profilink-<topic>`.
    Kafka {
        /// The broker's address.
        brokers: String,
        /// The profiles topic.
        topic: String,
    },
}

impl Service {
    /// Starts `a.binary` with the load test's configuration, reading from `door` and sending
    /// to the stand-in at `sentry`, and waits (up to 10 s) until it accepts connections (its
    /// gRPC port; with Kafka, its metrics port). With `symbolize` (the processor's settings, a
    /// YAML flow mapping) the pipeline runs a `symbolize` processor after `profile_sampling`.
    /// With `pprof`, it runs the `pprof` extension (see [`Service::cpu_profile`]).
    pub async fn start(
        a: &Args,
        door: &Door,
        sentry: SocketAddr,
        symbolize: Option<&str>,
        pprof: bool,
    ) -> Service {
        let dir = tempfile::tempdir().unwrap();
        let grpc = free_addr();
        let metrics_addr = free_addr();
        let (queue_mib, consumers) = if a.overload { (64, 4) } else { (256, 8) };
        let (receiver, receivers) = match door {
            Door::Otlp => (
                format!(
                    r#"  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}", max_recv_msg_size_mib: 64 }}"#
                ),
                "otlp",
            ),
            Door::Kafka { brokers, topic } => (
                format!(
                    r#"  kafka:
    brokers: ["{brokers}"]
    group_id: profilink-{topic}
    initial_offset: earliest
    profiles: {{ topics: [{topic}] }}"#
                ),
                "kafka",
            ),
        };
        let (symbolize_cfg, symbolize_step) = match symbolize {
            Some(s) => (format!("\n  symbolize: {s}"), ", symbolize"),
            None => (String::new(), ""),
        };
        let pprof_addr = free_addr();
        let (pprof_cfg, pprof_ext) = if pprof {
            (
                format!("extensions:\n  pprof: {{ endpoint: \"{pprof_addr}\" }}\n"),
                "\n  extensions: [pprof]",
            )
        } else {
            (String::new(), "")
        };
        let config = format!(
            r#"
{pprof_cfg}receivers:
{receiver}
processors:
  profile_sampling: {{ session_sample_rate: {rate} }}{symbolize_cfg}
exporters:
  sentry:
    dsn: "http://0123456789abcdef0123456789abcdef@{sentry}/1"
    compression: {compression}
    num_consumers: {consumers}
    chunk_duration: 60s
    chunk_idle_timeout: 5s
    sending_queue: {{ storage: ./queue, max_size_mib: {queue_mib}, fsync: {fsync} }}
service:{pprof_ext}
  pipelines:
    profiles: {{ receivers: [{receivers}], processors: [profile_sampling{symbolize_step}], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics_addr}" }}
    logs: {{ level: warn }}
"#,
            fsync = a.fsync,
            rate = a.sample_rate,
            compression = a.compression
        );
        std::fs::write(dir.path().join("load.yaml"), config).unwrap();
        let child = Command::new(&a.binary)
            .args(["run", "--config", "load.yaml"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start profilink");
        let t_wait = Instant::now();
        let ready = match door {
            Door::Otlp => &grpc,
            Door::Kafka { .. } => &metrics_addr,
        };
        while TcpStream::connect(ready).await.is_err() {
            assert!(
                t_wait.elapsed() < Duration::from_secs(10),
                "profilink did not start"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Service {
            pid: child.id(),
            child,
            grpc,
            metrics_addr,
            pprof_addr,
            _dir: dir,
        }
    }

    /// Its `/metrics` text (empty when it cannot be read).
    pub async fn metrics(&self) -> String {
        let addr = &self.metrics_addr;
        let mut s = match TcpStream::connect(addr).await {
            Ok(s) => s,
            Err(_) => return String::new(),
        };
        let req = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        if s.write_all(req.as_bytes()).await.is_err() {
            return String::new();
        }
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Its CPU profile over the next `seconds` (the `pprof` extension's, gzipped pprof
    /// protobuf), written to `to`; a failure is reported, not fatal.
    pub async fn cpu_profile(&self, seconds: u64, to: &Path) {
        let url = format!(
            "http://{}/debug/pprof/profile?seconds={seconds}",
            self.pprof_addr
        );
        let body = match reqwest::get(&url).await {
            Ok(r) if r.status().is_success() => r.bytes().await.ok(),
            _ => None,
        };
        match body.map(|b| std::fs::write(to, b)) {
            Some(Ok(())) => {}
            _ => eprintln!("no CPU profile from {url}"),
        }
    }

    /// Stops it with SIGTERM (it drains and flushes open sessions) and waits for its exit.
    pub fn stop(self) -> ExitStatus {
        self.stop_counted().0
    }

    /// [`Service::stop`], with the CPU seconds (user + system) the process used in its whole
    /// life, read from its exit (`wait4`): everything it did, the drain and the shutdown's
    /// flush included, which `/proc` can no longer tell once it has exited.
    pub fn stop_counted(mut self) -> (ExitStatus, f64) {
        use std::os::unix::process::ExitStatusExt;
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let mut status = 0;
        // SAFETY: `rusage` is a plain C struct of integers, for which all zeroes is valid.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let pid = self.pid as libc::pid_t;
        // SAFETY: both pointers are to live locals; the pid is our own child, not reaped yet
        // (`Child::wait` runs only when this did not reap it).
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped != pid {
            return (self.child.wait().unwrap(), f64::NAN);
        }
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (
            ExitStatus::from_raw(status),
            secs(usage.ru_utime) + secs(usage.ru_stime),
        )
    }
}

/// The sum of the samples of metric `name` (all its label sets) in `/metrics` text.
pub fn scrape(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(name))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

/// The `reason`s of `profilink_exporter_chunks_closed_total`.
const CLOSE_REASONS: [&str; 7] = [
    "duration", "settled", "size", "memory", "idle", "flush", "late",
];

/// The chunks the exporter emitted by why (`profilink_exporter_chunks_closed_total`), in
/// `/metrics` text.
pub fn closed_by_reason(text: &str) -> Vec<(&'static str, u64)> {
    CLOSE_REASONS
        .iter()
        .map(|&r| {
            let n = profilink::telemetry::metrics::scrape_f64(
                text,
                "profilink_exporter_chunks_closed_total",
                &[("reason", r)],
            );
            (r, n.unwrap_or(0.0) as u64)
        })
        .collect()
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}
