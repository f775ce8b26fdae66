//! Sibling profiles: one recording sent as several CPU/wall profiles, one per sample type.
//!
//! A pprof CPU profile has two sample types (`samples/count` and `cpu/nanoseconds`), and pprof
//! → OTLP (the Collector's `pkg/translator/pprof`, profilink's own) makes one OTLP `Profile` per
//! type, all in one `ScopeProfiles`, with the same samples in the same order. Translating each
//! would give every observation twice. So within one `ScopeProfiles`, CPU/wall profiles are
//! *siblings* when their sample types differ and they have the same `time_unix_nano`, the same
//! `duration_nano`, the same number of samples (at least one) and the same sequence of samples'
//! `stack_index` (two such profiles of one sample type are two recordings); of each
//! group of siblings only one is translated: the first whose sample type has a count rule
//! ([`super::sample_types::Observations::Count`]), else the first. The others are counted in
//! [`super::Stats::profiles_skipped_sibling`].

use super::ChunkOptions;
use super::samples::{PerValue, classify};
use crate::dictionary::Dictionary;
use profilink_proto::otlp::{Profile, ScopeProfiles};

/// Per profile of `scope`: whether it is skipped as a sibling of another one.
pub(crate) fn skipped_siblings(
    dict: &Dictionary<'_>,
    scope: &ScopeProfiles,
    opts: &ChunkOptions,
) -> Vec<bool> {
    let n = scope.profiles.len();
    let mut skip = vec![false; n];
    if n < 2 {
        return skip;
    }
    // (has a count rule, sample type) of each CPU/wall profile; unreadable types are no
    // siblings.
    let kinds: Vec<Option<(bool, (&str, &str))>> = scope
        .profiles
        .iter()
        .map(|p| {
            let st = p.sample_type.unwrap_or_default();
            let pt = p.period_type.unwrap_or_default();
            let names = (
                (
                    dict.string(st.type_strindex).ok()?,
                    dict.string(st.unit_strindex).ok()?,
                ),
                (
                    dict.string(pt.type_strindex).ok()?,
                    dict.string(pt.unit_strindex).ok()?,
                ),
            );
            let kind = classify(names.0, names.1, p.period, &opts.sample_types);
            (kind.cpu && !p.samples.is_empty())
                .then_some((kind.per_value == PerValue::Count, names.0))
        })
        .collect();
    let mut grouped = vec![false; n];
    for i in 0..n {
        let Some((count_i, type_i)) = kinds[i] else {
            continue;
        };
        if grouped[i] {
            continue;
        }
        let mut keeper = i;
        let mut keeper_count = count_i;
        let mut types = vec![type_i];
        for j in i + 1..n {
            let Some((count_j, type_j)) = kinds[j] else {
                continue;
            };
            if grouped[j]
                || types.contains(&type_j)
                || !same_recording(&scope.profiles[i], &scope.profiles[j])
            {
                continue;
            }
            types.push(type_j);
            grouped[j] = true;
            if count_j && !keeper_count {
                skip[keeper] = true;
                keeper = j;
                keeper_count = true;
            } else {
                skip[j] = true;
            }
        }
    }
    skip
}

fn same_recording(a: &Profile, b: &Profile) -> bool {
    a.time_unix_nano == b.time_unix_nano
        && a.duration_nano == b.duration_nano
        && a.samples.len() == b.samples.len()
        && a.samples
            .iter()
            .zip(&b.samples)
            .all(|(x, y)| x.stack_index == y.stack_index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{ProfilesDictionary, Sample, ValueType};

    fn profile(ty: i32, unit: i32, stacks: &[i32], time: u64) -> Profile {
        Profile {
            sample_type: Some(ValueType {
                type_strindex: ty,
                unit_strindex: unit,
            }),
            period_type: Some(ValueType {
                type_strindex: 3,
                unit_strindex: 4,
            }),
            period: 10_000_000,
            time_unix_nano: time,
            duration_nano: 1_000_000_000,
            samples: stacks
                .iter()
                .map(|&s| Sample {
                    stack_index: s,
                    values: vec![1],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_count_profile_of_a_pprof_pair_is_kept() {
        let d = ProfilesDictionary {
            string_table: [
                "",
                "samples",
                "count",
                "cpu",
                "nanoseconds",
                "alloc",
                "bytes",
            ]
            .map(String::from)
            .to_vec(),
            ..Default::default()
        };
        let dict = Dictionary::new(Some(&d));
        let opts = ChunkOptions::default();
        let scope = |profiles| ScopeProfiles {
            profiles,
            ..Default::default()
        };
        // cpu/nanoseconds first, samples/count second: the second is kept.
        let s = scope(vec![profile(3, 4, &[1, 2], 5), profile(1, 2, &[1, 2], 5)]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![true, false]);
        // Different stacks, times or non-CPU types: no siblings.
        let s = scope(vec![profile(1, 2, &[1, 2], 5), profile(3, 4, &[2, 1], 5)]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![false, false]);
        let s = scope(vec![profile(1, 2, &[1], 5), profile(3, 4, &[1], 6)]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![false, false]);
        let s = scope(vec![profile(1, 2, &[1], 5), profile(5, 6, &[1], 5)]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![false, false]);
        // Two of one sample type are two recordings; the count one is kept over the first.
        let s = scope(vec![
            profile(3, 4, &[1], 5),
            profile(3, 4, &[1], 5),
            profile(1, 2, &[1], 5),
        ]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![true, false, false]);
        let s = scope(vec![profile(1, 2, &[1], 5), profile(1, 2, &[1], 5)]);
        assert_eq!(skipped_siblings(&dict, &s, &opts), vec![false, false]);
    }
}
