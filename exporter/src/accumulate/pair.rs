//! Two adjacent windows of a session as one chunk.
//!
//! A session whose samples straddle a window boundary but span less than `chunk_duration` (a
//! short-lived process, a 5 s capture across a minute) would otherwise become two chunks, each
//! with too few samples per thread for Relay: sparse threads grouped or dropped that one chunk
//! would have kept. So windows `k` and `k + 1` of a session become **one chunk** when their
//! estimated size fits `max_chunk_bytes` and their samples together span
//! * less than `chunk_duration`, or
//! * at most Relay's limit for a chunk (66 s, [`MAX_CHUNK_DURATION_SECS`]) when either window
//!   alone would lose samples to Relay's sparse-thread rule, after grouping when
//!   `sparse_threads: group` (a process seen once in the last second of a minute and then
//!   through the next one: its lone sample goes out with the next minute instead of being
//!   dropped)
//!
//! (*they pair*). Two windows apart can never pair (their samples are more than 66 s apart,
//! with `chunk_duration` at its default), so pairs do not chain; the older window pairs first.
//!
//! The decision is made on the windows' final content, so it does not depend on arrival order:
//! a window due to close (its lateness passed, or it settled) that may still pair with the next
//! one is *held* (it stays open) until
//! * the next window closes: one chunk of both, if they still pair;
//! * samples joining either window make pairing impossible: it is emitted alone, for the
//!   reason it was due;
//! * for the lateness rule, with no next window yet: the next window's lateness passes too;
//! * the session ends (idle, shutdown), or the memory bound cuts it.

use super::session::Emitted;
use super::window::{Session, Window};
use super::{ChunkAccumulator, SessionKey, finish_window};
use crate::config::SparseThreads;
use crate::emit_reason::EmitReason;
use profilink_proto::validate::MAX_CHUNK_DURATION_SECS;

impl ChunkAccumulator {
    /// True when windows `a` and `b` (the next one) of a session become one chunk.
    pub(super) fn pairs(&self, a: &Window, b: &Window) -> bool {
        if a.est_bytes().saturating_add(b.est_bytes()) > self.cfg.max_chunk_bytes {
            return false;
        }
        let span = b.last - a.first;
        span < self.grid.duration()
            || (span <= MAX_CHUNK_DURATION_SECS && (self.loses_alone(a) || self.loses_alone(b)))
    }

    /// True when window `w`, sent alone, would lose samples to Relay's sparse-thread rule.
    fn loses_alone(&self, w: &Window) -> bool {
        let group = self.cfg.sparse_threads == SparseThreads::Group;
        w.builder
            .loses_sparse_samples(group, |t| w.linked.contains(t))
    }

    /// The longest span window `w` may still pair over: Relay's limit when it would lose
    /// samples alone, else `chunk_duration`.
    fn pair_reach(&self, w: &Window) -> f64 {
        if self.grid.duration() < MAX_CHUNK_DURATION_SECS && self.loses_alone(w) {
            MAX_CHUNK_DURATION_SECS
        } else {
            self.grid.duration()
        }
    }

    /// True when window `k` of `s`, due for `reason`, must wait for the next window.
    fn must_wait(&self, s: &Session, k: i64, reason: EmitReason) -> bool {
        let Some(w) = s.windows.get(&k) else {
            return false;
        };
        if let Some(prev) = s.windows.get(&(k - 1))
            && prev.held.is_some()
            && self.pairs(prev, w)
        {
            // The older window pairs first: this one goes out now, with it.
            return false;
        }
        match s.windows.get(&(k + 1)) {
            Some(next) => self.pairs(w, next),
            // A sample of window k + 1 not yet read could still pair, until that window's
            // lateness passes.
            None => {
                reason == EmitReason::Duration
                    && !self.grid.expired(k + 1, s.newest)
                    && w.first + self.pair_reach(w) > self.grid.end(k)
            }
        }
    }

