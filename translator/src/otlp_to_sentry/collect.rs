//! Per-profile collection: OTLP samples resolved into sessions, threads, stacks and links.
//!
//! Observations are not made here: each sample is resolved once (a [`SampleRef`]), counted
//! in its session (observations, runtimes, linked threads) and placed in a [`Block`](super::observations::Block) of its
//! session, so that splitting can make a session's observations one window at a time (see
//! [`super::window`]). Blocks are runs of consecutive samples of one session spanning at most
//! the block span (a quarter of the chunk duration); a longer sample is cut into blocks by
//! index: of its timestamps or aggregated values when their times never decrease, else of a
//! sorted copy of its timestamps (no producer known to us sends such samples).
//!
//! A profile is translated completely or not at all: its sample refs, blocks and counts are
//! removed again (the sessions restored to their previous state) when any index in the profile
//! turns out invalid, so the rejected profile leaves nothing behind in the output.
//!
//! Rooms: which session and thread a sample belongs to is in `identity.rs`, where a sample's
//! observations go in its session's blocks ([`Walk`], one pass over a profile) in
//! `blocks.rs`.

mod blocks;
mod identity;

use super::frames::FrameTable;
use super::observations::{SampleRef, Session};
use super::options::{ChunkOptions, NonCpuPolicy};
use super::platform::Runtime;
use super::restore_hook::{self, CHUNK_ID_KEY, Restore};
use super::samples::{PerValue, classify, expansion_count, scaled, value_sum};
use super::session::PROFILER_ID_KEY;
use super::stacks::StackTable;
use crate::dictionary::{Attr, AttrValue, Dictionary};
use crate::error::{Limit, Malformed, TranslateError};
use crate::sample_link::SampleLink;
use blocks::Walk;
use identity::{ATTR_UNKNOWN, AttrKey};
use profilink_proto::otlp::{Profile, ResourceProfiles, Sample};
use profilink_proto::sentry::{ProfileChunk, hex_lower, parse_sentry_id};
use std::collections::HashMap;

const UNRESOLVED: u32 = u32::MAX;

/// A translated profile, as splitting reads its observations.
pub(crate) struct ProfileSource<'a> {
    /// The profile.
    pub profile: &'a Profile,
    /// Where its samples' [`SampleRef`]s start in [`Collector::refs`].
    pub refs: usize,
    /// Expansion rule of its aggregated values.
    pub per_value: PerValue,
    /// The expansion cap and the profile's requested total (for [`scaled`]).
    pub cap: u128,
    /// Requested expansions of the whole profile.
    pub total: u128,
}

impl ProfileSource<'_> {
    /// Observations of sample `s` made from aggregated values (its timestamps are empty).
    #[inline]
    pub(crate) fn expansions(&self, s: &Sample) -> u64 {
        scaled(
            expansion_count(self.per_value, value_sum(&s.values)),
            self.cap,
            self.total,
        )
    }

    /// The window aggregated observations are spread over: start and duration.
    #[inline]
    pub(crate) fn spread_window(&self) -> (u64, u64) {
        (
            self.profile.time_unix_nano,
            self.profile
                .duration_nano
                .min(super::samples::MAX_SPREAD_NS),
        )
    }
}

/// A session's state before a profile first touched it, restored when the profile is rejected.
struct Touched {
    session: u32,
    observations: u64,
    runtimes: [u64; Runtime::COUNT],
    blocks: usize,
}

/// What became of one profile.
pub(crate) enum Outcome {
    /// Samples were added to sessions.
    Translated {
        /// Observations implied by the input (before the expansion cap).
        observations: u64,
        /// Observations not produced because of `max_expanded_samples`.
        dropped_expansion: u64,
        /// Observations whose link was unusable (ids of the wrong length or all zero).
        unusable_links: u64,
        /// The profile carried `sentry.chunk_id` but could not be restored.
        restore_fallback: bool,
    },
    /// A non-CPU profile skipped by policy, with its `"type:unit"`.
    SkippedNonCpu(String),
    /// A round-tripped chunk, rebuilt as it was, with its links.
    Restored(Box<ProfileChunk>, Vec<SampleLink>),
}

