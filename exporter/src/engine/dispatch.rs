//! Deliveries: picks ready chunks that may be sent (not in flight, due, not rate limited), runs
//! up to `num_consumers` of them at once through the [`Sink`], and turns each outcome into an
//! acknowledgement, a retry with backoff, or a drop with its reason.

use super::sink::{Delivery, Sink};
use super::state::{Core, Outcome, ReadyItem};
use crate::durations::AttemptOutcome;
use crate::metrics::{DiscardReason, ExporterMetrics};
use crate::queue::ReadyMeta;
use crate::retry::Backoff;
use std::time::{Duration, Instant};

/// How a delivery attempt ended, for the attempt-duration histograms.
fn attempt_outcome(delivery: &Delivery) -> AttemptOutcome {
    match delivery {
        Delivery::Delivered => AttemptOutcome::Success,
        Delivery::RateLimited => AttemptOutcome::RateLimited,
        Delivery::Retry {
            reason: DiscardReason::NetworkError,
            ..
        } => AttemptOutcome::NetworkError,
        Delivery::Retry { .. } | Delivery::Permanent { .. } => AttemptOutcome::SendError,
    }
}

impl<S: Sink> Core<S> {
    /// A chunk of the ready log to deliver, with its JSON when it is still in memory.
    pub(super) fn add_ready(&mut self, meta: ReadyMeta, json: Option<Vec<u8>>) {
        let json = json.and_then(|j| self.held.hold(j));
        self.ready.insert(
            meta.id,
            ReadyItem {
                meta,
                next_attempt: None,
                backoff: Backoff::new(&self.cfg.retry),
                in_flight: false,
                json,
            },
        );
    }

    pub(super) fn dispatchable(&self, item: &ReadyItem, now: Instant) -> bool {
        !item.in_flight
            && item.next_attempt.is_none_or(|t| t <= now)
            && self
                .sink
                .blocked_until(&item.meta.route, &item.meta.category, now)
                .is_none()
    }

    pub(super) fn dispatch(&mut self, now: Instant) {
        let limit = self.cfg.num_consumers.max(1);
        if self.inflight.len() >= limit {
            return;
        }
        let mut start = Vec::new();
        for (id, item) in &self.ready {
            if self.inflight.len() + start.len() >= limit {
                break;
            }
            if self.dispatchable(item, now) {
                start.push(*id);
            }
        }
        for id in start {
            if !self.queue.lease(id) {
                self.ready.remove(&id);
                continue;
            }
            let Some(item) = self.ready.get_mut(&id) else {
                continue;
            };
            item.in_flight = true;
            let held = item.json.take();
            let meta = item.meta.clone();
            let queue = self.queue.clone();
            let sink = self.sink.clone();
            let metrics = self.metrics.clone();
            let handle = self.inflight.spawn(async move {
                let read = match held {
                    Some(json) => Ok(Ok(Some(json.take()))),
                    None => {
                        tokio::task::spawn_blocking(move || {
                            queue.read_ready(id).map(|r| r.map(|(_, json)| json))
                        })
                        .await
                    }
                };
                let outcome = match read {
                    Ok(Ok(Some(json))) => {
                        let started = Instant::now();
                        let delivery = sink.deliver(meta, json).await;
                        metrics
                            .attempt_durations
                            .record(attempt_outcome(&delivery), started.elapsed());
                        Outcome::Sent(delivery)
                    }
                    Ok(Ok(None)) => Outcome::Gone,
                    Ok(Err(e)) => Outcome::Unreadable(e.to_string()),
                    Err(e) => Outcome::Unreadable(e.to_string()),
                };
                (id, outcome)
            });
            self.task_ids.insert(handle.id(), id);
        }
    }

