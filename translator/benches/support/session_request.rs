//! A long single-session request (issue #33): one sentry-python process recorded for 2 h 42 min
//! and exported as one OTLP request, shared (by `#[path]`) by `benches/otlp_to_sentry.rs` and
//! the workspace's `examples/translate_whole.rs`, next to `ebpf_request.rs`.
//!
//! Shape: the real sentry-python profile of `tests/fixtures/otlp/python-sdk-trace-chunk-00.pb`
//! (its dictionary, resource and samples: 176 ticks over 6.3 s, about 28 Hz per thread)
//! restricted to 4 of its threads, repeated back to back on one timeline (each copy stretched
//! by a few percent, so that the total is about [`SAMPLES`]) and cut into [`PROFILES`]
//! consecutive profiles of 65 s. Each copy keeps the fixture's sample grouping: one OTLP
//! `Sample` per (stack, thread, link) of the copy with its timestamps (about 3 per sample, so
//! about 12.6 bytes of protobuf per observation). About half of the observations carry a trace
//! link, as in the fixture. One resource (one process: the fixture's `service.*` attributes
//! plus `process.pid` and `host.name`), so every observation is in one profiler session.
//! Deterministic: every build gives the same request.

use profilink_proto::otlp::{
    AnyValue, ExportProfilesServiceRequest, KeyValue, Profile, Sample, any_value,
};
use prost::Message;
use std::collections::BTreeMap;

/// Observations aimed at (the request holds about this many; see [`build_request`]).
pub const SAMPLES: u64 = 1_000_000;
/// Consecutive profiles in the request.
pub const PROFILES: u64 = 150;
/// Each profile's window.
pub const PROFILE_NS: u64 = 65_000_000_000;
/// Threads of the process kept from the fixture.
pub const THREADS: usize = 4;

const FIXTURE: &[u8] = include_bytes!("../../../tests/fixtures/otlp/python-sdk-trace-chunk-00.pb");

fn attr(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        key_strindex: 0,
    }
}

/// Builds the request (well under a second in release builds).
pub fn build_request() -> ExportProfilesServiceRequest {
    let fixture = ExportProfilesServiceRequest::decode(FIXTURE).expect("the fixture decodes");
    let mut rp = fixture.resource_profiles[0].clone();
    let mut scope = rp.scope_profiles[0].clone();
    let template = scope.profiles[0].clone();

    // The fixture's observations of its first `THREADS` threads: (sample index, time).
    let mut threads: Vec<&[i32]> = Vec::new();
    let mut obs: Vec<(usize, u64)> = Vec::new();
    for (i, s) in template.samples.iter().enumerate() {
        let key = s.attribute_indices.as_slice();
        if !threads.contains(&key) {
            if threads.len() == THREADS {
                continue;
            }
            threads.push(key);
        }
        obs.extend(s.timestamps_unix_nano.iter().map(|&t| (i, t)));
    }
    obs.sort_by_key(|&(i, t)| (t, i));
    let (first, last) = (obs[0].1, obs[obs.len() - 1].1);
    // One copy lasts the fixture's span plus one mean tick; copies are stretched (by a few
    // percent) so that the request holds about `SAMPLES` observations.
    let ticks = {
        let mut t: Vec<u64> = obs.iter().map(|o| o.1).collect();
        t.dedup();
        t.len() as u64
    };
    let natural = (last - first) + (last - first) / (ticks - 1);
    let total_ns = PROFILES * PROFILE_NS;
    let copy_ns = (u128::from(total_ns) * obs.len() as u128 / u128::from(SAMPLES)) as u64;
    let start = template.time_unix_nano;

    // Per profile, its samples in order: (fixture sample, copy) -> timestamps.
    let mut profiles: Vec<BTreeMap<(u64, usize), Vec<u64>>> =
        (0..PROFILES).map(|_| BTreeMap::new()).collect();
    let mut copy = 0u64;
    'copies: loop {
        for &(i, t) in &obs {
            let at = copy * copy_ns
                + ((u128::from(t - first) * u128::from(copy_ns)) / u128::from(natural)) as u64;
            let k = at / PROFILE_NS;
            if k >= PROFILES {
                break 'copies;
            }
            profiles[k as usize]
                .entry((copy, i))
                .or_default()
                .push(start + at);
        }
        copy += 1;
    }

    scope.profiles = profiles
        .into_iter()
        .enumerate()
        .map(|(k, by_sample)| {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&0x7ffb_3319_b3ff_432e_u64.to_be_bytes());
            id[8..].copy_from_slice(&(k as u64 + 1).to_be_bytes());
            Profile {
                samples: by_sample
                    .into_iter()
                    .map(|((_, i), timestamps_unix_nano)| Sample {
                        timestamps_unix_nano,
                        ..template.samples[i].clone()
                    })
                    .collect(),
                time_unix_nano: start + k as u64 * PROFILE_NS,
                duration_nano: PROFILE_NS,
                profile_id: id.to_vec(),
                ..template.clone()
            }
        })
        .collect();
    if let Some(resource) = &mut rp.resource {
        resource
            .attributes
            .push(attr("process.pid", any_value::Value::IntValue(31_337)));
        resource.attributes.push(attr(
            "host.name",
            any_value::Value::StringValue("demo-host".into()),
        ));
    }
    rp.scope_profiles = vec![scope];
    ExportProfilesServiceRequest {
        resource_profiles: vec![rp],
        dictionary: fixture.dictionary,
    }
}
