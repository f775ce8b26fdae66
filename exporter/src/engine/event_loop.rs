//! The engine task: its state and its one event loop.
//!
//! The loop takes input while the unpersisted backlog is below [`MAX_UNPERSISTED_BYTES`],
//! finishes persist and acknowledgement jobs and deliveries, and cuts idle windows on every
//! tick. A shutdown request switches the same loop to draining: input is no longer read (what
//! was buffered is taken in first), open windows are cut or kept for the next start, and the
//! loop ends once nothing is left to do or due before the deadline.

use super::persist::MAX_UNPERSISTED_BYTES;
use super::sink::Sink;
use super::state::{Control, Core, Input, join_opt};
use super::summary::RunSummary;
use crate::accumulate::Emitted;
use crate::metrics::ExporterMetrics;
use tokio::sync::{mpsc, oneshot};

/// A shutdown in progress: drain until `deadline`, then answer `done`.
struct Draining {
    deadline: tokio::time::Instant,
    done: oneshot::Sender<()>,
}

impl<S: Sink> Core<S> {
    /// The event loop, until a shutdown has drained (or the handle is dropped).
    pub(super) async fn run(
        mut self,
        mut input_rx: mpsc::Receiver<Vec<Input>>,
        mut control_rx: mpsc::UnboundedReceiver<Control>,
    ) {
        let mut draining: Option<Draining> = None;
        loop {
            self.step();
            let nap = match &draining {
                None => self.cfg.tick,
                Some(d) => match self.drain_nap(d.deadline) {
                    Some(nap) => nap,
                    None => break,
                },
            };
            let accepting = draining.is_none() && self.accepting();
            tokio::select! {
                c = control_rx.recv(), if draining.is_none() => match c {
                    Some(Control::Shutdown { deadline, done }) => {
                        self.begin_shutdown(&mut input_rx);
                        draining = Some(Draining { deadline, done });
                    }
                    None => {
                        self.inflight.shutdown().await;
                        return;
                    }
                },
                Some(batch) = input_rx.recv(), if accepting => {
                    self.accept(batch);
                    while self.accepting() {
                        match input_rx.try_recv() {
                            Ok(batch) => self.accept(batch),
                            Err(_) => break,
                        }
                    }
                }
                res = join_opt(&mut self.persisting) => {
                    self.persisting = None;
                    self.on_persisted(res);
                }
                res = join_opt(&mut self.acking) => {
                    self.acking = None;
                    self.on_acked(res);
                }
                Some(res) = self.inflight.join_next_with_id(), if !self.inflight.is_empty() => {
                    self.on_joined(res);
                }
                _ = tokio::time::sleep(nap) => {}
            }
        }
        self.finish_shutdown().await;
        if let Some(d) = draining {
            let _ = d.done.send(());
        }
    }

    /// One round of the loop: cuts idle windows, starts queue jobs and deliveries.
    pub(super) fn step(&mut self) {
        let now = self.clock.now();
        if !self.keep_open_windows {
            let idle = self.acc.poll(now);
            self.add_emitted(idle);
        }
        self.start_persist();
        self.start_acks();
        self.drop_rate_limited(self.clock.now());
        self.dispatch(self.clock.now());
    }

    /// Pushes a batch (the chunks of one record are consecutive); a record that ends up in no
    /// open or unpersisted chunk is acknowledged at once.
    pub(super) fn accept(&mut self, batch: Vec<Input>) {
        let mut emitted = Vec::new();
        let mut current: Option<u64> = None;
        for input in batch {
            if let Some(prev) = current
                && prev != input.id
                && self.acc.finish_input(prev)
            {
                self.input_acks.push(prev);
            }
            current = Some(input.id);
            self.acc.push_part(
                input.id,
                input.part,
                &input.route,
                &input.chunk,
                &input.linked,
                Some(&input.frame_hashes),
                input.bytes,
                input.accepted_at,
                &mut emitted,
            );
        }
        if let Some(last) = current
            && self.acc.finish_input(last)
        {
            self.input_acks.push(last);
        }
        self.add_emitted(emitted);
    }

