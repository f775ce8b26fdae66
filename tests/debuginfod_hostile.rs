//! Issue 42: a debuginfod server on loopback that never ends its answers, or declares a huge
//! length and drips, or stops halfway, must not take the machine. The real binary, both
//! `translate --symbolize` and the service's `symbolize` processor, on the eBPF fixture:
//! peak RSS (`VmHWM`) under 256 MiB, an answer within the configured budget, chunks written,
//! the frames counted as not symbolized with a reason (`fetch_failed`, and the download's
//! reason), no partial file in the cache and a negative entry for every build id, so that a
//! restarted service fetches none of them again.

mod service_support;

use service_support::*;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the hostile server answers every `GET /buildid/<id>/debuginfo` with.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// 200, no length, ELF-looking bytes as fast as the client takes them, never ending.
    Endless,
    /// 200, `Content-Length: 4 GiB`, then a few bytes every 50 ms.
    HugeDrip,
    /// 200, a `Content-Length` under the size bound, then a few bytes every 50 ms (only the
    /// time budget stops it).
    SlowDrip,
    /// 200, `Content-Length: 1 MiB`, half of it, then the connection closes.
    Halfway,
}

/// The hostile debuginfod: a loopback listener; each connection in its own thread, each one
/// ended by the client closing, by [`CONN_LIFETIME`] or by the server's drop.
struct Hostile {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

/// No connection of the hostile server lasts longer.
const CONN_LIFETIME: Duration = Duration::from_secs(30);
/// The whole server stops after this, whatever a test does.
const SERVER_LIFETIME: Duration = Duration::from_secs(240);

fn elf_bytes(n: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let head = b"\x7fELF\x02\x01\x01\0";
    let k = head.len().min(n);
    v[..k].copy_from_slice(&head[..k]);
    v
}

impl Hostile {
    fn start(mode: Mode) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (Arc::clone(&requests), Arc::clone(&stop));
        let accept = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) && t0.elapsed() < SERVER_LIFETIME {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (r, s) = (Arc::clone(&r), Arc::clone(&s));
                        std::thread::spawn(move || serve(conn, mode, &r, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Hostile {
            url,
            requests,
            stop,
            accept: Some(accept),
        }
    }

    /// The paths asked for so far.
    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

fn serve(mut conn: TcpStream, mode: Mode, requests: &Mutex<Vec<String>>, stop: &AtomicBool) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let path = line.split(' ').nth(1).unwrap_or("").to_owned();
    requests.lock().unwrap().push(path);
    let t0 = Instant::now();
    let alive = || !stop.load(Ordering::Relaxed) && t0.elapsed() < CONN_LIFETIME;
    let block = elf_bytes(64 << 10);
    match mode {
        Mode::Endless => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n");
            while alive() && conn.write_all(&block).is_ok() {}
        }
        Mode::HugeDrip | Mode::SlowDrip => {
            let len: u64 = if mode == Mode::HugeDrip {
                4 << 30
            } else {
                8 << 20
            };
            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
            let mut at = 0;
            while alive() && conn.write_all(&block[at..at + 64]).is_ok() {
                at = (at + 64) % (block.len() - 64);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Mode::Halfway => {
            let body = elf_bytes(1 << 20);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(&body[..body.len() / 2]);
        }
    }
}

/// The GNU build ids (hex) of the fixture's mappings.
fn build_ids(req: &profilink_proto::otlp::ExportProfilesServiceRequest) -> BTreeSet<String> {
    let d = req.dictionary.as_ref().unwrap();
    let key = d
        .string_table
        .iter()
        .position(|s| s == "process.executable.build_id.gnu");
    let mut out = BTreeSet::new();
    for m in &d.mapping_table {
        for &a in &m.attribute_indices {
            let kv = &d.attribute_table[a as usize];
            if Some(kv.key_strindex as usize) == key
                && let Some(profilink_proto::otlp::any_value::Value::StringValue(s)) =
                    kv.value.as_ref().and_then(|v| v.value.as_ref())
            {
                out.insert(s.trim_start_matches("0x").to_lowercase());
            }
        }
    }
    out
}

/// The cache's files: no partial nor debug file, only `.failed` entries holding `reason`;
/// the build ids they are for.
fn failed_entries(cache: &Path, reason: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(cache).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let id = name.strip_suffix(".failed").unwrap_or_else(|| {
            panic!("{name}: a partial, unchecked or unexpected file in the cache")
        });
        assert_eq!(std::fs::read_to_string(e.path()).unwrap(), reason, "{name}");
        out.insert(id.to_owned());
    }
    out
}

/// The number in stderr's `debuginfod: N download(s) failed: N <reason>` (0 without).
fn failures_reported(stderr: &str, reason: &str) -> usize {
    stderr
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("debuginfod: ")?;
            let (n, tail) = rest.split_once(" download(s) failed: ")?;
            assert_eq!(tail, format!("{n} {reason}"), "{l}");
            n.parse().ok()
        })
        .unwrap_or(0)
}

