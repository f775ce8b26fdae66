//! What a frame's content alone decides, remembered across requests on each thread: its
//! serialized JSON length, the digest of that JSON, and one canonical `Arc<Frame>` that chunks
//! hold (plus one copy per foreign frame `platform`, sharing its strings).
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
//! Before any of that, a frame has to be built from a location line's strings (copied into
//! `Arc`s, its `in_app` decided by pattern matching, its address formatted): [`facts_of`]
//! remembers, per thread, the facts of the frame each distinct line input (a [`LineKey`])
//! became, so a line seen in an earlier request costs one hash of its strings.
//!
//! Per thread, so lookups take no lock; bounded ([`MAX_FRAMES`]): when full it starts over.
//! The `Arc`s themselves come from the process-wide [`super::canonical_frames`], asked once
//! per frame a thread meets, so every thread hands out the same copy of a frame.
//! The values are pure functions of the frame, so what the cache holds never changes an
//! output, only how fast it is computed.

use super::canonical_frames::canonical;
use super::ids::digest64;
use super::platform::Runtime;
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
    /// The canonical copy, `platform` unset (what chunks without a frame platform hold).
    pub frame: Arc<Frame>,
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
    /// The canonical copy, `platform` unset.
    frame: Arc<Frame>,
    json_len: usize,
    json_digest: u64,
    /// The copies with a `platform` handed out, one per platform (a handful at most: a frame
    /// keeps its runtime, and a runtime's frames take one platform per chunk platform).
    with_platform: Vec<Arc<Frame>>,
}

/// A frame has at most this many copies with a `platform`; past it, a new copy is made each
/// time, as without the cache.
const MAX_SHARED: usize = 8;

#[derive(Default)]
struct Cache {
    hasher: DefaultHashBuilder,
    index: HashTable<u32>,
    entries: Vec<Entry>,
    /// [`facts_of`]'s memory: line inputs and the entry their frame is.
    line_index: HashTable<u32>,
    lines: Vec<(OwnedLineKey, u32)>,
    /// Bumped each time the cache starts over, so an old [`Slot`] finds nothing.
    generation: u64,
}

/// What a location line's frame is built from (everything `FrameTable::make_frame` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct LineKey<'s> {
    /// The location's runtime.
    pub runtime: Runtime,
    /// Function name (or system name).
    pub name: &'s str,
    /// Function file name.
    pub file: &'s str,
    /// Line number as sent.
    pub line: i64,
    /// Column as sent.
    pub column: i64,
    /// The location's address, placed in its image.
    pub address: Option<u64>,
    /// The mapping's file name.
    pub package: Option<&'s str>,
}

/// A [`LineKey`] kept by the cache.
#[derive(Debug)]
struct OwnedLineKey {
    runtime: Runtime,
    name: Box<str>,
    file: Box<str>,
    line: i64,
    column: i64,
    address: Option<u64>,
    package: Option<Box<str>>,
}

impl OwnedLineKey {
    fn new(k: &LineKey<'_>) -> Self {
        OwnedLineKey {
            runtime: k.runtime,
            name: k.name.into(),
            file: k.file.into(),
            line: k.line,
            column: k.column,
            address: k.address,
            package: k.package.map(Into::into),
        }
    }

    fn key(&self) -> LineKey<'_> {
        LineKey {
            runtime: self.runtime,
            name: &self.name,
            file: &self.file,
            line: self.line,
            column: self.column,
            address: self.address,
            package: self.package.as_deref(),
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

impl Cache {
    fn facts_of_entry(&self, i: u32) -> FrameFacts {
        let e = &self.entries[i as usize];
        FrameFacts {
            frame: Arc::clone(&e.frame),
            json_len: e.json_len,
            json_digest: e.json_digest,
            slot: Slot {
                index: i,
                generation: self.generation,
            },
        }
    }

    /// The entry of `frame`, added if new (the cache starting over first when full).
    fn entry(&mut self, frame: Frame) -> u32 {
        let hash = self.hasher.hash_one(&frame);
        let entries = &self.entries;
        if let Some(&i) = self
            .index
            .find(hash, |&i| *entries[i as usize].frame == frame)
        {
            return i;
        }
        let (json_len, json_digest) = compute(&frame);
        if self.entries.len() >= MAX_FRAMES {
            self.start_over();
        }
        let Cache {
            hasher,
            index,
            entries,
            ..
        } = self;
        let i = entries.len() as u32;
        entries.push(Entry {
            frame: canonical(frame),
            json_len,
            json_digest,
            with_platform: Vec::new(),
        });
        index.insert_unique(hash, i, |&j| hasher.hash_one(&entries[j as usize].frame));
        i
    }

    fn start_over(&mut self) {
        self.entries.clear();
        self.index.clear();
        self.lines.clear();
        self.line_index.clear();
        self.generation += 1;
    }
}

/// The facts of `frame` (computed now, or remembered from an earlier request on this thread).
#[cfg(test)]
fn facts(frame: &Frame) -> FrameFacts {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let i = cache.entry(frame.clone());
        cache.facts_of_entry(i)
    })
}

