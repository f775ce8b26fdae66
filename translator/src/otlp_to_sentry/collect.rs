//! Per-profile collection: OTLP samples resolved into sessions, threads, stacks and links.
//!
//! Observations are not made here: each sample is resolved once (a [`SampleRef`]), counted
//! in its session (observations, runtimes, linked threads) and placed in a [`Block`] of its
//! session, so that splitting can make a session's observations one window at a time (see
//! [`super::window`]). Blocks are runs of consecutive samples of one session spanning at most
//! the block span (a quarter of the chunk duration); a longer sample is cut into blocks by
//! index: of its timestamps or aggregated values when their times never decrease, else of a
//! sorted copy of its timestamps (no producer known to us sends such samples).
//!
//! A profile is translated completely or not at all: its sample refs, blocks and counts are
//! removed again (the sessions restored to their previous state) when any index in the profile
//! turns out invalid, so the rejected profile leaves nothing behind in the output.

use super::frames::FrameTable;
use super::ids::digest64;
use super::observations::{Block, Part, SampleRef, Session, ThreadInfo};
use super::options::{ChunkOptions, NonCpuPolicy};
use super::platform::Runtime;
use super::platform::{hint_from_runtime_name, hint_from_sdk_language};
use super::restore_hook::{self, CHUNK_ID_KEY, Restore};
use super::samples::{
    PerValue, classify, expansion_count, scaled, spread, thread_id_text, value_sum,
};
use super::session::{PROFILER_ID_KEY, ProcessIdentity, derive_profiler_id};
use super::stacks::StackTable;
use crate::dictionary::{Attr, AttrValue, Dictionary};
use crate::error::TranslateError;
use crate::sample_link::SampleLink;
use profilink_proto::otlp::{Profile, ResourceProfiles, Sample};
use profilink_proto::sentry::parse_sentry_id;
use profilink_proto::sentry::{CompactString, ProfileChunk};
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
    /// Per attribute-table index: [`ATTR_UNKNOWN`], [`ATTR_PROCESS`] (the key can change a
    /// sample's process), [`ATTR_THREAD`] (its thread) or [`ATTR_OTHER`]; an index is
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

/// A resource (by address, stable during a translation) and attribute indices.
type AttrKey = (usize, Box<[i32]>);

const ATTR_UNKNOWN: u8 = 0;
const ATTR_PROCESS: u8 = 1;
const ATTR_THREAD: u8 = 2;
const ATTR_OTHER: u8 = 3;

/// A borrowed key of [`Collector::identity_cache`] (hashes like the owned key).
#[derive(Hash)]
struct IdentityKey<'k>(usize, &'k [i32]);

impl hashbrown::Equivalent<AttrKey> for IdentityKey<'_> {
    fn equivalent(&self, key: &AttrKey) -> bool {
        self.0 == key.0 && self.1 == &*key.1
    }
}

/// Attribute lookup over the sample layer, then the resource layer; the last occurrence of a
/// key in a layer wins.
fn lookup<'x, 'a>(
    sample: &'x [Attr<'a>],
    resource: &'x [Attr<'a>],
    key: &str,
) -> Option<&'x AttrValue<'a>> {
    sample
        .iter()
        .rev()
        .find(|a| a.key == key)
        .or_else(|| resource.iter().rev().find(|a| a.key == key))
        .map(|a| &a.value)
}

