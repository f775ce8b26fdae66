//! What a request's aggregated samples ask to be expanded into, measured before any of it is
//! translated: the input a service checks against its amplification budget.
//!
//! A sample with values and no timestamps *claims* `n(v)` observations (see the
//! [`samples`](super::samples) rules): a few bytes on the wire can ask for up to `i64::MAX`.
//! The translator caps each profile at [`ChunkOptions::max_expanded_samples`], but a request can
//! hold many profiles, so a service needs the whole request's claim before it commits memory.
//! [`expansion_claims`] reads only the sample types and values (no stacks, no attributes): a
//! linear pass over the request that allocates nothing.

use super::ChunkOptions;
use super::samples::{classify, expansion_count, value_sum};
use crate::dictionary::Dictionary;
use profilink_proto::otlp::{ProfilesDictionary, ResourceProfiles};

/// The largest claim one profile may make: more observations than 2^32 (at 100 Hz, 1.4 CPU
/// years in one profile) is no real profile. [`ChunkOptions::effective_max_expanded_samples`] is
/// never above it, so a plausible claim always translates with a bounded drop count.
pub const MAX_PLAUSIBLE_CLAIM: u64 = 1 << 32;

/// What the aggregated samples of some `ResourceProfiles` claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpansionClaims {
    /// Observations the translator would make from aggregated values: each profile's claim,
    /// capped at [`ChunkOptions::effective_max_expanded_samples`], summed (saturating).
    pub expanded: u64,
    /// The largest claim of one profile, before any cap (saturating at `u64::MAX`).
    pub largest: u64,
    /// Profiles whose claim is above [`MAX_PLAUSIBLE_CLAIM`].
    pub implausible_profiles: u64,
    /// Profiles with aggregated samples.
    pub aggregated_profiles: u64,
}

impl ExpansionClaims {
    /// Whether some profile claims more than [`MAX_PLAUSIBLE_CLAIM`].
    pub fn is_implausible(&self) -> bool {
        self.implausible_profiles > 0
    }
}

/// The expansion claims of `resource_profiles` (with their request's `dictionary`) under
/// `options`. Profiles the translator would skip (non-CPU under
/// [`NonCpuPolicy::Skip`](super::NonCpuPolicy::Skip)) or reject (an unreadable sample type)
/// claim nothing, as they expand nothing.
pub fn expansion_claims(
    dictionary: Option<&ProfilesDictionary>,
    resource_profiles: &[ResourceProfiles],
    options: &ChunkOptions,
) -> ExpansionClaims {
    let dict = Dictionary::new(dictionary);
    let cap = options.effective_max_expanded_samples();
    let mut claims = ExpansionClaims::default();
    let profiles = resource_profiles
        .iter()
        .flat_map(|rp| &rp.scope_profiles)
        .flat_map(|sp| &sp.profiles);
    for profile in profiles {
        if !profile
            .samples
            .iter()
            .any(|s| s.timestamps_unix_nano.is_empty() && !s.values.is_empty())
        {
            continue;
        }
        let st = profile.sample_type.unwrap_or_default();
        let pt = profile.period_type.unwrap_or_default();
        let names = (|| {
            Ok::<_, crate::TranslateError>((
                (
                    dict.string(st.type_strindex)?,
                    dict.string(st.unit_strindex)?,
                ),
                (
                    dict.string(pt.type_strindex)?,
                    dict.string(pt.unit_strindex)?,
                ),
            ))
        })();
        let Ok((sample_type, period_type)) = names else {
            continue;
        };
        let kind = classify(
            sample_type,
            period_type,
            profile.period,
            &options.sample_types,
        );
        if !kind.cpu && options.non_cpu_policy == super::NonCpuPolicy::Skip {
            continue;
        }
        let claim = profile
            .samples
            .iter()
            .filter(|s| s.timestamps_unix_nano.is_empty())
            .map(|s| expansion_count(kind.per_value, value_sum(&s.values)))
            .fold(0u64, u64::saturating_add);
        claims.aggregated_profiles += 1;
        claims.largest = claims.largest.max(claim);
        if claim > MAX_PLAUSIBLE_CLAIM {
            claims.implausible_profiles += 1;
        }
        claims.expanded = claims.expanded.saturating_add(claim.min(cap));
    }
    claims
}

#[cfg(test)]
mod tests {
    use super::*;
    use profilink_proto::otlp::{Profile, Sample, ScopeProfiles, ValueType};

    fn dictionary() -> ProfilesDictionary {
        ProfilesDictionary {
            string_table: vec![String::new(), "samples".into(), "count".into()],
            ..Default::default()
        }
    }

    fn profile(samples: Vec<Sample>) -> Profile {
        Profile {
            sample_type: Some(ValueType {
                type_strindex: 1,
                unit_strindex: 2,
            }),
            samples,
            ..Default::default()
        }
    }

    fn values(v: i64) -> Sample {
        Sample {
            values: vec![v],
            ..Default::default()
        }
    }

    fn request(profiles: Vec<Profile>) -> Vec<ResourceProfiles> {
        vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles,
                ..Default::default()
            }],
            ..Default::default()
        }]
    }

    #[test]
    fn claims_sum_each_profile_capped_and_name_the_largest() {
        let opts = ChunkOptions {
            max_expanded_samples: 1000,
            ..ChunkOptions::default()
        };
        let rps = request(vec![
            profile(vec![values(300), values(400)]),
            profile(vec![values(1_000_000)]),
            // Timestamped samples claim nothing: their observations are backed by the input.
            profile(vec![Sample {
                values: vec![1_000_000],
                timestamps_unix_nano: vec![1],
                ..Default::default()
            }]),
        ]);
        let c = expansion_claims(Some(&dictionary()), &rps, &opts);
        assert_eq!(c.expanded, 700 + 1000);
        assert_eq!(c.largest, 1_000_000);
        assert_eq!(c.aggregated_profiles, 2);
        assert!(!c.is_implausible());
    }

    #[test]
    fn a_claim_above_two_to_the_32_is_implausible_and_sums_never_overflow() {
        let rps = request(vec![
            profile(vec![values(i64::MAX), values(i64::MAX)]),
            profile(vec![values(i64::MAX)]),
        ]);
        let c = expansion_claims(Some(&dictionary()), &rps, &ChunkOptions::default());
        assert_eq!(c.implausible_profiles, 2);
        assert_eq!(c.largest, 2 * i64::MAX as u64);
        assert_eq!(c.expanded, 2 * 1_000_000);
        assert!(c.is_implausible());
        let just = request(vec![profile(vec![values(MAX_PLAUSIBLE_CLAIM as i64)])]);
        assert!(
            !expansion_claims(Some(&dictionary()), &just, &ChunkOptions::default())
                .is_implausible()
        );
    }

    #[test]
    fn an_unreadable_sample_type_claims_nothing() {
        let mut p = profile(vec![values(1 << 40)]);
        p.sample_type = Some(ValueType {
            type_strindex: 99,
            unit_strindex: 2,
        });
        let c = expansion_claims(
            Some(&dictionary()),
            &request(vec![p]),
            &ChunkOptions::default(),
        );
        assert_eq!(c, ExpansionClaims::default());
    }
}
