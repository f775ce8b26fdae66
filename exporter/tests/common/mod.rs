//! A stand-in Sentry (and OTLP/HTTP) server on 127.0.0.1: a small HTTP/1.1 server that records
//! every request and answers as scripted (ok, 429 with headers, 5xx, 4xx, dropped connection,
//! slow).
#![allow(dead_code)]

use flate2::read::GzDecoder;
use profilink_proto::sentry::{Envelope, Frame, ProfileChunk, Sample};
use std::collections::VecDeque;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub const KEY: &str = "0123456789abcdef0123456789abcdef";

/// How to answer one request.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Status, extra headers, body.
    Respond(u16, Vec<(String, String)>, Vec<u8>),
    /// Close the connection without answering.
    Drop,
    /// Wait, then answer as the inner behaviour.
    Slow(Duration, Box<Behaviour>),
}

impl Behaviour {
    pub fn ok() -> Self {
        Behaviour::Respond(200, vec![], b"{}".to_vec())
    }
    pub fn status(s: u16) -> Self {
        Behaviour::Respond(s, vec![], format!("status {s} from stand-in").into_bytes())
    }
    pub fn with_header(s: u16, name: &str, value: &str) -> Self {
        Behaviour::Respond(s, vec![(name.into(), value.into())], b"{}".to_vec())
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// 0 when the connection was dropped.
    pub answered: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, decompressed per `Content-Encoding`.
    pub fn decoded_body(&self) -> Vec<u8> {
        match self.header("content-encoding") {
            Some("gzip") => {
                let mut out = Vec::new();
                GzDecoder::new(&self.body[..])
                    .read_to_end(&mut out)
                    .expect("gzip body");
                out
            }
            Some("zstd") => zstd::stream::decode_all(&self.body[..]).expect("zstd body"),
            _ => self.body.clone(),
        }
    }

    pub fn envelope(&self) -> Envelope {
        Envelope::parse(&self.decoded_body()).expect("envelope parses")
    }

    /// The profile chunk of a chunk envelope, if it is one.
    pub fn chunk(&self) -> Option<ProfileChunk> {
        let env = self.envelope();
        let item = env.profile_chunks().next()?;
        Some(ProfileChunk::from_json(&item.payload).expect("chunk parses"))
    }

    pub fn is_client_report(&self) -> bool {
        self.envelope().items_of("client_report").next().is_some()
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Behaviour>,
    default: Option<Behaviour>,
    requests: Vec<Recorded>,
}

/// The running server.
#[derive(Clone)]
pub struct StandIn {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl StandIn {
    pub async fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State::default()));
        let s2 = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, s2.clone()));
            }
        });
        StandIn { addr, state }
    }

    pub fn dsn(&self, project: u32) -> String {
        format!("http://{KEY}@{}/{project}", self.addr)
    }

    /// Answers the next requests with these, then with the default.
    pub fn script(&self, behaviours: Vec<Behaviour>) {
        self.state.lock().unwrap().script.extend(behaviours);
    }

    pub fn set_default(&self, b: Behaviour) {
        self.state.lock().unwrap().default = Some(b);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Chunk envelopes answered 2xx.
    pub fn delivered_chunks(&self) -> Vec<ProfileChunk> {
        self.requests()
            .iter()
            .filter(|r| (200..300).contains(&r.answered))
            .filter_map(Recorded::chunk)
            .collect()
    }

    pub fn chunk_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.chunk().is_some())
            .collect()
    }

    pub fn client_reports(&self) -> Vec<serde_json::Value> {
        self.requests()
            .iter()
            .filter(|r| (200..300).contains(&r.answered))
            .flat_map(|r| {
                r.envelope()
                    .items_of("client_report")
                    .map(|i| serde_json::from_slice(&i.payload).expect("report json"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Waits until `f` holds (polling), at most `limit`.
    pub async fn wait_for(&self, limit: Duration, f: impl Fn(&StandIn) -> bool) -> bool {
        let end = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < end {
            if f(self) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        f(self)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            let mut tmp = [0u8; 8192];
            match stream.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap_or("");
        let mut parts = first.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut tmp = [0u8; 65536];
            match stream.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let body = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        let mut behaviour = {
            let mut st = state.lock().unwrap();
            st.script
                .pop_front()
                .or_else(|| st.default.clone())
                .unwrap_or_else(Behaviour::ok)
        };
        let mut rec = Recorded {
            method,
            path,
            headers,
            body,
            answered: 0,
        };
        let mut slow = false;
        while let Behaviour::Slow(d, inner) = behaviour {
            // Recorded as unanswered: the client has given up by the time the answer comes.
            if !slow {
                state.lock().unwrap().requests.push(rec.clone());
                slow = true;
            }
            tokio::time::sleep(d).await;
            behaviour = *inner;
        }
        match behaviour {
            Behaviour::Drop | Behaviour::Slow(..) => {
                if !slow {
                    state.lock().unwrap().requests.push(rec);
                }
                return;
            }
            Behaviour::Respond(status, extra, body) => {
                rec.answered = status;
                if !slow {
                    state.lock().unwrap().requests.push(rec);
                }
                let mut resp = format!(
                    "HTTP/1.1 {status} Stand-in\r\ncontent-length: {}\r\n",
                    body.len()
                );
                for (k, v) in extra {
                    resp.push_str(&format!("{k}: {v}\r\n"));
                }
                resp.push_str("\r\n");
                let mut bytes = resp.into_bytes();
                bytes.extend_from_slice(&body);
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A chunk of `secs` seconds of `hz` samples starting at unix time `start`, for `profiler`.
pub fn chunk(profiler: &str, platform: &str, start: f64, secs: f64, hz: f64) -> ProfileChunk {
    let mut c = ProfileChunk {
        chunk_id: format!("{:032x}", (start * 1000.0) as u64),
        profiler_id: profiler.to_string(),
        platform: platform.to_string(),
        version: "2".into(),
        release: Some("app@1.0".into()),
        environment: Some("test".into()),
        client_sdk: Some(profilink_proto::sentry::ClientSdk {
            name: "sentry.test".into(),
            version: "1.0.0".into(),
        }),
        ..Default::default()
    };
    c.profile.frames = vec![
        std::sync::Arc::new(Frame {
            function: Some("main".into()),
            in_app: Some(true),
            ..Default::default()
        }),
        std::sync::Arc::new(Frame {
            function: Some("work".into()),
            in_app: Some(true),
            ..Default::default()
        }),
    ];
    c.profile.stacks = vec![vec![1, 0], vec![0]];
    let n = (secs * hz).round() as usize;
    for i in 0..n {
        c.profile.samples.push(Sample {
            timestamp: start + i as f64 / hz,
            stack_id: i % 2,
            thread_id: "100".into(),
        });
    }
    c
}

pub const PROFILER_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const PROFILER_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// A window start (a multiple of the 60 s `chunk_duration` on the epoch): windows are aligned
/// to time, so twelve 5 s chunks from here are one minute's window.
pub const T0: f64 = 1_749_999_960.0;

/// Twelve consecutive 5 s chunks of 20 Hz samples of one process.
pub fn twelve_chunks(profiler: &str, platform: &str, start: f64) -> Vec<ProfileChunk> {
    (0..12)
        .map(|i| chunk(profiler, platform, start + 5.0 * i as f64, 5.0, 20.0))
        .collect()
}

/// Waits (up to 10 s) until no queue under `dir` is held any more: every `lock` file below it
/// can be locked. A dropped exporter's tasks end asynchronously and hold their queue until
/// then; a test that edits queue files "after a crash" waits for this first, so that nothing
/// of the dropped exporter writes to them afterwards.
pub async fn wait_until_unlocked(dir: &std::path::Path) {
    fn locks(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                locks(&p, out);
            } else if p.file_name().is_some_and(|n| n == "lock") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    locks(dir, &mut files);
    assert!(
        !files.is_empty(),
        "no queue lock files under {}",
        dir.display()
    );
    let began = std::time::Instant::now();
    for path in files {
        let file = std::fs::File::open(&path).unwrap();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) => {
                    assert!(
                        began.elapsed() < Duration::from_secs(10),
                        "{} is still locked after 10 s",
                        path.display()
                    );
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(std::fs::TryLockError::Error(e)) => panic!("{}: {e}", path.display()),
            }
        }
    }
}

/// Starts an exporter on a queue directory that a dropped exporter of the same process may
/// still hold: its tasks end asynchronously, and until then the directory's lock is held, as a
/// dying process's would be. Retries `start` while it reports the directory in use, up to 10 s.
pub async fn start_when_free<T, E, F, Fut>(mut start: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let began = std::time::Instant::now();
    loop {
        match start().await {
            Ok(started) => return started,
            Err(e)
                if e.to_string().contains("is in use")
                    && began.elapsed() < Duration::from_secs(10) =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("exporter start: {e}"),
        }
    }
}