/// The facts of the frame location line `key` makes: `make()` (which must be that frame)
/// is called only when this thread has not seen `key` since the cache last started over.
pub(crate) fn facts_of(key: &LineKey<'_>, make: impl FnOnce() -> Frame) -> FrameFacts {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let hash = cache.hasher.hash_one(key);
        let lines = &cache.lines;
        if let Some(&l) = cache
            .line_index
            .find(hash, |&l| lines[l as usize].0.key() == *key)
        {
            let i = cache.lines[l as usize].1;
            return cache.facts_of_entry(i);
        }
        if cache.lines.len() >= MAX_FRAMES {
            cache.start_over();
        }
        let i = cache.entry(make());
        let Cache {
            hasher,
            line_index,
            lines,
            ..
        } = &mut *cache;
        let l = lines.len() as u32;
        lines.push((OwnedLineKey::new(key), i));
        line_index.insert_unique(hash, l, |&m| hasher.hash_one(lines[m as usize].0.key()));
        cache.facts_of_entry(i)
    })
}

/// The copy of `frame` (the canonical one of `slot`) that chunks hold, with `platform` set:
/// `frame` itself without a platform, else the copy with that platform handed out before on
/// this thread (taken from [`super::canonical_frames`] when new). Without the slot (the cache
/// started over since), the process's copy, asked for each time.
pub(crate) fn shared(slot: Slot, platform: Option<&Arc<str>>, frame: &Arc<Frame>) -> Arc<Frame> {
    let Some(platform) = platform else {
        return Arc::clone(frame);
    };
    let with_platform = || {
        canonical(Frame {
            platform: Some(Arc::clone(platform)),
            ..(**frame).clone()
        })
    };
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let generation = cache.generation;
        let Some(entry) = cache
            .entries
            .get_mut(slot.index as usize)
            .filter(|_| generation == slot.generation)
        else {
            return with_platform();
        };
        if let Some(f) = entry
            .with_platform
            .iter()
            .find(|f| f.platform.as_deref() == Some(&**platform))
        {
            return Arc::clone(f);
        }
        let f = with_platform();
        if entry.with_platform.len() < MAX_SHARED {
            entry.with_platform.push(Arc::clone(&f));
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
        let (fa, fb) = (
            a.frame.function.clone().unwrap(),
            b.frame.function.clone().unwrap(),
        );
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
        shared(facts.slot, platform.as_ref(), &facts.frame)
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
    fn a_slot_from_before_the_cache_started_over_gets_its_own_frame_back() {
        let old = facts(&frame("before"));
        for i in 0..MAX_FRAMES {
            facts(&frame(&format!("filler{i}")));
        }
        // The cache started over: `old.slot` now names another frame's place, or none.
        let native: Arc<str> = Arc::from("native");
        let copy = shared(old.slot, Some(&native), &old.frame);
        assert_eq!(
            *copy,
            Frame {
                platform: Some(native.clone()),
                ..frame("before")
            }
        );
        // Nothing of the stale slot is used: the copy comes from the process's table.
        let again = shared(old.slot, Some(&native), &old.frame);
        assert_eq!(copy, again);
    }

    fn line(name: &str, line: i64) -> LineKey<'_> {
        LineKey {
            runtime: Runtime::CPython,
            name,
            file: "app.py",
            line,
            column: 0,
            address: None,
            package: None,
        }
    }

    #[test]
    fn a_line_seen_before_is_not_built_again() {
        let built = std::cell::Cell::new(0);
        let make = |name: &str| {
            built.set(built.get() + 1);
            frame(name)
        };
        let a = facts_of(&line("handler", 10), || make("handler"));
        let b = facts_of(&line("handler", 10), || make("handler"));
        assert_eq!(built.get(), 1, "the second request's line is remembered");
        assert_eq!(a.frame, b.frame);
        assert_eq!((a.json_len, a.json_digest), (b.json_len, b.json_digest));
        assert_eq!((a.json_len, a.json_digest), compute(&frame("handler")));
        // Another line number is another input, even when it makes the same frame: built, and
        // then found as the same frame (one shared copy for both).
        let c = facts_of(&line("handler", 11), || make("handler"));
        assert_eq!(built.get(), 2);
        let shared_a = shared(a.slot, None, &a.frame);
        let shared_c = shared(c.slot, None, &c.frame);
        assert!(Arc::ptr_eq(&shared_a, &shared_c));
        // Frame facts looked up by content agree with those found by line.
        assert_eq!(facts(&frame("handler")).json_digest, a.json_digest);
    }

    #[test]
    fn remembered_lines_are_bounded() {
        for i in 0..MAX_FRAMES as i64 + 10 {
            let f = facts_of(&line("f", i), || frame("f"));
            assert_eq!((f.json_len, f.json_digest), compute(&frame("f")));
        }
        CACHE.with(|c| {
            let c = c.borrow();
            assert!(c.lines.len() <= MAX_FRAMES && c.line_index.len() == c.lines.len());
        });
    }
}
