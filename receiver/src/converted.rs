//! Profiles that arrive in another format than OTLP (pprof, folded stacks, Pyroscope pushes)
//! and are translated by the receiver that took them: the translation seam
//! ([`pprof_to_otlp`], [`folded_to_otlp`], bounded by the receiver's limits), the resource
//! attributes the receiver sets ([`set_resource_attributes`]), and the hand-off to the pipeline
//! with the OTLP receivers' validation and counting ([`hand_off`]).
//!
//! The hand-off validates the translation as an OTLP request is validated
//! ([`crate::otlp::profiles::ingest`]); a profile that fails is counted as refused and logged
//! (a translation bug, never the sender's), the others go on. Nothing valid left: refused as
//! invalid.

use crate::otlp::ingest::{Refused, Split};
use crate::otlp::profiles;
use crate::server::decompress::{BodyError, Encoding, decode_bytes};
use crate::stats::Counters;
use profilink_consumer::{ConsumeError, Consumer, ReceiverKind, Transport};
use profilink_proto::otlp::{
    AnyValue, KeyValue, ProfilesData, Resource, any_value, request_from_data,
};
use profilink_translator::{
    FoldedOptions, PprofOptions, folded_to_otlp as translator_folded, pprof_bytes_to_otlp,
};

/// Why translated profiles did not reach the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HandoffError {
    /// Nothing valid was left (the message says why).
    Invalid(String),
    /// The pipeline refused the batch.
    Consumer(ConsumeError),
}

/// What a hand-off delivered: profiles and observations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delivered {
    /// OTLP profiles handed on.
    pub profiles: u64,
    /// Observations in them.
    pub samples: u64,
}

/// Validates `data`, hands its valid profiles to `consumer` as one batch from `kind` over
/// `transport`, and counts into `counters` (profiles, observations, sample records; not the
/// request). An empty translation (no profiles) is delivered as nothing.
pub(crate) async fn hand_off<C: Consumer + ?Sized>(
    consumer: &C,
    counters: &Counters,
    (kind, transport): (ReceiverKind, Transport),
    data: ProfilesData,
) -> Result<Delivered, HandoffError> {
    let Split {
        payload,
        valid,
        rejected,
        error_message,
    } = match profiles::ingest(request_from_data(data)) {
        Ok(split) => split,
        Err(Refused { message, tally }) => {
            counters.refuse(tally.counts.items, tally.counts.samples);
            counters.refuse_records(&tally.records);
            tracing::warn!(receiver = %kind, %message, "translated profiles refused");
            return Err(HandoffError::Invalid(message));
        }
    };
    if rejected.counts.items > 0 {
        counters.refuse(rejected.counts.items, rejected.counts.samples);
        counters.refuse_records(&rejected.records);
        tracing::warn!(receiver = %kind, message = %error_message, "translated profiles rejected");
        if valid.counts.items == 0 {
            return Err(HandoffError::Invalid(error_message));
        }
    }
    if valid.counts.items > 0 {
        let batch = payload.into_batch(kind, transport, valid.counts);
        if let Err(e) = consumer.consume(batch).await {
            counters.refuse(valid.counts.items, valid.counts.samples);
            counters.refuse_records(&valid.records);
            return Err(HandoffError::Consumer(e));
        }
    }
    counters.accept(valid.counts.items, valid.counts.samples);
    counters.accept_records(&valid.records);
    Ok(Delivered {
        profiles: valid.counts.items,
        samples: valid.counts.samples,
    })
}

/// Sets `attributes` (replacing attributes of the same key) on every resource of `data`,
/// creating the resource where there is none.
pub(crate) fn set_resource_attributes(data: &mut ProfilesData, attributes: &[(String, String)]) {
    for rp in &mut data.resource_profiles {
        let resource = rp.resource.get_or_insert_with(Resource::default);
        for (key, value) in attributes {
            let value = Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.clone())),
            });
            match resource.attributes.iter_mut().find(|kv| &kv.key == key) {
                Some(kv) => kv.value = value,
                None => resource.attributes.push(KeyValue {
                    key: key.clone(),
                    value,
                    ..Default::default()
                }),
            }
        }
    }
}

/// Why bytes could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TranslateError(pub String);

/// A pprof profile (raw or gzipped protobuf) as OTLP. A gzipped profile is inflated here, to
/// at most `budget` bytes, which it then takes from `budget`: the bytes all the profiles of one
/// request (a Pyroscope push holds several) may inflate to.
pub(crate) fn pprof_to_otlp(
    bytes: &[u8],
    budget: &mut usize,
) -> Result<ProfilesData, TranslateError> {
    let inflated;
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        inflated = decode_bytes(bytes, Encoding::Gzip, *budget).map_err(|e| match e {
            BodyError::TooLarge { limit } => TranslateError(format!(
                "the gzipped profile inflates to more than {limit} bytes"
            )),
            e => TranslateError(e.to_string()),
        })?;
        *budget -= inflated.len();
        inflated.as_slice()
    } else {
        bytes
    };
    translate_pprof(raw)
}

/// The translator's pprof -> OTLP mapping of an uncompressed profile.
fn translate_pprof(raw: &[u8]) -> Result<ProfilesData, TranslateError> {
    let opts = PprofOptions {
        max_inflated_bytes: raw.len() as u64,
        ..PprofOptions::default()
    };
    pprof_bytes_to_otlp(raw, &opts).map_err(|e| TranslateError(error_chain(&e)))
}

/// `e` and its sources, `: `-separated.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// What a folded-stacks body stands for (sample type, period, time span).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoldedMeta {
    /// Sample type and unit (`samples`, `count`).
    pub sample_type: (String, String),
    /// Period type and unit (`cpu`, `nanoseconds`) and the period, when known.
    pub period: Option<((String, String), i64)>,
    /// Start of the profile, Unix nanoseconds.
    pub time_unix_nano: u64,
    /// Its length in nanoseconds.
    pub duration_nano: u64,
}

/// Folded stacks (`root;...;leaf N` lines) as OTLP.
pub(crate) fn folded_to_otlp(
    text: &[u8],
    meta: &FoldedMeta,
) -> Result<ProfilesData, TranslateError> {
    let ((period_type, period_unit), period) = meta
        .period
        .clone()
        .unwrap_or_else(|| ((String::new(), String::new()), 0));
    let opts = FoldedOptions {
        sample_type: meta.sample_type.0.clone(),
        sample_unit: meta.sample_type.1.clone(),
        period_type,
        period_unit,
        period,
        time_unix_nano: meta.time_unix_nano,
        duration_nano: meta.duration_nano,
    };
    translator_folded(text, &opts).map_err(|e| TranslateError(error_chain(&e)))
}

/// Gives every profile of `data` without a start time (`time_unix_nano` 0) the span
/// `[start_ns, start_ns + duration_ns)` the sender declared.
pub(crate) fn fill_missing_times(data: &mut ProfilesData, start_ns: u64, duration_ns: u64) {
    for p in data
        .resource_profiles
        .iter_mut()
        .flat_map(|rp| &mut rp.scope_profiles)
        .flat_map(|sp| &mut sp.profiles)
    {
        if p.time_unix_nano == 0 {
            p.time_unix_nano = start_ns;
            if p.duration_nano == 0 {
                p.duration_nano = duration_ns;
            }
        }
    }
}
