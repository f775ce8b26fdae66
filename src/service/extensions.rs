//! Step 1 of the start: the extensions. The `file_storage` directories (created when
//! `create_directory`), the `profile_store` (opened first: exporters and pipelines feed it),
//! then the HTTP extensions in `service.extensions` order: the `flamegraph_api` over the store,
//! the `health_check` and the `pprof` extension. (The `bearertokenauth` authenticators start in
//! `auth.rs`.)

use super::components::{ExtensionSpec, Plan};
use super::error::ServiceError;
use super::stop::waiter;
use crate::pprof::Pprof;
use crate::telemetry::health::{self, Health};
use crate::telemetry::http::HttpServer;
use profilink_flamegraph::ProfileStore;
use profilink_processor::StoreWriter;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the store's retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(60);

/// The `profile_store` extension while the service runs.
pub struct RunningStore {
    /// Inserts chunks on a thread of its own.
    pub writer: Arc<StoreWriter>,
    /// Applies the retention every [`RETENTION_EVERY`].
    pub retention: tokio::task::JoinHandle<()>,
}

/// Creates the directories of the `file_storage` extensions in `service.extensions` that
/// say `create_directory` (with their `directory_permissions`, minus the umask), before the
/// exporters open their queues under them.
pub fn prepare_file_storage(plan: &Plan) -> Result<(), ServiceError> {
    for id in &plan.config.service.extensions {
        let Some(ExtensionSpec::FileStorage(c)) = plan.components.extensions.get(id) else {
            continue;
        };
        if c.create_directory {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(c.permissions())
                .create(&c.directory)
                .map_err(|source| ServiceError::FileStorage {
                    id: id.clone(),
                    path: c.directory.clone(),
                    source,
                })?;
        }
        tracing::info!(extension = %id, directory = %c.directory.display(), "file storage for durable queues");
    }
    Ok(())
}

/// Opens the `profile_store` of `plan` (if it runs one) and starts its writer, retention task
/// and cache warm-up.
pub async fn open_store(plan: &Plan) -> Result<Option<RunningStore>, ServiceError> {
    let Some((id, cfg)) = plan.profile_store() else {
        return Ok(None);
    };
    let cfg = cfg.clone();
    let path = cfg.path.clone();
    let store = tokio::task::spawn_blocking(move || ProfileStore::open(&cfg))
        .await
        .map_err(|source| ServiceError::StoreTask {
            id: id.to_string(),
            source,
        })?
        .map_err(|source| ServiceError::OpenStore {
            id: id.to_string(),
            path: path.clone(),
            source,
        })?;
    let store = Arc::new(store);
    let warm = store.clone();
    tokio::task::spawn_blocking(move || match warm.warm_cache() {
        Ok(n) if n > 0 => tracing::debug!(chunks = n, "profile store cache warmed"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "profile store: cache warm-up failed"),
    });
    let retention = store.spawn_retention_task(RETENTION_EVERY);
    let writer = StoreWriter::start(store).map_err(|source| ServiceError::StoreWriter {
        id: id.to_string(),
        source,
    })?;
    tracing::info!(extension = %id, path = %path.display(), "keeping chunks in the profile store");
    Ok(Some(RunningStore {
        writer: Arc::new(writer),
        retention,
    }))
}

/// Starts the HTTP extensions of `plan` (the `health_check` answers 503 until the service is
/// ready), serving until `stop` says stop.
pub async fn build_extensions(
    plan: &Plan,
    store: Option<&RunningStore>,
    health: &Arc<Health>,
    stop: &watch::Receiver<bool>,
) -> Result<Vec<HttpServer>, ServiceError> {
    let mut servers = Vec::new();
    for id in &plan.config.service.extensions {
        let endpoint_error = |source| ServiceError::ExtensionEndpoint {
            id: id.clone(),
            source,
        };
        match (plan.components.extensions.get(id), store) {
            (Some(ExtensionSpec::FlamegraphApi(c)), Some(s)) => {
                let router = profilink_flamegraph::router(s.writer.store().clone(), c);
                let server = HttpServer::start(&c.endpoint, router, waiter(stop))
                    .await
                    .map_err(endpoint_error)?;
                let addr = server.local_addr();
                tracing::info!(extension = %id, address = %addr, "flamegraph API and viewer at http://{addr}/ui/");
                servers.push(server);
            }
            (Some(ExtensionSpec::HealthCheck(c)), _) => {
                let router = health::router(c, health.clone());
                let server = HttpServer::start(&c.endpoint, router, waiter(stop))
                    .await
                    .map_err(endpoint_error)?;
                tracing::info!(extension = %id, address = %server.local_addr(), path = %c.path, "health check listening");
                servers.push(server);
            }
            _ => {}
        }
    }
    Ok(servers)
}

/// Starts the `pprof` extension of `plan`, if it runs one (at most one: see the plan's
/// checks), serving until `stop` says stop.
pub async fn start_pprof(
    plan: &Plan,
    stop: &watch::Receiver<bool>,
) -> Result<Option<Pprof>, ServiceError> {
    for id in &plan.config.service.extensions {
        if let Some(ExtensionSpec::Pprof(c)) = plan.components.extensions.get(id) {
            let pprof =
                Pprof::start(c, stop)
                    .await
                    .map_err(|source| ServiceError::ExtensionEndpoint {
                        id: id.clone(),
                        source,
                    })?;
            let addr = pprof.local_addr();
            tracing::info!(extension = %id, address = %addr, "CPU profiles of profilink at http://{addr}/debug/pprof/profile?seconds=30");
            return Ok(Some(pprof));
        }
    }
    Ok(None)
}