    /// Closes window `k` of session `key`, due for `reason` (the lateness or settle rule):
    /// holds it while it may still pair with the next window, else emits it.
    pub(super) fn close(
        &mut self,
        key: &SessionKey,
        k: i64,
        reason: EmitReason,
        emitted: &mut Vec<Emitted>,
    ) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        if self.must_wait(s, k, reason) {
            if let Some(w) = self
                .sessions
                .get_mut(key)
                .and_then(|s| s.windows.get_mut(&k))
            {
                w.held.get_or_insert(reason);
            }
            return;
        }
        self.emit(key, k, reason, emitted);
    }

    /// Emits window `k` of session `key` for `reason`, as one chunk with the window before it
    /// when that one is held and they pair (else that one first, alone).
    pub(super) fn emit(
        &mut self,
        key: &SessionKey,
        k: i64,
        reason: EmitReason,
        emitted: &mut Vec<Emitted>,
    ) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(mut w) = s.windows.remove(&k) else {
            return;
        };
        let prev = match s.windows.get(&(k - 1)) {
            Some(p) if p.held.is_some() => s.windows.remove(&(k - 1)),
            _ => None,
        };
        self.open_bytes = self.open_bytes.saturating_sub(w.est_bytes());
        let policy = self.cfg.sparse_threads;
        if let Some(p) = prev {
            self.open_bytes = self.open_bytes.saturating_sub(p.est_bytes());
            if self.pairs(&p, &w) {
                self.join_into(&mut w, p);
            } else {
                let r = p.held.unwrap_or(reason);
                emitted.push(finish_window(key.clone(), p, policy, r));
            }
        }
        emitted.push(finish_window(key.clone(), w, policy, reason));
    }

    /// After samples joined window `k` of session `key`: emits a held window next to it that
    /// can no longer pair.
    pub(super) fn recheck(&mut self, key: &SessionKey, k: i64, emitted: &mut Vec<Emitted>) {
        for held in [k - 1, k] {
            let Some(s) = self.sessions.get(key) else {
                return;
            };
            let Some(reason) = s.windows.get(&held).and_then(|w| w.held) else {
                continue;
            };
            let next_pairs = match (s.windows.get(&held), s.windows.get(&(held + 1))) {
                (Some(w), Some(n)) => self.pairs(w, n),
                _ => true,
            };
            if !next_pairs {
                self.emit(key, held, reason, emitted);
            }
        }
    }

    /// Ends a session's windows (oldest first) for `reason`, pairing adjacent ones.
    pub(super) fn end_session(
        &mut self,
        key: SessionKey,
        s: Session,
        reason: EmitReason,
        out: &mut Vec<Emitted>,
    ) {
        let policy = self.cfg.sparse_threads;
        let mut carry: Option<(i64, Window)> = None;
        for (k, mut w) in s.windows {
            self.open_bytes = self.open_bytes.saturating_sub(w.est_bytes());
            match carry.take() {
                Some((pk, p)) if pk + 1 == k && self.pairs(&p, &w) => {
                    self.join_into(&mut w, p);
                    out.push(finish_window(key.clone(), w, policy, reason));
                }
                Some((_, p)) => {
                    out.push(finish_window(key.clone(), p, policy, reason));
                    carry = Some((k, w));
                }
                None => carry = Some((k, w)),
            }
        }
        if let Some((_, p)) = carry {
            out.push(finish_window(key, p, policy, reason));
        }
    }

    /// Moves window `p` (the one before) into `w`; an input in both stays counted once.
    fn join_into(&mut self, w: &mut Window, p: Window) {
        for id in p.inputs {
            if !w.inputs.insert(id)
                && let Some(n) = self.pending.get_mut(&id)
            {
                *n = n.saturating_sub(1);
            }
        }
        w.builder.absorb(p.builder);
        w.consumed.extend(p.consumed);
        w.linked.extend(p.linked);
        w.first = w.first.min(p.first);
        w.last = w.last.max(p.last);
        w.last_added = w.last_added.max(p.last_added);
    }
}
