//! The Sentry receivers' upstreams (`receivers.sentry.upstream`): typed from the receiver's
//! raw section, started before the receivers, drained after them.

use super::ServiceError;
use super::components::{Plan, ReceiverSpec};
use profilink_exporter::{ForwardConfig, Forwarder};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Types and checks `receivers.<id>.upstream`; the error names the key.
pub fn read_upstream(at: &str, value: &serde_json::Value) -> Result<ForwardConfig, String> {
    let cfg: ForwardConfig =
        serde_json::from_value(value.clone()).map_err(|e| format!("{at}.upstream: {e}"))?;
    cfg.validate().map_err(|e| format!("{at}.upstream.{e}"))?;
    Ok(cfg)
}

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
        let mut cfg = read_upstream(&at, value).map_err(ServiceError)?;
        if cfg.sending_queue.storage.is_none() {
            let name = id.replace(['/', '\\'], "_");
            cfg.sending_queue.storage =
                Some(PathBuf::from(format!("./profilink-data/forward-{name}")));
        }
        let queue = if cfg.sending_queue.enabled {
            format!("queue in {}", cfg.sending_queue.dir().display())
        } else {
            "in-memory queue".into()
        };
        let endpoint = cfg.endpoint.clone();
        let f = Forwarder::start(cfg)
            .await
            .map_err(|e| ServiceError(format!("{at}.upstream: cannot start: {e}")))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_errors_name_the_key() {
        let ok = read_upstream(
            "receivers.sentry",
            &serde_json::json!({"endpoint": "https://o0.ingest.sentry.io", "timeout": "10s"}),
        )
        .unwrap();
        assert_eq!(ok.timeout, Duration::from_secs(10));
        let e =
            read_upstream("receivers.sentry", &serde_json::json!({"timeout": "10s"})).unwrap_err();
        assert_eq!(
            e,
            "receivers.sentry.upstream.endpoint: required (the upstream Sentry or Relay base URL)"
        );
        let e = read_upstream(
            "receivers.sentry",
            &serde_json::json!({"endpoint": "https://x", "tls": {"cert_file": "c"}}),
        )
        .unwrap_err();
        assert!(
            e.starts_with("receivers.sentry.upstream: unknown field `cert_file`"),
            "{e}"
        );
    }
}
