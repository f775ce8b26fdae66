//! The pprof receiver's pull metrics, read from the [`ScrapeCounters`](crate::stats::scrape::ScrapeCounters)
//! of its `remote` and `file` listeners (what the pulls deliver counts in the receiver families
//! of [`crate::telemetry`], with the same labels):
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `profilink_receiver_scrapes_total` | counter | `receiver`, `transport` | pulls (`transport="scrape"`: `remote` mode; `"file"`: `file` mode) whose profiles reached the pipeline |
//! | `profilink_receiver_scrape_failures_total` | counter | `receiver`, `transport`, `reason` | pulls that failed: `connect`, `status`, `timeout`, `too_large`, `read`, `invalid`, `full`, `rejected`, `unavailable`, `file` |

use super::ReceiverEntry;
use profilink_consumer::telemetry::{Render, Text};

/// The pprof receiver's pulls (`remote` scrapes, `file` reads): successes and failures by
/// reason. Listeners that pull nothing are left out; none, no families.
pub struct Scrapes<'a>(pub &'a [ReceiverEntry]);

impl Render for Scrapes<'_> {
    fn render(&self, f: &mut Text<'_>) {
        let pulling: Vec<&ReceiverEntry> = self
            .0
            .iter()
            .filter(|r| {
                r.id.split('/').next() == Some("pprof") && matches!(r.transport, "scrape" | "file")
            })
            .collect();
        if pulling.is_empty() {
            return;
        }
        let name = "profilink_receiver_scrapes_total";
        f.header(
            name,
            "counter",
            "Pulls (remote scrapes, file reads) whose profiles reached the pipeline.",
        );
        for r in &pulling {
            let labels = [("receiver", r.id.as_str()), ("transport", r.transport)];
            f.sample(name, &labels, r.counters().scrapes.successes());
        }
        let name = "profilink_receiver_scrape_failures_total";
        f.header(name, "counter", "Pulls that failed, by reason.");
        for r in &pulling {
            for (reason, n) in r.counters().scrapes.failures() {
                let labels = [
                    ("receiver", r.id.as_str()),
                    ("transport", r.transport),
                    ("reason", reason.as_str()),
                ];
                f.sample(name, &labels, n);
            }
        }
    }
}
