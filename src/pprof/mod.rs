//! The `pprof` extension: CPU profiles of profilink itself over HTTP, as the Collector's
//! `pprof` extension serves Go's `net/http/pprof` (default `localhost:1777`).
//!
//! * `GET /debug/pprof/profile?seconds=N`: samples profilink's CPU for `N` seconds (default
//!   30, 1 to 300) and answers a gzipped pprof protobuf (`go tool pprof`, `pprof`, Pyroscope,
//!   speedscope read it). One profile at a time: another request meanwhile gets 409.
//! * `GET /debug/pprof/`: a small index of what is served.
//! * Go's other profiles (`heap`, `goroutine`, `block`, `mutex`, …) have no equivalent in a
//!   Rust program: 404 saying so.
//!
//! Keys: `endpoint`; `save_to_file` (profile the whole run and write the profile there at
//! shutdown; the HTTP profile is then busy); `block_profile_fraction` and
//! `mutex_profile_fraction` exist for configs copied from the Collector and accept only 0
//! (off), as Go's block and mutex profiles have no Rust equivalent.

pub mod cpu;

use crate::telemetry::http::{BindError, HttpServer};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use cpu::{CaptureError, CpuProfiler};
use serde::Deserialize;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// `extensions.pprof`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PprofConfig {
    /// `host:port` to serve on. Default `localhost:1777`.
    pub endpoint: String,
    /// Go's block profile rate: only 0 (off) is accepted.
    pub block_profile_fraction: i64,
    /// Go's mutex profile rate: only 0 (off) is accepted.
    pub mutex_profile_fraction: i64,
    /// Profile the whole run and write the gzipped profile to this file at shutdown.
    pub save_to_file: Option<PathBuf>,
}

impl Default for PprofConfig {
    fn default() -> Self {
        PprofConfig {
            endpoint: "localhost:1777".into(),
            block_profile_fraction: 0,
            mutex_profile_fraction: 0,
            save_to_file: None,
        }
    }
}

impl PprofConfig {
    /// Checks the settings; the error starts with the key it is about.
    pub fn validate(&self) -> Result<(), String> {
        if self.endpoint.trim().is_empty() {
            return Err("endpoint: is empty".into());
        }
        for (key, value, what) in [
            (
                "block_profile_fraction",
                self.block_profile_fraction,
                "block",
            ),
            (
                "mutex_profile_fraction",
                self.mutex_profile_fraction,
                "mutex",
            ),
        ] {
            if value != 0 {
                return Err(format!(
                    "{key}: Go's {what} profile has no equivalent in profilink (a Rust \
                     program); only 0 (off) is accepted"
                ));
            }
        }
        if self
            .save_to_file
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            return Err("save_to_file: is empty".into());
        }
        Ok(())
    }
}

/// Shortest, default and longest `seconds` of a profile.
pub const SECONDS: (u64, u64, u64) = (1, 30, 300);

/// The running extension: its HTTP server and, with `save_to_file`, the whole-run profile.
#[derive(Debug)]
pub struct Pprof {
    server: HttpServer,
    whole_run: Option<WholeRun>,
}

#[derive(Debug)]
struct WholeRun {
    path: PathBuf,
    stop: std::sync::mpsc::Sender<()>,
    task: tokio::task::JoinHandle<Result<Vec<u8>, CaptureError>>,
}

impl Pprof {
    /// Serves `config.endpoint` until `stop` says stop (a profile in progress then ends with a
    /// 503), and starts the whole-run profile of `save_to_file`.
    pub async fn start(
        config: &PprofConfig,
        stop: &watch::Receiver<bool>,
    ) -> Result<Pprof, BindError> {
        let profiler = Arc::new(CpuProfiler::default());
        let state = Arc::new(Served {
            profiler: profiler.clone(),
            stop: stop.clone(),
        });
        let server = HttpServer::start(&config.endpoint, router(state), stopped(stop)).await?;
        let whole_run = match &config.save_to_file {
            Some(path) => Some(start_whole_run(&profiler, path.clone()).await),
            None => None,
        };
        Ok(Pprof { server, whole_run })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addr()
    }

    /// Ends the whole-run profile of `save_to_file` and writes it (logged, never fatal).
    pub async fn finish(self) {
        let Some(run) = self.whole_run else {
            return;
        };
        drop(run.stop);
        let path = run.path.display().to_string();
        match run.task.await {
            Ok(Ok(bytes)) => match tokio::fs::write(&run.path, &bytes).await {
                Ok(()) => {
                    tracing::info!(file = %path, bytes = bytes.len(), "pprof: CPU profile of the run saved")
                }
                Err(e) => {
                    tracing::warn!(file = %path, error = %e, "pprof: cannot write the CPU profile")
                }
            },
            Ok(Err(e)) => tracing::warn!(file = %path, error = %e, "pprof: no CPU profile saved"),
            Err(e) => tracing::warn!(file = %path, error = %e, "pprof: the profiler task failed"),
        }
    }
}