/// The build ids the server was asked for.
fn asked(server: &Hostile) -> BTreeSet<String> {
    asked_from(&server.requests())
}

/// The build ids of request paths.
fn asked_from(paths: &[String]) -> BTreeSet<String> {
    paths
        .iter()
        .filter_map(|p| {
            p.strip_prefix("/buildid/")?
                .strip_suffix("/debuginfo")
                .map(str::to_owned)
        })
        .collect()
}

/// Runs `translate --symbolize` against a server in `mode`; its peak RSS (KiB, from `wait4`),
/// wall time, stderr and the chunks it wrote.
fn translate(dir: &Path, url: &str, budget: &str) -> (u64, Duration, String, usize) {
    let out = dir.join("out.ndjson");
    let t0 = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_profilink"))
        .args([
            "translate",
            "--to",
            "sentry",
            "--symbolize",
            "--debuginfod",
            url,
        ])
        .arg("--symbol-cache")
        .arg(dir.join("cache"))
        .args([
            "--debuginfod-timeout",
            budget,
            "--symbol-max-file-size-mib",
            "32",
        ])
        .arg("-o")
        .arg(&out)
        .arg(fixtures().join("otlp/ebpf-profile.pb"))
        .env_remove("DEBUGINFOD_URLS")
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let (status, rss_kib) = wait_with_peak_rss(child);
    let took = t0.elapsed();
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert_eq!(status, 0, "{stderr}");
    let chunks = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .count();
    (rss_kib, took, stderr, chunks)
}

/// Waits for `child`: its exit code and peak resident set (KiB, `ru_maxrss`, the `VmHWM` of
/// its last moment).
fn wait_with_peak_rss(child: std::process::Child) -> (i32, u64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; the pid is our unwaited child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child);
    (libc::WEXITSTATUS(status), ru.ru_maxrss as u64)
}

