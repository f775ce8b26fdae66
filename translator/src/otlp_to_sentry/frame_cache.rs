//! What a frame's content alone decides, remembered across requests on each thread: its
//! serialized JSON length, the digest of that JSON, one canonical copy of the frame whose
//! strings later copies share, and the shared `Arc<Frame>` chunks hold, once per frame
//! `platform`.
//!
//! A producer sends the same frames in request after request, each time with a dictionary of
//! its own (the eBPF profiler numbers its tables afresh per report). Serializing and hashing
//! every frame of every request was the largest single cost of translating a typical agent
//! request; here a frame's content is hashed once per request (which the per-request dedup
//! did anyway) and the JSON and SHA-256 are computed once per thread. Sharing the canonical
//! strings also keeps one copy of each name in memory instead of one per request.
//!
//! Handing out the same `Arc<Frame>` for the same frame in every request is what makes frame
//! comparisons downstream cheap: `Arc<Frame>`'s equality compares the pointers first (`Frame`
//! is `Eq`), so the exporter merging a session's chunks of many requests finds a frame it
//! already holds without comparing its strings. (`Arc<str>`'s equality has no such shortcut:
//! `str` is unsized, and rustc 1.95 compares the bytes even of one shared string.)
//!
//! Per thread, so lookups take no lock; bounded ([`MAX_FRAMES`]): when full it starts over.
//! The values are pure functions of the frame, so what the cache holds never changes an
//! output, only how fast it is computed.

use super::ids::digest64;
use hashbrown::{DefaultHashBuilder, HashTable};
use profilink_proto::sentry::Frame;
use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::Arc;

/// At most this many frames are remembered per thread (a few MiB with their strings); past
/// it the cache starts over.
const MAX_FRAMES: usize = 1 << 16;

/// What the cache knows of a frame.
#[derive(Debug, Clone)]
pub(crate) struct FrameFacts {
    /// The canonical copy (strings shared with every later copy handed out).
    pub frame: Frame,
    /// Length of its JSON.
    pub json_len: usize,
    /// First 8 bytes of the SHA-256 of its JSON.
    pub json_digest: u64,
    /// Where the cache keeps it, for [`shared`].
    pub slot: Slot,
}

/// A frame's place in this thread's cache, valid while the cache has not started over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    index: u32,
    generation: u64,
}

/// One remembered frame.
struct Entry {
    frame: Frame,
    json_len: usize,
    json_digest: u64,
    /// The shared copies handed out, one per frame `platform` (a handful at most: a frame
    /// keeps its runtime, and a runtime's frames take one platform per chunk platform).
    shared: Vec<Arc<Frame>>,
}

/// A frame has at most this many shared copies (one per distinct `platform`); past it, a new
/// copy is made each time, as without the cache.
const MAX_SHARED: usize = 8;

#[derive(Default)]
struct Cache {
    hasher: DefaultHashBuilder,
    index: HashTable<u32>,
    entries: Vec<Entry>,
    /// Bumped each time the cache starts over, so an old [`Slot`] finds nothing.
    generation: u64,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// The facts of `frame` (computed now, or remembered from an earlier request on this thread).
pub(crate) fn facts(frame: &Frame) -> FrameFacts {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let hash = cache.hasher.hash_one(frame);
        let entries = &cache.entries;
        if let Some(&i) = cache
            .index
            .find(hash, |&i| entries[i as usize].frame == *frame)
        {
            let e = &entries[i as usize];
            return FrameFacts {
                frame: e.frame.clone(),
                json_len: e.json_len,
                json_digest: e.json_digest,
                slot: Slot {
                    index: i,
                    generation: cache.generation,
                },
            };
        }
        let (json_len, json_digest) = compute(frame);
        if cache.entries.len() >= MAX_FRAMES {
            cache.entries.clear();
            cache.index.clear();
            cache.generation += 1;
        }
        let Cache {
            hasher,
            index,
            entries,
            generation,
        } = &mut *cache;
        let i = entries.len() as u32;
        entries.push(Entry {
            frame: frame.clone(),
            json_len,
            json_digest,
            shared: Vec::new(),
        });
        index.insert_unique(hash, i, |&j| hasher.hash_one(&entries[j as usize].frame));
        FrameFacts {
            frame: frame.clone(),
            json_len,
            json_digest,
            slot: Slot {
                index: i,
                generation: *generation,
            },
        }
    })
}

