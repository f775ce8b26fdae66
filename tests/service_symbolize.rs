//! The `symbolize` processor end to end: the real binary runs a profiles pipeline with
//! `processors: [symbolize]` (process source only), a real process (a gcc -O2 binary that
//! sleeps) is the `process.pid` of eBPF-shaped OTLP sent over gRPC, and the chunks Sentry gets
//! name every native frame as `eu-addr2line` does (one frame per inline level, each with the
//! location's `instruction_addr`, the debug image kept); `/metrics` counts them.
//! Skips without gcc unless `PROFILINK_REQUIRE_GCC` is set.

mod service_support;
#[path = "../symbolizer/tests/support/mod.rs"]
mod support;

use profilink::telemetry::metrics::scrape;
use service_support::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symbolize_processor_names_frames_end_to_end() {
    if !support::tools_present("service_symbolize", &["gcc", "eu-addr2line"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("app.c");
    std::fs::write(&c, support::C_SOURCE).unwrap();
    let exe = dir.path().join("sleeper");
    support::run(
        Command::new("gcc")
            .args(["-g", "-O2", "-Wl,--build-id=sha1", "-o"])
            .arg(&exe)
            .arg(&c),
    );
    let mut child = Command::new(&exe)
        .arg("sleep")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let proc = Proc(child);
    let pid = i64::from(proc.0.id());

    let b = support::Built {
        name: "sleeper".into(),
        object: exe.clone(),
        debug: exe.clone(),
        separate_debug: false,
        only: Some("work_"),
    };
    let addrs = support::addresses(&b, 6);
    let expected = support::eu_addr2line(&exe, &addrs);
    let mut dict = support::Dict::new();
    let m = dict.mapping("sleeper", &std::fs::read(&exe).unwrap(), true);
    let locs = dict.locations(m, &addrs);
    // Two samples of one thread, so Relay's sparse-thread rule keeps it.
    let mut req = support::request(dict, &[(pid, locs.clone())]);
    let p = &mut req.resource_profiles[0].scope_profiles[0].profiles[0];
    p.samples[0].timestamps_unix_nano = (0..4).map(|i| p.time_unix_nano + i * 50_000_000).collect();

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
    sources: [process]
    debug_dirs: []
    wait: 1s
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
"#
        ),
    );
    let dsn = sentry.dsn();
    let mut p = Profilink::start(
        dir.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("DSN", Some(&dsn)), ("DEBUGINFOD_URLS", None)],
    );
    p.wait_port(&grpc, Duration::from_secs(20));
    grpc_export(&grpc, req).await;
    assert!(
        sentry
            .wait_for(Duration::from_secs(20), |c| !c.is_empty())
            .await,
        "no chunk; stderr:\n{}",
        p.stderr()
    );
    let chunk = &sentry.chunks()[0];
    let stack = &chunk.profile.stacks[chunk.profile.samples[0].stack_id];
    let want: Vec<&support::Expected> = expected.iter().flatten().collect();
    assert_eq!(stack.len(), want.len(), "one frame per inline level");
    for (&fi, e) in stack.iter().zip(&want) {
        let f = &chunk.profile.frames[fi];
        assert_eq!(f.function.as_deref(), Some(e.0.as_str()));
        assert_eq!(f.abs_path.as_deref(), Some(e.1.as_str()));
        assert_eq!(f.lineno, Some(e.2));
        assert!(f.instruction_addr.is_some(), "{f:?}");
    }
    assert_eq!(chunk.debug_meta.as_ref().map(|d| d.images.len()), Some(1));

    let (_, text) = get_text(&format!("http://{metrics}/metrics")).await;
    let n = scrape(
        &text,
        "profilink_symbolizer_frames_total",
        &[("pipeline", "profiles"), ("outcome", "symbolized")],
    );
    assert_eq!(n, Some(addrs.len() as u64), "{text}");
    drop(proc);
}
