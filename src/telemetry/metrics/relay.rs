//! The metrics of the Sentry receiver as a Relay: per-item drops and refusals, and its
//! upstream forwarder (see the table in [`super`]).

use super::receivers::ReceiverEntry;
use super::text::{Field, Render, Text};
use profilink_exporter::ForwardMetrics;
use std::sync::Arc;

/// Renders the item counters of every Sentry receiver and the forwarders' counters.
pub fn render(
    receivers: &[ReceiverEntry],
    forwarders: &[(String, Arc<ForwardMetrics>)],
    f: &mut Text<'_>,
) {
    let sentry: Vec<&ReceiverEntry> = receivers
        .iter()
        .filter(|r| crate::config::component_type(&r.id) == "sentry")
        .collect();
    if !sentry.is_empty() {
        let name = "profilink_receiver_dropped_items_total";
        f.header(
            name,
            "counter",
            "Sentry items no pipeline consumes, dropped because the receiver has no upstream.",
        );
        for r in &sentry {
            for (t, n) in r.stats.sentry_items.dropped() {
                f.sample(name, &[("receiver", &r.id), ("type", t)], n);
            }
        }
        let name = "profilink_receiver_refused_items_total";
        f.header(name, "counter", "Sentry items refused, by type and reason.");
        for r in &sentry {
            for (t, reason, n) in r.stats.sentry_items.refused() {
                f.sample(
                    name,
                    &[("receiver", &r.id), ("type", t), ("reason", reason)],
                    n,
                );
            }
        }
    }
    if forwarders.is_empty() {
        return;
    }
    let rows: [(&str, &str, &str, Field<ForwardMetrics>); 9] = [
        (
            "profilink_receiver_upstream_queued_requests_total",
            "counter",
            "Requests taken into the forward queue.",
            |m| &m.queued,
        ),
        (
            "profilink_receiver_upstream_sent_requests_total",
            "counter",
            "Requests delivered upstream.",
            |m| &m.sent,
        ),
        (
            "profilink_receiver_upstream_replayed_requests_total",
            "counter",
            "Requests found in the forward queue at start.",
            |m| &m.replayed,
        ),
        (
            "profilink_receiver_upstream_send_failed_total",
            "counter",
            "Failed attempts to forward (network errors, 5xx).",
            |m| &m.send_failed,
        ),
        (
            "profilink_receiver_upstream_retries_total",
            "counter",
            "Forwarding retries scheduled.",
            |m| &m.retries,
        ),
        (
            "profilink_receiver_upstream_rate_limited_total",
            "counter",
            "Upstream answers that carried rate limits.",
            |m| &m.rate_limited,
        ),
        (
            "profilink_receiver_upstream_refused_full_total",
            "counter",
            "Requests refused (503) because the forward queue was full.",
            |m| &m.refused_full,
        ),
        (
            "profilink_receiver_upstream_queue_size_bytes",
            "gauge",
            "Bytes in the forward queue.",
            |m| &m.queue_bytes,
        ),
        (
            "profilink_receiver_upstream_queue_capacity_bytes",
            "gauge",
            "The forward queue's bound in bytes.",
            |m| &m.queue_capacity,
        ),
    ];
    for (name, kind, help, get) in rows {
        f.per_entry(kind, "receiver", forwarders, &[(name, help, get)]);
    }
    let name = "profilink_receiver_upstream_dropped_requests_total";
    f.header(name, "counter", "Forwarded requests given up, by reason.");
    for (id, m) in forwarders {
        for (reason, n) in m.dropped() {
            f.sample(name, &[("receiver", id), ("reason", reason)], n);
        }
    }
}

/// The Sentry receivers' item counters and their forwarders, as one [`Render`] section.
pub struct Relay<'a> {
    /// Every receiver listener (the Sentry ones are rendered).
    pub receivers: &'a [ReceiverEntry],
    /// The upstream forwarders, by receiver id.
    pub forwarders: &'a [(String, Arc<ForwardMetrics>)],
}

impl Render for Relay<'_> {
    fn render(&self, f: &mut Text<'_>) {
        render(self.receivers, self.forwarders, f);
    }
}