/// Starts the whole-run profile and waits until it samples, so the run is profiled from the
/// moment the service is ready.
async fn start_whole_run(profiler: &Arc<CpuProfiler>, path: PathBuf) -> WholeRun {
    let (stop, stopped) = std::sync::mpsc::channel();
    let (started, running) = tokio::sync::oneshot::channel::<()>();
    let slot = profiler.start_whole_run();
    let task = tokio::task::spawn_blocking(move || {
        cpu::capture_until(slot?, &stopped, move || {
            let _ = started.send(());
        })
    });
    let _ = running.await;
    tracing::info!(file = %path.display(), "pprof: profiling the whole run (save_to_file)");
    WholeRun { path, stop, task }
}

/// A future resolving once `rx` says stop.
fn stopped(rx: &watch::Receiver<bool>) -> impl Future<Output = ()> + Send + 'static {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

struct Served {
    profiler: Arc<CpuProfiler>,
    /// Says when the service stops.
    stop: watch::Receiver<bool>,
}

fn router(state: Arc<Served>) -> Router {
    Router::new()
        .route("/debug/pprof/", get(index))
        .route("/debug/pprof", get(index))
        .route("/debug/pprof/profile", get(profile))
        .route("/debug/pprof/{name}", get(not_available))
        .with_state(state)
}

const INDEX: &str = "<!DOCTYPE html>
<html><head><title>/debug/pprof/</title></head><body>
<h1>/debug/pprof/</h1>
<p>CPU profiles of profilink (gzipped pprof protobuf, sampled at 100 Hz):</p>
<ul><li><a href=\"profile?seconds=30\">profile</a>: <code>GET /debug/pprof/profile?seconds=N</code> (1 to 300, default 30), one at a time</li></ul>
<p>Go's heap, goroutine, block, mutex and other profiles have no equivalent in profilink.</p>
<p>Example: <code>go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=10</code></p>
</body></html>
";

async fn index() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        INDEX,
    )
        .into_response()
}

async fn not_available(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!(
            "unknown profile {name:?}: profilink serves only the CPU profile \
             (/debug/pprof/profile); Go's other profiles have no equivalent in a Rust program\n"
        ),
    )
        .into_response()
}

/// The `seconds` of a profile request, or the message of a 400.
fn seconds(query: &HashMap<String, String>) -> Result<Duration, String> {
    let (min, default, max) = SECONDS;
    let Some(text) = query.get("seconds") else {
        return Ok(Duration::from_secs(default));
    };
    match text.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(Duration::from_secs(n)),
        _ => Err(format!(
            "seconds: {text:?} is not a whole number from {min} to {max}\n"
        )),
    }
}

async fn profile(
    State(state): State<Arc<Served>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let duration = match seconds(&query) {
        Ok(d) => d,
        Err(message) => return (StatusCode::BAD_REQUEST, message).into_response(),
    };
    let slot = match state.profiler.try_start() {
        Ok(slot) => slot,
        Err(e) => return (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
    };
    // Dropping `cancel` (this request dropped, or the service stopping) ends the capture.
    let (cancel, cancelled) = std::sync::mpsc::channel::<()>();
    let mut job = tokio::task::spawn_blocking(move || cpu::capture(slot, duration, &cancelled));
    let result = tokio::select! {
        r = &mut job => r,
        _ = stopped(&state.stop) => {
            drop(cancel);
            return (StatusCode::SERVICE_UNAVAILABLE, "profilink is stopping\n").into_response();
        }
    };
    drop(cancel);
    match result {
        Ok(Ok(bytes)) => (
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                ),
                (
                    header::CONTENT_DISPOSITION,
                    HeaderValue::from_static("attachment; filename=\"profile\""),
                ),
                (
                    header::X_CONTENT_TYPE_OPTIONS,
                    HeaderValue::from_static("nosniff"),
                ),
            ],
            bytes,
        )
            .into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "pprof: profile failed");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response()
        }
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("profiler task failed: {e}\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_and_seconds() {
        let c: PprofConfig = serde_yaml_ng::from_str("{}").unwrap();
        assert_eq!(c, PprofConfig::default());
        assert_eq!(c.validate(), Ok(()));
        let c = PprofConfig {
            mutex_profile_fraction: 5,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("mutex_profile_fraction: Go's mutex profile has no equivalent"),
        );
        let c = PprofConfig {
            block_profile_fraction: 1,
            ..Default::default()
        };
        assert!(
            c.validate()
                .unwrap_err()
                .starts_with("block_profile_fraction: ")
        );
        assert!(serde_yaml_ng::from_str::<PprofConfig>("{endpont: x}").is_err());
        let q = |s: &str| HashMap::from([("seconds".to_string(), s.to_string())]);
        assert_eq!(seconds(&HashMap::new()), Ok(Duration::from_secs(30)));
        assert_eq!(seconds(&q("2")), Ok(Duration::from_secs(2)));
        assert_eq!(seconds(&q("300")), Ok(Duration::from_secs(300)));
        for bad in ["0", "301", "-1", "1.5", "x", ""] {
            let e = seconds(&q(bad)).unwrap_err();
            assert!(e.starts_with("seconds: "), "{e}");
        }
    }
}