/// Collection state for one request.
pub(crate) struct Collector<'a> {
    dict: Dictionary<'a>,
    opts: &'a ChunkOptions,
    /// Frames.
    pub ft: FrameTable<'a>,
    /// Stacks.
    pub st: StackTable,
    /// Sessions in order of first appearance.
    pub sessions: Vec<Session>,
    /// Per session: the producer's valid `sentry.chunk_id` (normalized) when the session holds
    /// the observations of profiles carrying that id, reused when they make exactly one chunk.
    pub chunk_ids: Vec<Option<String>>,
    /// (profiler id, producer chunk id or "") -> session.
    session_index: HashMap<(String, String), u32>,
    /// The producer chunk id of the profile being collected.
    producer_chunk_id: Option<String>,
    link_slot: Vec<u32>,
    /// Usable links; link id `i` is `links[i - 1]`.
    pub links: Vec<([u8; 16], [u8; 8])>,
    /// Translated profiles, in input order.
    pub profiles: Vec<ProfileSource<'a>>,
    /// The resolved samples of the translated profiles.
    pub refs: Vec<SampleRef>,
    /// Sorted copies of the timestamps of long samples whose timestamps are out of order.
    pub sorted: Vec<Vec<u64>>,
    /// Longest span of a block of several samples (see the module docs).
    block_span: u64,
    touch_gen: Vec<u32>,
    touched: Vec<Touched>,
    /// (session, thread) of the linked observations of the profile being collected, marked
    /// once it is translated.
    linked_marks: Vec<(u32, u32)>,
    profile_gen: u32,
    /// Per attribute-table index: `ATTR_UNKNOWN`, `ATTR_PROCESS` (the key can change a
    /// sample's process), `ATTR_THREAD` (its thread) or `ATTR_OTHER` (see `identity`); an index is
    /// validated when classified.
    attr_class: Vec<u8>,
    /// (resource, the sample's identity and thread attribute indices) -> (session, thread).
    identity_cache: hashbrown::HashMap<AttrKey, (u32, u32)>,
    /// (resource, the sample's identity attribute indices) -> session: the threads of one
    /// process find its session without deriving its profiler id again.
    session_cache: hashbrown::HashMap<AttrKey, u32>,
    key_scratch: Vec<i32>,
    process_scratch: Vec<i32>,
}

/// A valid Sentry id (32 hex digits, dashes and case ignored, not all zero), normalized.
fn valid_id(v: &AttrValue<'_>) -> Option<String> {
    v.as_str()
        .and_then(parse_sentry_id)
        .filter(|b| *b != [0u8; 16])
        .map(|b| hex_lower(&b))
}

impl<'a> Collector<'a> {
    pub(crate) fn new(dict: Dictionary<'a>, opts: &'a ChunkOptions) -> Self {
        let depth = opts.effective_max_stack_depth();
        let (stacks, links, attrs) = dict.raw().map_or((0, 0, 0), |d| {
            (
                d.stack_table.len(),
                d.link_table.len(),
                d.attribute_table.len(),
            )
        });
        Collector {
            dict,
            opts,
            ft: FrameTable::new(dict, depth),
            st: StackTable::new(stacks, depth),
            sessions: Vec::new(),
            chunk_ids: Vec::new(),
            session_index: HashMap::new(),
            producer_chunk_id: None,
            link_slot: vec![UNRESOLVED; links],
            links: Vec::new(),
            profiles: Vec::new(),
            refs: Vec::new(),
            sorted: Vec::new(),
            block_span: block_span(opts),
            touch_gen: Vec::new(),
            touched: Vec::new(),
            linked_marks: Vec::new(),
            profile_gen: 0,
            attr_class: vec![ATTR_UNKNOWN; attrs],
            identity_cache: hashbrown::HashMap::new(),
            session_cache: hashbrown::HashMap::new(),
            key_scratch: Vec::new(),
            process_scratch: Vec::new(),
        }
    }

