//! What a frame's content alone decides, remembered across requests on each thread: its
//! serialized JSON length, the digest of that JSON, and one canonical copy of the frame whose
//! strings later copies share.
//!
//! A producer sends the same frames in request after request, each time with a dictionary of
//! its own (the eBPF profiler numbers its tables afresh per report). Serializing and hashing
//! every frame of every request was the largest single cost of translating a typical agent
//! request; here a frame's content is hashed once per request (which the per-request dedup
//! did anyway) and the JSON and SHA-256 are computed once per thread. Sharing the canonical
//! strings also keeps one copy of each name in memory instead of one per request. (It does
//! not make frame comparisons pointer comparisons: `Arc<str>`'s equality compares the bytes
//! even of one shared string, as measured with rustc 1.95.)
//!
//! Per thread, so lookups take no lock; bounded ([`MAX_FRAMES`]): when full it starts over.
//! The values are pure functions of the frame, so what the cache holds never changes an
//! output, only how fast it is computed.

use super::ids::digest64;
use hashbrown::HashMap;
use profilink_proto::sentry::Frame;
use std::cell::RefCell;

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
}

thread_local! {
    static CACHE: RefCell<HashMap<Frame, (usize, u64)>> = RefCell::new(HashMap::new());
}

/// The facts of `frame` (computed now, or remembered from an earlier request on this thread).
pub(crate) fn facts(frame: &Frame) -> FrameFacts {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if let Some((canonical, &(json_len, json_digest))) = cache.get_key_value(frame) {
            return FrameFacts {
                frame: canonical.clone(),
                json_len,
                json_digest,
            };
        }
        let (json_len, json_digest) = compute(frame);
        if cache.len() >= MAX_FRAMES {
            cache.clear();
        }
        cache.insert(frame.clone(), (json_len, json_digest));
        FrameFacts {
            frame: frame.clone(),
            json_len,
            json_digest,
        }
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
        CACHE.with(|c| assert!(c.borrow().len() <= MAX_FRAMES));
    }
}