/// The shared copy of the frame at `slot` with `platform` set: the one handed out before on
/// this thread, else `frame` (that frame with that platform) made the shared one. Without the
/// slot (the cache started over since), a new copy.
pub(crate) fn shared(
    slot: Slot,
    platform: Option<&Arc<str>>,
    frame: impl FnOnce() -> Frame,
) -> Arc<Frame> {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let generation = cache.generation;
        let Some(entry) = cache
            .entries
            .get_mut(slot.index as usize)
            .filter(|_| generation == slot.generation)
        else {
            return Arc::new(frame());
        };
        let wanted = platform.map(|p| &**p);
        if let Some(f) = entry
            .shared
            .iter()
            .find(|f| f.platform.as_deref() == wanted)
        {
            return Arc::clone(f);
        }
        let f = Arc::new(frame());
        debug_assert_eq!(f.platform.as_deref(), wanted);
        if entry.shared.len() < MAX_SHARED {
            entry.shared.push(Arc::clone(&f));
        }
        f
    })
}

/// The facts without the cache.
fn compute(frame: &Frame) -> (usize, u64) {
    // Plain data with string keys always serializes.
    let json = serde_json::to_vec(frame).unwrap_or_default();
    (json.len(), digest64(&json))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn frame(name: &str) -> Frame {
        Frame {
            function: Some(Arc::from(name)),
            in_app: Some(false),
            ..Frame::default()
        }
    }

    #[test]
    fn remembered_facts_equal_computed_ones_and_share_strings() {
        let a = facts(&frame("memcpy"));
        let b = facts(&frame("memcpy"));
        assert_eq!((a.json_len, a.json_digest), compute(&frame("memcpy")));
        assert_eq!((b.json_len, b.json_digest), (a.json_len, a.json_digest));
        let (fa, fb) = (a.frame.function.unwrap(), b.frame.function.unwrap());
        assert!(
            Arc::ptr_eq(&fa, &fb),
            "the second copy shares the first one's string"
        );
        let c = facts(&frame("memmove"));
        assert_ne!(c.json_digest, a.json_digest);
        assert_eq!(c.json_len, a.json_len + 1);
    }

    #[test]
    fn a_full_cache_starts_over_and_still_answers() {
        for i in 0..MAX_FRAMES + 10 {
            let f = frame(&format!("f{i}"));
            assert_eq!(
                {
                    let x = facts(&f);
                    (x.json_len, x.json_digest)
                },
                compute(&f)
            );
        }
        CACHE.with(|c| assert!(c.borrow().entries.len() <= MAX_FRAMES));
    }

    fn shared_copy(name: &str, platform: Option<&str>) -> Arc<Frame> {
        let facts = facts(&frame(name));
        let platform: Option<Arc<str>> = platform.map(Arc::from);
        shared(facts.slot, platform.as_ref(), || Frame {
            platform: platform.clone(),
            ..facts.frame.clone()
        })
    }

    #[test]
    fn the_same_frame_is_handed_out_as_the_same_arc_per_platform() {
        let a = shared_copy("strlen", None);
        let b = shared_copy("strlen", None);
        assert!(Arc::ptr_eq(&a, &b), "a later request gets the same Arc");
        let n1 = shared_copy("strlen", Some("native"));
        let n2 = shared_copy("strlen", Some("native"));
        assert!(Arc::ptr_eq(&n1, &n2));
        assert!(!Arc::ptr_eq(&a, &n1), "another platform is another frame");
        assert_eq!(a.platform, None);
        assert_eq!(n1.platform.as_deref(), Some("native"));
        assert_eq!(*a, frame("strlen"));
        let other = shared_copy("strcpy", None);
        assert_ne!(*other, *a);
    }

    #[test]
    fn a_slot_from_before_the_cache_started_over_gets_a_fresh_copy() {
        let old = facts(&frame("before"));
        for i in 0..MAX_FRAMES {
            facts(&frame(&format!("filler{i}")));
        }
        // The cache started over: `old.slot` now names another frame's place, or none.
        let copy = shared(old.slot, None, || old.frame.clone());
        assert_eq!(*copy, frame("before"));
        let again = shared(old.slot, None, || old.frame.clone());
        assert!(!Arc::ptr_eq(&copy, &again), "a stale slot shares nothing");
    }
}
