//! Grouping the threads Relay would drop, so that their samples reach Sentry: the rule is on
//! [`ThreadGroups`].

use super::chunk::{ProfileData, ThreadMetadata, thread_activity};
use compact_str::CompactString;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The smallest group thread id.
pub const GROUP_ID_MIN: u64 = 9_000_000_000_000_000;
/// The largest group thread id (`2^53 - 1`, the largest integer a JavaScript number holds
/// exactly).
pub const GROUP_ID_MAX: u64 = (1 << 53) - 1;
/// The `thread_metadata` name of the catch-all group thread.
pub const OTHER_THREADS_NAME: &str = "other threads";

/// What grouping needs to know about one thread of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadStat<'a> {
    /// The thread id.
    pub id: &'a str,
    /// Its `thread_metadata` name, if any.
    pub name: Option<&'a str>,
    /// Its samples with a non-empty stack in the chunk.
    pub active: usize,
    /// Whether spans may reference it (a sample of it carries a trace link): never grouped.
    pub linked: bool,
}

/// Grouping the threads Relay would drop, so that their samples reach Sentry.
///
/// A grouping decision for one chunk: the threads Relay would drop, grouped so that their
/// samples reach Sentry.
///
/// Relay drops every thread with fewer than 2 samples with a non-empty stack in a chunk
/// (`remove_single_samples_per_thread`; see [`ProfileData::drop_sparse_threads`]). A profiler
/// that samples every thread of a host at 20 Hz (the eBPF profiler) sees many threads only
/// once per minute, so most of its samples would be lost. Instead, such *sparse* threads are
/// grouped into threads that Relay keeps. A chunk holds one process (one profiler session), so
/// the rule works per chunk:
///
/// 1. **Linked threads are never touched.** A thread any of whose samples carries a trace link
///    (an SDK's thread, whose id spans reference through `thread.id`) keeps its id and its
///    samples, and no other thread's samples are moved onto it. If it is sparse, the caller's
///    usual rule (keep or drop) applies to it.
/// 2. **Name groups.** Sparse threads that share a `thread_metadata` name (Go and JVM runtimes
///    name many OS threads alike) and have at least 2 non-empty-stack samples together become
///    one group thread named with that name.
/// 3. **Catch-all.** The sparse threads left (names seen on a single sparse sample, or no name)
///    become one group thread named [`OTHER_THREADS_NAME`] when they have at least 2
///    non-empty-stack samples together.
/// 4. **A lone sample** (what is left has exactly one non-empty-stack sample) joins the busiest
///    unlinked non-sparse thread of the same name (ties: the smallest id), which keeps its id
///    and name; without one, the smallest name group (fewest samples, then name) is dissolved
///    into a catch-all with it. Otherwise it stays alone, and Relay's rule applies to it.
///
/// The limit of any rule that never invents threads across processes is "every sample of a
/// process seen at least twice in its chunk"; this rule reaches it unless a lone sample has
/// nothing to join (no sparse partner, no same-name thread, no name group).
///
/// **Group thread ids** are decimal strings of 16 digits from [`GROUP_ID_MIN`] to
/// [`GROUP_ID_MAX`] (`9000000000000000` to `2^53 - 1`, so they are exact as JavaScript
/// numbers and as `i64`; OS thread ids are far smaller), derived from the group key by
/// [`group_id`] (64-bit FNV-1a of `"name\0" + name` for a name group, of `"other"` for the
/// catch-all, reduced into the range): the group of threads named `etcd` has the same id in
/// every chunk. If that id is already a thread id of the chunk (or another group's), the next
/// free id in the range is taken, so a group never merges with a real thread. The result
/// depends only on the chunk's content, never on the order of its samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadGroups {
    /// Grouped thread id -> the thread id its samples move to.
    pub moves: BTreeMap<CompactString, CompactString>,
    /// Group threads made: id -> `thread_metadata` name.
    pub groups: BTreeMap<CompactString, String>,
}