    /// Translates one profile into session observations (or restores it). `scope_name` is the
    /// name of its instrumentation scope.
    pub(crate) fn profile(
        &mut self,
        resource_profiles: &'a ResourceProfiles,
        scope_name: &str,
        resource: &[Attr<'a>],
        profile: &'a Profile,
    ) -> Result<Outcome, TranslateError> {
        let mut restore_fallback = false;
        let profile_attrs = self.dict.attributes(&profile.attribute_indices)?;
        if profile_attrs.iter().any(|a| a.key == CHUNK_ID_KEY) {
            match restore_hook::restore(
                &self.dict,
                scope_name,
                resource_profiles,
                profile,
                self.opts,
            ) {
                Restore::Restored(chunk, links) => return Ok(Outcome::Restored(chunk, links)),
                Restore::Fallback => restore_fallback = true,
            }
        }
        // A producer's ids on the profile: a valid `sentry.profiler_id` sits between the
        // resource and the sample layer; a valid `sentry.chunk_id` keeps the profile's
        // observations in a session of their own, whose chunk reuses the id when it is one.
        let profile_profiler_id = profile_attrs
            .iter()
            .rev()
            .find(|a| a.key == PROFILER_ID_KEY && valid_id(&a.value).is_some());
        self.producer_chunk_id = profile_attrs
            .iter()
            .rev()
            .find(|a| a.key == CHUNK_ID_KEY)
            .and_then(|a| valid_id(&a.value));
        let layered: Vec<Attr<'a>>;
        let (resource, resource_id) =
            if profile_profiler_id.is_some() || self.producer_chunk_id.is_some() {
                layered = resource
                    .iter()
                    .chain(profile_profiler_id)
                    .cloned()
                    .collect();
                // The session now depends on the profile: cache per profile.
                (&layered[..], std::ptr::from_ref(profile) as usize)
            } else {
                (resource, std::ptr::from_ref(resource_profiles) as usize)
            };

        let st = profile.sample_type.unwrap_or_default();
        let pt = profile.period_type.unwrap_or_default();
        let kind = classify(
            (
                self.dict.string(st.type_strindex)?,
                self.dict.string(st.unit_strindex)?,
            ),
            (
                self.dict.string(pt.type_strindex)?,
                self.dict.string(pt.unit_strindex)?,
            ),
            profile.period,
            &self.opts.sample_types,
        );
        if !kind.cpu && self.opts.non_cpu_policy == NonCpuPolicy::Skip {
            return Ok(Outcome::SkippedNonCpu(format!(
                "{}:{}",
                self.dict.string(st.type_strindex)?,
                self.dict.string(st.unit_strindex)?
            )));
        }

        // Pass 1: shape checks and the requested expansion total.
        let mut total: u128 = 0;
        for (i, s) in profile.samples.iter().enumerate() {
            let (nv, nt) = (s.values.len(), s.timestamps_unix_nano.len());
            if nv != 0 && nt != 0 && nv != nt {
                return Err(Malformed::ValuesAndTimestamps {
                    sample: i,
                    values: nv,
                    timestamps: nt,
                }
                .into());
            }
            if nt == 0 {
                total += u128::from(expansion_count(kind.per_value, value_sum(&s.values)));
            }
        }
        // A claim no profiler can make is refused, not scaled: scaling it would count a
        // fictitious drop of up to 2^64 observations (see `claims::MAX_PLAUSIBLE_CLAIM`).
        if total > u128::from(super::claims::MAX_PLAUSIBLE_CLAIM) {
            return Err(Limit::Claim {
                total,
                max: super::claims::MAX_PLAUSIBLE_CLAIM,
            }
            .into());
        }

        // Pass 2, undone on error.
        self.profile_gen = self.profile_gen.wrapping_add(1);
        self.touched.clear();
        self.linked_marks.clear();
        let refs = self.refs.len();
        let sorted = self.sorted.len();
        self.profiles.push(ProfileSource {
            profile,
            refs,
            per_value: kind.per_value,
            cap: u128::from(self.opts.effective_max_expanded_samples()),
            total,
        });
        let result = self.collect(resource_id, resource, profile);
        match result {
            Ok((observations, dropped_expansion, unusable_links)) => {
                for &(session, thread) in &self.linked_marks {
                    let linked = &mut self.sessions[session as usize].linked_threads;
                    let t = thread as usize;
                    if linked.len() <= t {
                        linked.resize(t + 1, false);
                    }
                    linked[t] = true;
                }
                Ok(Outcome::Translated {
                    observations,
                    dropped_expansion,
                    unusable_links,
                    restore_fallback,
                })
            }
            Err(e) => {
                self.profiles.pop();
                self.refs.truncate(refs);
                self.sorted.truncate(sorted);
                for t in &self.touched {
                    let sess = &mut self.sessions[t.session as usize];
                    sess.observations = t.observations;
                    sess.runtimes = t.runtimes;
                    sess.blocks.truncate(t.blocks);
                }
                Err(e)
            }
        }
    }

    /// Pass 2 over the samples of the profile last pushed to [`Collector::profiles`]: each
    /// sample resolved ([`Collector::resolve`]), its observations counted
    /// ([`Walk::observations`], [`Collector::count`]) and placed in blocks of its session
    /// ([`Collector::place_short`], [`Collector::place_long`]). Returns the observations
    /// implied, those dropped by the expansion cap, and those with an unusable link.
    fn collect(
        &mut self,
        resource_id: usize,
        resource: &[Attr<'a>],
        profile: &'a Profile,
    ) -> Result<(u64, u64, u64), TranslateError> {
        let p = self.profiles.len() - 1;
        let mut walk = Walk::new(p as u32, &self.profiles[p], self.block_span);
        self.refs.reserve(profile.samples.len());
        for (i, s) in profile.samples.iter().enumerate() {
            let (session, r, link_unusable) = self.resolve(&mut walk, resource_id, resource, s)?;
            let (n, min, max) = walk.observations(s);
            if link_unusable {
                walk.unusable += n;
            }
            if n == 0 {
                continue;
            }
            self.count(&mut walk, session, r, n);
            let i = i as u32;
            if max - min <= walk.block_span {
                self.place_short(&mut walk, session, i, (min, max));
            } else {
                walk.open = None;
                self.place_long(&walk, session, i, &s.timestamps_unix_nano, n);
            }
        }
        Ok((walk.observations, walk.dropped, walk.unusable))
    }

    /// Resolves sample `s` into a [`SampleRef`] (its session's thread, its stack, its link),
    /// pushed to [`Collector::refs`]: its session, the ref, and whether its link is present
    /// but unusable.
    fn resolve(
        &mut self,
        walk: &mut Walk<'a>,
        resource_id: usize,
        resource: &[Attr<'a>],
        s: &'a Sample,
    ) -> Result<(u32, SampleRef, bool), TranslateError> {
        let key = s.attribute_indices.as_slice();
        let (session, thread) = match walk.last {
            Some((k, v)) if k == key => v,
            _ => {
                let v = self.session_thread_cached(resource_id, resource, s)?;
                walk.last = Some((key, v));
                v
            }
        };
        let stack = self.st.resolve(&mut self.ft, s.stack_index)?;
        let (link, link_unusable) = self.link(s.link_index)?;
        let r = SampleRef {
            thread,
            stack,
            link,
        };
        self.refs.push(r);
        Ok((session, r, link_unusable))
    }

    /// Counts `n` observations of sample `r` in its session (and in its stack's runtime): the
    /// session first recorded as touched by this profile, the thread marked linked when the
    /// sample has a link.
    fn count(&mut self, walk: &mut Walk<'a>, session: u32, r: SampleRef, n: u64) {
        if walk.touched != Some(session) {
            self.touch(session);
            walk.touched = Some(session);
        }
        if r.link != 0 {
            self.linked_marks.push((session, r.thread));
        }
        let primary = self.st.stacks[r.stack as usize].primary;
        let sess = &mut self.sessions[session as usize];
        sess.observations = sess.observations.saturating_add(n);
        let r = &mut sess.runtimes[primary.index()];
        *r = r.saturating_add(n);
    }

    /// Records the session's state before its first change in this profile.
    fn touch(&mut self, session: u32) {
        let i = session as usize;
        if self.touch_gen.len() <= i {
            self.touch_gen.resize(i + 1, 0);
        }
        if self.touch_gen[i] != self.profile_gen {
            self.touch_gen[i] = self.profile_gen;
            let sess = &self.sessions[i];
            self.touched.push(Touched {
                session,
                observations: sess.observations,
                runtimes: sess.runtimes,
                blocks: sess.blocks.len(),
            });
        }
    }

    /// Link id for `link_index` (0: none) and whether the link was present but unusable.
    fn link(&mut self, index: i32) -> Result<(u32, bool), TranslateError> {
        if index == 0 {
            return Ok((0, false));
        }
        let slot = usize::try_from(index)
            .ok()
            .filter(|i| *i < self.link_slot.len());
        if let Some(s) = slot.map(|i| self.link_slot[i]).filter(|s| *s != UNRESOLVED) {
            return Ok((s, s == 0));
        }
        let id = match self.dict.link(index)? {
            Some(l) => match (
                <[u8; 16]>::try_from(l.trace_id.as_slice()),
                <[u8; 8]>::try_from(l.span_id.as_slice()),
            ) {
                (Ok(t), Ok(s)) if t != [0; 16] && s != [0; 8] => {
                    self.links.push((t, s));
                    self.links.len() as u32
                }
                _ => 0,
            },
            None => 0,
        };
        if let Some(i) = slot {
            self.link_slot[i] = id;
        }
        Ok((id, id == 0))
    }
}

/// The longest span of a block of several samples: a quarter of the chunk duration (at least
/// 1 ns), so that a session's window holds little more than the chunk being cut.
pub(crate) fn block_span(opts: &ChunkOptions) -> u64 {
    (opts.effective_max_chunk_duration_ns() / 4).max(1)
}
