//! The amplification budget: how much memory the OTLP -> chunks translation of one request may
//! take, and all requests together.
//!
//! A request's size does not bound its translation. Aggregated samples (values without
//! timestamps) claim observations that are made from nothing (a value of 10^12 in a few bytes),
//! and every profiler session gets chunks with their own copy of the frames its stacks use, so
//! a small dictionary shared by thousands of sessions is copied thousands of times. Before
//! this budget, a 0.8 MB request drove the service past 4 GiB and a 409 KB one to 1 GB, and
//! the exporters' full queues answered "retry later" to requests that could never fit.
//!
//! The rules, in order:
//!
//! 1. **Claims** ([`ExpansionClaims`], measured before anything is translated): a profile
//!    claiming more than [`MAX_PLAUSIBLE_CLAIM`] (2^32) observations, or a request whose capped
//!    claims sum above [`Budget::max_request_expansion`], is refused for good
//!    ([`ConsumeError::Rejected`]: gRPC `INVALID_ARGUMENT`, HTTP 400).
//! 2. **Reservation**: the claimed observations reserve [`OBSERVATION_BYTES`] each from the
//!    bytes all requests may hold at once ([`Budget::max_in_flight_bytes`]); when the
//!    reservation does not fit now, the request is refused as full (it fits later: gRPC
//!    `UNAVAILABLE`, HTTP 503, "retry later").
//! 3. **Output**: each chunk the translation makes reserves its estimated in-memory size (the
//!    store writer's estimate) as it is made. A request whose chunks reach
//!    [`Budget::max_request_bytes`] is refused for good; one that finds the shared budget
//!    exhausted is refused as full. Chunks past either bound are not kept, so memory stays
//!    within the bound while the translation finishes.
//!
//! Reservations are held until the request's chunks are handed to the exporters (whose queues
//! bound them from there on) and released when the [`Reservation`] is dropped.

use crate::store::estimated_bytes;
use profilink_consumer::{ConsumeError, DEFAULT_RETRY_AFTER};
use profilink_proto::sentry::ProfileChunk;
use profilink_translator::otlp_to_sentry::{ExpansionClaims, MAX_PLAUSIBLE_CLAIM};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Estimated bytes one expanded observation takes until its chunk is handed over.
pub(crate) const OBSERVATION_BYTES: u64 = 48;

/// Default of [`Budget::max_request_expansion`]: the translator's own per-profile cap, so any
/// request of one aggregated profile fits.
pub(crate) const DEFAULT_MAX_REQUEST_EXPANSION: u64 = 1_000_000;

/// Default of [`Budget::max_request_bytes`]: 128 MiB (a one-hour, one-million-observation
/// session takes about 50 MiB).
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: u64 = 128 << 20;

/// Default of [`Budget::max_in_flight_bytes`]: 256 MiB.
pub(crate) const DEFAULT_MAX_IN_FLIGHT_BYTES: u64 = 256 << 20;

/// Permits are counted in units of this many bytes (a semaphore holds fewer than 2^61).
const UNIT: u64 = 1024;

/// The amplification budget shared by the pipelines of one service (see the module docs).
#[derive(Debug, Clone)]
pub struct Budget {
    max_request_expansion: u64,
    max_request_bytes: u64,
    max_in_flight_bytes: u64,
    in_flight: Arc<Semaphore>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(
            DEFAULT_MAX_REQUEST_EXPANSION,
            DEFAULT_MAX_REQUEST_BYTES,
            DEFAULT_MAX_IN_FLIGHT_BYTES,
        )
    }
}

fn units(bytes: u64) -> u64 {
    bytes.div_ceil(UNIT)
}

impl Budget {
    /// A budget with these bounds (the in-flight bound is raised to the per-request one, so a
    /// request within its own bound always fits eventually).
    pub fn new(max_request_expansion: u64, max_request_bytes: u64, max_in_flight: u64) -> Self {
        let max_in_flight_bytes = max_in_flight.max(max_request_bytes);
        let permits = units(max_in_flight_bytes).min(Semaphore::MAX_PERMITS as u64) as usize;
        Budget {
            max_request_expansion,
            max_request_bytes,
            max_in_flight_bytes,
            in_flight: Arc::new(Semaphore::new(permits)),
        }
    }

    /// Most observations one request's aggregated samples may expand to (after the
    /// translator's per-profile cap).
    pub fn max_request_expansion(&self) -> u64 {
        self.max_request_expansion
    }

    /// Most estimated bytes one request's translation may hold.
    pub fn max_request_bytes(&self) -> u64 {
        self.max_request_bytes
    }

    /// Most estimated bytes all translations may hold at once.
    pub fn max_in_flight_bytes(&self) -> u64 {
        self.max_in_flight_bytes
    }

    /// Estimated bytes held now by translations in flight.
    pub fn in_flight_bytes(&self) -> u64 {
        let free = self.in_flight.available_permits() as u64;
        units(self.max_in_flight_bytes)
            .saturating_sub(free)
            .saturating_mul(UNIT)
    }

