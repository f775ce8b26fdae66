//! Bodies read from the network, bounded while they stream: one running count against a limit,
//! for every client in the workspace (debuginfod downloads, the exporters' responses, scrapes).
//!
//! A `Content-Length` says what a server *means* to send, not what it sends: a body without one
//! (or one that lies) is only bounded by counting the bytes as they arrive and stopping at the
//! limit. [`BodyBound`] is that count; it never lets a caller hold more than the limit:
//!
//! * [`BodyBound::admit`]: strict, for bodies that are useless when cut (a debug file): the
//!   chunk that passes the limit is an error ([`BodyTooLarge`]) and nothing of it is kept;
//! * [`BodyBound::keep`]: a prefix, for bodies read only for detail (an error message): the
//!   part of the chunk that fits, and [`BodyBound::is_full`] says when to stop reading.
//!
//! The time a body may take is the client's business (`reqwest`'s total `timeout` covers the
//! body); this module only counts bytes.

/// A body went past its limit (the bytes past it were not kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("body longer than its limit of {limit} bytes")]
pub struct BodyTooLarge {
    /// The limit, in bytes.
    pub limit: u64,
}

/// The running count of one body against its limit (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyBound {
    limit: u64,
    seen: u64,
}

impl BodyBound {
    /// A count of nothing yet, against `limit` bytes.
    pub fn new(limit: u64) -> BodyBound {
        BodyBound { limit, seen: 0 }
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes admitted or kept so far (never more than the limit).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Whether the limit is reached: nothing more can be kept.
    pub fn is_full(&self) -> bool {
        self.seen >= self.limit
    }

    /// Refuses a declared length (`Content-Length`) above the limit before any byte is read.
    pub fn check_declared(&self, declared: Option<u64>) -> Result<(), BodyTooLarge> {
        match declared {
            Some(n) if n > self.limit => Err(BodyTooLarge { limit: self.limit }),
            _ => Ok(()),
        }
    }

    /// Counts `chunk` in full, or refuses it when the total would pass the limit (the count
    /// stays where it was: the caller drops the chunk and stops reading).
    pub fn admit(&mut self, chunk: &[u8]) -> Result<(), BodyTooLarge> {
        let total = self.seen.saturating_add(chunk.len() as u64);
        if total > self.limit {
            return Err(BodyTooLarge { limit: self.limit });
        }
        self.seen = total;
        Ok(())
    }

    /// The part of `chunk` that still fits under the limit, counted.
    pub fn keep<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        let room = self.limit - self.seen;
        let n = usize::try_from(room).map_or(chunk.len(), |r| r.min(chunk.len()));
        self.seen += n as u64;
        &chunk[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// `data` cut into pieces of the given sizes (cycled), as a server's chunks arrive.
    fn chunks<'a>(data: &'a [u8], pieces: &[usize]) -> Vec<&'a [u8]> {
        let mut out = Vec::new();
        let mut rest = data;
        let mut i = 0;
        while !rest.is_empty() {
            let n = pieces[i % pieces.len()].clamp(1, rest.len());
            out.push(&rest[..n]);
            rest = &rest[n..];
            i += 1;
        }
        out
    }

    /// The strict reader of a client: admitted chunks are kept, the first refused one ends it.
    fn strict(limit: u64, chunks: &[&[u8]], peak: &mut usize) -> Result<Vec<u8>, BodyTooLarge> {
        let mut b = BodyBound::new(limit);
        let mut held = Vec::new();
        for c in chunks {
            b.admit(c)?;
            held.extend_from_slice(c);
            *peak = (*peak).max(held.len());
            assert_eq!(b.seen(), held.len() as u64);
        }
        Ok(held)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any chunking of an over-long body: refused, and never more than the limit held, by
        /// the strict count (admit) or the prefix count (keep, which keeps exactly the limit).
        #[test]
        fn over_long_bodies_never_hold_more_than_the_bound(
            limit in 0u64..200_000,
            over in 1usize..150_000,
            pieces in proptest::collection::vec(1usize..100_000, 1..12),
        ) {
            let data = body(limit as usize + over);
            let cs = chunks(&data, &pieces);
            let mut peak = 0;
            prop_assert_eq!(strict(limit, &cs, &mut peak), Err(BodyTooLarge { limit }));
            prop_assert!(peak as u64 <= limit);

            let mut b = BodyBound::new(limit);
            let mut kept = Vec::new();
            for c in &cs {
                if b.is_full() {
                    break;
                }
                kept.extend_from_slice(b.keep(c));
                prop_assert!(kept.len() as u64 <= limit);
            }
            prop_assert_eq!(&kept[..], &data[..limit as usize]);
        }

        /// A body at or below the limit comes through whole, whatever its chunking.
        #[test]
        fn bodies_within_the_bound_are_whole(
            len in 0usize..200_000,
            slack in 0u64..3,
            pieces in proptest::collection::vec(1usize..100_000, 1..12),
        ) {
            let data = body(len);
            let limit = len as u64 + slack;
            let cs = chunks(&data, &pieces);
            let mut peak = 0;
            prop_assert_eq!(strict(limit, &cs, &mut peak), Ok(data.clone()));
            let mut b = BodyBound::new(limit);
            let kept: Vec<u8> = cs.iter().flat_map(|c| b.keep(c).to_vec()).collect();
            prop_assert_eq!(kept, data);
        }
    }

    #[test]
    fn declared_lengths() {
        let b = BodyBound::new(10);
        assert!(b.check_declared(Some(10)).is_ok());
        assert!(b.check_declared(None).is_ok());
        assert_eq!(b.check_declared(Some(11)), Err(BodyTooLarge { limit: 10 }));
        let mut b = BodyBound::new(3);
        assert_eq!(b.keep(b"abcdef"), b"abc");
        assert!(b.is_full());
        assert_eq!(b.keep(b"g"), b"");
    }
}
