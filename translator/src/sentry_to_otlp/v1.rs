//! A deprecated V1 (transaction-bound) profile → one OTLP `Profile`.
//!
//! * Sample time = the profile's `timestamp` (else the transaction's `start_timestamp`) +
//!   `elapsed_since_start_ns`; a profile with neither is rejected.
//! * Stacks, frames, thread attributes, sample grouping, profile window, `sample_type`,
//!   `period_type` and `period`: as for chunks.
//! * `profile_id` = the 16 bytes of the profile's `event_id`; profile attributes
//!   [`SENTRY_PROFILE_ID`] ← `event_id`, [`SENTRY_VERSION`] ← `version`,
//!   [`SENTRY_V1_TRANSACTIONS`] ← `transactions` (or the single `transaction`) as JSON, and the
//!   extras of [`super::extras`]. V1 profiles have no profiler session; their resource is
//!   described in [`super::resource`].
//! * Links: when the envelope's transaction is given, by the rule of [`crate::linking`] over
//!   that transaction alone (its profiler id does not matter); its root span runs on
//!   `contexts.trace.data["thread.id"]`, else on the `active_thread_id` of the profile's
//!   transaction entry with the same id (else of the first entry that has one). Without a
//!   transaction, the caller's [`LinkSource`] is asked with the profile's `event_id` as the
//!   profiler id.

use super::attributes::{SENTRY_PROFILE_ID, SENTRY_V1_TRANSACTIONS, SENTRY_VERSION};
use super::builder::DictionaryBuilder;
use super::chunk::check_stacks;
use super::options::OtlpOptions;
use super::samples::{Body, emit};
use super::{extras, profile_shell};
use crate::error::{TimestampError, TranslateError};
use crate::linking::{LinkSource, TransactionLinks, span_intervals_with};
use profilink_proto::otlp::Profile;
use profilink_proto::sentry::{SampleProfileV1, Transaction};

/// A V1 profile with the transaction of its envelope, when known.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct V1WithTransaction {
    /// The `profile` item.
    pub profile: SampleProfileV1,
    /// The `transaction` item of the same envelope.
    pub transaction: Option<Transaction>,
}

impl V1WithTransaction {
    /// The thread the transaction's root span ran on (see the module docs).
    pub fn root_thread_id(&self) -> Option<String> {
        let txn = self.transaction.as_ref()?;
        if let Some(t) = txn.root_thread_id() {
            return Some(t);
        }
        let entries = self.profile.all_transactions();
        let same_id = |e: &&&profilink_proto::sentry::V1Transaction| {
            txn.event_id.as_deref().is_some_and(|id| {
                id.replace('-', "")
                    .eq_ignore_ascii_case(&e.id.replace('-', ""))
            })
        };
        entries
            .iter()
            .find(same_id)
            .and_then(|e| e.active_thread_id.clone())
            .or_else(|| entries.iter().find_map(|e| e.active_thread_id.clone()))
    }
}

/// Checks a V1 profile and computes its sample times (Unix ns).
pub fn prepare(v: &V1WithTransaction) -> Result<Vec<u64>, TranslateError> {
    let p = &v.profile;
    check_stacks(&p.profile.stacks, p.profile.frames.len())?;
    let base = p
        .timestamp
        .or_else(|| v.transaction.as_ref().and_then(|t| t.start_timestamp))
        .ok_or(TimestampError::Missing)?;
    let base = base
        .as_unix_nanos()
        .ok_or(TimestampError::Unrepresentable { timestamp: base.0 })?;
    let mut out = Vec::with_capacity(p.profile.samples.len());
    for (i, s) in p.profile.samples.iter().enumerate() {
        if s.stack_id >= p.profile.stacks.len() {
            return Err(TranslateError::SentryIndexOutOfRange {
                what: "stack_id",
                index: s.stack_id,
                len: p.profile.stacks.len(),
            });
        }
        let t = base
            .checked_add(s.elapsed_since_start_ns)
            .ok_or(TimestampError::Elapsed {
                index: i,
                elapsed_ns: s.elapsed_since_start_ns,
            })?;
        out.push(t);
    }
    Ok(out)
}

/// Translates a V1 profile checked by [`prepare`] (`times` is its result).
pub(crate) fn to_profile(
    b: &mut DictionaryBuilder,
    v: &V1WithTransaction,
    times: &[u64],
    links: &dyn LinkSource,
    options: &OtlpOptions,
) -> Profile {
    let p = &v.profile;
    let images = p.debug_meta.as_ref().map_or(&[][..], |d| &d.images[..]);
    let body = Body {
        frames: &p.profile.frames,
        stacks: &p.profile.stacks,
        thread_metadata: &p.profile.thread_metadata,
        platform: &p.platform,
        images,
    };
    let observations = p
        .profile
        .samples
        .iter()
        .zip(times)
        .map(|(s, &t)| (t, s.stack_id, s.thread_id.as_str()));
    let event_id = p.event_id.as_deref().unwrap_or("");
    let own = v.transaction.as_ref().map(|txn| {
        let root = v.root_thread_id();
        TransactionLinks::from_intervals(span_intervals_with(txn, event_id, root.as_deref()))
    });
    let source: &dyn LinkSource = match &own {
        Some(t) => t,
        None => links,
    };
    let emitted = emit(
        b,
        &body,
        observations,
        times.len(),
        source,
        event_id,
        options,
    );

    let mut attrs = Vec::new();
    if let Some(id) = &p.event_id {
        attrs.push(b.attribute_str(SENTRY_PROFILE_ID, id));
    }
    attrs.push(b.attribute_str(SENTRY_VERSION, &p.version));
    let txns = p.all_transactions();
    if !txns.is_empty() {
        let json = serde_json::to_string(&txns).unwrap_or_default();
        attrs.push(b.attribute_str(SENTRY_V1_TRANSACTIONS, &json));
    }
    extras::encode(
        b,
        &mut attrs,
        &p.profile.thread_metadata,
        p.debug_meta.as_ref(),
    );
    extras::encode_v1_measurements(b, &mut attrs, &p.measurements);
    profile_shell(b, emitted, event_id, attrs)
}
