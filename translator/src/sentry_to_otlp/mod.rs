//! Sentry profiles → OTLP profiles, losslessly, with trace links from transactions.
//!
//! Input: V2 profile chunks and V1 profiles (each with its envelope's transaction, when known).
//! Output: one `ExportProfilesServiceRequest` with **one** deduplicated dictionary shared by all
//! resources and profiles (`builder`), plus the items that could not be translated
//! ([`OtlpTranslation::rejected`]): a bad chunk never sinks the others, and a rejected item leaves
//! nothing in the dictionary.
//!
//! Layout:
//!
//! * One `ResourceProfiles` per distinct resource attribute set, in order of first appearance;
//!   for chunks that is one per profiler session (`resource`). One `ScopeProfiles` per resource
//!   (scope `profilink`, version = this crate's version), one `Profile` per chunk or V1 profile.
//! * Each `Profile`: `sample_type` = `samples`/`count`, `period_type` = `cpu`/`nanoseconds`,
//!   `period` per [`OtlpOptions`], `time_unix_nano` = first sample, `duration_nano` = last − first
//!   plus 1 (every timestamp inside `[time, time + duration)`), `profile_id` = the chunk id (or
//!   V1 event id) as 16 bytes. Samples are grouped by identity `(stack, thread attributes, link)`
//!   with their timestamps and no values (`samples`).
//! * Frames → locations/functions/mappings (`frames`); chunk-level fields (`chunk`,
//!   `v1`, `extras`); every name in [`attributes`].
//! * Links: every observation asks the [`LinkSource`] (e.g. [`TransactionLinks`](crate::TransactionLinks)
//!   built from transactions, or [`ExactLinks`](crate::ExactLinks) to replay known links) with
//!   `(profiler_id, thread_id, time)`; V1 profiles with their transaction link by that
//!   transaction (`v1`).
//!
//! Lossless: [`restore_chunk`] rebuilds the exact chunk from its profile. Frames and
//! stacks come back renumbered (one frame per distinct location, one stack per distinct stack,
//! in first-use order; frames/stacks no sample uses are not kept) and samples come back in time
//! order (ties in the order of their OTLP `Sample`, which is first-appearance order), so compare
//! chunks with [`canonical_form`]; everything else compares equal as it is.

pub mod attributes;
pub(crate) mod builder;
mod chunk;
mod extras;
mod frames;
mod options;
mod resource;
mod restore;
mod samples;
mod v1;

pub use options::{DEFAULT_PERIOD_NS, OtlpOptions};
pub use restore::{
    canonical_form, check_marker, is_from_chunk, restore_chunk, restore_chunk_with_links,
    restore_request,
};
pub use v1::V1WithTransaction;

use crate::error::TranslateError;
use crate::fx_hash::FxHashMap;
use crate::linking::LinkSource;
use builder::DictionaryBuilder;
use profilink_proto::otlp::{
    ExportProfilesServiceRequest, InstrumentationScope, KeyValue, Profile, Resource,
    ResourceProfiles, ScopeProfiles, ValueType, any_value,
};
use profilink_proto::sentry::ProfileChunk;
use profilink_proto::sentry::parse_sentry_id;

/// What to translate.
#[derive(Debug, Clone, Copy, Default)]
pub struct SentryInput<'a> {
    /// V2 profile chunks.
    pub chunks: &'a [ProfileChunk],
    /// V1 profiles, each with its envelope's transaction when known.
    pub v1_profiles: &'a [V1WithTransaction],
}

/// An input item that could not be translated.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// Which item: `chunk[<index>] <chunk_id>` or `v1[<index>] <event_id>`.
    pub item: String,
    /// Why.
    pub error: TranslateError,
}

/// The result of [`to_otlp`]: the request for everything that translated, and what did not.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OtlpTranslation {
    /// The OTLP request (always with a dictionary holding at least the zero entries).
    pub request: ExportProfilesServiceRequest,
    /// The items left out, in input order.
    pub rejected: Vec<Rejected>,
}

/// Groups profiles by resource attributes, in order of first appearance.
#[derive(Default)]
struct Resources {
    index: FxHashMap<Vec<(String, String)>, usize>,
    groups: Vec<(Vec<KeyValue>, Vec<Profile>)>,
}

impl Resources {
    fn add(&mut self, attrs: Vec<KeyValue>, profile: Profile) {
        let key: Vec<(String, String)> = attrs
            .iter()
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    _ => String::new(),
                };
                (kv.key.clone(), v)
            })
            .collect();
        match self.index.get(&key) {
            Some(&i) => self.groups[i].1.push(profile),
            None => {
                self.index.insert(key, self.groups.len());
                self.groups.push((attrs, vec![profile]));
            }
        }
    }

    fn finish(self) -> Vec<ResourceProfiles> {
        self.groups
            .into_iter()
            .map(|(attributes, profiles)| ResourceProfiles {
                resource: Some(Resource {
                    attributes,
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        name: attributes::SCOPE_NAME.to_owned(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                        ..Default::default()
                    }),
                    profiles,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            })
            .collect()
    }
}