    /// Checks a request's claims (rules 1 and 2 of the module docs) and reserves their
    /// memory.
    pub(crate) fn admit(&self, claims: &ExpansionClaims) -> Result<Reservation, ConsumeError> {
        if claims.is_implausible() {
            return Err(ConsumeError::Rejected(format!(
                "{} profile(s) claim more observations from aggregated sample values than any \
                 profiler records (largest claim {}, bound {MAX_PLAUSIBLE_CLAIM})",
                claims.implausible_profiles, claims.largest
            )));
        }
        if claims.expanded > self.max_request_expansion {
            return Err(ConsumeError::Rejected(format!(
                "aggregated sample values expand to {} observations, over the per-request \
                 bound of {}; send fewer aggregated profiles per request",
                claims.expanded, self.max_request_expansion
            )));
        }
        let mut r = Reservation {
            budget: self.clone(),
            bytes: 0,
            permits: None,
            outcome: Ok(()),
        };
        r.reserve(claims.expanded.saturating_mul(OBSERVATION_BYTES));
        r.outcome.clone().map(|()| r)
    }
}

/// Memory one request holds in the [`Budget`]; released on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Budget,
    bytes: u64,
    permits: Option<OwnedSemaphorePermit>,
    outcome: Result<(), ConsumeError>,
}

impl Reservation {
    fn reserve(&mut self, bytes: u64) {
        if self.outcome.is_err() || bytes == 0 {
            return;
        }
        let total = self.bytes.saturating_add(bytes);
        if total > self.budget.max_request_bytes {
            self.outcome = Err(ConsumeError::Rejected(format!(
                "the request's translation needs more than {} MiB (estimated), over the \
                 per-request bound; send it in smaller requests",
                self.budget.max_request_bytes >> 20
            )));
            return;
        }
        let wanted = units(total) - units(self.bytes);
        if wanted > 0 {
            let Ok(n) = u32::try_from(wanted) else {
                self.outcome = Err(full());
                return;
            };
            match self.budget.in_flight.clone().try_acquire_many_owned(n) {
                Ok(p) => match &mut self.permits {
                    Some(held) => held.merge(p),
                    None => self.permits = Some(p),
                },
                Err(_) => {
                    self.outcome = Err(full());
                    return;
                }
            }
        }
        self.bytes = total;
    }

    /// Reserves room for `chunk`; false (and the chunk should be dropped) once the request is
    /// over a bound. [`Reservation::outcome`] then says why.
    pub fn keep(&mut self, chunk: &ProfileChunk) -> bool {
        self.reserve(estimated_bytes(chunk));
        self.outcome.is_ok()
    }

    /// `Ok` while every reservation fit; else the refusal to answer the client.
    pub fn outcome(&self) -> Result<(), ConsumeError> {
        self.outcome.clone()
    }

    /// Estimated bytes reserved (the tests' view of the reservation).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

fn full() -> ConsumeError {
    ConsumeError::Full {
        retry_after: DEFAULT_RETRY_AFTER,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(expanded: u64, largest: u64) -> ExpansionClaims {
        ExpansionClaims {
            expanded,
            largest,
            implausible_profiles: u64::from(largest > MAX_PLAUSIBLE_CLAIM),
            aggregated_profiles: 1,
        }
    }

    fn chunk(samples: usize) -> ProfileChunk {
        let mut c = ProfileChunk::default();
        c.profile.samples = vec![Default::default(); samples];
        c
    }

    #[test]
    fn implausible_and_oversized_claims_are_refused_for_good() {
        let b = Budget::default();
        for c in [claims(1_000_000, 1 << 40), claims(1_000_001, 10)] {
            match b.admit(&c) {
                Err(ConsumeError::Rejected(m)) => assert!(!m.is_empty()),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(b.in_flight_bytes(), 0, "a refusal holds nothing");
        let r = b.admit(&claims(1_000_000, 1_000_000)).unwrap();
        assert_eq!(r.bytes(), 48_000_000);
        assert!(b.in_flight_bytes() >= 48_000_000);
        drop(r);
        assert_eq!(b.in_flight_bytes(), 0);
    }

    #[test]
    fn output_over_the_request_bound_is_refused_and_over_the_shared_bound_is_full() {
        let b = Budget::new(1000, 100_000, 150_000);
        let mut r = b.admit(&claims(0, 0)).unwrap();
        assert!(r.keep(&chunk(1000)), "~49 KB fits");
        assert!(
            !r.keep(&chunk(2000)),
            "~145 KB is over the request's 100 KB"
        );
        assert!(matches!(r.outcome(), Err(ConsumeError::Rejected(_))));
        assert!(!r.keep(&chunk(1)), "nothing is kept once over");
        drop(r);

        let mut a = b.admit(&claims(0, 0)).unwrap();
        let mut c = b.admit(&claims(0, 0)).unwrap();
        assert!(a.keep(&chunk(1700)));
        assert!(!c.keep(&chunk(1700)), "together over the shared 150 KB");
        assert!(matches!(c.outcome(), Err(ConsumeError::Full { .. })));
        drop(a);
        let mut d = b.admit(&claims(0, 0)).unwrap();
        assert!(
            d.keep(&chunk(1700)),
            "room again once the first is released"
        );
    }
}