    pub(super) fn on_joined(
        &mut self,
        res: Result<(tokio::task::Id, (u64, Outcome)), tokio::task::JoinError>,
    ) {
        let (id, outcome) = match res {
            Ok((task, (id, outcome))) => {
                self.task_ids.remove(&task);
                (id, outcome)
            }
            Err(e) => {
                let Some(id) = self.task_ids.remove(&e.id()) else {
                    return;
                };
                (
                    id,
                    Outcome::Unreadable(format!("delivery task failed: {e}")),
                )
            }
        };
        self.queue.unlease(id);
        let now = self.clock.now();
        match outcome {
            Outcome::Gone => {
                self.ready.remove(&id);
            }
            Outcome::Sent(Delivery::Delivered) => {
                ExporterMetrics::add(&self.metrics.sent_chunks, 1);
                if let Some(item) = self.ready.remove(&id) {
                    ExporterMetrics::add(&self.metrics.sent_samples, item.meta.samples);
                }
                self.ready_acks.push(id);
            }
            Outcome::Sent(Delivery::RateLimited) => {
                let mut drop = false;
                if let Some(item) = self.ready.get_mut(&id) {
                    item.in_flight = false;
                    drop = self
                        .sink
                        .dropping(&item.meta.route, &item.meta.category, now);
                    if drop {
                        tracing::warn!(chunk_id = %item.meta.chunk_id, category = %item.meta.category, "chunk dropped: rate limited for longer than rate_limit_max_wait or over quota (ratelimit_backoff)");
                    }
                }
                if drop {
                    self.give_up(id, DiscardReason::RatelimitBackoff);
                }
            }
            Outcome::Sent(Delivery::Permanent { message }) => {
                ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                tracing::debug!(id, %message, "chunk refused for good");
                self.give_up(id, DiscardReason::SendError);
            }
            Outcome::Sent(Delivery::Retry {
                after,
                reason,
                message,
            }) => {
                ExporterMetrics::add(&self.metrics.send_failed_chunks, 1);
                self.retry_later(id, now, after, reason, &message);
            }
            Outcome::Unreadable(message) => {
                tracing::error!(id, %message, "queue: could not read a queued chunk");
                self.retry_later(id, now, None, DiscardReason::SendError, &message);
            }
        }
    }

    pub(super) fn retry_later(
        &mut self,
        id: u64,
        now: Instant,
        after: Option<Duration>,
        reason: DiscardReason,
        message: &str,
    ) {
        let retry = self.cfg.retry.clone();
        let Some(item) = self.ready.get_mut(&id) else {
            return;
        };
        item.in_flight = false;
        match item.backoff.next(&retry, now, after) {
            Some(wait) => {
                ExporterMetrics::add(&self.metrics.retries, 1);
                tracing::debug!(chunk_id = %item.meta.chunk_id, ?wait, %message, "delivery failed; retrying");
                item.next_attempt = Some(now + wait);
            }
            None => {
                tracing::warn!(
                    chunk_id = %item.meta.chunk_id,
                    route = %item.meta.route,
                    %message,
                    "delivery failed and retries are exhausted; chunk dropped"
                );
                self.give_up(id, reason);
            }
        }
    }

    pub(super) fn give_up(&mut self, id: u64, reason: DiscardReason) {
        if let Some(item) = self.ready.remove(&id) {
            self.metrics.add_dropped(reason, 1);
            self.metrics.add_dropped_samples(reason, item.meta.samples);
            self.sink.discarded(&item.meta, reason, 1);
        }
        self.ready_acks.push(id);
    }

    /// Gives up (`ratelimit_backoff`) the waiting chunks whose category is limited for long
    /// ([`Sink::dropping`]); at most once per tick, as it looks at every ready chunk.
    pub(super) fn drop_rate_limited(&mut self, now: Instant) {
        let real = Instant::now();
        if self
            .last_drop_sweep
            .is_some_and(|t| real.saturating_duration_since(t) < self.cfg.tick)
        {
            return;
        }
        self.last_drop_sweep = Some(real);
        let ids: Vec<u64> = self
            .ready
            .iter()
            .filter(|(_, i)| {
                !i.in_flight && self.sink.dropping(&i.meta.route, &i.meta.category, now)
            })
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return;
        }
        for id in &ids {
            self.give_up(*id, DiscardReason::RatelimitBackoff);
        }
        tracing::warn!(
            chunks = ids.len(),
            "chunks dropped: their category is rate limited for longer than rate_limit_max_wait or over quota (ratelimit_backoff)"
        );
    }

    /// The earliest instant something not in flight may be sent.
    pub(super) fn next_due(&self, now: Instant) -> Option<Instant> {
        self.ready
            .values()
            .filter(|i| !i.in_flight)
            .map(|i| {
                let attempt = i.next_attempt.unwrap_or(now);
                let unblock = self
                    .sink
                    .blocked_until(&i.meta.route, &i.meta.category, now)
                    .unwrap_or(now);
                attempt.max(unblock)
            })
            .min()
    }
}
