//! [`Running`]: the started service, and its drain: receivers stop and finish in-flight
//! requests, the pipelines release what they hold, every exporter flushes until the deadline,
//! the `profile_store` writes what is pending, and the run summary is logged.

use super::exporters::Exporters;
use super::extensions::RunningStore;
use super::pipelines::Pipelines;
use crate::pprof::Pprof;
use crate::telemetry::http::HttpServer;
use crate::telemetry::metrics::Registry;
use profilink_exporter::Forwarder;
use profilink_processor::Exporter;
use profilink_receiver::ServerHandle;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Everything the service started.
pub struct Running {
    /// The receivers' listeners, by receiver id.
    pub receivers: Vec<(String, ServerHandle)>,
    /// The pipelines, fan-outs and tickers.
    pub pipelines: Pipelines,
    /// The exporters.
    pub exporters: Exporters,
    /// The Sentry receivers' upstream forwarders, by receiver id.
    pub forwarders: BTreeMap<String, Arc<Forwarder>>,
    /// The `profile_store`, when it runs.
    pub store: Option<RunningStore>,
    /// The extensions' and `/metrics` HTTP servers.
    pub telemetry: Vec<HttpServer>,
    /// The `pprof` extension, when it runs (its `save_to_file` profile is written last).
    pub pprof: Option<Pprof>,
    /// What `/metrics` reports (and the run summary).
    pub registry: Arc<Registry>,
}

/// Takes each exporter back from the pipelines (the receivers' tasks held the last other
/// references; waits briefly for them to go) and starts its shutdown in `set`.
async fn shut_down<T: 'static>(
    exporters: BTreeMap<String, Arc<Exporter<T>>>,
    what: &'static str,
    deadline: impl Fn() -> Duration,
    set: &mut JoinSet<String>,
) {
    for (id, e) in exporters {
        let mut e = e;
        let mut tries = 0;
        let owned = loop {
            match Arc::try_unwrap(e) {
                Ok(x) => break Some(x),
                Err(back) if tries < 50 => {
                    e = back;
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => break None,
            }
        };
        match owned {
            Some(e) => {
                let left = deadline();
                set.spawn(async move {
                    e.shutdown(left).await;
                    format!("{id}{what}")
                });
            }
            None => {
                tracing::warn!(exporter = %id, "exporter{what} still in use; not flushed (a durable queue keeps its data for the next start)")
            }
        }
    }
}

impl Running {
    /// Drains the service within `deadline`: `stop_receivers` stops the receivers first.
    pub async fn drain(self, deadline: Duration, stop_receivers: watch::Sender<bool>) {
        let Running {
            receivers,
            pipelines,
            exporters,
            forwarders,
            store,
            telemetry,
            pprof,
            registry,
        } = self;
        let _ = stop_receivers.send(true);
        let started = tokio::time::Instant::now();
        for (id, handle) in receivers {
            let left = deadline.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, handle.wait()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(receiver = %id, error = %e, "receiver stopped with an error")
                }
                Err(_) => {
                    tracing::warn!(receiver = %id, "in-flight requests did not finish in time");
                }
            }
        }
        let Pipelines {
            profiles,
            traces,
            fanouts,
            tickers,
            ..
        } = pipelines;
        drop(fanouts);
        // Receivers are done: release what the join buffers hold before the exporters stop.
        for t in tickers {
            let _ = t.await;
        }
        for p in profiles.values() {
            p.flush_join().await;
        }
        for p in traces.values() {
            p.release(true).await;
        }
        drop(profiles);
        drop(traces);

        let left = || {
            deadline
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(500))
        };
        let mut set = JoinSet::new();
        let Exporters {
            chunks,
            profiles,
            traces,
            ..
        } = exporters;
        shut_down(traces, " (traces)", left, &mut set).await;
        shut_down(chunks, "", left, &mut set).await;
        shut_down(profiles, "", left, &mut set).await;
        let forwarders_left = left();
        set.spawn(async move {
            super::forward::shutdown_forwarders(forwarders, forwarders_left).await;
            "upstream forwarders".to_string()
        });
        while let Some(r) = set.join_next().await {
            if let Ok(id) = r {
                tracing::info!(exporter = %id, "exporter stopped");
            }
        }
        if let Some(s) = store {
            // The exporters' final flushes were offered to the store; write them before exiting.
            let left = deadline
                .saturating_sub(started.elapsed())
                .max(Duration::from_secs(2));
            s.writer.close(left).await;
            s.retention.abort();
        }
        crate::telemetry::summary::log_run_summary(&registry);
        if let Some(p) = pprof {
            p.finish().await;
        }
        drop(telemetry);
    }
}
