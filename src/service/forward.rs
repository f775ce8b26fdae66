//! The Sentry receivers' upstreams (`receivers.sentry.upstream`): typed from the receiver's
//! raw section, started before the receivers, drained after them.

use super::components::{Plan, ReceiverSpec, read_upstream};
use super::error::ServiceError;
use profilink_exporter::Forwarder;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Starts the upstream of every Sentry receiver that has one, by receiver id; warns about
/// the ones without.
pub async fn start_forwarders(
    plan: &Plan,
) -> Result<BTreeMap<String, Arc<Forwarder>>, ServiceError> {
    let used: std::collections::BTreeSet<&String> = plan
        .config
        .service
        .pipelines
        .values()
        .flat_map(|p| p.receivers.iter())
        .collect();
    let mut out = BTreeMap::new();
    for (id, spec) in &plan.components.receivers {
        let ReceiverSpec::Sentry(c) = spec else {
            continue;
        };
        if !used.contains(id) {
            continue;
        }
        let at = format!("receivers.{id}");
        let Some(value) = &c.upstream else {
            tracing::warn!(
                receiver = %id,
                "{at} has no upstream: envelope items no pipeline consumes (errors, sessions, \
                 attachments, replays, logs, check-ins, client reports…) are DROPPED, counted in \
                 profilink_receiver_dropped_items_total; set {at}.upstream to forward them to Sentry"
            );
            continue;
        };
        let mut cfg = read_upstream(&at, value).map_err(ServiceError::Upstream)?;
        if cfg.sending_queue.storage.is_none() {
            let name = id.replace(['/', '\\'], "_");
            cfg.sending_queue.storage =
                Some(PathBuf::from(format!("./profilink-data/forward-{name}")));
        }
        let queue = if cfg.sending_queue.enabled {
            format!("queue in {}", cfg.sending_queue.forward_dir().display())
        } else {
            "in-memory queue".into()
        };
        let endpoint = cfg.endpoint.clone();
        let f = Forwarder::start(cfg)
            .await
            .map_err(|source| ServiceError::Forwarder {
                at: at.clone(),
                source,
            })?;
        tracing::info!(receiver = %id, upstream = %endpoint, "forwarding everything SDKs send to {endpoint} (profiles tapped into the pipelines); {queue}");
        out.insert(id.clone(), Arc::new(f));
    }
    Ok(out)
}

/// Sends what the upstreams can until `deadline` (the rest stays queued).
pub async fn shutdown_forwarders(forwarders: BTreeMap<String, Arc<Forwarder>>, deadline: Duration) {
    for (id, f) in forwarders {
        f.shutdown(deadline).await;
        tracing::info!(receiver = %id, "upstream forwarder stopped");
    }
}
