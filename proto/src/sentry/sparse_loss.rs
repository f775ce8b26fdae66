//! Whether a chunk would lose samples to Relay's sparse-thread rule, without changing it: the
//! question [`ProfileData::loses_sparse_samples`] answers for the exporter, which decides from
//! it whether two neighbouring windows of a session become one chunk.

use super::chunk::ProfileData;
use std::collections::HashMap;

impl ProfileData {
    /// True when sending this profile would lose samples to Relay's sparse-thread rule (a
    /// thread with fewer than 2 samples with a non-empty stack is dropped whole): after
    /// [`ProfileData::group_sparse_threads`] when `group`, else as it is. Equals "the
    /// grouping (if `group`) and then [`ProfileData::drop_sparse_threads`] would drop a
    /// sample", computed on thread counts alone (no sample is copied or moved).
    pub fn loses_sparse_samples(&self, group: bool, is_linked: impl Fn(&str) -> bool) -> bool {
        let (stats, groups) = self.plan_groups(is_linked);
        let groups = match groups {
            Some(groups) if group => groups,
            _ => return stats.iter().any(|t| t.active < 2),
        };
        // Each thread's non-empty-stack samples where the grouping puts them.
        let mut after: HashMap<&str, usize> = HashMap::with_capacity(stats.len());
        for t in &stats {
            let to = groups.moves.get(t.id).map_or(t.id, |g| g.as_str());
            *after.entry(to).or_default() += t.active;
        }
        after.values().any(|&n| n < 2)
    }
}

#[cfg(test)]
mod tests {
    use crate::sentry::chunk::{Frame, ProfileData, Sample, ThreadMetadata};
    use proptest::prelude::*;
    use std::sync::Arc;

    /// A profile of `samples` as (thread index, empty stack), threads named by `names`
    /// (`None`: no metadata entry).
    fn profile(samples: &[(u8, bool)], names: &[Option<u8>]) -> ProfileData {
        let mut p = ProfileData {
            stacks: vec![vec![0], vec![]],
            frames: vec![Arc::new(Frame::default())],
            ..Default::default()
        };
        for (i, &(t, empty)) in samples.iter().enumerate() {
            p.samples.push(Sample {
                timestamp: i as f64,
                stack_id: usize::from(empty),
                thread_id: (u32::from(t) + 1).to_string().into(),
            });
        }
        for (t, name) in names.iter().enumerate() {
            if let Some(n) = name {
                p.thread_metadata.insert(
                    (t + 1).to_string(),
                    ThreadMetadata {
                        name: Some(format!("pool-{n}")),
                        priority: None,
                    },
                );
            }
        }
        p
    }

    /// What grouping and dropping really do: whether a sample is dropped.
    fn really_loses(p: &ProfileData, group: bool, linked: &[&str]) -> bool {
        let mut q = p.clone();
        if group {
            q.group_sparse_threads(|t| linked.contains(&t));
        }
        q.drop_sparse_threads().1 > 0
    }

    #[test]
    fn a_lone_sample_loses_and_a_pair_does_not() {
        let lone = profile(&[(0, false)], &[None]);
        assert!(lone.loses_sparse_samples(true, |_| false));
        let pair = profile(&[(0, false), (1, false)], &[None, None]);
        // Two single-sample threads make one catch-all group of 2: kept when grouped.
        assert!(!pair.loses_sparse_samples(true, |_| false));
        assert!(pair.loses_sparse_samples(false, |_| false));
        // A linked thread is never grouped.
        assert!(pair.loses_sparse_samples(true, |t| t == "1"));
        // Only idle samples: dropped by Relay, grouped or not.
        let idle = profile(&[(0, true), (0, true)], &[None]);
        assert!(idle.loses_sparse_samples(true, |_| false));
    }

    proptest! {
        #[test]
        fn agrees_with_grouping_then_dropping(
            samples in prop::collection::vec((0u8..6, prop::bool::weighted(0.2)), 0..14),
            names in prop::collection::vec(prop::option::of(0u8..3), 6),
            group in any::<bool>(),
            linked in prop::collection::vec(1u8..7, 0..2),
        ) {
            let p = profile(&samples, &names);
            let linked: Vec<String> = linked.iter().map(u8::to_string).collect();
            let linked: Vec<&str> = linked.iter().map(String::as_str).collect();
            prop_assert_eq!(
                p.loses_sparse_samples(group, |t| linked.contains(&t)),
                really_loses(&p, group, &linked)
            );
        }
    }
}