/// What [`ProfileData::group_sparse_threads`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupOutcome {
    /// Group threads made.
    pub groups: usize,
    /// Threads whose samples moved to a group (or to a same-name thread).
    pub threads: usize,
    /// Samples that moved.
    pub samples: usize,
}

/// The id of the group with `key` before collisions are resolved: 64-bit FNV-1a of the key,
/// reduced into [`GROUP_ID_MIN`]..=[`GROUP_ID_MAX`].
pub fn group_id(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    GROUP_ID_MIN + h % (GROUP_ID_MAX - GROUP_ID_MIN + 1)
}

/// Numeric order for decimal ids (shorter first), then text.
fn id_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// A thread's name, when it has a non-empty one.
fn name_of<'a>(t: &ThreadStat<'a>) -> Option<&'a str> {
    t.name.filter(|n| !n.is_empty())
}

fn active(members: &[&ThreadStat<'_>]) -> usize {
    members.iter().map(|t| t.active).sum()
}

impl ThreadGroups {
    /// True when nothing moves.
    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// Decides the groups of a chunk with `threads` (each thread once; any order) whose other
    /// thread ids in use (e.g. `thread_metadata` entries without samples) are `reserved`.
    pub fn plan(threads: &[ThreadStat<'_>], reserved: &[&str]) -> Self {
        let mut out = ThreadGroups::default();
        let mut sorted: Vec<&ThreadStat<'_>> = threads.iter().collect();
        sorted.sort_by(|a, b| id_order(a.id, b.id));
        let mut by_name: BTreeMap<&str, Vec<&ThreadStat<'_>>> = BTreeMap::new();
        let mut rest: Vec<&ThreadStat<'_>> = Vec::new();
        for &t in &sorted {
            if t.linked || t.active >= 2 {
                continue;
            }
            match name_of(t) {
                Some(n) => by_name.entry(n).or_default().push(t),
                None => rest.push(t),
            }
        }
        if by_name.is_empty() && rest.is_empty() {
            return out;
        }
        let mut named: Vec<(&str, Vec<&ThreadStat<'_>>)> = Vec::new();
        for (n, members) in by_name {
            if active(&members) >= 2 {
                named.push((n, members));
            } else {
                rest.extend(members);
            }
        }
        let mut catch_all: Vec<&ThreadStat<'_>> = Vec::new();
        if active(&rest) >= 2 {
            catch_all = rest;
        } else if active(&rest) == 1 {
            // The busiest unlinked non-sparse thread of each name (ties: smallest id).
            let mut hosts: HashMap<&str, &ThreadStat<'_>> = HashMap::new();
            for &t in &sorted {
                if let Some(n) = name_of(t)
                    && !t.linked
                    && t.active >= 2
                {
                    let h = hosts.entry(n).or_insert(t);
                    if t.active > h.active {
                        *h = t;
                    }
                }
            }
            let mut left = Vec::new();
            for t in rest {
                match name_of(t).and_then(|n| hosts.get(n)) {
                    Some(h) => {
                        out.moves.insert(t.id.into(), h.id.into());
                    }
                    None => left.push(t),
                }
            }
            if active(&left) == 1 && !named.is_empty() {
                let smallest = named
                    .iter()
                    .enumerate()
                    .min_by(|(_, a), (_, b)| active(&a.1).cmp(&active(&b.1)).then(a.0.cmp(b.0)))
                    .map_or(0, |(i, _)| i);
                let (_, members) = named.remove(smallest);
                left.extend(members);
                left.sort_by(|a, b| id_order(a.id, b.id));
                catch_all = left;
            }
        }
        let mut used: HashSet<&str> = threads.iter().map(|t| t.id).collect();
        used.extend(reserved.iter().copied());
        let mut made: HashSet<u64> = HashSet::new();
        let mut assign = |key: &[u8], name: &str, members: &[&ThreadStat<'_>], out: &mut Self| {
            let mut id = group_id(key);
            let mut text = CompactString::from(id.to_string());
            while made.contains(&id) || used.contains(text.as_str()) {
                id = if id == GROUP_ID_MAX {
                    GROUP_ID_MIN
                } else {
                    id + 1
                };
                text = CompactString::from(id.to_string());
            }
            made.insert(id);
            for t in members {
                out.moves.insert(t.id.into(), text.clone());
            }
            out.groups.insert(text, name.to_owned());
        };
        for (n, members) in &named {
            let mut key = b"name\0".to_vec();
            key.extend_from_slice(n.as_bytes());
            assign(&key, n, members, &mut out);
        }
        if !catch_all.is_empty() {
            assign(b"other", OTHER_THREADS_NAME, &catch_all, &mut out);
        }
        out
    }
}

impl ProfileData {
    /// Moves the samples of grouped threads as `groups` says and updates `thread_metadata`
    /// (grouped threads' entries removed, group threads named). Returns the samples moved.
    pub fn apply_thread_groups(&mut self, groups: &ThreadGroups) -> usize {
        if groups.is_empty() {
            return 0;
        }
        let mut moved = 0;
        for s in &mut self.samples {
            if let Some(to) = groups.moves.get(s.thread_id.as_str()) {
                s.thread_id = to.clone();
                moved += 1;
            }
        }
        for from in groups.moves.keys() {
            self.thread_metadata.remove(from.as_str());
        }
        for (id, name) in &groups.groups {
            self.thread_metadata.insert(
                id.to_string(),
                ThreadMetadata {
                    name: Some(name.clone()),
                    priority: None,
                },
            );
        }
        moved
    }

    /// Each sampled thread's [`ThreadStat`] (in the order of its first sample), and the
    /// [`ThreadGroups`] plan for them; `None` when no unlinked thread is sparse.
    pub(crate) fn plan_groups(
        &self,
        is_linked: impl Fn(&str) -> bool,
    ) -> (Vec<ThreadStat<'_>>, Option<ThreadGroups>) {
        let (active, index) = thread_activity(&self.samples, &self.stacks);
        let stats: Vec<ThreadStat<'_>> = active
            .iter()
            .map(|&(id, active)| ThreadStat {
                id,
                name: self.thread_metadata.get(id).and_then(|m| m.name.as_deref()),
                active,
                linked: is_linked(id),
            })
            .collect();
        if stats.iter().all(|t| t.active >= 2 || t.linked) {
            return (stats, None);
        }
        let reserved: Vec<&str> = self
            .thread_metadata
            .keys()
            .map(String::as_str)
            .filter(|k| !index.contains_key(k))
            .collect();
        let groups = ThreadGroups::plan(&stats, &reserved);
        (stats, Some(groups))
    }

    /// Groups the threads Relay would drop (see [`ThreadGroups`]); a thread for which
    /// `is_linked` is true is never grouped. Threads still sparse afterwards are left as they
    /// are (apply [`ProfileData::drop_sparse_threads`] next to send only what Relay keeps).
    pub fn group_sparse_threads(&mut self, is_linked: impl Fn(&str) -> bool) -> GroupOutcome {
        let groups = match self.plan_groups(is_linked) {
            (_, Some(groups)) => groups,
            (_, None) => return GroupOutcome::default(),
        };
        let samples = self.apply_thread_groups(&groups);
        GroupOutcome {
            groups: groups.groups.len(),
            threads: groups.moves.len(),
            samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sentry::chunk::{Frame, Sample};
    use std::collections::BTreeSet;
    use std::sync::Arc;

    /// A chunk with `threads` as (id, name, samples with a stack), plus one empty-stack sample
    /// per thread id in `empty`.
    fn chunk(threads: &[(&str, Option<&str>, usize)], empty: &[&str]) -> ProfileData {
        let mut p = ProfileData {
            stacks: vec![vec![0], vec![]],
            frames: vec![Arc::new(Frame::default())],
            ..Default::default()
        };
        let mut t = 0.0;
        for &(id, name, n) in threads {
            for _ in 0..n {
                t += 1.0;
                p.samples.push(Sample {
                    timestamp: t,
                    stack_id: 0,
                    thread_id: id.into(),
                });
            }
            p.thread_metadata.insert(
                id.into(),
                ThreadMetadata {
                    name: name.map(str::to_owned),
                    priority: None,
                },
            );
        }
        for &id in empty {
            t += 1.0;
            p.samples.push(Sample {
                timestamp: t,
                stack_id: 1,
                thread_id: id.into(),
            });
        }
        p
    }

    fn threads_of(p: &ProfileData) -> BTreeMap<String, (Option<String>, usize)> {
        let mut out: BTreeMap<String, (Option<String>, usize)> = BTreeMap::new();
        for s in &p.samples {
            let name = p
                .thread_metadata
                .get(s.thread_id.as_str())
                .and_then(|m| m.name.clone());
            out.entry(s.thread_id.to_string()).or_insert((name, 0)).1 += 1;
        }
        out
    }

    fn id(key: &str) -> String {
        group_id(key.as_bytes()).to_string()
    }

    #[test]
    fn same_name_threads_form_a_named_group_and_the_rest_a_catch_all() {
        let mut p = chunk(
            &[
                ("10", Some("main"), 5),
                ("11", Some("etcd"), 1),
                ("12", Some("etcd"), 1),
                ("13", Some("etcd"), 1),
                ("20", Some("a"), 1),
                ("21", None, 1),
            ],
            &[],
        );
        let out = p.group_sparse_threads(|_| false);
        assert_eq!(
            out,
            GroupOutcome {
                groups: 2,
                threads: 5,
                samples: 5
            }
        );
        let t = threads_of(&p);
        assert_eq!(t["10"], (Some("main".into()), 5));
        assert_eq!(t[&id("name\0etcd")], (Some("etcd".into()), 3));
        assert_eq!(t[&id("other")], (Some(OTHER_THREADS_NAME.into()), 2));
        assert_eq!(t.len(), 3);
        // Metadata names exactly the threads that have samples.
        let keys: BTreeSet<&String> = p.thread_metadata.keys().collect();
        assert_eq!(keys, t.keys().collect());
        // Relay keeps everything now.
        assert_eq!(p.drop_sparse_threads(), (0, 0));
        for g in [id("name\0etcd"), id("other")] {
            let v: u64 = g.parse().unwrap();
            assert!((GROUP_ID_MIN..=GROUP_ID_MAX).contains(&v) && g.len() == 16);
        }
    }

    #[test]
    fn a_lone_sample_joins_the_busiest_thread_of_its_name() {
        // Thread 7 ("node", one sample) has no sparse partner; 5 and 6 are "node" too.
        let mut p = chunk(
            &[
                ("5", Some("node"), 2),
                ("6", Some("node"), 3),
                ("7", Some("node"), 1),
                ("8", Some("x"), 4),
            ],
            &[],
        );
        let out = p.group_sparse_threads(|_| false);
        assert_eq!((out.groups, out.threads, out.samples), (0, 1, 1));
        let t = threads_of(&p);
        assert_eq!(t["6"], (Some("node".into()), 4));
        assert!(!t.contains_key("7") && !p.thread_metadata.contains_key("7"));
    }

    #[test]
    fn a_lone_sample_without_a_host_dissolves_the_smallest_name_group() {
        let mut p = chunk(
            &[
                ("1", Some("big"), 1),
                ("2", Some("big"), 1),
                ("3", Some("big"), 1),
                ("4", Some("small"), 1),
                ("5", Some("small"), 1),
                ("6", Some("lone"), 1),
            ],
            &[],
        );
        p.group_sparse_threads(|_| false);
        let t = threads_of(&p);
        assert_eq!(t[&id("name\0big")], (Some("big".into()), 3));
        assert_eq!(t[&id("other")], (Some(OTHER_THREADS_NAME.into()), 3));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn what_cannot_be_grouped_stays_as_it_was() {
        // One sparse sample with nothing to join, and an empty-stack-only thread.
        let mut p = chunk(&[("1", Some("a"), 3), ("2", Some("b"), 1)], &["3"]);
        let before = p.clone();
        assert_eq!(p.group_sparse_threads(|_| false), GroupOutcome::default());
        assert_eq!(p, before);
        // Relay's rule then drops both.
        assert_eq!(p.drop_sparse_threads(), (2, 2));
    }

    #[test]
    fn empty_stack_samples_travel_with_their_thread() {
        let mut p = chunk(&[("1", Some("w"), 1), ("2", Some("w"), 1)], &["2"]);
        let out = p.group_sparse_threads(|_| false);
        assert_eq!(out.samples, 3);
        assert_eq!(threads_of(&p)[&id("name\0w")].1, 3);
    }

    #[test]
    fn linked_threads_are_never_grouped_nor_joined() {
        // 11 and 12 are linked (spans reference them): they keep their ids even though
        // sparse; 13 could join "node" thread 10, which is linked, so it may not.
        let mut p = chunk(
            &[
                ("10", Some("node"), 4),
                ("11", Some("w"), 1),
                ("12", Some("w"), 1),
                ("13", Some("node"), 1),
            ],
            &[],
        );
        let linked = ["10", "11", "12"];
        let before = p.clone();
        let out = p.group_sparse_threads(|t| linked.contains(&t));
        assert_eq!(out, GroupOutcome::default());
        assert_eq!(p, before);
        // 14 and 15 share "w" and form a name group (11, linked, stays out of it); 13 has no
        // unlinked host, so it dissolves that group into a catch-all with it.
        let mut p = chunk(
            &[
                ("10", Some("node"), 4),
                ("11", Some("w"), 1),
                ("13", Some("node"), 1),
                ("14", Some("w"), 1),
                ("15", Some("w"), 1),
            ],
            &[],
        );
        p.group_sparse_threads(|t| linked.contains(&t));
        let t = threads_of(&p);
        assert_eq!(t["10"].1, 4);
        assert_eq!(t["11"].1, 1);
        assert_eq!(t[&id("other")].1, 3);
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn group_ids_never_take_a_real_thread_id() {
        let taken = id("name\0w");
        let next = (taken.parse::<u64>().unwrap() + 1).to_string();
        // A real thread already has the group's id, and another one the next id (only in
        // `thread_metadata`): the group takes the one after.
        let mut p = chunk(
            &[
                (&taken, Some("real"), 3),
                ("1", Some("w"), 1),
                ("2", Some("w"), 1),
            ],
            &[],
        );
        p.thread_metadata
            .insert(next.clone(), ThreadMetadata::default());
        p.group_sparse_threads(|_| false);
        let t = threads_of(&p);
        let after = (taken.parse::<u64>().unwrap() + 2).to_string();
        assert_eq!(t[&taken], (Some("real".into()), 3));
        assert_eq!(t[&after], (Some("w".into()), 2));
        // Threads without names go to the catch-all.
        let plan = ThreadGroups::plan(
            &[
                ThreadStat {
                    id: "1",
                    name: None,
                    active: 1,
                    linked: false,
                },
                ThreadStat {
                    id: "2",
                    name: None,
                    active: 1,
                    linked: false,
                },
            ],
            &[],
        );
        assert_eq!(plan.groups.len(), 1);
        assert_eq!(plan.groups[id("other").as_str()], OTHER_THREADS_NAME);
    }

    #[test]
    fn the_result_does_not_depend_on_sample_order() {
        let threads = [
            ("1", Some("w"), 1),
            ("2", Some("w"), 1),
            ("3", Some("x"), 1),
            ("4", None, 1),
            ("5", Some("main"), 6),
            ("6", Some("main"), 1),
        ];
        let mut a = chunk(&threads, &[]);
        let mut rev = threads;
        rev.reverse();
        let mut b = chunk(&rev, &[]);
        a.group_sparse_threads(|_| false);
        b.group_sparse_threads(|_| false);
        assert_eq!(threads_of(&a), threads_of(&b));
        assert_eq!(a.thread_metadata, b.thread_metadata);
        // And the same input gives the same output.
        let mut c = chunk(&threads, &[]);
        c.group_sparse_threads(|_| false);
        assert_eq!(a, c);
    }
}
