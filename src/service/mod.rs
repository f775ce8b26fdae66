//! The profilink service, the composition root: builds the components of a [`Plan`] in small
//! steps, runs them until a shutdown signal, and drains them.
//!
//! Start order:
//! 1. extensions (`extensions.rs`): the `file_storage` directories, the `bearertokenauth`
//!    authenticators (`auth.rs`), the `profile_store`, then `flamegraph_api`, `health_check`
//!    (answering 503) and `pprof`;
//! 2. exporters (`exporters.rs`): each opens and replays its durable queue;
//! 3. pipelines (`pipelines.rs`): the processing stage of `profilink-processor`, one fan-out
//!    per receiver id;
//! 4. telemetry (`registry.rs`): the counters of everything above, at `/metrics`;
//! 5. receivers (`receivers.rs`), fanning out to every pipeline that lists them; then the
//!    health check turns 200.
//!
//! Shutdown (SIGTERM/SIGINT in the binary, any future here, see `running.rs`): the health check
//! turns 503; the receivers stop accepting connections and finish in-flight requests (each
//! answered only once its data is durable); then every exporter `shutdown(deadline)`s:
//! accumulated sessions are flushed into the queues and sent until the deadline, and whatever
//! is left stays queued for the next start. Finally the telemetry endpoints stop.

mod auth;
pub mod components;
pub mod default_config;
mod error;
mod exporters;
mod extensions;
pub mod forward;
mod options;
mod pipelines;
mod receivers;
mod registry;
mod running;
mod stop;

pub use error::ServiceError;
pub use exporters::describe_exporter;
pub use options::{DEFAULT_SHUTDOWN_TIMEOUT, ServiceOptions};

use crate::telemetry::health::{Health, State};
use components::Plan;
use running::Running;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// Runs the service of `plan` until `shutdown` resolves, then drains it. `Err` when a
/// component cannot start (a port in use, a queue directory that cannot be written).
pub async fn run<F>(plan: Plan, options: ServiceOptions, shutdown: F) -> Result<(), ServiceError>
where
    F: Future<Output = ()>,
{
    let health = Arc::new(Health::default());
    let (stop_receivers, receivers_rx) = watch::channel(false);
    let (stop_telemetry, telemetry_rx) = watch::channel(false);
    let running = match start(&plan, &options, &health, &receivers_rx, &telemetry_rx).await {
        Ok(r) => r,
        Err(e) => {
            let _ = stop_receivers.send(true);
            let _ = stop_telemetry.send(true);
            return Err(e);
        }
    };
    health.set(State::Ready);
    tracing::info!("profilink is ready");

    shutdown.await;
    health.set(State::Draining);
    tracing::info!(
        timeout = ?options.shutdown_timeout,
        "shutting down: receivers stop accepting, exporters flush"
    );
    running
        .drain(options.shutdown_timeout, stop_receivers)
        .await;
    let _ = stop_telemetry.send(true);
    tracing::info!("profilink stopped");
    Ok(())
}

/// The start, step by step (see the module docs).
async fn start(
    plan: &Plan,
    options: &ServiceOptions,
    health: &Arc<Health>,
    receivers_rx: &watch::Receiver<bool>,
    telemetry_rx: &watch::Receiver<bool>,
) -> Result<Running, ServiceError> {
    extensions::prepare_file_storage(plan)?;
    let auths = auth::start_authenticators(plan, telemetry_rx)?;
    let store = extensions::open_store(plan).await?;
    let mut telemetry =
        extensions::build_extensions(plan, store.as_ref(), health, telemetry_rx).await?;
    let pprof = extensions::start_pprof(plan, telemetry_rx).await?;
    let exporters = exporters::build_exporters(plan, store.as_ref(), &auths).await?;
    let pipelines = pipelines::build_pipelines(plan, &exporters, store.as_ref(), receivers_rx)?;
    let forwarders = forward::start_forwarders(plan).await?;
    let stats = receivers::receiver_stats(&pipelines.fanouts);
    let kafka = receivers::kafka_metrics(plan);
    let registry = Arc::new(registry::registry(
        plan,
        &exporters,
        &pipelines,
        store.as_ref(),
        &stats,
        &forwarders,
        &kafka,
    ));
    telemetry.extend(registry::serve_metrics(plan, options, registry.clone(), telemetry_rx).await?);
    let receivers = receivers::build_receivers(
        plan,
        &pipelines.fanouts,
        &stats,
        &kafka,
        &forwarders,
        &auths,
        (receivers_rx, options.shutdown_timeout),
    )
    .await?;
    Ok(Running {
        receivers,
        pipelines,
        exporters,
        forwarders,
        store,
        telemetry,
        pprof,
        registry,
    })
}