fn non_empty_str(v: Option<&AttrValue<'_>>) -> Option<String> {
    v.and_then(AttrValue::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A valid Sentry id (32 hex digits, dashes and case ignored, not all zero), normalized.
fn valid_id(v: &AttrValue<'_>) -> Option<String> {
    v.as_str()
        .and_then(parse_sentry_id)
        .filter(|b| *b != [0u8; 16])
        .map(hex::encode)
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
                return Err(TranslateError::Invalid(format!(
                    "samples[{i}] has {nv} values but {nt} timestamps"
                )));
            }
            if nt == 0 {
                total += u128::from(expansion_count(kind.per_value, value_sum(&s.values)));
            }
        }
        // A claim no profiler can make is refused, not scaled: scaling it would count a
        // fictitious drop of up to 2^64 observations (see `claims::MAX_PLAUSIBLE_CLAIM`).
        if total > u128::from(super::claims::MAX_PLAUSIBLE_CLAIM) {
            return Err(TranslateError::LimitExceeded(format!(
                "aggregated samples claim {total} observations, over {}",
                super::claims::MAX_PLAUSIBLE_CLAIM
            )));
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

    fn collect(
        &mut self,
        resource_id: usize,
        resource: &[Attr<'a>],
        profile: &'a Profile,
    ) -> Result<(u64, u64, u64), TranslateError> {
        let p = self.profiles.len() - 1;
        let source = &self.profiles[p];
        let (cap, total, per_value) = (source.cap, source.total, source.per_value);
        let (start, dur) = source.spread_window();
        let block_span = self.block_span;
        let (mut observations, mut dropped, mut unusable) = (0u64, 0u64, 0u64);
        self.refs.reserve(profile.samples.len());
        // Consecutive samples often share their attribute list: skip the lookup then.
        let mut last: Option<(&'a [i32], (u32, u32))> = None;
        // The block the previous sample went to: (session, index in its blocks).
        let mut open: Option<(u32, usize)> = None;
        // The session last recorded as touched by this profile.
        let mut touched: Option<u32> = None;
        for (i, s) in profile.samples.iter().enumerate() {
            let key = s.attribute_indices.as_slice();
            let (session, thread) = match last {
                Some((k, v)) if k == key => v,
                _ => {
                    let v = self.session_thread_cached(resource_id, resource, s)?;
                    last = Some((key, v));
                    v
                }
            };
            let stack = self.st.resolve(&mut self.ft, s.stack_index)?;
            let (link, link_unusable) = self.link(s.link_index)?;
            self.refs.push(SampleRef {
                thread,
                stack,
                link,
            });
            // The sample's observations: how many, their time range, and whether their times
            // never decrease.
            let ts = &s.timestamps_unix_nano;
            let (n, min, max) = if !ts.is_empty() {
                let n = ts.len() as u64;
                observations = observations.saturating_add(n);
                let (min, max) = ts
                    .iter()
                    .fold((u64::MAX, 0), |(lo, hi), &t| (lo.min(t), hi.max(t)));
                (n, min, max)
            } else {
                let requested = expansion_count(per_value, value_sum(&s.values));
                let n = scaled(requested, cap, total);
                // Aggregated values are the producer's claim, up to i64::MAX each: the sums
                // saturate rather than overflow (they are statistics, not data).
                observations = observations.saturating_add(requested);
                dropped = dropped.saturating_add(requested - n);
                let last = n.saturating_sub(1);
                (n, spread(start, dur, 0, n), spread(start, dur, last, n))
            };
            if link_unusable {
                unusable += n;
            }
            if n == 0 {
                continue;
            }
            if touched != Some(session) {
                self.touch(session);
                touched = Some(session);
            }
            if link != 0 {
                self.linked_marks.push((session, thread));
            }
            let primary = self.st.stacks[stack as usize].primary;
            let sess = &mut self.sessions[session as usize];
            sess.observations = sess.observations.saturating_add(n);
            let r = &mut sess.runtimes[primary.index()];
            *r = r.saturating_add(n);
            let i = i as u32;
            if max - min <= block_span {
                if let Some((bs, bi)) = open
                    && bs == session
                {
                    let b = &mut sess.blocks[bi];
                    let (lo, hi) = (b.min_ts.min(min), b.max_ts.max(max));
                    if b.end == i && hi - lo <= block_span {
                        b.end = i + 1;
                        b.min_ts = lo;
                        b.max_ts = hi;
                        continue;
                    }
                }
                open = Some((session, sess.blocks.len()));
                sess.blocks.push(Block {
                    profile: p as u32,
                    start: i,
                    end: i + 1,
                    part: Part::Whole,
                    min_ts: min,
                    max_ts: max,
                });
                continue;
            }
            open = None;
            // Long: blocks of at most `block_span` each, by index (of a sorted copy of the
            // timestamps when they are out of order).
            let ordered = ts.is_empty() || ts.windows(2).all(|w| w[0] <= w[1]);
            let copy = if ordered {
                None
            } else {
                let mut v = ts.clone();
                v.sort_unstable();
                self.sorted.push(v);
                Some(self.sorted.len() - 1)
            };
            let sess = &mut self.sessions[session as usize];
            let at = |k: u64| match copy {
                Some(c) => self.sorted[c][k as usize],
                None if ts.is_empty() => spread(start, dur, k, n),
                None => ts[k as usize],
            };
            let mut lo = 0u64;
            while lo < n {
                let first = at(lo);
                let limit = first.saturating_add(block_span);
                // The first index past `limit` (times never decrease): binary search.
                let (mut a, mut b) = (lo + 1, n);
                while a < b {
                    let mid = a + (b - a) / 2;
                    if at(mid) <= limit {
                        a = mid + 1;
                    } else {
                        b = mid;
                    }
                }
                sess.blocks.push(Block {
                    profile: p as u32,
                    start: i,
                    end: i + 1,
                    part: match copy {
                        Some(c) => Part::Sorted {
                            sorted: c as u32,
                            lo,
                            hi: a,
                        },
                        None => Part::Range(lo, a),
                    },
                    min_ts: first,
                    max_ts: at(a - 1),
                });
                lo = a;
            }
        }
        Ok((observations, dropped, unusable))
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

    /// How an attribute counts for a sample's identity ([`ATTR_PROCESS`], [`ATTR_THREAD`]
    /// or [`ATTR_OTHER`]), remembered per attribute-table index.
    fn attribute_class(&mut self, index: i32) -> Result<u8, TranslateError> {
        let slot = usize::try_from(index)
            .ok()
            .filter(|&i| i < self.attr_class.len());
        if let Some(i) = slot
            && self.attr_class[i] != ATTR_UNKNOWN
        {
            return Ok(self.attr_class[i]);
        }
        let class = match self.dict.attribute(index)? {
            Some(a) if ProcessIdentity::is_identity_key(a.key) => ATTR_PROCESS,
            Some(a) if a.key == "thread.id" || a.key == "thread.name" => ATTR_THREAD,
            _ => ATTR_OTHER,
        };
        if let Some(i) = slot {
            self.attr_class[i] = class;
        }
        Ok(class)
    }

    /// The session and thread of a sample, computed once per resource and distinct list of
    /// identity and thread attributes (eBPF samples differ in other attributes too).
    fn session_thread_cached(
        &mut self,
        resource_id: usize,
        resource: &[Attr<'a>],
        s: &'a Sample,
    ) -> Result<(u32, u32), TranslateError> {
        let mut key = std::mem::take(&mut self.key_scratch);
        key.clear();
        for &i in &s.attribute_indices {
            if self.attribute_class(i)? != ATTR_OTHER {
                key.push(i);
            }
        }
        let v = match self.identity_cache.get(&IdentityKey(resource_id, &key)) {
            Some(&v) => v,
            None => {
                let attrs = self.dict.attributes(&s.attribute_indices)?;
                // The process's attributes alone decide the session.
                let mut process = std::mem::take(&mut self.process_scratch);
                process.clear();
                for &i in &key {
                    if self.attribute_class(i)? == ATTR_PROCESS {
                        process.push(i);
                    }
                }
                let session = match self.session_cache.get(&IdentityKey(resource_id, &process)) {
                    Some(&session) => session,
                    None => {
                        let session = self.session_of(resource, &attrs);
                        self.session_cache
                            .insert((resource_id, process.as_slice().into()), session);
                        session
                    }
                };
                self.process_scratch = process;
                let v = (session, self.thread_of(session, resource, &attrs));
                self.identity_cache
                    .insert((resource_id, key.as_slice().into()), v);
                v
            }
        };
        self.key_scratch = key;
        Ok(v)
    }

    /// The session of a sample's process (created at its first sample).
    fn session_of(&mut self, resource: &[Attr<'a>], attrs: &[Attr<'a>]) -> u32 {
        let identity = ProcessIdentity::from_attributes(resource, attrs);
        let profiler_id = derive_profiler_id(&identity);
        let key = (
            profiler_id,
            self.producer_chunk_id.clone().unwrap_or_default(),
        );
        match self.session_index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.sessions.len() as u32;
                let l = |k| lookup(attrs, resource, k);
                let environment = non_empty_str(l("deployment.environment.name"))
                    .or_else(|| non_empty_str(l("deployment.environment")));
                let platform_hint = l("telemetry.sdk.language")
                    .and_then(AttrValue::as_str)
                    .and_then(hint_from_sdk_language)
                    .or_else(|| {
                        l("process.runtime.name")
                            .and_then(AttrValue::as_str)
                            .and_then(hint_from_runtime_name)
                    });
                self.sessions.push(Session {
                    profiler_id: key.0.clone(),
                    release: non_empty_str(l("service.version")),
                    environment,
                    platform_hint,
                    ..Session::default()
                });
                self.chunk_ids.push(self.producer_chunk_id.clone());
                self.session_index.insert(key, i);
                i
            }
        }
    }

    /// The thread of a sample in `session` (created at its first sample).
    fn thread_of(&mut self, session: u32, resource: &[Attr<'a>], attrs: &[Attr<'a>]) -> u32 {
        let tid = thread_id(attrs, resource);
        let name = non_empty_str(lookup(attrs, resource, "thread.name"));
        let sess = &mut self.sessions[session as usize];
        match sess.thread_index.get(&tid) {
            Some(&t) => {
                let info = &mut sess.threads[t as usize];
                if info.name.is_none() {
                    info.name = name;
                }
                t
            }
            None => {
                let t = sess.threads.len() as u32;
                sess.threads.push(ThreadInfo {
                    digest: digest64(tid.as_bytes()),
                    sample_id: CompactString::from(tid.as_str()),
                    id: tid.clone(),
                    name,
                });
                sess.thread_index.insert(tid, t);
                t
            }
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

/// The Sentry thread id of a sample (see [`super::samples`]).
fn thread_id(sample: &[Attr<'_>], resource: &[Attr<'_>]) -> String {
    lookup(sample, resource, "thread.id")
        .and_then(thread_id_text)
        .or_else(|| lookup(sample, resource, "process.pid").and_then(thread_id_text))
        .unwrap_or_else(|| "0".to_owned())
}