/// `VmHWM` of a running process, KiB.
fn vm_hwm(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

const MAX_RSS_KIB: u64 = 256 << 10;

#[test]
fn translate_symbolize_survives_hostile_debuginfod() {
    let ids = build_ids(&otlp_fixture("ebpf-profile.pb"));
    assert!(!ids.is_empty(), "the fixture has GNU build ids");
    for (mode, reason, budget) in [
        (Mode::Endless, "too_large", Duration::from_secs(8)),
        (Mode::HugeDrip, "too_large", Duration::from_secs(3)),
        (Mode::SlowDrip, "timeout", Duration::from_secs(2)),
        (Mode::Halfway, "truncated", Duration::from_secs(3)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = Hostile::start(mode);
        let budget_text = format!("{}s", budget.as_secs());
        let (rss, took, stderr, chunks) = translate(dir.path(), &server.url, &budget_text);
        eprintln!("{mode:?}: peak RSS {} MiB in {took:?}", rss >> 10);
        assert!(rss < MAX_RSS_KIB, "{mode:?}: peak RSS {rss} KiB; {stderr}");
        // The budget, the 2 s grace, and the command's own work.
        assert!(
            took < budget + Duration::from_secs(10),
            "{mode:?}: {took:?}; {stderr}"
        );
        assert!(chunks > 0, "{mode:?}: chunks written; {stderr}");
        assert!(stderr.contains(" fetch_failed"), "{mode:?}: {stderr}");
        let asked = asked(&server);
        assert!(
            !asked.is_empty() && asked.is_subset(&ids),
            "{mode:?}: {asked:?} of {ids:?}"
        );
        // Every download that ended within the command's wait failed with `reason`, has a
        // negative entry and one warning; a later wave still running then (`timeout` frames)
        // was cancelled at exit, its part removed.
        let failed = failed_entries(&dir.path().join("cache"), reason);
        assert!(
            !failed.is_empty() && failed.is_subset(&asked),
            "{mode:?}: {failed:?}"
        );
        assert_eq!(
            failures_reported(&stderr, reason),
            failed.len(),
            "{mode:?}: {stderr}"
        );
        let warnings = stderr.matches("debuginfod download failed").count();
        assert_eq!(
            warnings,
            failed.len(),
            "{mode:?}: one warning per build id; {stderr}"
        );
        if mode != Mode::SlowDrip {
            assert_eq!(
                failed, asked,
                "{mode:?}: fast failures all end within the wait"
            );
        }

        // Again with the same cache: the negative entries answer, those are not fetched.
        let before = server.requests().len();
        let (_, took, stderr, chunks) = translate(dir.path(), &server.url, &budget_text);
        let again: BTreeSet<String> = asked_from(&server.requests()[before..]);
        assert!(
            again.is_disjoint(&failed),
            "{mode:?}: fetched again: {again:?}; {stderr}"
        );
        assert!(
            took < budget + Duration::from_secs(10),
            "{mode:?}: {took:?}"
        );
        assert!(chunks > 0 && stderr.contains(" fetch_failed"), "{stderr}");
        failed_entries(&dir.path().join("cache"), reason);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_symbolize_survives_hostile_debuginfod_and_restarts() {
    let req = otlp_fixture("ebpf-profile.pb");
    let ids = build_ids(&req);
    let server = Hostile::start(Mode::Endless);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sentry = SentryStandIn::start(None).await;
    let (grpc, metrics) = (free_addr(), free_addr());
    let config = write_config(
        dir.path(),
        "profilink.yaml",
        &format!(
            r#"
receivers:
  otlp:
    protocols:
      grpc: {{ endpoint: "{grpc}" }}
processors:
  symbolize:
    sources: [debuginfod]
    wait: 10s
    max_file_size_mib: 32
    debuginfod:
      urls: ["{url}"]
      cache_dir: "{cache}"
      timeout: 8s
exporters:
  sentry:
    dsn: "${{env:DSN}}"
    chunk_idle_timeout: 300ms
    tick: 20ms
    sending_queue: {{ enabled: true, storage: ./data/q, max_size_mib: 64 }}
service:
  pipelines:
    profiles: {{ receivers: [otlp], processors: [symbolize], exporters: [sentry] }}
  telemetry:
    metrics: {{ address: "{metrics}" }}
"#,
            url = server.url,
            cache = cache.display(),
        ),
    );
    let dsn = sentry.dsn();
    let env = [("DSN", Some(dsn.as_str())), ("DEBUGINFOD_URLS", None)];
    let args = ["run", "--config", config.to_str().unwrap()];
    let mut p = Profilink::start(dir.path(), &args, &env);
    p.wait_port(&grpc, Duration::from_secs(20));
    let t0 = Instant::now();
    grpc_export(&grpc, req.clone()).await;
    let answered = t0.elapsed();
    assert!(
        answered < Duration::from_secs(10) + Duration::from_secs(5),
        "{answered:?}"
    );
    assert!(
        sentry
            .wait_for(Duration::from_secs(20), |c| !c.is_empty())
            .await,
        "no chunk; stderr:\n{}",
        p.stderr()
    );
    let rss = vm_hwm(p.pid());
    eprintln!(
        "service: peak RSS {} MiB, answered in {answered:?}",
        rss >> 10
    );
    assert!(rss < MAX_RSS_KIB, "peak RSS {rss} KiB; {}", p.stderr());
    let failed = metric(
        &metrics,
        "profilink_symbolizer_frames_total",
        &[("outcome", "fetch_failed")],
    )
    .await;
    assert!(failed > 0, "{}", p.stderr());
    let asked = asked(&server);
    assert!(!asked.is_empty() && asked.is_subset(&ids), "{asked:?}");
    let too_large = metric(
        &metrics,
        "profilink_symbolizer_debuginfod_fetch_errors_total",
        &[("reason", "too_large")],
    )
    .await;
    assert_eq!(too_large, asked.len() as u64, "{}", p.stderr());
    assert_eq!(failed_entries(&cache, "too_large"), asked);
    let stderr = p.stderr();
    assert_eq!(
        stderr.matches("debuginfod download failed").count(),
        asked.len(),
        "one warning per build id: {stderr}"
    );

    // A restart (as after an OOM kill): the negative entries on disk keep it from fetching
    // the same build ids again; the frames are still counted, the chunks still sent.
    drop(p);
    let before = server.requests().len();
    let chunks_before = sentry.chunks().len();
    let mut p = Profilink::start(dir.path(), &args, &env);
    p.wait_port(&grpc, Duration::from_secs(20));
    grpc_export(&grpc, tagged(&req, "again")).await;
    assert!(
        sentry
            .wait_for(Duration::from_secs(20), |c| c.len() > chunks_before)
            .await,
        "no chunk after the restart; stderr:\n{}",
        p.stderr()
    );
    assert_eq!(
        server.requests().len(),
        before,
        "fetched again after a restart"
    );
    let failed = metric(
        &metrics,
        "profilink_symbolizer_frames_total",
        &[("outcome", "fetch_failed")],
    )
    .await;
    assert!(failed > 0, "{}", p.stderr());
    assert_eq!(failed_entries(&cache, "too_large"), asked);
}
