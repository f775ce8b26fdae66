//! One `Arc<Frame>` per frame content for the whole process, shared by every thread's frame
//! cache ([`super::frame_cache`]).
//!
//! Each translating thread keeps a cache of its own, so that lookups take no lock. Before
//! this table each cache also made its own copy of every frame: a service translating on two
//! runtime workers handed out two `Arc`s for one frame, depending on the thread a request
//! happened to land on. The exporter merging a session's chunks compares frames through
//! `Arc<Frame>`'s equality, which stops at the pointer when both are the same allocation and
//! otherwise compares every string; with two copies in play, about half of those lookups
//! compared strings.
//!
//! A thread's cache asks here only when it meets a frame it does not hold (the first time it
//! sees it, or after it started over), so the lock is taken once per frame and thread, not per
//! request. Bounded ([`MAX_FRAMES`]): when full it starts over, after which new copies are
//! made again (still equal, only compared more slowly).

use hashbrown::{DefaultHashBuilder, HashTable};
use profilink_proto::sentry::Frame;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

/// At most this many frames are held (their strings are shared with the threads' caches and
/// the chunks, so this costs little more than the table).
const MAX_FRAMES: usize = 1 << 17;

struct Table {
    hasher: DefaultHashBuilder,
    frames: HashTable<Arc<Frame>>,
    /// Times the table started over.
    #[cfg(test)]
    generation: u64,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The process's copy of `frame`: the one handed out before for an equal frame, else
/// `frame` itself, now the copy for later callers.
pub(crate) fn canonical(frame: Frame) -> Arc<Frame> {
    // A poisoned lock only means another thread panicked mid-insert; the table is still a
    // set of valid frames.
    let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let table = guard.get_or_insert_with(|| Table {
        hasher: DefaultHashBuilder::default(),
        frames: HashTable::new(),
        #[cfg(test)]
        generation: 0,
    });
    let hash = table.hasher.hash_one(&frame);
    if let Some(f) = table.frames.find(hash, |f| **f == frame) {
        return Arc::clone(f);
    }
    if table.frames.len() >= MAX_FRAMES {
        table.frames.clear();
        #[cfg(test)]
        {
            table.generation += 1;
        }
    }
    let f = Arc::new(frame);
    let hasher = &table.hasher;
    table
        .frames
        .insert_unique(hash, Arc::clone(&f), |g| hasher.hash_one(&**g));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str) -> Frame {
        Frame {
            function: Some(Arc::from(name)),
            ..Frame::default()
        }
    }

    fn generation() -> u64 {
        TABLE.lock().unwrap().as_ref().map_or(0, |t| t.generation)
    }

    #[test]
    fn threads_get_the_same_copy_of_an_equal_frame() {
        let name = "canonical_frames::threads_get_the_same_copy";
        let before = generation();
        let here = canonical(frame(name));
        let there = std::thread::spawn(move || canonical(frame(name)))
            .join()
            .unwrap();
        // Other tests fill the table too: it may have started over in between.
        assert!(Arc::ptr_eq(&here, &there) || generation() != before);
        let other = canonical(frame("canonical_frames::another"));
        assert!(!Arc::ptr_eq(&here, &other));
        assert_eq!(*other, frame("canonical_frames::another"));
    }
}