    pub(super) fn add_emitted(&mut self, emitted: Vec<Emitted>) {
        for e in emitted {
            ExporterMetrics::add(
                &self.metrics.sparse_samples_dropped,
                e.sparse_samples_dropped as u64,
            );
            ExporterMetrics::add(
                &self.metrics.sparse_samples_grouped,
                e.sparse_samples_grouped as u64,
            );
            ExporterMetrics::add(
                &self.metrics.sparse_threads_grouped,
                e.sparse_threads_grouped as u64,
            );
            if e.sparse_samples_dropped > 0 {
                tracing::debug!(
                    samples = e.sparse_samples_dropped,
                    reason = ?e.reason,
                    profiler_id = %e.key.profiler_id,
                    "chunk accumulation: samples of threads Relay would drop left out of a chunk"
                );
            }
            self.metrics.add_closed(e.reason);
            self.unpersisted_bytes += e.est_bytes;
            self.unpersisted.push_back(e);
        }
    }

    /// True while the unpersisted backlog leaves room for more input.
    pub(super) fn accepting(&self) -> bool {
        self.unpersisted_bytes < MAX_UNPERSISTED_BYTES
    }

    /// True while queue work (persisting, acknowledging) is pending or running.
    pub(super) fn queue_work_left(&self) -> bool {
        !self.unpersisted.is_empty()
            || self.persisting.is_some()
            || self.acking.is_some()
            || !self.input_acks.is_empty()
            || !self.ready_acks.is_empty()
    }

    /// Takes in what `export` buffered, then cuts open windows or keeps them for the next
    /// start.
    pub(super) fn begin_shutdown(&mut self, input_rx: &mut mpsc::Receiver<Vec<Input>>) {
        while let Ok(batch) = input_rx.try_recv() {
            self.accept(batch);
        }
        // On disk, open windows stay as they are (unless configured otherwise): their inputs
        // are unacknowledged and the next start replays them and goes on filling the same
        // windows, so a restart does not change where chunks are cut. In memory there is no
        // next start: cut them now.
        if self.cfg.flush_on_shutdown || !self.queue.is_durable() {
            let flushed = self.acc.flush_all();
            self.add_emitted(flushed);
        } else {
            // Nor does a long drain make them idle: no input arrives because the receivers
            // stopped, not because the producers did.
            self.keep_open_windows = true;
        }
    }

    /// While draining: how long to wait for the next event, or `None` when the drain is over
    /// (deadline passed, or nothing running and nothing due before it).
    pub(super) fn drain_nap(&self, deadline: tokio::time::Instant) -> Option<std::time::Duration> {
        let now = self.clock.now();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        if self.inflight.is_empty() && !self.queue_work_left() {
            match self.next_due(now) {
                None => return None,
                Some(t) if t.saturating_duration_since(now) >= left => return None,
                Some(_) => {}
            }
        }
        Some(self.cfg.tick.min(left))
    }

    /// After the drain: stops deliveries, lets running queue jobs finish, records the last
    /// acknowledgements and logs the run's summary.
    pub(super) async fn finish_shutdown(&mut self) {
        self.inflight.shutdown().await;
        for id in self.task_ids.drain().map(|(_, id)| id) {
            self.queue.unlease(id);
        }
        // Let running queue jobs finish (they are short disk writes), then record the last
        // acknowledgements.
        if self.persisting.is_some() {
            let res = join_opt(&mut self.persisting).await;
            self.persisting = None;
            self.on_persisted(res);
        }
        for _ in 0..2 {
            if self.acking.is_some() {
                let res = join_opt(&mut self.acking).await;
                self.acking = None;
                self.on_acked(res);
            }
            self.start_acks();
        }
        let left_behind = self.ready.len();
        if left_behind > 0 {
            tracing::info!(
                chunks = left_behind,
                "shutdown: undelivered chunks stay queued for the next start"
            );
        }
        let summary = self.summary();
        tracing::info!(
            accepted = summary.accepted,
            replayed = summary.replayed,
            replay_skipped = summary.replay_skipped,
            delivered = summary.delivered,
            queued = summary.queued,
            sparse_dropped = summary.sparse_dropped,
            dropped = %summary.dropped_text(),
            "exporter run summary (samples)"
        );
    }

    /// Where every sample of this run went (see [`RunSummary`]).
    pub(super) fn summary(&self) -> RunSummary {
        let m = self.metrics.snapshot();
        let open = self.acc.pending_samples() as u64;
        let unpersisted: u64 = self
            .unpersisted
            .iter()
            .map(|e| e.chunk.profile.samples.len() as u64)
            .sum();
        let ready: u64 = self.ready.values().map(|i| i.meta.samples).sum();
        RunSummary {
            accepted: m.accepted_samples,
            replayed: m.replayed_samples,
            replay_skipped: m.replay_skipped_samples,
            delivered: m.sent_samples,
            queued: open + unpersisted + ready,
            sparse_dropped: m.sparse_samples_dropped,
            dropped: m.dropped_samples,
        }
    }
}
