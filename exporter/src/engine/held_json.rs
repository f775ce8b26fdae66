//! The JSON of merged chunks kept in memory from the persist job to their first delivery, so
//! a chunk just written to the ready log is sent without reading it back (a blocking-pool
//! task, a disk read and two copies per chunk). Bounded ([`MAX_HELD_BYTES`]): past it chunks
//! are read from the log as before, as are retries and chunks replayed at start.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most JSON bytes held at once (16 MiB: 32 held 17 MiB more at the peak for no measurable CPU).
pub(super) const MAX_HELD_BYTES: u64 = 16 << 20;

/// The bytes held by every [`HeldJson`] of one engine.
#[derive(Debug, Default, Clone)]
pub(super) struct HeldBytes(Arc<AtomicU64>);

impl HeldBytes {
    /// Holds `json` when it fits under [`MAX_HELD_BYTES`] (else `None`: it is read from the
    /// log when sent). What is counted is the buffer's capacity, the memory it really holds,
    /// not its length.
    pub(super) fn hold(&self, json: Vec<u8>) -> Option<HeldJson> {
        let n = json.capacity() as u64;
        let mut now = self.0.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(n) > MAX_HELD_BYTES {
                return None;
            }
            match self
                .0
                .compare_exchange_weak(now, now + n, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(v) => now = v,
            }
        }
        Some(HeldJson {
            json,
            counted: n,
            held: self.clone(),
        })
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(super) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A chunk's JSON, counted in its engine's [`HeldBytes`] until taken or dropped.
#[derive(Debug)]
pub(super) struct HeldJson {
    json: Vec<u8>,
    /// What `hold` added to `held`.
    counted: u64,
    held: HeldBytes,
}

impl HeldJson {
    /// The JSON, no longer counted.
    pub(super) fn take(mut self) -> Vec<u8> {
        std::mem::take(&mut self.json)
    }
}

impl Drop for HeldJson {
    fn drop(&mut self) {
        // Also after `take`: what was counted is released once, here.
        let n = self.counted;
        let _ = self
            .held
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_bytes_are_released_when_taken_or_dropped_and_bounded() {
        let held = HeldBytes::default();
        let a = held.hold(vec![1; 1000]).expect("fits");
        let b = held.hold(vec![2; 24]).expect("fits");
        assert_eq!(held.get(), 1024);
        assert_eq!(a.take(), vec![1; 1000]);
        assert_eq!(held.get(), 24);
        drop(b);
        assert_eq!(held.get(), 0);
        let big = held
            .hold(vec![0; MAX_HELD_BYTES as usize])
            .expect("exactly fits");
        assert!(held.hold(vec![0; 1]).is_none(), "over the bound: not held");
        drop(big);
        assert!(held.hold(vec![0; 1]).is_some());
    }

    #[test]
    fn a_buffers_spare_capacity_counts_as_held() {
        let held = HeldBytes::default();
        let mut json = Vec::with_capacity(MAX_HELD_BYTES as usize);
        json.extend_from_slice(b"{}");
        let h = held.hold(json).expect("fits: the whole bound");
        assert_eq!(
            held.get(),
            MAX_HELD_BYTES,
            "the allocation is held, not its 2 bytes"
        );
        assert!(held.hold(vec![0; 1]).is_none(), "the bound is taken");
        drop(h);
        assert_eq!(held.get(), 0);
    }
}
