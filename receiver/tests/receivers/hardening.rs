//! Connection hardening: idle connections, slowloris clients and the connection bound, against
//! the real servers over loopback, with short configured timeouts. File descriptors are counted
//! in /proc/self/fd (client and server ends both live in this process).

use crate::common::*;
use profilink_receiver::{OtlpGrpcConfig, OtlpHttpConfig, SentryReceiverConfig};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: usize = 2000;
/// Descriptors other tests of this binary may open meanwhile.
const SLACK: usize = 150;

/// These tests count this process's descriptors: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const SLOWLORIS: usize = 50;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// Needs about 2 × (IDLE + SLOWLORIS) descriptors in this process; skips loudly when the soft
/// limit cannot be raised that far.
fn enough_fds() -> bool {
    let needed = 2 * (IDLE + SLOWLORIS) as u64 + 512;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return false;
        }
        if lim.rlim_cur < needed && lim.rlim_max >= needed {
            lim.rlim_cur = needed;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    if lim.rlim_cur < needed {
        eprintln!(
            "SKIPPED: needs RLIMIT_NOFILE >= {needed}, have {}",
            lim.rlim_cur
        );
        return false;
    }
    true
}

async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(TcpStream::connect(addr).await.expect("connects"));
    }
    conns
}

/// Sends headers one byte every 200 ms and never finishes them; returns how long the server
/// kept the connection.
async fn slow_headers(addr: SocketAddr) -> Duration {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).await.expect("connects");
    let head = b"POST /x HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for b in head.iter().cycle() {
        if s.write_all(&[*b]).await.is_err() || closed_now(&mut s).await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if start.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    start.elapsed()
}

/// Sends complete headers, then the body at one byte per second; returns how long the server
/// kept the connection.
async fn slow_body(addr: SocketAddr, path: &str) -> Duration {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).await.expect("connects");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.expect("writes headers");
    while start.elapsed() < Duration::from_secs(20) {
        if s.write_all(b"\n").await.is_err() || closed_now(&mut s).await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    start.elapsed()
}

/// True when the server has answered and/or closed (EOF, reset, or any response bytes that end
/// in EOF) — checked without waiting long.
async fn closed_now(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_millis(10), s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// One plain HTTP/1.1 request on a fresh connection; returns the status line and the latency.
async fn answer(addr: SocketAddr, request: &str) -> (String, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).await.expect("connects");
    s.write_all(request.as_bytes()).await.expect("writes");
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut response))
        .await
        .expect("answered within 5 s")
        .expect("reads");
    let text = String::from_utf8_lossy(&response);
    (
        text.lines().next().unwrap_or_default().to_string(),
        start.elapsed(),
    )
}

/// Counts the connections in `conns` the server has closed.
async fn count_closed(conns: &mut [TcpStream]) -> usize {
    let mut closed = 0;
    for s in conns.iter_mut() {
        if closed_now(s).await {
            closed += 1;
        }
    }
    closed
}