/// The `Profile` around emitted samples: types, period, window, id and attributes.
fn profile_shell(
    b: &mut DictionaryBuilder,
    e: samples::Emitted,
    id: &str,
    attribute_indices: Vec<i32>,
) -> Profile {
    let sample_type = ValueType {
        type_strindex: b.string("samples"),
        unit_strindex: b.string("count"),
    };
    let period_type = ValueType {
        type_strindex: b.string("cpu"),
        unit_strindex: b.string("nanoseconds"),
    };
    let profile_id = match parse_sentry_id(id) {
        Some(bytes) if bytes != [0u8; 16] => bytes.to_vec(),
        _ => Vec::new(),
    };
    Profile {
        sample_type: Some(sample_type),
        samples: e.samples,
        time_unix_nano: e.time_unix_nano,
        duration_nano: e.duration_nano,
        period_type: Some(period_type),
        period: i64::try_from(e.period).unwrap_or(i64::MAX),
        profile_id,
        dropped_attributes_count: 0,
        original_payload_format: String::new(),
        original_payload: Vec::new(),
        attribute_indices,
    }
}

/// Translates everything that can be; collects the rest in [`OtlpTranslation::rejected`].
///
/// The chunks, then the V1 profiles, through an [`OtlpBuilder`].
pub fn to_otlp(
    input: &SentryInput<'_>,
    links: &dyn LinkSource,
    options: &OtlpOptions,
) -> OtlpTranslation {
    let mut b = OtlpBuilder::new(links, options);
    input.chunks.iter().for_each(|c| b.add_chunk(c));
    input.v1_profiles.iter().for_each(|v| b.add_v1(v));
    b.finish()
}

/// [`to_otlp`] one item at a time: each chunk or V1 profile added is translated at once, so
/// the caller need not hold them all (e.g. chunks parsed from NDJSON as they come). Items are
/// laid out in the order they are added (see the module docs); a rejected item is named by its
/// position among the items of its kind added so far.
pub struct OtlpBuilder<'l, 'o> {
    links: &'l dyn LinkSource,
    options: &'o OtlpOptions,
    dictionary: DictionaryBuilder,
    resources: Resources,
    rejected: Vec<Rejected>,
    chunks: usize,
    v1_profiles: usize,
}

impl<'l, 'o> OtlpBuilder<'l, 'o> {
    /// An empty request, linking observations through `links`.
    pub fn new(links: &'l dyn LinkSource, options: &'o OtlpOptions) -> Self {
        OtlpBuilder {
            links,
            options,
            dictionary: DictionaryBuilder::new(),
            resources: Resources::default(),
            rejected: Vec::new(),
            chunks: 0,
            v1_profiles: 0,
        }
    }

    /// Adds a V2 chunk (or records why it cannot be translated).
    pub fn add_chunk(&mut self, c: &ProfileChunk) {
        let i = self.chunks;
        self.chunks += 1;
        match chunk::prepare(c) {
            Ok(times) => {
                let b = &mut self.dictionary;
                let profile = chunk::to_profile(b, c, &times, self.links, self.options);
                self.resources.add(resource::chunk_resource(c), profile);
            }
            Err(error) => self.rejected.push(Rejected {
                item: format!("chunk[{i}] {}", c.chunk_id),
                error,
            }),
        }
    }

    /// Adds a V1 profile with its transaction (or records why it cannot be translated).
    pub fn add_v1(&mut self, v: &V1WithTransaction) {
        let i = self.v1_profiles;
        self.v1_profiles += 1;
        match v1::prepare(v) {
            Ok(times) => {
                let b = &mut self.dictionary;
                let profile = v1::to_profile(b, v, &times, self.links, self.options);
                self.resources
                    .add(resource::v1_resource(&v.profile), profile);
            }
            Err(error) => self.rejected.push(Rejected {
                item: format!("v1[{i}] {}", v.profile.event_id.as_deref().unwrap_or("")),
                error,
            }),
        }
    }

    /// The request of everything added, and what was rejected.
    pub fn finish(self) -> OtlpTranslation {
        OtlpTranslation {
            request: ExportProfilesServiceRequest {
                resource_profiles: self.resources.finish(),
                dictionary: Some(self.dictionary.finish()),
            },
            rejected: self.rejected,
        }
    }
}

/// Translates all of `input`, or fails with the first item's error (see [`to_otlp`] for
/// partial results).
pub fn try_to_otlp(
    input: &SentryInput<'_>,
    links: &dyn LinkSource,
    options: &OtlpOptions,
) -> Result<ExportProfilesServiceRequest, TranslateError> {
    let t = to_otlp(input, links, options);
    match t.rejected.into_iter().next() {
        Some(r) => Err(r.error),
        None => Ok(t.request),
    }
}
