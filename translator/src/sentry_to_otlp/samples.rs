//! Observations `(time, stack, thread)` → grouped OTLP `Sample`s.
//!
//! * A sample's identity is `(stack, attribute set, link)`; observations with the same identity
//!   become one `Sample` with all their times in `timestamps_unix_nano` (sorted ascending;
//!   repeated times are kept), and empty `values` (each timestamp counts 1).
//! * `Sample`s are emitted in the order their identity first appears in the input.
//! * Attributes: [`THREAD_ID`] (an int when the id is the canonical decimal of an `i64`, else a
//!   string) and [`THREAD_NAME`] when the thread metadata names the thread. They are interned
//!   once per thread per profile, so no observation allocates.
//! * Links: each observation's link comes from the [`LinkSource`], asked once per thread for a
//!   [`LinkSource::thread_links`] lookup; equal links share one `link_table` entry.
//! * Stacks and frames are interned once per Sentry index (vector caches); a Sentry stack of no
//!   frames is the empty stack, `stack_index` 0.
//! * The profile window is `time_unix_nano` = first time, `duration_nano` = last − first + 1,
//!   so every timestamp lies in `[time, time + duration)`.

use super::attributes::{THREAD_ID, THREAD_NAME};
use super::builder::{DictionaryBuilder, int_value, str_value};
use super::frames::FrameInterner;
use super::options::OtlpOptions;
use crate::fx_hash::FxHashMap;
use crate::linking::{LinkIds, LinkSource, ThreadLinks};
use profilink_proto::otlp::{AnyValue, Sample};
use profilink_proto::sentry::{DebugImage, Frame, ThreadMetadata};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a profile's observations refer to.
pub(crate) struct Body<'a> {
    pub frames: &'a [Arc<Frame>],
    pub stacks: &'a [Vec<usize>],
    pub thread_metadata: &'a BTreeMap<String, ThreadMetadata>,
    pub platform: &'a str,
    pub images: &'a [DebugImage],
}

/// The grouped samples and the profile window.
pub(crate) struct Emitted {
    pub samples: Vec<Sample>,
    pub time_unix_nano: u64,
    pub duration_nano: u64,
    pub period: u64,
}

/// The `thread.id` value for a Sentry thread id.
pub fn thread_id_value(thread_id: &str) -> AnyValue {
    match thread_id.parse::<i64>() {
        Ok(v) if v.to_string() == thread_id => int_value(v),
        _ => str_value(thread_id),
    }
}

/// Groups observations (bounds-checked by the caller) into samples.
pub(crate) fn emit<'a>(
    b: &mut DictionaryBuilder,
    body: &Body<'a>,
    observations: impl Iterator<Item = (u64, usize, &'a str)>,
    count: usize,
    links: &'a dyn LinkSource,
    profiler_id: &'a str,
    options: &OtlpOptions,
) -> Emitted {
    let mut frames = FrameInterner::new(body.frames, body.platform, body.images);
    let mut stack_cache: Vec<i32> = vec![-1; body.stacks.len()];
    let mut thread_slots: FxHashMap<&'a str, u32> = FxHashMap::default();
    let mut thread_attrs: Vec<Vec<i32>> = Vec::new();
    let mut thread_links: Vec<ThreadLinks<'a>> = Vec::new();
    let infer = options.period_ns.is_none();
    let mut thread_times: Vec<Vec<u64>> = Vec::new();
    let mut groups: FxHashMap<(i32, u32, i32), u32> = FxHashMap::default();
    groups.reserve(count / 8 + 16);
    let mut samples: Vec<Sample> = Vec::new();
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut last_link: Option<(LinkIds, i32)> = None;

    for (ts, stack_id, tid) in observations {
        let stack_index = match stack_cache.get(stack_id) {
            Some(&i) if i >= 0 => i,
            _ => {
                let locs: Vec<i32> = body
                    .stacks
                    .get(stack_id)
                    .map(|s| s.iter().map(|&f| frames.location(b, f)).collect())
                    .unwrap_or_default();
                let i = b.stack(locs);
                if let Some(slot) = stack_cache.get_mut(stack_id) {
                    *slot = i;
                }
                i
            }
        };
        let slot = match thread_slots.get(tid) {
            Some(&s) => s,
            None => {
                let s = thread_attrs.len() as u32;
                let mut attrs = vec![b.attribute(THREAD_ID, thread_id_value(tid))];
                if let Some(name) = body
                    .thread_metadata
                    .get(tid)
                    .and_then(|m| m.name.as_deref())
                {
                    attrs.push(b.attribute_str(THREAD_NAME, name));
                }
                thread_attrs.push(attrs);
                thread_links.push(links.thread_links(profiler_id, tid));
                if infer {
                    thread_times.push(Vec::new());
                }
                thread_slots.insert(tid, s);
                s
            }
        };
        let link_index = match thread_links[slot as usize](ts) {
            None => 0,
            Some(ids) => match last_link {
                Some((prev, i)) if prev == ids => i,
                _ => {
                    let i = b.link(ids.0, ids.1);
                    last_link = Some((ids, i));
                    i
                }
            },
        };
        let g = *groups
            .entry((stack_index, slot, link_index))
            .or_insert_with(|| {
                samples.push(Sample {
                    stack_index,
                    attribute_indices: thread_attrs[slot as usize].clone(),
                    link_index,
                    values: Vec::new(),
                    timestamps_unix_nano: Vec::new(),
                });
                (samples.len() - 1) as u32
            });
        samples[g as usize].timestamps_unix_nano.push(ts);
        if infer {
            thread_times[slot as usize].push(ts);
        }
        first = first.min(ts);
        last = last.max(ts);
    }

    for s in &mut samples {
        if !s.timestamps_unix_nano.is_sorted() {
            s.timestamps_unix_nano.sort_unstable();
        }
    }
    let period = options.period_for(&mut thread_times);
    let (time_unix_nano, duration_nano) = if samples.is_empty() {
        (0, 0)
    } else {
        (first, last - first + 1)
    };
    Emitted {
        samples,
        time_unix_nano,
        duration_nano,
        period,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids() {
        assert_eq!(thread_id_value("42"), int_value(42));
        assert_eq!(thread_id_value("-42"), int_value(-42));
        assert_eq!(thread_id_value("042"), str_value("042"));
        assert_eq!(thread_id_value("+42"), str_value("+42"));
        assert_eq!(
            thread_id_value("18446744073709551615"),
            str_value("18446744073709551615")
        );
        assert_eq!(thread_id_value("main"), str_value("main"));
    }
}