fn short_http() -> OtlpHttpConfig {
    OtlpHttpConfig {
        read_timeout: Duration::from_secs(2),
        read_header_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(2),
        max_connections: IDLE + SLOWLORIS + 100,
        ..OtlpHttpConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_idle_and_slowloris_clients_leave_the_receiver_answering() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !enough_fds() {
        return;
    }
    let server = start_http(short_http(), 4).await;
    let addr = server.addr;
    let baseline = open_fds();

    let mut idle = idle_connections(addr, IDLE).await;
    let mut loris = Vec::new();
    for i in 0..SLOWLORIS {
        loris.push(if i % 2 == 0 {
            tokio::spawn(slow_headers(addr))
        } else {
            tokio::spawn(slow_body(addr, "/v1development/profiles"))
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let peak = open_fds();
    assert!(
        peak > baseline + IDLE,
        "the idle connections are open: {peak}"
    );

    // Other clients are answered promptly meanwhile.
    for _ in 0..10 {
        let (status, took) = answer(
            addr,
            "GET /v1development/profiles HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(status.starts_with("HTTP/1.1 "), "{status}");
        assert!(took < Duration::from_secs(1), "answered in {took:?}");
    }

    // Every slowloris client is cut off after the 2 s timeouts (well before 20 s).
    for task in loris {
        let held = task.await.expect("slowloris task");
        assert!(held < Duration::from_secs(6), "slowloris held for {held:?}");
    }
    // The idle ones are closed after idle_timeout, and their server ends are gone.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let closed = count_closed(&mut idle).await;
    assert_eq!(closed, IDLE, "idle connections closed by the server");
    let after = open_fds();
    eprintln!("HTTP: descriptors baseline {baseline}, peak {peak}, after the timeouts {after}");
    assert!(
        after <= baseline + IDLE + SLACK,
        "server-side descriptors released: baseline {baseline}, peak {peak}, after {after}"
    );
    drop(idle);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_max_connections_bounds_the_open_connections() {
    let config = SentryReceiverConfig {
        max_connections: 20,
        idle_timeout: Duration::from_secs(30),
        read_header_timeout: Duration::from_secs(30),
        ..SentryReceiverConfig::default()
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let server = start_sentry(config, 4).await;
    let baseline = open_fds();
    let start = Instant::now();
    let conns = idle_connections(server.addr, 100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let open = open_fds() - baseline;
    eprintln!(
        "100 clients, max_connections 20: {open} descriptors opened in {:?}",
        start.elapsed()
    );
    // 100 client ends + at most 20 server ends (the rest wait in the accept backlog); without
    // the bound it would be 200.
    assert!(open <= 100 + 20 + 30, "descriptors opened: {open}");
    assert!(open >= 100 + 15, "the first 20 are accepted: {open}");
    // Freed slots are taken again: once the idle clients leave, others are answered.
    drop(conns);
    let request = "OPTIONS /api/1/envelope/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let (status, took) = answer(server.addr, request).await;
    assert!(status.starts_with("HTTP/1.1 "), "{status}");
    assert!(took < Duration::from_secs(2), "answered in {took:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_idle_connections_are_closed_and_calls_still_answered() {
    let _one = ONE_AT_A_TIME.lock().await;
    if !enough_fds() {
        return;
    }
    let mut config = OtlpGrpcConfig {
        max_connections: IDLE + 100,
        ..OtlpGrpcConfig::default()
    };
    config.keepalive.server_parameters.max_connection_idle = Duration::from_secs(2);
    let server = start_grpc(config, 4).await;
    let baseline = open_fds();
    let mut idle = idle_connections(server.addr, IDLE).await;
    // Half-finished HTTP/2 prefaces: the connection preface, then nothing.
    let mut partial = idle_connections(server.addr, SLOWLORIS).await;
    for s in &mut partial {
        s.write_all(b"PRI * HTTP/2.0\r\n").await.expect("writes");
    }
    let start = Instant::now();
    let channel = grpc_channel(server.addr).await;
    let status = grpc_raw_export(channel, b"\xff\xff garbage".to_vec(), None)
        .await
        .expect_err("garbage is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );

    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(count_closed(&mut idle).await, IDLE);
    assert_eq!(count_closed(&mut partial).await, SLOWLORIS);
    let after = open_fds();
    eprintln!("gRPC: descriptors baseline {baseline}, after the idle timeout {after}");
    assert!(
        after <= baseline + IDLE + SLOWLORIS + SLACK,
        "server-side descriptors released: baseline {baseline}, after {after}"
    );
    server.stop().await;
}

/// Opens one gRPC call over a raw HTTP/2 connection and sends its request message at one byte
/// per 200 ms (a 64-byte message announced in the gRPC frame header, never completed); returns
/// the `grpc-status` the server answered with and how long the call was held.
async fn slow_grpc_call(addr: SocketAddr) -> (Option<String>, Duration) {
    let start = Instant::now();
    let tcp = TcpStream::connect(addr).await.expect("connects");
    let (mut client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(connection);
    let request = http::Request::post(format!(
        "http://{addr}/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("request");
    let (response, mut body) = client.send_request(request, false).expect("sends headers");
    // gRPC frame header: not compressed, 64-byte message; then the message a byte at a time.
    body.send_data(vec![0, 0, 0, 0, 64].into(), false)
        .expect("frame header");
    let drip = async {
        for _ in 0..64 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if body.send_data(vec![0x0a].into(), false).is_err() {
                break;
            }
        }
        std::future::pending::<()>().await
    };
    let answered = async {
        let response = response.await.ok()?;
        let in_headers = response.headers().get("grpc-status").cloned();
        let status = match in_headers {
            Some(s) => Some(s),
            None => {
                let mut rbody = response.into_body();
                while rbody.data().await.is_some_and(|d| d.is_ok()) {}
                rbody.trailers().await.ok()??.get("grpc-status").cloned()
            }
        };
        status.map(|s| s.to_str().unwrap_or_default().to_string())
    };
    let status = tokio::select! {
        status = answered => status,
        _ = drip => None,
        _ = tokio::time::sleep(Duration::from_secs(20)) => None,
    };
    (status, start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_sent_a_byte_at_a_time_end_at_the_request_timeout() {
    let config = OtlpGrpcConfig {
        request_timeout: Duration::from_secs(2),
        ..OtlpGrpcConfig::default()
    };
    let server = start_grpc(config, 4).await;
    let calls: Vec<_> = (0..SLOWLORIS)
        .map(|_| tokio::spawn(slow_grpc_call(server.addr)))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Others are answered meanwhile.
    let channel = grpc_channel(server.addr).await;
    let status = grpc_raw_export(channel, b"\xff\xff garbage".to_vec(), None)
        .await
        .expect_err("garbage is refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    for call in calls {
        let (status, held) = call.await.expect("slow call task");
        // CANCELLED (1): tonic's server timeout.
        assert_eq!(status.as_deref(), Some("1"), "held {held:?}");
        assert!(held < Duration::from_secs(5), "slow call held for {held:?}");
    }
    server.stop().await;
}
